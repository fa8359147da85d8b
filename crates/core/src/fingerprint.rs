//! Charikar's SimHash over weighted features.
//!
//! Each feature is hashed to 64 bits with FNV-1a-64 over its UTF-8 bytes (the same value as Go's
//! `fnv.New64a()`, the seeds' reference). Every feature votes on every bit: `+weight` where its hash
//! has a 1, `-weight` where it has a 0. A fingerprint bit is 1 where the total is strictly positive;
//! a total of exactly 0 gives 0 (the tie rule). Weights are integers, so the totals do not depend on
//! the order in which features arrive (float sums do, and flip near-zero bits).

use std::hash::Hasher;

use crate::interrupt::{Interrupt, STEP};

/// Fixed-point scale applied to float weights (TF-IDF, the user's) before the integer vote.
pub const WEIGHT_SCALE: f64 = (1u64 << 24) as f64;

/// FNV-1a-64 of a feature's bytes.
///
/// Not `Hash::hash(&str)`: that appends a 0xFF terminator and would disagree with every other FNV
/// implementation.
pub fn feature_hash(feature: &str) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(feature.as_bytes());
    hasher.finish()
}

/// [`feature_hash`], checking `interrupt` every [`STEP`] bytes (FNV-1a goes a byte at a time, so
/// the pieces hash to the same value as the whole).
pub fn feature_hash_interruptible(feature: &str, interrupt: Interrupt<'_>) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    for piece in feature.as_bytes().chunks(STEP) {
        interrupt.check();
        hasher.write(piece);
    }
    hasher.finish()
}

/// The weighted bit vote: bit `i` of the result is 1 iff the sum over features of
/// `+w` (bit `i` of the hash set) or `-w` (clear) is > 0. Bit 0 is the least significant bit.
pub fn weighted_vote<I>(hashed_features: I) -> u64
where
    I: IntoIterator<Item = (u64, i64)>,
{
    weighted_vote_interruptible(hashed_features, Interrupt::NEVER)
}

