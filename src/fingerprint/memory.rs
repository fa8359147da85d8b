//! `simhash.max_text_memory`: the most memory one call of a text function may take. The text
//! functions work in Rust memory, several times the text's size (folded copy, words or shingles,
//! their hashes and sets), which PostgreSQL's memory contexts do not see; so each call estimates
//! its need from the text's length, with the factors measured on the worst texts (every shingle
//! distinct), and a text that would need more is refused with 54000 before any of it is allocated,
//! rather than left to the operating system's out-of-memory killer.

use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::pg::errors::raise;

/// `simhash.max_text_memory`, in kilobytes.
pub(crate) static MAX_TEXT_MEMORY: GucSetting<i32> =
    GucSetting::<i32>::new((simhash_core::text_memory::DEFAULT_MAX_TEXT_MEMORY >> 10) as i32);

/// Defines the setting; called once per backend from `_PG_init`.
pub(crate) fn define() {
    GucRegistry::define_int_guc(
        c"simhash.max_text_memory",
        c"The most memory one call of a simhash text function may use.",
        c"A text whose fingerprint, folding or similarity would need more is refused (54000).",
        &MAX_TEXT_MEMORY,
        1024,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
}

/// Bytes of memory per byte of text that a function needs at most (the factors are the core's,
/// shared with the Python module).
pub(crate) use simhash_core::text_memory::Need;

/// Refuses (54000) a call of `function` on `bytes` bytes of text that would need more memory than
/// `simhash.max_text_memory`.
pub(crate) fn check(function: &str, bytes: usize, need: Need) {
    let limit = MAX_TEXT_MEMORY.get().max(0) as usize * 1024;
    let needed = simhash_core::text_memory::needed(bytes, need);
    if needed > limit {
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("{function} of {} of text would need up to {} of memory", size(bytes), size(needed)),
            Some(format!("simhash.max_text_memory is {}.", size(limit))),
            Some("Fingerprint a shorter part of the text (left(body, n)), or raise simhash.max_text_memory.".into()),
        );
    }
}

/// `bytes` in kB below a megabyte, else in MB (rounded up).
fn size(bytes: usize) -> String {
    if bytes < 1 << 20 {
        format!("{} kB", bytes.div_ceil(1024))
    } else {
        format!("{} MB", bytes.div_ceil(1 << 20))
    }
}
