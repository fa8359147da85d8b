//! Text -> weighted features, with jieba-rs segmentation and its TF-IDF keyword weights.
//!
//! Format version 0 (see CHANGELOG.md): every TF-IDF keyword of the text is a feature (no top-N cut:
//! a keyword entering or leaving a top N moves many bits at once); a keyword must have at least two
//! characters (jieba-rs' rule) and at least one letter or digit (so "..." or "——" are not words).
//! The float TF-IDF weight is scaled by 2^24 and rounded to an integer (at least 1), so that the vote
//! in [`crate::fingerprint`] is exact and independent of keyword order.

use std::sync::LazyLock;

use jieba_rs::{Jieba, KeywordExtract, TfIdf};

use crate::fingerprint::{feature_hash, weighted_vote};

/// jieba-rs' bundled dictionary; built on first use, once per process (a PostgreSQL backend).
static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
/// jieba-rs' bundled IDF table and default keyword configuration.
static TFIDF: LazyLock<TfIdf> = LazyLock::new(TfIdf::default);

/// The same IDF table with real stop-word lists added to jieba-rs' 31 English words: stopwords-iso's
/// Chinese and English lists (MIT, `data/stopwords`).
static TFIDF_STOPWORDS: LazyLock<TfIdf> = LazyLock::new(|| {
    let mut tfidf = TfIdf::default();
    let mut builder = jieba_rs::KeywordExtractConfig::builder();
    for list in [include_str!("../data/stopwords/stopwords-zh.txt"), include_str!("../data/stopwords/stopwords-en.txt")] {
        for word in list.lines().map(str::trim).filter(|w| !w.is_empty()) {
            builder = builder.add_stop_word(word.to_string());
        }
    }
    *tfidf.config_mut() = builder.build();
    tfidf
});

/// Experimental: [`simhash_text`] with the stop-word lists (compared by the quality harness).
pub fn simhash_text_stopwords(text: &str) -> Option<u64> {
    let features: Vec<(String, i64)> = TFIDF_STOPWORDS
        .extract_keywords(&JIEBA, text, usize::MAX, Vec::new())
        .into_iter()
        .filter(|k| k.keyword.chars().any(char::is_alphanumeric))
        .map(|k| (k.keyword, (k.weight * WEIGHT_SCALE).round().max(1.0) as i64))
        .collect();
    if features.is_empty() {
        return None;
    }
    Some(weighted_vote(features.iter().map(|(f, w)| (feature_hash(f), *w))))
}

/// Fixed-point scale applied to TF-IDF weights before the integer vote.
pub const WEIGHT_SCALE: f64 = (1u64 << 24) as f64;

/// Loads the dictionary and IDF table now rather than on the first fingerprint.
pub fn preload() {
    LazyLock::force(&JIEBA);
    LazyLock::force(&TFIDF);
    LazyLock::force(&TFIDF_STOPWORDS);
}

/// The features of `text` with their integer weights, heaviest first, ties by feature text.
pub fn text_features(text: &str) -> Vec<(String, i64)> {
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

/// The SimHash fingerprint of `text`, or `None` when the text has no features (empty, only
/// punctuation, or only one-character words): such texts have nothing to compare, and a 0 fingerprint
/// would make them all near-duplicates of each other.
pub fn simhash_text(text: &str) -> Option<u64> {
    let features = text_features(text);
    if features.is_empty() {
        return None;
    }
    Some(weighted_vote(features.iter().map(|(f, w)| (feature_hash(f), *w))))
}

/// The seeds' variant: the SimHash of only the `top_n` heaviest features (ties by feature text).
pub fn simhash_top_n(text: &str, top_n: usize) -> Option<u64> {
    let features = text_features(text);
    if features.is_empty() || top_n == 0 {
        return None;
    }
    Some(weighted_vote(features.iter().take(top_n).map(|(f, w)| (feature_hash(f), *w))))
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
    }

    #[test]
    fn features_are_keywords_with_positive_integer_weights() {
        let features = text_features("今天纽约的天气真好啊，京华大酒店的张尧经理吃了一只北京烤鸭。");
        let words: Vec<&str> = features.iter().map(|(f, _)| f.as_str()).collect();
        assert!(words.contains(&"纽约"), "{words:?}");
        assert!(words.contains(&"北京烤鸭"), "{words:?}");
        assert!(features.iter().all(|(f, w)| *w > 0 && f.chars().count() >= 2));
        assert!(features.windows(2).all(|p| p[0].1 >= p[1].1));
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
