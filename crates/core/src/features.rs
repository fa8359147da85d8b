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

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use fnv::FnvHashMap;
use jieba_rs::{Jieba, KeywordExtract, TfIdf};

use crate::fingerprint::{feature_hash, weighted_vote_interruptible};
use crate::fold::fold_interruptible;
use crate::interrupt::{ranges, Interrupt, STEP};

/// jieba-rs' bundled dictionary; built on first use, once per process (a PostgreSQL backend).
static JIEBA: LazyLock<Jieba> = LazyLock::new(Jieba::new);
/// jieba-rs' bundled IDF table and default keyword configuration.
static TFIDF: LazyLock<TfIdf> = LazyLock::new(TfIdf::default);
/// Its stop words, for [`is_keyword`] (a hash set, as jieba-rs looks them up).
static STOP_WORDS: LazyLock<WordSet> = LazyLock::new(|| TFIDF.config().stop_words().iter().cloned().collect());

/// Hashes words eight bytes at a time (FNV takes a byte at a time, and counting the words of a
/// text is a hash lookup per word).
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(last) ^ (chunks.remainder().len() as u64) << 59);
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.add(x.into());
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ self.0 >> 29
    }
}

impl WordHasher {
    #[inline]
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
    }
}

type WordSet = HashSet<String, BuildHasherDefault<WordHasher>>;

pub use crate::fingerprint::WEIGHT_SCALE;

/// How many keywords vote in `simhash(text)`.
pub const DEFAULT_TOP_N: usize = 20;

/// Loads the dictionary, the IDF table and the folding tables now rather than on first use.
pub fn preload() {
    LazyLock::force(&JIEBA);
    LazyLock::force(&TFIDF);
    LazyLock::force(&STOP_WORDS);
    crate::fold::preload();
    crate::shingles::preload();
}

/// Every keyword of `text` (not folded) with its integer weight, heaviest first, ties by text.
pub fn keywords(text: &str) -> Vec<(String, i64)> {
    heaviest_keywords(text, usize::MAX, Interrupt::NEVER)
}

