//! The fingerprint modes by name, for tools that compare them (the quality harness, benchmarks).

/// A mode: text -> fingerprint (`None`: the text has nothing to fingerprint).
pub type Mode = fn(&str) -> Option<u64>;

const MODES: &[(&str, Mode)] = &[
    ("simhash", crate::features::simhash_text),
    ("simhash_folded", |t| crate::features::simhash_text(&crate::fold::fold(t))),
    ("simhash_top20", |t| crate::features::simhash_top_n(t, 20)),
    ("simhash_folded_stop", |t| crate::features::simhash_text_stopwords(&crate::fold::fold(t))),
    ("simhash_folded_top20", |t| crate::features::simhash_top_n(&crate::fold::fold(t), 20)),
    ("simhash_folded_top40", |t| crate::features::simhash_top_n(&crate::fold::fold(t), 40)),
    ("simhash_folded_sqrtn", |t| {
        let folded = crate::fold::fold(t);
        let n = crate::features::text_features(&folded).len();
        crate::features::simhash_top_n(&folded, ((n as f64).sqrt() * 4.0).ceil().max(10.0) as usize)
    }),
    ("simhash_ngrams3", |t| crate::shingles::simhash_ngrams(t, 3)),
    ("minhash64", |t| crate::shingles::minhash64(t, 3)),
    ("minhash64_5", |t| crate::shingles::minhash64(t, 5)),
];

pub fn names() -> Vec<&'static str> {
    MODES.iter().map(|(name, _)| *name).collect()
}

pub fn by_name(name: &str) -> Option<Mode> {
    MODES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}
