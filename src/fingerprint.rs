//! `simhash(text)`, `hamming(a, b)` (the `<~>` operator) and `simhash_segment(fp, n)`.

use std::cell::RefCell;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::errors::raise;
use crate::SimHash64;

thread_local! {
    /// The last text fingerprinted by this backend and its result. The planner rewrite may place
    /// `simhash($1)` in several spots of one query (index probes, distance check); with this
    /// one-entry memo they cost one segmentation, not one each. Keyed on the exact bytes; texts
    /// longer than `MEMO_MAX_BYTES` are not kept, so the memo never holds much memory.
    static LAST_TEXT: RefCell<(Vec<u8>, Option<u64>)> = const { RefCell::new((Vec::new(), None)) };
}

const MEMO_MAX_BYTES: usize = 1 << 20;

/// The text as UTF-8: as is in a UTF8 database, converted from any other server encoding, and
/// checked in SQL_ASCII (where PostgreSQL stores bytes unchecked).
fn text_as_utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let encoding = unsafe { pg_sys::GetDatabaseEncoding() } as u32;
    if encoding != pg_sys::pg_enc::PG_UTF8 && encoding != pg_sys::pg_enc::PG_SQL_ASCII && !bytes.is_empty() {
        let converted = unsafe {
            pg_sys::pg_server_to_any(bytes.as_ptr().cast(), bytes.len() as i32, pg_sys::pg_enc::PG_UTF8 as i32)
        };
        let utf8 = unsafe { CStr::from_ptr(converted) }.to_string_lossy().into_owned();
        return std::borrow::Cow::Owned(utf8);
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => raise(
            PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
            "simhash() needs UTF-8 text".into(),
            Some("The database encoding is SQL_ASCII and the text is not valid UTF-8.".into()),
        ),
    }
}

/// SimHash of a text: jieba-rs words, TF-IDF weights, FNV-1a-64, weighted bit vote.
/// NULL when the text has no features (see `simhash_core::simhash_text`).
#[pg_extern(sql = false)]
fn simhash(text: &[u8]) -> Option<SimHash64> {
    if text.len() > MEMO_MAX_BYTES {
        return simhash_core::simhash_text(&text_as_utf8(text)).map(SimHash64);
    }
    LAST_TEXT.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.0 != text || memo.0.is_empty() {
            let fp = simhash_core::simhash_text(&text_as_utf8(text));
            memo.0.clear();
            memo.0.extend_from_slice(text);
            memo.1 = fp;
        }
        memo.1.map(SimHash64)
    })
}

/// Number of differing bits; declared in SQL as returning the `simhash_distance` domain.
#[pg_extern(sql = false)]
fn hamming(a: SimHash64, b: SimHash64) -> i32 {
    simhash_core::hamming(a.0, b.0) as i32
}

/// 16-bit segment `n` (0 = most significant) as an int4 in 0..65535: what the segment indexes hold.
#[pg_extern(sql = false)]
fn simhash_segment(fp: SimHash64, n: i32) -> i32 {
    segment_or_raise(fp, n) as i32
}

/// Segment `n` of `fp`, or an ERROR (22023) for a segment number outside 0..3.
pub(crate) fn segment_or_raise(fp: SimHash64, n: i32) -> u16 {
    match simhash_core::segment(fp.0, n) {
        Some(value) => value,
        None => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("simhash segment number {n} is out of range"),
            Some("Segments are numbered 0 (most significant 16 bits) to 3 (least significant).".into()),
        ),
    }
}