/// The first `top_n` of [`keywords`]: every keyword with its integer weight, only the `top_n`
/// heaviest kept (by selection, then sorted: the order is total, keywords being distinct).
fn heaviest_keywords(text: &str, top_n: usize, interrupt: Interrupt<'_>) -> Vec<(String, i64)> {
    let weighted = keyword_weights(text, ONE_CALL_MAX_BYTES, PIECE_BYTES, interrupt);
    let mut features: Vec<(String, i64)> = Vec::with_capacity(weighted.len());
    for (i, (keyword, weight)) in weighted.into_iter().enumerate() {
        if i % STEP == 0 {
            interrupt.check();
        }
        if keyword.chars().any(char::is_alphanumeric) {
            features.push((keyword, (weight * WEIGHT_SCALE).round().max(1.0) as i64));
        }
    }
    let order = |a: &(String, i64), b: &(String, i64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    if features.len() > top_n {
        features.select_nth_unstable_by(top_n, order);
        features.truncate(top_n);
    }
    interrupt.check();
    features.sort_by(order);
    features
}

/// Texts up to this many bytes go to jieba-rs' keyword extraction in one call (about 40 ms a
/// megabyte); longer ones are segmented a piece at a time ([`keyword_weights_in_pieces`]).
const ONE_CALL_MAX_BYTES: usize = 1 << 20;
/// The length of those pieces, about (each ends at the first separator after it): small pieces keep
/// jieba-rs' list of words in the cache.
const PIECE_BYTES: usize = 1 << 13;

/// jieba-rs' TF-IDF keywords of `text` with their float weights (`extract_keywords`), in one call
/// for a text of up to `one_call_max_bytes`, else in pieces of about `piece_bytes`, with the same
/// result, checking `interrupt` between pieces.
fn keyword_weights(
    text: &str,
    one_call_max_bytes: usize,
    piece_bytes: usize,
    interrupt: Interrupt<'_>,
) -> Vec<(String, f64)> {
    if text.len() > one_call_max_bytes {
        if let Some(weights) = keyword_weights_in_pieces(text, piece_bytes, interrupt) {
            return weights;
        }
    }
    TFIDF.extract_keywords(&JIEBA, text, usize::MAX, Vec::new()).into_iter().map(|k| (k.keyword, k.weight)).collect()
}

/// What `extract_keywords(text)` gives (every keyword and its weight, in another order), bit for
/// bit, computed a piece of the text at a time so that `interrupt` is checked in between; `None`
/// in the rare case where the IDF of a keyword cannot be read back ([`probe_idfs`]), and the
/// caller then makes the one call. Why it is the same (jieba-rs 0.11, pinned by `Cargo.lock`; the
/// unit tests compare both on many texts cut into pieces of every size):
///
/// - Words: jieba-rs splits a text into runs of "Han" characters (CJK ideographs, ASCII letters
///   and digits, `+#&._%-`) and runs of other characters, segments each Han run on its own (the
///   best route through the run's dictionary words), and makes every other character a word of its
///   own ("\r\n" one word). So pieces cut right after a character that is not Han and not '\r'
///   ([`ends_piece`]) segment into the words of the whole text. Segmentation needs no tags, so
///   this segments with `cut` rather than `tag` (which `extract_keywords` uses for the tags only).
/// - Keywords and counts: [`is_keyword`] is jieba-rs' test (length in characters, stop words), and
///   each keyword's count and the total are summed over the pieces.
/// - Weights: jieba-rs computes `tf as f64 * idf / total as f64`; so does this, with the IDF
///   jieba-rs gives each keyword ([`probe_idfs`]).
///
/// A text with no separator for a long stretch (a Chinese text without punctuation, a long run of
/// letters and digits) takes that stretch in one piece.
fn keyword_weights_in_pieces(text: &str, piece_bytes: usize, interrupt: Interrupt<'_>) -> Option<Vec<(String, f64)>> {
    let config = TFIDF.config();
    let (hmm, min_length, stop_words) = (config.use_hmm(), config.min_keyword_length(), &*STOP_WORDS);
    let mut frequencies: HashMap<&str, u64, BuildHasherDefault<WordHasher>> = HashMap::default();
    for piece in jieba_pieces(text, piece_bytes) {
        interrupt.check();
        for token in JIEBA.cut(piece, hmm) {
            if is_keyword(token.word, min_length, stop_words) {
                *frequencies.entry(token.word).or_insert(0) += 1;
            }
        }
    }
    let total: u64 = frequencies.values().sum();
    let words: Vec<&str> = frequencies.keys().copied().collect();
    let idfs = probe_idfs(&words, interrupt)?;
    let mut weights = Vec::with_capacity(words.len());
    for range in ranges(words.len(), interrupt) {
        for (word, idf) in words[range.clone()].iter().zip(&idfs[range]) {
            weights.push((word.to_string(), frequencies[word] as f64 * idf / total as f64));
        }
    }
    Some(weights)
}

/// `text` in pieces of at least `piece_bytes` (but the last), each ending right after a character
/// for which [`ends_piece`] holds.
fn jieba_pieces(text: &str, piece_bytes: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut from = piece_bytes.min(rest.len());
        while !rest.is_char_boundary(from) {
            from += 1;
        }
        let end = rest[from..]
            .char_indices()
            .find(|&(_, c)| ends_piece(c))
            .map_or(rest.len(), |(i, c)| from + i + c.len_utf8());
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

/// Whether a piece may end after `c`: `c` is not in jieba-rs' Han runs (CJK ideographs, within
/// U+3400-U+9FFF, U+F900-U+FAFF and U+20000-U+3FFFF here, a superset; ASCII letters and digits;
/// `+#&._%-`) and is not '\r' (of a "\r\n" word): spaces, punctuation (Chinese too), kana,
/// letters of other scripts.
#[inline]
fn ends_piece(c: char) -> bool {
    let han = c.is_ascii_alphanumeric()
        || matches!(c, '+' | '#' | '&' | '.' | '_' | '%' | '-')
        || matches!(c, '\u{3400}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{3FFFF}');
    !han && c != '\r'
}

/// jieba-rs' keyword test (`KeywordExtractConfig::is_keyword`, not public): at least `min_length`
/// characters, not a stop word, and for a word with an upper-case letter, its lower case not a
/// stop word either.
fn is_keyword(word: &str, min_length: usize, stop_words: &WordSet) -> bool {
    if word.len() < min_length {
        return false; // fewer bytes than characters needed (spaces, punctuation)
    }
    let mut length = 0;
    let mut has_uppercase = false;
    for c in word.chars() {
        length += 1;
        has_uppercase |= c.is_uppercase();
    }
    if length < min_length || stop_words.contains(word) {
        return false;
    }
    !has_uppercase || !stop_words.contains(&word.to_lowercase())
}

/// The IDF jieba-rs' TF-IDF gives each of `words` (distinct keywords of a text), in order: its
/// table is not public, so it is read back from `extract_keywords` itself, on a probe text of
/// 2^k of the words separated by spaces (up to 1,024 at a time).
///
/// If the probe's keywords are exactly its words, each word was segmented, alone, into itself
/// (were some not, the longest such word would have to come out of a longer word's segmentation,
/// which would not be itself either), so each counts once and the total is 2^k: its weight is
/// `1 * idf / 2^k`, exact in floating point (unless subnormal), and `weight * 2^k` is the IDF. A
/// batch where that fails is probed again a word at a time; `None` where a word alone still does
/// not come out as itself (never seen so far: a word is segmented as itself in a text because the
/// best route chose it over the same alternatives it has alone).
fn probe_idfs(words: &[&str], interrupt: Interrupt<'_>) -> Option<Vec<f64>> {
    const BATCH: usize = 1 << 10;
    let mut idfs = Vec::with_capacity(words.len());
    let mut probe = String::new();
    let mut rest = words;
    while !rest.is_empty() {
        interrupt.check();
        let size = rest.len().min(BATCH);
        let batch = &rest[..1 << (usize::BITS - 1 - size.leading_zeros())];
        match probe_batch(batch, &mut probe) {
            Some(batch_idfs) => idfs.extend(batch_idfs),
            None => {
                for word in batch {
                    idfs.extend(probe_batch(std::slice::from_ref(word), &mut probe)?);
                }
            }
        }
        rest = &rest[batch.len()..];
    }
    Some(idfs)
}

/// The IDFs of a batch of 2^k distinct keywords from one probe (see [`probe_idfs`]), or `None`.
fn probe_batch(batch: &[&str], probe: &mut String) -> Option<Vec<f64>> {
    debug_assert!(batch.len().is_power_of_two());
    probe.clear();
    for word in batch {
        if !probe.is_empty() {
            probe.push(' ');
        }
        probe.push_str(word);
    }
    let found: FnvHashMap<String, f64> = TFIDF
        .extract_keywords(&JIEBA, probe, usize::MAX, Vec::new())
        .into_iter()
        .map(|k| (k.keyword, k.weight))
        .collect();
    if found.len() != batch.len() {
        return None;
    }
    let scale = batch.len() as f64;
    batch.iter().map(|word| found.get(*word).filter(|w| w.is_normal() || **w == 0.0).map(|w| w * scale)).collect()
}

/// The `top_n` heaviest keywords of the folded text: the features of `simhash(text, top_n)`.
pub fn top_features(text: &str, top_n: usize) -> Vec<(String, i64)> {
    top_features_interruptible(text, top_n, Interrupt::NEVER)
}

/// [`top_features`], checking `interrupt` as it goes.
pub fn top_features_interruptible(text: &str, top_n: usize, interrupt: Interrupt<'_>) -> Vec<(String, i64)> {
    heaviest_keywords(&fold_interruptible(text, interrupt), top_n, interrupt)
}

/// The features of `simhash(text)`: the [`DEFAULT_TOP_N`] heaviest keywords of the folded text.
pub fn text_features(text: &str) -> Vec<(String, i64)> {
    top_features(text, DEFAULT_TOP_N)
}

/// [`text_features`], checking `interrupt` as it goes.
pub fn text_features_interruptible(text: &str, interrupt: Interrupt<'_>) -> Vec<(String, i64)> {
    top_features_interruptible(text, DEFAULT_TOP_N, interrupt)
}

fn vote(features: &[(String, i64)], interrupt: Interrupt<'_>) -> Option<u64> {
    if features.is_empty() {
        return None;
    }
    Some(weighted_vote_interruptible(features.iter().map(|(f, w)| (feature_hash(f), *w)), interrupt))
}

/// The SimHash fingerprint of `text`, or `None` when the text has no features (empty, only
/// punctuation, or only one-character words): such texts have nothing to compare, and a 0 fingerprint
/// would make them all near-duplicates of each other.
pub fn simhash_text(text: &str) -> Option<u64> {
    simhash_text_interruptible(text, Interrupt::NEVER)
}

/// [`simhash_text`], checking `interrupt` as it goes.
pub fn simhash_text_interruptible(text: &str, interrupt: Interrupt<'_>) -> Option<u64> {
    vote(&text_features_interruptible(text, interrupt), interrupt)
}

/// `simhash(text, top_n)`: only the `top_n` heaviest keywords of the folded text vote.
pub fn simhash_top_n(text: &str, top_n: usize) -> Option<u64> {
    simhash_top_n_interruptible(text, top_n, Interrupt::NEVER)
}

/// [`simhash_top_n`], checking `interrupt` as it goes.
pub fn simhash_top_n_interruptible(text: &str, top_n: usize, interrupt: Interrupt<'_>) -> Option<u64> {
    vote(&top_features_interruptible(text, top_n, interrupt), interrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;
    use crate::fold::fold;
    use crate::interrupt::tests::{long_text, run_stopping, sample_texts};

    fn sorted(mut weights: Vec<(String, f64)>) -> Vec<(String, u64)> {
        let mut bits: Vec<(String, u64)> = weights.drain(..).map(|(k, w)| (k, w.to_bits())).collect();
        bits.sort();
        bits
    }

    /// Keywords and weights computed a piece at a time are those of jieba-rs' one call, to the bit,
    /// for texts cut into pieces of every small size (the cut falls at every separator), folded
    /// or not.
    #[test]
    fn keywords_in_pieces_equal_one_call() {
        let mut probes_failed = 0;
        for (t, text) in sample_texts(400, 120).iter().enumerate() {
            for text in [text.clone(), fold(text)] {
                let one_call = sorted(keyword_weights(&text, usize::MAX, 0, Interrupt::NEVER));
                for piece_bytes in [0, 1, 2, 3, 5, 8, 13, 40, 200] {
                    if t % 4 != 0 && piece_bytes > 3 {
                        continue;
                    }
                    match keyword_weights_in_pieces(&text, piece_bytes, Interrupt::NEVER) {
                        Some(pieces) => assert_eq!(sorted(pieces), one_call, "{piece_bytes}: {text:?}"),
                        None => probes_failed += 1,
                    }
                    let through = keyword_weights(&text, 0, piece_bytes, Interrupt::NEVER);
                    assert_eq!(sorted(through), one_call, "{piece_bytes}: {text:?}");
                }
            }
        }
        assert_eq!(probes_failed, 0);
    }

    /// Long texts take the pieces, with the features of the one call; the check is made all along
    /// (at least once per 64 kB) and stops the computation when it unwinds, which leaves nothing
    /// behind (the next computation gives the same features).
    #[test]
    fn long_texts_are_interruptible_with_the_same_features() {
        for seed in 0..3 {
            let text = long_text(3 * ONE_CALL_MAX_BYTES, seed);
            let folded = fold(&text);
            let one_call = sorted(keyword_weights(&folded, usize::MAX, 0, Interrupt::NEVER));
            let pieces =
                keyword_weights_in_pieces(&folded, PIECE_BYTES, Interrupt::NEVER).expect("every IDF read back");
            assert_eq!(sorted(pieces), one_call);
            let expected = text_features(&text);
            let (stopped, checks) = run_stopping(usize::MAX, |i| {
                assert_eq!(text_features_interruptible(&text, i), expected);
            });
            assert!(!stopped && checks >= text.len() / PIECE_BYTES, "{checks} checks");
            for stop_at in [1, checks / 3, checks / 2, checks - 1] {
                let (stopped, _) = run_stopping(stop_at, |i| simhash_text_interruptible(&text, i));
                assert!(stopped, "{stop_at}");
            }
            assert_eq!(simhash_text(&text), simhash_text_interruptible(&text, Interrupt::NEVER));
            let top = top_features(&text, 1000);
            assert_eq!(top[..], keywords(&folded)[..top.len()]);
            assert_eq!(simhash_top_n(&text, 1000), simhash_top_n_interruptible(&text, 1000, Interrupt::NEVER));
        }
    }

    /// The pieces end only after characters that end jieba-rs' runs, and never inside "\r\n".
    #[test]
    fn pieces_end_after_separators() {
        let text = "海量网页去重,是 搜索引擎\r\n的基础工作。abc.def+1 中文、カナ";
        for piece_bytes in 0..text.len() {
            let pieces: Vec<&str> = jieba_pieces(text, piece_bytes).collect();
            assert_eq!(pieces.concat(), text);
            for piece in &pieces[..pieces.len() - 1] {
                let last = piece.chars().last().unwrap();
                assert!([',', ' ', '\n', '。', '、', 'カ', 'ナ'].contains(&last), "{piece:?}");
            }
        }
        assert!(!ends_piece('\r') && !ends_piece('a') && !ends_piece('中') && !ends_piece('.') && !ends_piece('𠮷'));
        assert!(ends_piece(' ') && ends_piece('，') && ends_piece('。') && ends_piece('é') && ends_piece('カ'));
    }

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
