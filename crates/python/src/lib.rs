//! `pgsimhash._core`: the simhash extension's text fingerprints and similarities computed in the
//! client, by the same code as the server (`crates/core`), so bit for bit the server's values.
//!
//! Each function has the SQL function's name, parameters and defaults, and returns `None` where
//! SQL returns NULL. Fingerprints are Python `int`s from 0 to 2^64 - 1: the 64 bits of a
//! `simhash64`, bit 0 the least significant ([`to_hex`] gives the server's text form). Parameters out
//! of range raise `ValueError` (the server's 22023); a text that would need more memory than
//! [`set_max_text_memory`] allows raises `TextTooLarge` (the server's 54000). Functions on a text
//! longer than [`DETACH_BYTES`] release the GIL while they run; the `*_many` variants take a list of
//! texts and release it once for the whole list.

use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use simhash_core::fingerprint::{feature_hash, integer_weight, VoteTotals};
use simhash_core::shingles::{self, MAX_HASHES_PER_BIT, MAX_SHINGLE};
use simhash_core::text_memory::{self, Need, DEFAULT_MAX_TEXT_MEMORY};

create_exception!(
    _core,
    TextTooLarge,
    PyMemoryError,
    "A text whose fingerprint, folding or similarity would need more memory than the limit (set_max_text_memory)."
);

/// Texts longer than this (in UTF-8 bytes) are fingerprinted with the GIL released. Below it the
/// work takes a few microseconds, less than handing the GIL over to another thread and back.
const DETACH_BYTES: usize = 16 * 1024;

/// The most memory one call may use, in bytes (the client's `simhash.max_text_memory`).
static MAX_TEXT_MEMORY: AtomicUsize = AtomicUsize::new(DEFAULT_MAX_TEXT_MEMORY);

/// Refuses a call of `function` on `bytes` bytes of text that would need more than the limit.
fn check_memory(function: &str, bytes: usize, need: Need) -> PyResult<()> {
    let limit = MAX_TEXT_MEMORY.load(Ordering::Relaxed);
    let needed = text_memory::needed(bytes, need);
    if needed > limit {
        return Err(TextTooLarge::new_err(format!(
            "{function} of {bytes} bytes of text would need up to {needed} bytes of memory; the limit is {limit} \
             (pgsimhash.set_max_text_memory)"
        )));
    }
    Ok(())
}

/// `value` when it is 1 to `max`, else `ValueError` as the server's 22023.
fn in_range(value: i64, max: usize, function: &str, what: &str) -> PyResult<usize> {
    match usize::try_from(value) {
        Ok(v) if (1..=max).contains(&v) => Ok(v),
        _ => Err(PyValueError::new_err(format!("{function} {what} {value} is out of range (1 to {max})"))),
    }
}

fn shingle_length(n: i64, function: &str) -> PyResult<usize> {
    in_range(n, MAX_SHINGLE, function, "shingle length")
}

/// `f(text)`, with the GIL released for a long text.
fn run<T: Send>(py: Python<'_>, text: &str, f: impl FnOnce(&str) -> T + Send) -> T {
    if text.len() > DETACH_BYTES {
        py.detach(|| f(text))
    } else {
        f(text)
    }
}

/// `f` over every text, with the GIL released once for the list; checks every text's memory first.
fn run_many<T: Send>(
    py: Python<'_>,
    texts: &[Option<PyBackedStr>],
    function: &str,
    need: Need,
    f: impl Fn(&str) -> Option<T> + Send + Sync,
) -> PyResult<Vec<Option<T>>> {
    for text in texts.iter().flatten() {
        check_memory(function, text.len(), need)?;
    }
    Ok(py.detach(|| texts.iter().map(|t| t.as_deref().and_then(&f)).collect()))
}

