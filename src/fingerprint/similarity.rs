//! The exact similarity of two texts, which verifies what the fingerprints only estimate:
//! `simhash_similarity(a, b, n)`, the Jaccard similarity of the two texts' sets of folded character
//! n-grams (the very set `minhash64(text, n)` fingerprints), and `simhash_containment(a, b, n)`,
//! the share of the smaller set found in the larger.
//!
//! In a lookup (`WHERE fp <~> minhash64($1) <= k AND simhash_similarity(body, $1) >= 0.8`) one
//! argument is the same text for every candidate row: the last text of each argument position is
//! kept with its shingle set, so that only the row's text is folded and cut per call.

use std::cell::RefCell;
use std::rc::Rc;

use pgrx::prelude::*;
use simhash_core::shingles::{Overlap, ShingleSet};

use super::text::{shingle_length, text_as_utf8, INTERRUPTS};

/// The last text seen in one argument position, with its shingle length and set.
struct Memo {
    n: usize,
    text: Vec<u8>,
    set: Rc<ShingleSet>,
}

/// Texts longer than this are not kept (their sets are rebuilt at each call).
const MEMO_MAX_BYTES: usize = 1 << 20;

thread_local! {
    static LAST: RefCell<[Option<Memo>; 2]> = const { RefCell::new([None, None]) };
}

/// The shingle set of `text`, through the memo of argument position `slot`.
fn shingle_set(slot: usize, text: &[u8], n: usize) -> Rc<ShingleSet> {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some(m) = &last[slot] {
            if m.n == n && m.text == text {
                return m.set.clone();
            }
        }
        let set = Rc::new(ShingleSet::of_interruptible(&text_as_utf8(text), n, INTERRUPTS));
        if text.len() <= MEMO_MAX_BYTES {
            last[slot] = Some(Memo { n, text: text.to_vec(), set: set.clone() });
        }
        set
    })
}

/// The overlap of the n-gram sets of `a` and `b` (n checked: 1 to 32).
pub(crate) fn overlap(a: &[u8], b: &[u8], n: i32, function: &str) -> Overlap {
    let n = shingle_length(n, function);
    super::memory::check(function, a.len().saturating_add(b.len()), super::memory::Need::Sets);
    Overlap::of_interruptible(&shingle_set(0, a, n), &shingle_set(1, b, n), INTERRUPTS)
}

/// Jaccard similarity of the folded character n-gram sets; NULL when either text has no letter
/// or digit.
#[pg_extern(sql = false)]
fn simhash_similarity(a: &[u8], b: &[u8], n: i32) -> Option<f64> {
    overlap(a, b, n, "simhash_similarity").jaccard()
}

/// The share of the smaller n-gram set found in the larger; NULL when either text has no letter
/// or digit.
#[pg_extern(sql = false)]
fn simhash_containment(a: &[u8], b: &[u8], n: i32) -> Option<f64> {
    overlap(a, b, n, "simhash_containment").containment()
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// SQL gives the core's values, row after row, whichever argument repeats (the memo keeps the
    /// last text of each argument position and must never answer for another text).
    #[pg_test]
    fn similarity_agrees_with_the_core_across_rows() {
        let texts = [
            "海量网页去重是搜索引擎的基础工作",
            "海量網頁去重是搜尋引擎的基礎",
            "the quick brown fox",
            "The quick brown fox!",
        ];
        let mut expected = Vec::new();
        let mut rows = Vec::new();
        for (i, a) in texts.iter().enumerate() {
            for (j, b) in texts.iter().enumerate() {
                for n in [2, 3] {
                    rows.push(format!("({}, {i}, {j}, {n})", expected.len()));
                    expected.push(simhash_core::shingles::jaccard(a, b, n));
                }
            }
        }
        let array = texts.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        let got = Spi::get_one::<Vec<Option<f64>>>(&format!(
            "SELECT array_agg(simhash_similarity(t[i + 1], t[j + 1], n) ORDER BY r) \
             FROM (VALUES {}) v(r, i, j, n), (SELECT ARRAY[{array}] AS t) s",
            rows.join(", ")
        ))
        .unwrap()
        .unwrap();
        assert_eq!(got, expected);
    }
}
