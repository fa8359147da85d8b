//! Text -> weighted features, with jieba-rs segmentation and its TF-IDF keyword weights.
//!
//! Format version 0 (see CHANGELOG.md): the text is folded first ([`crate::fold`]: NFKC, lower
//! case, Traditional -> Simplified, whitespace); a keyword must have at least two characters
//! (jieba-rs' rule) and at least one letter or digit (so "..." or "——" are not words); its float
//! TF-IDF weight is scaled by 2^24 and rounded to an integer (at least 1), so that the vote in
//! [`crate::fingerprint`] is exact and independent of keyword order; the [`DEFAULT_TOP_N`] heaviest
//! keywords vote (ties broken by the keyword's text). The quality harness (`bench/quality`) chose
//! the cut: against all keywords it keeps boilerplate out (added navigation or copyright lines bring
//! many light keywords) at some cost on repeated and dropped sentences.

use std::sync::LazyLock;

use jieba_rs::{Jieba, KeywordExtract, TfIdf};

use crate::fingerprint::{feature_hash, weighted_vote};
use crate::fold::fold;

/// jieba-rs' bundled dictionary; built on first use, once per process (a PostgreSQL backend).
static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
/// jieba-rs' bundled IDF table and default keyword configuration.
static TFIDF: LazyLock<TfIdf> = LazyLock::new(TfIdf::default);

pub use crate::fingerprint::WEIGHT_SCALE;

/// How many keywords vote in `simhash(text)`.
pub const DEFAULT_TOP_N: usize = 20;

/// Loads the dictionary, the IDF table and the folding tables now rather than on first use.
pub fn preload() {
    LazyLock::force(&JIEBA);
    LazyLock::force(&TFIDF);
    crate::fold::preload();
    crate::shingles::preload();
}

/// Every keyword of `text` (not folded) with its integer weight, heaviest first, ties by text.
pub fn keywords(text: &str) -> Vec<(String, i64)> {
    let mut features: Vec<(String, i64)> = TFIDF
        .extract_keywords(&JIEBA, text, usize::MAX, Vec::new())
        .into_iter()
        .filter(|k| k.keyword.chars().any(char::is_alphanumeric))
        .map(|k| {
            let weight = (k.weight * WEIGHT_SCALE).round().max(1.0) as i64;
            (k.keyword, weight)
        })
        .collect();
    features.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    features
}

/// The `top_n` heaviest keywords of the folded text: the features of `simhash(text, top_n)`.
pub fn top_features(text: &str, top_n: usize) -> Vec<(String, i64)> {
    let mut features = keywords(&fold(text));
    features.truncate(top_n);
    features
}

/// The features of `simhash(text)`: the [`DEFAULT_TOP_N`] heaviest keywords of the folded text.
pub fn text_features(text: &str) -> Vec<(String, i64)> {
    top_features(text, DEFAULT_TOP_N)
}

fn vote(features: &[(String, i64)]) -> Option<u64> {
    if features.is_empty() {
        return None;
    }
    Some(weighted_vote(features.iter().map(|(f, w)| (feature_hash(f), *w))))
}

/// The SimHash fingerprint of `text`, or `None` when the text has no features (empty, only
/// punctuation, or only one-character words): such texts have nothing to compare, and a 0 fingerprint
/// would make them all near-duplicates of each other.
pub fn simhash_text(text: &str) -> Option<u64> {
    vote(&text_features(text))
}

/// `simhash(text, top_n)`: only the `top_n` heaviest keywords of the folded text vote.
pub fn simhash_top_n(text: &str, top_n: usize) -> Option<u64> {
    vote(&top_features(text, top_n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    #[test]
    fn featureless_text_has_no_fingerprint() {
        assert_eq!(simhash_text(""), None);
        assert_eq!(simhash_text("   "), None);
        assert_eq!(simhash_text("，。！？……——"), None);
        assert_eq!(simhash_text("我"), None);
        assert_eq!(simhash_top_n("数据库系统", 0), None);
    }

    #[test]
    fn features_are_the_heaviest_keywords_of_the_folded_text() {
        let features = text_features("今天紐約的天氣真好啊，京華大酒店的張堯經理吃了一隻北京烤鴨。");
        let words: Vec<&str> = features.iter().map(|(f, _)| f.as_str()).collect();
        assert!(words.contains(&"纽约"), "{words:?}");
        assert!(words.contains(&"北京烤鸭"), "{words:?}");
        assert!(features.iter().all(|(f, w)| *w > 0 && f.chars().count() >= 2));
        assert!(features.windows(2).all(|p| p[0].1 >= p[1].1));
        let long = "数据库 ".repeat(3) + &(0..60).map(|i| format!("词{i}语")).collect::<String>();
        assert_eq!(text_features(&long).len(), DEFAULT_TOP_N);
        assert!(keywords(&long).len() > DEFAULT_TOP_N);
    }

    #[test]
    fn width_case_and_script_do_not_matter() {
        assert_eq!(simhash_text("PostgreSQL 資料庫"), simhash_text("ｐｏｓｔｇｒｅｓｑｌ 数据库"));
    }

    #[test]
    fn is_deterministic_and_near_for_small_edits() {
        let a = "区块链共识算法的未来研究趋势将主要侧重于区块链共识算法性评估、共识算法与激励机制的适配优化以及新型区块链结构下的共识创新三个方面。";
        let b = "区块链共识算法的未来研究趋势将主要侧重于区块链共识算法性评估、共识算法与激励机制的适配优化以及新型区块链结构下的共识创新等三个方面。";
        let fa = simhash_text(a).unwrap();
        assert_eq!(simhash_text(a), Some(fa));
        let fb = simhash_text(b).unwrap();
        assert!(hamming(fa, fb) <= 3, "distance {}", hamming(fa, fb));
        let other = simhash_text("PostgreSQL is a powerful, open source object-relational database system.").unwrap();
        assert!(hamming(fa, other) > 10);
    }
}
