//! The fingerprint modes by name, for tools that compare them (the quality harness, benchmarks).

/// A mode: text -> fingerprint (`None`: the text has nothing to fingerprint).
pub type Mode = fn(&str) -> Option<u64>;

const MODES: &[(&str, Mode)] = &[("simhash", crate::features::simhash_text)];

pub fn names() -> Vec<&'static str> {
    MODES.iter().map(|(name, _)| *name).collect()
}

pub fn by_name(name: &str) -> Option<Mode> {
    MODES.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
}
