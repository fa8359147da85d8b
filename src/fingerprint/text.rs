//! The text -> fingerprint functions (`simhash(text)`, `simhash(text, top_n)`, `simhash_ngrams`,
//! `minhash64`, `simhash_fold`), `hamming(a, b)` (the `<~>` operator) and `simhash_segment(fp, n)`.
//!
//! Every function that goes through a text passes [`INTERRUPTS`] to the core, whose loops check for
//! a cancel request or a statement timeout every few thousand characters, words or shingles: a
//! call on a text of hundreds of megabytes stops within milliseconds of either.

use std::cell::RefCell;
use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;
use simhash_core::Interrupt;

use super::memory::Need;
use super::simhash64::SimHash64;
use crate::pg::errors::raise;

/// `CHECK_FOR_INTERRUPTS()`: a cancel request or a statement timeout raises its error here (57014),
/// which unwinds out of the core's computation.
fn check_for_interrupts() {
    pg_sys::check_for_interrupts!();
}

/// What the core's long loops call (see [`check_for_interrupts`]).
pub(crate) const INTERRUPTS: Interrupt<'static> = Interrupt::new(&check_for_interrupts);

/// The last text one text -> fingerprint function fingerprinted in this backend, with which
/// parameter, and the result.
struct Memo {
    mode: Mode,
    text: Vec<u8>,
    fp: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    SimHash,
    SimHashTopN(i32),
    SimHashNgrams(i32),
    MinHash64(i32, i32),
}

impl Mode {
    /// The memo slot of the function.
    fn slot(self) -> usize {
        match self {
            Mode::SimHash => 0,
            Mode::SimHashTopN(_) => 1,
            Mode::SimHashNgrams(_) => 2,
            Mode::MinHash64(..) => 3,
        }
    }
}

thread_local! {
    /// The planner rewrite may place `simhash($1)` (or another text -> fingerprint function) in
    /// several spots of one query (index probes, distance check); with this memo they cost one
    /// segmentation, not one each. One entry per function, so that a query calling two of them
    /// (`simhash(body), minhash64(body)`) keeps both; keyed on the parameter and the exact bytes;
    /// texts longer than `MEMO_MAX_BYTES` are not kept, so the memo never holds much memory.
    static LAST_TEXT: RefCell<[Option<Memo>; 4]> = const { RefCell::new([None, None, None, None]) };
}

/// `compute(text)` for `mode`, through the memo.
fn memoized(mode: Mode, text: &[u8], compute: impl Fn(&str) -> Option<u64>) -> Option<SimHash64> {
    let (function, need) = match mode {
        Mode::SimHash | Mode::SimHashTopN(_) => ("simhash", Need::Words),
        Mode::SimHashNgrams(_) => ("simhash_ngrams", Need::Ngrams),
        Mode::MinHash64(..) => ("minhash64", Need::MinHash),
    };
    super::memory::check(function, text.len(), need);
    if text.len() > MEMO_MAX_BYTES || text.is_empty() {
        return compute(&text_as_utf8(text)).map(SimHash64);
    }
    LAST_TEXT.with(|memo| {
        let mut memo = memo.borrow_mut();
        let entry = &mut memo[mode.slot()];
        match entry {
            Some(m) if m.mode == mode && m.text == text => m.fp.map(SimHash64),
            _ => {
                let fp = compute(&text_as_utf8(text));
                let m = entry.get_or_insert_with(|| Memo { mode, text: Vec::new(), fp });
                m.mode = mode;
                m.text.clear();
                m.text.extend_from_slice(text);
                m.fp = fp;
                fp.map(SimHash64)
            }
        }
    })
}

const MEMO_MAX_BYTES: usize = 1 << 20;

/// The text as UTF-8: as is in a UTF8 database, converted from any other server encoding, and
/// checked in SQL_ASCII (where PostgreSQL stores bytes unchecked).
pub(crate) fn text_as_utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
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
            None,
        ),
    }
}

/// SimHash of a text: jieba-rs words, TF-IDF weights, FNV-1a-64, weighted bit vote.
/// NULL when the text has no features (see `simhash_core::simhash_text`).
#[pg_extern(sql = false)]
fn simhash(text: &[u8]) -> Option<SimHash64> {
    memoized(Mode::SimHash, text, |t| simhash_core::features::simhash_text_interruptible(t, INTERRUPTS))
}

