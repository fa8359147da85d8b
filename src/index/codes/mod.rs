//! The second kind of `simhash` index: `bit(n)` codes of 1 to 4,096 bits (operator class
//! `simhash_bit_ops`), exact radius search `code <@ simhash_code_ball(q, k)` and exact nearest rows
//! `ORDER BY code <-> simhash_code_ball(q, 0)`. Every callback of the access method dispatches on
//! the key type ([`is_codes`]); the `simhash64` kind (`super`) is untouched.
//!
//! The layout ("A" of `docs/design/codes-of-any-length.md`; without pages in
//! `simhash_core::code_index`): block 0 the metapage ([`meta`], format 6), then the *code store*
//! (every row of the build, code and TID, sorted by code: a row's position there is its ordinal),
//! then per indexed segment its directory (where each prefix's entries start) and its entries
//! ((low bits, ordinal) in two arrays per page, sorted by (segment value, ordinal)), then the chain
//! of rows whose code is NULL. Rows inserted after the build go to the *tail*, a chain of (code,
//! TID) pages, which a backend that looks them up often keeps a copy of in memory ([`tail`]; a
//! REINDEX compacts).
//!
//! The files: `meta` (the metapage, where each part is, the slots of a page), `build`, `read`
//! (pages, the store and the chains, the probes), `segment_pages` (the probes' reads of
//! directories and entries), `ordered` (nearest rows, and radius scans too
//! large for memory), `scan` (the scan callbacks), `write` (insert and VACUUM), `cost`, `check`.

use pgrx::pg_sys::{self, Datum};
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

pub(super) mod build;
mod build_pages;
pub(super) mod check;
pub(super) mod cost;
pub(super) mod meta;
mod ordered;
mod read;
pub(super) mod scan;
mod segment_pages;
mod spill;
pub(crate) mod tail;
pub(super) mod write;

/// Whether `index` is of the bit-codes kind (its key is `bit`).
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn is_codes(index: pg_sys::Relation) -> bool {
    unsafe { !(*index).rd_opcintype.is_null() && *(*index).rd_opcintype == pg_sys::BITOID }
}

/// ERROR 0A000 for an entry point of the `simhash64` kind given an index of codes.
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn refuse(index: pg_sys::Relation, what: &str) -> ! {
    let name = unsafe { crate::pg::names::relation_name(index) };
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("{what} does not support simhash index \"{name}\" of bit codes"),
        None,
        Some("It needs a simhash index on a simhash64 column.".into()),
    )
}

pub(crate) use crate::codes::{ball_of, CodeBall};

/// The bits and bytes of a `bit` value (detoasted; the bytes as `bit` stores them, first bit =
/// most significant bit of byte 0, padding bits zero).
///
/// # Safety
///
/// `datum` is a non-NULL `bit` or `bit varying` value; the bytes live in the current memory
/// context.
pub(crate) unsafe fn code_bytes<'a>(datum: Datum) -> (u32, &'a [u8]) {
    let code = unsafe { crate::codes::code_of(datum) };
    (code.bits, code.bytes)
}

/// ERROR 22026: a code of `bits` bits where the index holds codes of `expected`.
pub(super) fn wrong_length(bits: u32, expected: u32) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_STRING_DATA_LENGTH_MISMATCH,
        format!("a code of {bits} bits cannot be compared with the {expected}-bit codes of a simhash index"),
        None,
        Some("Every code of an index has one length.".into()),
    )
}