/// [`weighted_vote`], checking `interrupt` every [`STEP`] features.
pub fn weighted_vote_interruptible<I>(hashed_features: I, interrupt: Interrupt<'_>) -> u64
where
    I: IntoIterator<Item = (u64, i64)>,
{
    let mut totals = [0i128; 64];
    for (i, (hash, weight)) in hashed_features.into_iter().enumerate() {
        if i % STEP == 0 {
            interrupt.check();
        }
        let weight = weight as i128;
        for (bit, total) in totals.iter_mut().enumerate() {
            if hash >> bit & 1 == 1 {
                *total += weight;
            } else {
                *total -= weight;
            }
        }
    }
    totals.iter().enumerate().filter(|(_, total)| **total > 0).fold(0u64, |fp, (bit, _)| fp | 1 << bit)
}

/// The vote's 64 running totals, for fingerprints built up feature by feature (an aggregate).
/// Same rule as [`weighted_vote`]; totals are `i64`, and an overflow is reported, not wrapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VoteTotals(pub [i64; 64]);

/// A vote total went past the range of `i64` (weights summing beyond about 5.5e11 x 2^24).
#[derive(Debug, PartialEq, Eq)]
pub struct VoteOverflow;

impl Default for VoteTotals {
    fn default() -> Self {
        VoteTotals([0; 64])
    }
}

impl VoteTotals {
    pub fn add(&mut self, hash: u64, weight: i64) -> Result<(), VoteOverflow> {
        for (bit, total) in self.0.iter_mut().enumerate() {
            let vote = if hash >> bit & 1 == 1 { Some(weight) } else { weight.checked_neg() };
            *total = vote.and_then(|v| total.checked_add(v)).ok_or(VoteOverflow)?;
        }
        Ok(())
    }

    pub fn merge(&mut self, other: &VoteTotals) -> Result<(), VoteOverflow> {
        for (total, other) in self.0.iter_mut().zip(other.0) {
            *total = total.checked_add(other).ok_or(VoteOverflow)?;
        }
        Ok(())
    }

    pub fn fingerprint(&self) -> u64 {
        self.0.iter().enumerate().filter(|(_, t)| **t > 0).fold(0u64, |fp, (bit, _)| fp | 1 << bit)
    }
}

/// A user's float weight as the vote's integer weight: scaled by 2^24 (as TF-IDF weights are) and
/// rounded. `None` for NaN, infinities and weights beyond about 2.7e11.
pub fn integer_weight(weight: f64) -> Option<i64> {
    let scaled = (weight * WEIGHT_SCALE).round();
    (scaled.is_finite() && scaled.abs() < i64::MAX as f64 / 2.0).then_some(scaled as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_totals_agree_with_the_vote() {
        let features = [(0x1234_5678_9abc_def0u64, 7i64), (0x0fed_cba9_8765_4321, 5), (!0u64, -1)];
        let mut totals = VoteTotals::default();
        let mut halves = (VoteTotals::default(), VoteTotals::default());
        for (i, &(h, w)) in features.iter().enumerate() {
            totals.add(h, w).unwrap();
            if i % 2 == 0 {
                halves.0.add(h, w).unwrap()
            } else {
                halves.1.add(h, w).unwrap()
            }
        }
        halves.0.merge(&halves.1).unwrap();
        assert_eq!(totals, halves.0);
        assert_eq!(totals.fingerprint(), weighted_vote(features));
        let mut big = VoteTotals::default();
        big.add(1, i64::MAX).unwrap();
        assert_eq!(big.add(1, 1), Err(VoteOverflow));
        assert_eq!(integer_weight(1.0), Some(1 << 24));
        assert_eq!(integer_weight(f64::NAN), None);
        assert_eq!(integer_weight(1e300), None);
    }

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        // Published FNV-1a-64 test vectors (offset basis for "", then "a" and "foobar").
        assert_eq!(feature_hash(""), 0xcbf29ce484222325);
        assert_eq!(feature_hash("a"), 0xaf63dc4c8601ec8c);
        assert_eq!(feature_hash("foobar"), 0x85944171f73967e8);
        let long = "指纹 fingerprint ".repeat(STEP);
        assert_eq!(feature_hash_interruptible(&long, Interrupt::NEVER), feature_hash(&long));
        assert_eq!(feature_hash_interruptible("foobar", Interrupt::NEVER), 0x85944171f73967e8);
        assert_eq!(feature_hash_interruptible("", Interrupt::NEVER), 0xcbf29ce484222325);
    }

    /// The seeds' 6-bit example (seed 001): "美国" hashes to 100101 with weight 4, "51区" to 101011
    /// with weight 5; the column sums are 9 -9 1 -1 1 9, so the fingerprint is 101011.
    /// Bits are written most significant first, as in the seed.
    #[test]
    fn six_bit_example_from_the_seeds() {
        let us = 0b100101u64;
        let area51 = 0b101011u64;
        let fp = weighted_vote([(us, 4), (area51, 5)]);
        assert_eq!(fp & 0b111111, 0b101011);
        // The 58 high bits are 0 in both hashes, so they sum to -9 and stay 0.
        assert_eq!(fp >> 6, 0);
    }

    #[test]
    fn ties_give_zero_and_order_does_not_matter() {
        // Two features with equal weight and complementary hashes cancel on every bit.
        assert_eq!(weighted_vote([(0xffff_0000_ffff_0000, 3), (0x0000_ffff_0000_ffff, 3)]), 0);
        let features = [(0x1234_5678_9abc_def0, 7), (0x0fed_cba9_8765_4321, 5), (!0u64, 1)];
        let mut reversed = features;
        reversed.reverse();
        assert_eq!(weighted_vote(features), weighted_vote(reversed));
    }

    #[test]
    fn a_single_feature_reproduces_its_hash() {
        let h = feature_hash("指纹");
        assert_eq!(weighted_vote([(h, 1)]), h);
        assert_eq!(weighted_vote(std::iter::empty()), 0);
    }
}
