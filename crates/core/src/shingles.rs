//! Character n-gram shingles of folded text, and the two fingerprints built on them:
//! [`minhash64`] (1-bit MinHash) and [`simhash_ngrams`] (SimHash of the n-grams).
//!
//! Shingles are taken from the folded text ([`crate::fold`]) with punctuation and symbols left out:
//! letters, digits and combining marks remain, with one space between two words of a spaced script
//! (not next to a Chinese character or kana), so that punctuation and spacing changes are not edits. A text
//! shorter than n characters is one shingle; a text with no letter or digit has none.

use std::collections::HashMap;

use crate::fingerprint::{feature_hash, weighted_vote};
use crate::fold::fold_chars;

/// The shingle length the SQL functions use by default.
pub const DEFAULT_SHINGLE: usize = 3;
/// The longest shingle accepted.
pub const MAX_SHINGLE: usize = 32;

/// The text shingles are cut from: folded, only letters, digits and single spaces.
pub fn shingle_text(text: &str) -> String {
    shingle_chars(text).into_iter().collect()
}

/// [`shingle_text`] as characters.
fn shingle_chars(text: &str) -> Vec<char> {
    let mut chars = fold_chars(text);
    keep_shingle_chars(&mut chars);
    chars
}

/// Keeps the characters of folded text that shingles are cut from, in place (a space is added only
/// where at least one character was left out, so the text never grows).
fn keep_shingle_chars(chars: &mut Vec<char>) {
    // Chinese and Japanese have no spaces between words: keep a space only between two other
    // letters or digits, where punctuation or whitespace separated them.
    // Chinese characters, kana and CJK symbols (not Hangul, which spaces its words).
    let wide = |c: char| {
        let c = c as u32;
        ((0x2E80..=0x9FFF).contains(&c) && !(0x3130..=0x318F).contains(&c))
            || (0xF900..=0xFAFF).contains(&c)
            || (0x20000..=0x3FFFF).contains(&c)
    };
    let mut kept = 0;
    let mut previous: Option<char> = None;
    let mut separated = false;
    for i in 0..chars.len() {
        let c = chars[i];
        // Combining marks (Devanagari vowel signs, Thai tone marks) belong to their word.
        // (ASCII and CJK Unified Ideographs, the common cases, without a Unicode table search.)
        let keep = match c as u32 {
            0..=0x7F => c.is_ascii_alphanumeric(),
            0x4E00..=0x9FFF => true,
            _ => c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(c),
        };
        if keep {
            if separated && previous.is_some_and(|p| !wide(p)) && !wide(c) {
                chars[kept] = ' ';
                kept += 1;
            }
            separated = false;
            previous = Some(c);
            chars[kept] = c;
            kept += 1;
        } else {
            separated = true;
        }
    }
    chars.truncate(kept);
}

/// Calls `each` with every n-character window of `text` (the whole text if it is shorter).
fn for_each_shingle<'a>(text: &'a str, n: usize, each: &mut dyn FnMut(&'a str)) {
    if text.is_empty() {
        return;
    }
    let offsets: Vec<usize> = text.char_indices().map(|(b, _)| b).chain(std::iter::once(text.len())).collect();
    let chars = offsets.len() - 1;
    if chars <= n {
        each(text);
        return;
    }
    for i in 0..=chars - n {
        each(&text[offsets[i]..offsets[i + n]]);
    }
}

/// SplitMix64's finaliser: spreads FNV-1a's weak high bits over all 64.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The 1-bit MinHash of the set of n-character shingles of `text`: 64 min-hashes, one bit each.
///
/// One-permutation hashing: each shingle is hashed once (FNV-1a-64 over its code points, then
/// SplitMix64's finaliser); the top 6 bits pick one of 64 bins, the
/// other 58 bits are its value, and each bin keeps its least value. An empty bin (fewer than about
/// 200 shingles leave some) takes the value of a non-empty bin chosen by a hash of its number
/// (optimal densification, Shrivastava 2017), so that every bin agrees between two texts with the
/// probability of their Jaccard similarity J. Bit i is one bit of a hash of bin i's value and i, so
/// two texts differ in about 32 x (1 - J) bits.
pub fn minhash64(text: &str, n: usize) -> Option<u64> {
    const EMPTY: u64 = u64::MAX;
    let chars = shingle_chars(text);
    let n = n.clamp(1, chars.len().max(1));
    let mut bins = [EMPTY; 64];
    for window in chars.windows(n) {
        // FNV-1a over the code points (not the UTF-8 bytes: no re-encoding), then mixed.
        let h =
            mix(window.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)));
        let bin = (h >> 58) as usize;
        let value = h & ((1 << 58) - 1);
        if value < bins[bin] {
            bins[bin] = value;
        }
    }
    if bins.iter().all(|&b| b == EMPTY) {
        return None;
    }
    let mut fp = 0u64;
    for (i, &value) in bins.iter().enumerate() {
        let mut value = value;
        let mut attempt = 0u64;
        while value == EMPTY {
            attempt += 1;
            value = bins[(mix((i as u64) << 32 | attempt) % 64) as usize];
        }
        // The bit is drawn from the value and the bin number, so that a bin filled from another
        // does not simply repeat its bit (a one-shingle text would be all ones or all zeros).
        fp |= (mix(value ^ (i as u64) << 58) & 1) << i;
    }
    Some(fp)
}

