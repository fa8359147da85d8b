//! How much memory a text function needs, from the text's length: the text functions work in
//! memory several times the text's size (folded copy, words or shingles, their hashes and sets),
//! so a caller bounds a call by refusing a text whose [`needed`] bytes exceed its limit, before
//! any of it is allocated (the server: the GUC `simhash.max_text_memory`, SQLSTATE 54000; the
//! Python module: `pgsimhash.set_max_text_memory`, `TextTooLarge`).

/// The default limit: 1 GB, the server's default `simhash.max_text_memory`.
pub const DEFAULT_MAX_TEXT_MEMORY: usize = 1 << 30;

/// Bytes of memory per byte of text that a function needs at most: measured with
/// `bench/text_memory.sh` on 94 MB of distinct words (the worst case: every shingle new), beyond
/// the text itself, with a margin (the text in the server's memory is counted too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
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

/// The most memory a call of a function of kind `need` on `bytes` bytes of text needs.
pub fn needed(bytes: usize, need: Need) -> usize {
    bytes.saturating_mul(need as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_scale_with_the_text_and_saturate() {
        assert_eq!(needed(1000, Need::MinHash), 6000);
        assert_eq!(needed(1000, Need::Sets), 13000);
        assert_eq!(needed(usize::MAX, Need::Ngrams), usize::MAX);
    }
}