/// `simhash(text)` and `simhash(text, top_n)`: SimHash of the text's words (jieba-rs, TF-IDF
/// weights, FNV-1a-64, weighted bit vote); `None` when the text has no features.
#[pyfunction]
#[pyo3(signature = (text, top_n = None))]
fn simhash(py: Python<'_>, text: PyBackedStr, top_n: Option<i64>) -> PyResult<Option<u64>> {
    check_memory("simhash", text.len(), Need::Words)?;
    match top_n {
        None => Ok(run(py, &text, simhash_core::simhash_text)),
        Some(top_n) => {
            let top_n = in_range(top_n, i32::MAX as usize, "simhash", "keyword count")?;
            Ok(run(py, &text, |t| simhash_core::features::simhash_top_n(t, top_n)))
        }
    }
}

/// `simhash_ngrams(text, n = 3)`: SimHash of the set of the folded text's character n-grams.
#[pyfunction]
#[pyo3(signature = (text, n = 3))]
fn simhash_ngrams(py: Python<'_>, text: PyBackedStr, n: i64) -> PyResult<Option<u64>> {
    let n = shingle_length(n, "simhash_ngrams")?;
    check_memory("simhash_ngrams", text.len(), Need::Ngrams)?;
    Ok(run(py, &text, |t| shingles::simhash_ngrams(t, n)))
}

fn per_bit(hashes_per_bit: i64) -> PyResult<usize> {
    in_range(hashes_per_bit, MAX_HASHES_PER_BIT, "minhash64", "hashes_per_bit")
}

/// `minhash64(text, n = 3, hashes_per_bit = 1)`: the 1-bit MinHash of the text's n-gram set.
#[pyfunction]
#[pyo3(signature = (text, n = 3, hashes_per_bit = 1))]
fn minhash64(py: Python<'_>, text: PyBackedStr, n: i64, hashes_per_bit: i64) -> PyResult<Option<u64>> {
    let n = shingle_length(n, "minhash64")?;
    let r = per_bit(hashes_per_bit)?;
    check_memory("minhash64", text.len(), Need::MinHash)?;
    Ok(run(py, &text, |t| shingles::minhash64_with(t, n, r)))
}

/// [`simhash`] of every text of a list (`None` for a `None` text), the GIL released once.
#[pyfunction]
#[pyo3(signature = (texts, top_n = None))]
fn simhash_many(py: Python<'_>, texts: Vec<Option<PyBackedStr>>, top_n: Option<i64>) -> PyResult<Vec<Option<u64>>> {
    match top_n {
        None => run_many(py, &texts, "simhash", Need::Words, simhash_core::simhash_text),
        Some(top_n) => {
            let top_n = in_range(top_n, i32::MAX as usize, "simhash", "keyword count")?;
            run_many(py, &texts, "simhash", Need::Words, |t| simhash_core::features::simhash_top_n(t, top_n))
        }
    }
}

/// [`simhash_ngrams`] of every text of a list.
#[pyfunction]
#[pyo3(signature = (texts, n = 3))]
fn simhash_ngrams_many(py: Python<'_>, texts: Vec<Option<PyBackedStr>>, n: i64) -> PyResult<Vec<Option<u64>>> {
    let n = shingle_length(n, "simhash_ngrams")?;
    run_many(py, &texts, "simhash_ngrams", Need::Ngrams, |t| shingles::simhash_ngrams(t, n))
}

/// [`minhash64`] of every text of a list.
#[pyfunction]
#[pyo3(signature = (texts, n = 3, hashes_per_bit = 1))]
fn minhash64_many(
    py: Python<'_>,
    texts: Vec<Option<PyBackedStr>>,
    n: i64,
    hashes_per_bit: i64,
) -> PyResult<Vec<Option<u64>>> {
    let n = shingle_length(n, "minhash64")?;
    let r = per_bit(hashes_per_bit)?;
    run_many(py, &texts, "minhash64", Need::MinHash, |t| shingles::minhash64_with(t, n, r))
}

