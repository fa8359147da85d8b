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
pub(crate) static MAX_TEXT_MEMORY: GucSetting<i32> = GucSetting::<i32>::new(1 << 20);

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

/// Bytes of memory per byte of text that a function needs at most: measured with
/// `bench/text_memory.sh` on 94 MB of distinct words (the worst case: every shingle new), beyond
/// the text itself, with a margin (the text in the server's memory is counted too).
#[derive(Clone, Copy)]
pub(crate) enum Need {
    /// `simhash(text)`, `simhash(text, n)`, `simhash_features`: 5.9.
    Words = 8,
    /// `minhash64`: 4.0.
    MinHash = 6,
    /// `simhash_fold`: 5.1.
    Fold = 7,
    /// `simhash_ngrams`: 14.3.
    Ngrams = 16,
    /// `simhash_similarity`, `simhash_containment`, per byte of both texts: 12.2.
    Sets = 13,
}

/// Refuses (54000) a call of `function` on `bytes` bytes of text that would need more memory than
/// `simhash.max_text_memory`.
pub(crate) fn check(function: &str, bytes: usize, need: Need) {
    let limit = MAX_TEXT_MEMORY.get().max(0) as usize * 1024;
    let needed = bytes.saturating_mul(need as usize);
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