/// The SimHash of the n-character shingles of `text`, each weighted by its number of occurrences.
pub fn simhash_ngrams(text: &str, n: usize) -> Option<u64> {
    let shingled = shingle_text(text);
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for_each_shingle(&shingled, n, &mut |s| *counts.entry(s).or_insert(0) += 1);
    if counts.is_empty() {
        return None;
    }
    Some(weighted_vote(counts.into_iter().map(|(s, w)| (feature_hash(s), w))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_unified_ideographs_are_alphanumeric() {
        assert!((0x4E00..=0x9FFF).filter_map(char::from_u32).all(char::is_alphanumeric));
    }
    use crate::distance::hamming;

    fn jaccard(a: &str, b: &str, n: usize) -> f64 {
        let set = |t: &str| {
            let mut s = std::collections::HashSet::new();
            for_each_shingle(&shingle_text(t), n, &mut |x| {
                s.insert(x.to_string());
            });
            s
        };
        let (a, b) = (set(a), set(b));
        a.intersection(&b).count() as f64 / a.union(&b).count() as f64
    }

    #[test]
    fn shingle_text_drops_punctuation_and_folds() {
        assert_eq!(shingle_text("Hello,ＷＯＲＬＤ!  軟體。"), "hello world软件");
        assert_eq!(shingle_text("PostgreSQL 数据库"), shingle_text("PostgreSQL数据库"));
        assert_eq!(shingle_text("हिन्दी भाषा"), "हिन्दी भाषा");
        assert_eq!(shingle_text("한국어 문장"), "한국어 문장");
        assert_eq!(shingle_text("，。！"), "");
    }

    #[test]
    fn empty_or_punctuation_only_has_no_fingerprint() {
        assert_eq!(minhash64("", 3), None);
        assert_eq!(minhash64("，。！？", 3), None);
        assert_eq!(simhash_ngrams("...", 3), None);
        assert!(minhash64("ab", 3).is_some());
        let one = minhash64("好", 3).unwrap();
        assert!((16..=48).contains(&one.count_ones()), "{one:016x}");
    }

    #[test]
    fn equal_after_folding() {
        let a = "PostgreSQL 資料庫的軟體開發";
        let b = "postgresql，数据库的软件开发！";
        assert_eq!(minhash64(a, 3), minhash64(b, 3));
        assert_eq!(simhash_ngrams(a, 3), simhash_ngrams(b, 3));
    }

    /// The mean distance over many pairs tracks 32 x (1 - J).
    #[test]
    fn distance_estimates_jaccard() {
        let base: String = (0..400).map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000).unwrap()).collect();
        let mut total_error = 0.0;
        let trials = 200;
        for t in 0..trials {
            let chars: Vec<char> = base.chars().collect();
            let mut edited = chars.clone();
            for e in 0..20 {
                let at = (t * 131 + e * 977) % edited.len();
                edited[at] = char::from_u32(0x4e00 + ((t * 31 + e) % 500) as u32).unwrap();
            }
            let edited: String = edited.into_iter().collect();
            let original: String = chars.into_iter().collect();
            let j = jaccard(&original, &edited, 3);
            let d = hamming(minhash64(&original, 3).unwrap(), minhash64(&edited, 3).unwrap()) as f64;
            total_error += d - 32.0 * (1.0 - j);
        }
        let bias = total_error / trials as f64;
        assert!(bias.abs() < 1.0, "mean distance - 32(1-J) = {bias}");
    }
}