/// `simhash_fold(text)`: the folded text the fingerprints see (NFKC, lower case, Chinese in one
/// script and vocabulary, whitespace collapsed).
#[pyfunction]
fn simhash_fold(py: Python<'_>, text: PyBackedStr) -> PyResult<String> {
    check_memory("simhash_fold", text.len(), Need::Fold)?;
    Ok(run(py, &text, simhash_core::fold::fold))
}

/// The overlap of the n-gram sets of `a` and `b`.
fn overlap(py: Python<'_>, a: &str, b: &str, n: i64, function: &str) -> PyResult<shingles::Overlap> {
    let n = shingle_length(n, function)?;
    check_memory(function, a.len().saturating_add(b.len()), Need::Sets)?;
    let compute = || shingles::overlap(a, b, n);
    Ok(if a.len() + b.len() > DETACH_BYTES { py.detach(compute) } else { compute() })
}

/// `simhash_similarity(a, b, n = 3)`: the Jaccard similarity of the folded character n-gram sets
/// (the verified similarity of the near-duplicate constraint); `None` when either text has no
/// letter or digit.
#[pyfunction]
#[pyo3(signature = (a, b, n = 3))]
fn simhash_similarity(py: Python<'_>, a: PyBackedStr, b: PyBackedStr, n: i64) -> PyResult<Option<f64>> {
    Ok(overlap(py, &a, &b, n, "simhash_similarity")?.jaccard())
}

/// `simhash_containment(a, b, n = 3)`: the share of the smaller n-gram set found in the larger.
#[pyfunction]
#[pyo3(signature = (a, b, n = 3))]
fn simhash_containment(py: Python<'_>, a: PyBackedStr, b: PyBackedStr, n: i64) -> PyResult<Option<f64>> {
    Ok(overlap(py, &a, &b, n, "simhash_containment")?.containment())
}

/// `simhash(features text[], weights float8[])`: each feature hashed with FNV-1a-64 votes with its
/// weight; `None` for empty lists.
#[pyfunction]
fn simhash_weighted(features: Vec<PyBackedStr>, weights: Vec<f64>) -> PyResult<Option<u64>> {
    if features.len() != weights.len() {
        return Err(PyValueError::new_err(format!(
            "simhash got {} features and {} weights",
            features.len(),
            weights.len()
        )));
    }
    if features.is_empty() {
        return Ok(None);
    }
    let mut totals = VoteTotals::default();
    for (feature, &weight) in features.iter().zip(&weights) {
        let w = integer_weight(weight)
            .ok_or_else(|| PyValueError::new_err(format!("simhash feature weight {weight:e} is out of range")))?;
        totals
            .add(feature_hash(feature), w)
            .map_err(|_| PyValueError::new_err("simhash feature weights sum out of range"))?;
    }
    Ok(Some(totals.fingerprint()))
}

/// `simhash_features(text)`: the features of `simhash(text)`, heaviest first, as
/// `(feature, weight, hash)` tuples (the weight is the vote's integer weight / 2^24).
#[pyfunction]
fn simhash_features(py: Python<'_>, text: PyBackedStr) -> PyResult<Vec<(String, f64, u64)>> {
    check_memory("simhash_features", text.len(), Need::Words)?;
    let features = run(py, &text, simhash_core::text_features);
    Ok(features
        .into_iter()
        .map(|(f, w)| {
            let hash = feature_hash(&f);
            (f, w as f64 / simhash_core::fingerprint::WEIGHT_SCALE, hash)
        })
        .collect())
}

/// A fingerprint argument: an `int` of 64 bits, unsigned (0 to 2^64 - 1) or as the server's
/// `bigint` cast gives it (-2^63 to -1 for the fingerprints with the top bit set).
fn bits(fp: i128) -> PyResult<u64> {
    if (i64::MIN as i128..=u64::MAX as i128).contains(&fp) {
        Ok(fp as u64)
    } else {
        Err(PyValueError::new_err(format!("{fp} is not a 64-bit fingerprint")))
    }
}

