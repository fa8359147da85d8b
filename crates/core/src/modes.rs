//! The fingerprint modes by name, for tools that compare them (the quality harness, benchmarks).

/// A mode: text -> fingerprint (`None`: the text has nothing to fingerprint).
pub type Mode = fn(&str) -> Option<u64>;

const MODES: &[(&str, Mode)] = &[
    ("simhash", crate::features::simhash_text),
    // simhash(text) with every keyword voting (no top-N cut), for comparison.
    ("simhash_all_keywords", |t| crate::features::simhash_top_n(t, usize::MAX)),
    // The README's recipe for long texts: simhash(body, greatest(20, char_length(body) / 40)).
    ("simhash_len40", |t| {
        crate::features::simhash_top_n(t, (t.chars().count() / 40).max(crate::features::DEFAULT_TOP_N))
    }),
    ("simhash_ngrams3", |t| crate::shingles::simhash_ngrams(t, 3)),
    ("minhash64", |t| crate::shingles::minhash64(t, 3)),
    ("minhash64_5", |t| crate::shingles::minhash64(t, 5)),
    // minhash64(text, 4, 2): 4-character shingles, two min-hashes per bit.
    ("minhash64_4x2", |t| crate::shingles::minhash64_with(t, 4, 2)),
];

pub fn names() -> Vec<&'static str> {
    MODES.iter().map(|(name, _)| *name).collect()
}

pub fn by_name(name: &str) -> Option<Mode> {
    MODES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}