/// The seeds' variant: only the `top_n` heaviest keywords vote.
#[pg_extern(sql = false)]
fn simhash_top_n(text: &[u8], top_n: i32) -> Option<SimHash64> {
    if top_n < 1 {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("simhash keyword count {top_n} is out of range"),
            Some("The number of keywords is at least 1; simhash(text) keeps them all.".into()),
            None,
        );
    }
    memoized(Mode::SimHashTopN(top_n), text, |t| {
        simhash_core::features::simhash_top_n_interruptible(t, top_n as usize, INTERRUPTS)
    })
}

/// `value` when it is 1 to `max`; otherwise SQLSTATE 22023, "{function} {what} {value} is out of
/// range", with `detail`.
fn parameter_in_range(value: i32, max: usize, function: &str, what: &str, detail: String) -> usize {
    match usize::try_from(value) {
        Ok(v) if (1..=max).contains(&v) => v,
        _ => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("{function} {what} {value} is out of range"),
            Some(detail),
            None,
        ),
    }
}

/// Checks a shingle length (1 to `MAX_SHINGLE` characters).
pub(crate) fn shingle_length(n: i32, function: &str) -> usize {
    let max = simhash_core::shingles::MAX_SHINGLE;
    parameter_in_range(
        n,
        max,
        function,
        "shingle length",
        format!("Shingles are 1 to {max} characters long; the default is 3."),
    )
}

/// SimHash of the set of the text's character n-grams (folded, punctuation left out), each voting once.
#[pg_extern(sql = false)]
fn simhash_ngrams(text: &[u8], n: i32) -> Option<SimHash64> {
    let n = shingle_length(n, "simhash_ngrams");
    memoized(Mode::SimHashNgrams(n as i32), text, |t| {
        simhash_core::shingles::simhash_ngrams_interruptible(t, n, INTERRUPTS)
    })
}

/// The 1-bit MinHash of the text's character n-gram set, `hashes_per_bit` min-hashes per bit:
/// distance ~ 32 x (1 - Jaccard^hashes_per_bit).
#[pg_extern(sql = false)]
fn minhash64(text: &[u8], n: i32, hashes_per_bit: i32) -> Option<SimHash64> {
    let n = shingle_length(n, "minhash64");
    let max = simhash_core::shingles::MAX_HASHES_PER_BIT;
    let per_bit = parameter_in_range(
        hashes_per_bit,
        max,
        "minhash64",
        "hashes_per_bit",
        format!("Each bit combines 1 to {max} min-hashes; the default is 1."),
    );
    memoized(Mode::MinHash64(n as i32, hashes_per_bit), text, |t| {
        simhash_core::shingles::minhash64_interruptible(t, n, per_bit, INTERRUPTS)
    })
}

/// The folded text the fingerprints see (NFKC, lower case, Chinese in one script and vocabulary,
/// whitespace collapsed). Declared in SQL as returning text: the bytes are in the server encoding.
/// Folding can lengthen a text (NFKC spells some characters out in many): a result longer than a
/// text value can be is an error (54000), as for PostgreSQL's own `repeat()`.
#[pg_extern(sql = false)]
fn simhash_fold(text: &[u8]) -> Vec<u8> {
    super::memory::check("simhash_fold", text.len(), Need::Fold);
    let folded = utf8_to_server(simhash_core::fold::fold_interruptible(&text_as_utf8(text), INTERRUPTS));
    // MaxAllocSize (utils/memutils.h, a macro pg_sys does not have), less the varlena header.
    const MAX_TEXT_BYTES: usize = 0x3fff_ffff - pg_sys::VARHDRSZ;
    if folded.len() > MAX_TEXT_BYTES {
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            "simhash_fold result is too long".into(),
            Some(format!("The folded text has {} bytes; a text value has at most {MAX_TEXT_BYTES}.", folded.len())),
            None,
        );
    }
    folded
}

/// UTF-8 text as the bytes of a `text` in the server encoding (an error for a character the
/// encoding lacks, as PostgreSQL's own conversions give).
pub(crate) fn utf8_to_server(text: String) -> Vec<u8> {
    let encoding = unsafe { pg_sys::GetDatabaseEncoding() } as u32;
    if encoding == pg_sys::pg_enc::PG_UTF8 || encoding == pg_sys::pg_enc::PG_SQL_ASCII || text.is_empty() {
        return text.into_bytes();
    }
    unsafe {
        let converted =
            pg_sys::pg_any_to_server(text.as_ptr().cast(), text.len() as i32, pg_sys::pg_enc::PG_UTF8 as i32);
        CStr::from_ptr(converted).to_bytes().to_vec()
    }
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
            None,
        ),
    }
}