/// `hamming(a, b)` (the `<~>` operator): the number of differing bits.
#[pyfunction]
fn hamming(a: i128, b: i128) -> PyResult<u32> {
    Ok(simhash_core::hamming(bits(a)?, bits(b)?))
}

/// `simhash_segment(fp, n)`: 16-bit segment `n` (0 = most significant).
#[pyfunction]
fn simhash_segment(fp: i128, n: i32) -> PyResult<u16> {
    simhash_core::segment(bits(fp)?, n)
        .ok_or_else(|| PyValueError::new_err(format!("simhash segment number {n} is out of range (0 to 3)")))
}

/// The server's text form of a fingerprint: 16 lower-case hex digits.
#[pyfunction]
fn to_hex(fp: i128) -> PyResult<String> {
    Ok(simhash_core::format_hex(bits(fp)?))
}

/// A fingerprint from the server's input syntax (16 hex digits, optionally after `0x`, or 64
/// binary digits), as an unsigned `int`.
#[pyfunction]
fn from_hex(text: &str) -> PyResult<u64> {
    simhash_core::parse_fingerprint(text).map_err(|e| PyValueError::new_err(format!("invalid simhash64 {text:?}: {e}")))
}

/// The fingerprint as the server's `simhash64::bigint` cast gives it (the same 64 bits, two's
/// complement: fingerprints from 2^63 on are negative).
#[pyfunction]
fn to_signed(fp: i128) -> PyResult<i64> {
    Ok(bits(fp)? as i64)
}

/// The unsigned fingerprint of a `bigint` (or of an unsigned one, which it returns as is).
#[pyfunction]
fn to_unsigned(fp: i128) -> PyResult<u64> {
    bits(fp)
}

/// Sets the most memory one call may use, in bytes (default 1 GB, as the server's
/// `simhash.max_text_memory`); returns the previous limit.
#[pyfunction]
fn set_max_text_memory(bytes: usize) -> usize {
    MAX_TEXT_MEMORY.swap(bytes, Ordering::Relaxed)
}

/// The limit [`set_max_text_memory`] sets, in bytes.
#[pyfunction]
fn max_text_memory() -> usize {
    MAX_TEXT_MEMORY.load(Ordering::Relaxed)
}

/// Loads the word segmenter's dictionary and the folding tables now rather than at the first call.
#[pyfunction]
fn preload(py: Python<'_>) {
    py.detach(|| {
        simhash_core::fold::preload();
        simhash_core::features::preload();
        shingles::preload();
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TextTooLarge", m.py().get_type::<TextTooLarge>())?;
    m.add("MAX_SHINGLE", MAX_SHINGLE)?;
    m.add("MAX_HASHES_PER_BIT", MAX_HASHES_PER_BIT)?;
    m.add_function(wrap_pyfunction!(simhash, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_ngrams, m)?)?;
    m.add_function(wrap_pyfunction!(minhash64, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_many, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_ngrams_many, m)?)?;
    m.add_function(wrap_pyfunction!(minhash64_many, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_fold, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_similarity, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_containment, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_weighted, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_features, m)?)?;
    m.add_function(wrap_pyfunction!(hamming, m)?)?;
    m.add_function(wrap_pyfunction!(simhash_segment, m)?)?;
    m.add_function(wrap_pyfunction!(to_hex, m)?)?;
    m.add_function(wrap_pyfunction!(from_hex, m)?)?;
    m.add_function(wrap_pyfunction!(to_signed, m)?)?;
    m.add_function(wrap_pyfunction!(to_unsigned, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_text_memory, m)?)?;
    m.add_function(wrap_pyfunction!(max_text_memory, m)?)?;
    m.add_function(wrap_pyfunction!(preload, m)?)?;
    Ok(())
}
