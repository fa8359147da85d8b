//! Dealing a set's lean bits among its segments: a permutation of the bit positions of codes, for
//! the in-memory sets of the near-duplicate constraint (the kept rows of the deferred check, the
//! pending rows of the commit-time recheck).
//!
//! Those sets cut codes into segments of consecutive bits and look a code up by its segment values
//! (the pigeonhole). When some bits are nearly constant in the set (a code shorter than its type,
//! padded with zeros: 50-bit values in a `bit(64)` or a `bigint`), the segments that hold them
//! take few values, and every lookup meets a share of the set there: the deferred check of 50,000
//! such codes compared each with about a quarter of the others. Hamming distance does not change
//! when every code's bits are moved by one permutation, so a set may file the codes with their
//! bits moved, and move the query's alike.
//!
//! [`BitDeal`] ranks the bits from the most balanced (ones in about half of the codes) to the
//! leanest, and moves rank `r` to position `r * step mod bits`, with `step` near `bits / phi`
//! (phi the golden ratio) and prime to `bits`: any run of consecutive ranks then lands spread
//! evenly over the code, so every window of consecutive positions (every segment, whatever its
//! width) holds about its share of the lean bits. A set whose bits are all balanced is left as it
//! is (no permutation: no cost).

use crate::interrupt::{Interrupt, STEP};

/// At most this many codes, evenly spaced through the set, are counted to rank its bits.
pub const SAMPLE: usize = 1 << 16;

/// A bit is lean when fewer than one code in this many differs from the rest there (ones, or
/// zeros).
const LEAN: usize = 8;

/// A set is dealt when at least this many of its bits are lean: fewer cost a segment at most
/// 8x more meetings.
const LEAN_BITS: usize = 3;

/// [`BitCounts::lean`] tells lean bits among at least this many codes.
pub const LEAN_AMONG: usize = 10_000;

/// A permutation of the bits of `bits`-bit codes: bit `source[p]` of a code goes to position `p`.
/// Bits are numbered from the most significant bit of the first byte, as PostgreSQL stores
/// `bit(n)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitDeal {
    source: Vec<u32>,
}

impl BitDeal {
    /// The deal for `count` codes of `bits` bits, `code(i)` the bytes of code `i` (at least
    /// `bits.div_ceil(8)` each); `None` when fewer than [`LEAN_BITS`] bits are lean (file the codes
    /// as they are). Counts at most [`SAMPLE`] codes, evenly spaced through the set (a load's codes
    /// may drift from its first to its last); `interrupt` is called every
    /// [`crate::interrupt::STEP`] of them.
    pub fn for_codes<'a>(
        bits: u32,
        count: usize,
        code: &dyn Fn(usize) -> &'a [u8],
        interrupt: Interrupt,
    ) -> Option<BitDeal> {
        let mut counts = BitCounts::new(bits);
        sample_evenly(count, interrupt, &mut |i| counts.add(code(i)));
        counts.deal()
    }

    /// The deal for 64-bit values (bit `b` numbered from the most significant), as
    /// [`BitDeal::for_codes`].
    pub fn for_u64s(values: &[u64], interrupt: Interrupt) -> Option<BitDeal> {
        let mut counts = BitCounts::new(64);
        sample_evenly(values.len(), interrupt, &mut |i| counts.add(&values[i].to_be_bytes()));
        counts.deal()
    }

    /// The deal for bits with `ones[b]` ones among `sample` codes.
    fn of_counts(ones: &[usize], sample: usize) -> Option<BitDeal> {
        if ones.len() < 2 || sample < 2 {
            return None;
        }
        let leanness = |b: usize| ones[b].min(sample - ones[b]);
        let lean = ones.iter().filter(|&&one| is_lean(one, sample)).count();
        if lean < LEAN_BITS {
            return None;
        }
        let bits = ones.len();
        // Most balanced first (the most ones-or-zeros in the minority); ties in position order.
        let mut ranked: Vec<usize> = (0..bits).collect();
        ranked.sort_by_key(|&b| (std::cmp::Reverse(leanness(b)), b));
        let step = golden_step(bits);
        let mut source = vec![0u32; bits];
        for (r, &b) in ranked.iter().enumerate() {
            source[r * step % bits] = b as u32;
        }
        Some(BitDeal { source })
    }

    /// `code` with its bits moved, into `out` (`bits.div_ceil(8)` bytes; the bits past the code's
    /// last are zero).
    pub fn apply(&self, code: &[u8], out: &mut [u8]) {
        out.fill(0);
        for (p, &s) in self.source.iter().enumerate() {
            let s = s as usize;
            let bit = code[s / 8] >> (7 - s % 8) & 1;
            out[p / 8] |= bit << (7 - p % 8);
        }
    }

    /// The codes `codes` (`bytes` bytes each, one after the other) with their bits moved, in a new
    /// buffer laid out alike; `Err` when memory for it is refused. `interrupt` is called every
    /// [`crate::interrupt::STEP`] codes.
    pub fn dealt_all(
        &self,
        codes: &[u8],
        bytes: usize,
        interrupt: Interrupt,
    ) -> Result<Vec<u8>, std::collections::TryReserveError> {
        let mut dealt: Vec<u8> = Vec::new();
        dealt.try_reserve_exact(codes.len())?;
        dealt.resize(codes.len(), 0);
        for (m, (out, code)) in dealt.chunks_exact_mut(bytes).zip(codes.chunks_exact(bytes)).enumerate() {
            if m % STEP == STEP - 1 {
                interrupt.check();
            }
            self.apply(code, out);
        }
        Ok(dealt)
    }

    /// `code` with its bits moved, in a new vector.
    #[cfg(test)]
    fn dealt(&self, code: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; self.source.len().div_ceil(8)];
        self.apply(code, &mut out);
        out
    }

    /// The tables that move the bits of a 64-bit value a byte at a time ([`BitDeal64`]); `None`
    /// unless the deal is of 64 bits.
    pub fn for_64_bits(&self) -> Option<BitDeal64> {
        if self.source.len() != 64 {
            return None;
        }
        let mut tables = vec![[0u64; 256]; 8];
        for (p, &s) in self.source.iter().enumerate() {
            let (byte, shift) = (s as usize / 8, 7 - s % 8);
            for (v, moved) in tables[byte].iter_mut().enumerate() {
                if v >> shift & 1 == 1 {
                    *moved |= 1u64 << (63 - p);
                }
            }
        }
        Some(BitDeal64 { tables })
    }
}

/// The ones counted at each bit of some codes of one length, for a [`BitDeal`] (a caller that
/// samples the codes itself adds them one at a time).
pub struct BitCounts {
    ones: Vec<usize>,
    codes: usize,
}

impl BitCounts {
    pub fn new(bits: u32) -> BitCounts {
        BitCounts { ones: vec![0; bits as usize], codes: 0 }
    }

    /// Counts `code` (at least `bits.div_ceil(8)` bytes).
    pub fn add(&mut self, code: &[u8]) {
        for (b, one) in self.ones.iter_mut().enumerate() {
            *one += usize::from(code[b / 8] >> (7 - b % 8) & 1);
        }
        self.codes += 1;
    }

    /// The deal of the codes counted ([`BitDeal::for_codes`]).
    pub fn deal(&self) -> Option<BitDeal> {
        BitDeal::of_counts(&self.ones, self.codes)
    }

    /// The lean bits of the codes counted (fewer than one code in eight differs from the rest
    /// there), numbered from 0, in order; none before [`LEAN_AMONG`] codes (a small table's bits
    /// say little, and its lookups meet few rows anyway).
    pub fn lean(&self) -> Vec<u32> {
        if self.codes < LEAN_AMONG {
            return Vec::new();
        }
        (0..self.ones.len() as u32).filter(|&b| is_lean(self.ones[b as usize], self.codes)).collect()
    }
}

/// Whether a bit with `ones` ones among `codes` codes is lean: fewer than one code in [`LEAN`]
/// differs from the rest there.
fn is_lean(ones: usize, codes: usize) -> bool {
    ones.min(codes - ones) * LEAN < codes
}

/// Calls `take(i)` for at most [`SAMPLE`] of `count` items, evenly spaced (a load's codes may
/// drift from its first to its last), and `interrupt` every [`crate::interrupt::STEP`] of them.
fn sample_evenly(count: usize, interrupt: Interrupt, take: &mut dyn FnMut(usize)) {
    let sample = count.min(SAMPLE);
    for s in 0..sample {
        if s % STEP == STEP - 1 {
            interrupt.check();
        }
        take(s * count / sample);
    }
}

/// Whether a build that counts its rows' bits as they come counts row `n` (from 0): the first
/// [`SAMPLE`] rows, then one in 64 (not evenly spaced, but the count is not known ahead; enough to
/// tell lean bits).
pub fn counted(n: usize) -> bool {
    n < SAMPLE || n.is_multiple_of(64)
}

/// A segment of an index that holds lean bits, as [`most_crowded`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crowded {
    /// The segment's number, from 0.
    pub segment: u32,
    /// Its width in bits.
    pub width: u32,
    /// How many of its bits are lean.
    pub lean: u32,
}

/// Of the first `indexed` segments of `plan` (consecutive bits, as an index cuts them), the one
/// that holds the most of the `lean` bits, if it holds at least [`LEAN_BITS`] of them: a lookup
/// there meets about 2^lean times the rows it would on uniform codes.
pub fn most_crowded(lean: &[u32], plan: &crate::multi_index::SegmentPlan, indexed: u32) -> Option<Crowded> {
    (0..indexed.min(plan.count))
        .map(|segment| {
            let start = segment * plan.width;
            let width = plan.width_of(segment);
            let lean = lean.iter().filter(|&&b| (start..start + width).contains(&b)).count() as u32;
            Crowded { segment, width, lean }
        })
        .max_by_key(|c| (c.lean, std::cmp::Reverse(c.segment)))
        .filter(|c| c.lean as usize >= LEAN_BITS)
}

/// A [`BitDeal`] of 64-bit values, applied with one table read per byte.
#[derive(Clone, Debug)]
pub struct BitDeal64 {
    /// `tables[i][v]`: where the bits of value `v` of byte `i` (from the most significant) go.
    tables: Vec<[u64; 256]>,
}

impl BitDeal64 {
    /// The deal of `values` ([`BitDeal::for_u64s`]), as tables.
    pub fn for_values(values: &[u64], interrupt: Interrupt) -> Option<BitDeal64> {
        BitDeal::for_u64s(values, interrupt).and_then(|deal| deal.for_64_bits())
    }

    pub fn apply(&self, value: u64) -> u64 {
        value.to_be_bytes().iter().zip(&self.tables).fold(0, |moved, (&byte, table)| moved | table[usize::from(byte)])
    }
}

/// The step near `bits / phi` that is prime to `bits` (so that `r * step mod bits` visits every
/// position once).
fn golden_step(bits: usize) -> usize {
    let mut step = ((bits as f64) * 0.618_033_988_75).round().max(1.0) as usize;
    while gcd(step, bits) != 1 {
        step += 1;
    }
    step
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multi_index::hamming_bytes;

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// 50-bit values in 64 bits: the top 14 bits are zero in every one.
    fn short_values(n: usize) -> Vec<u64> {
        (1..=n as u64).map(|g| g.wrapping_mul(2_654_435_761) & ((1 << 50) - 1)).collect()
    }

    #[test]
    fn balanced_codes_are_left_as_they_are() {
        let mut state = 7;
        let values: Vec<u64> = (0..10_000).map(|_| next(&mut state)).collect();
        assert_eq!(BitDeal::for_u64s(&values, Interrupt::NEVER), None);
        let codes: Vec<[u8; 32]> = (0..5_000)
            .map(|_| {
                let mut c = [0u8; 32];
                c.iter_mut().for_each(|b| *b = next(&mut state) as u8);
                c
            })
            .collect();
        assert_eq!(BitDeal::for_codes(256, codes.len(), &|i| &codes[i][..], Interrupt::NEVER), None);
        // Two constant bits are not worth a deal either.
        let two: Vec<u64> = (0..10_000).map(|_| next(&mut state) >> 2).collect();
        assert_eq!(BitDeal::for_u64s(&two, Interrupt::NEVER), None);
    }

    /// The 14 zero bits of 50-bit values are spread: every 16-bit segment of the dealt values
    /// holds 3 or 4 of them (all 14 were in the first segment), and its values are many.
    #[test]
    fn lean_bits_are_dealt_among_the_segments() {
        let values = short_values(50_000);
        let deal = BitDeal::for_u64s(&values, Interrupt::NEVER).expect("14 lean bits");
        let moved = deal.for_64_bits().expect("64 bits");
        let zeros = values.iter().fold(u64::MAX, |z, &v| z & !moved.apply(v));
        for n in 0..4 {
            let segment_zeros = (zeros >> (48 - 16 * n) & 0xffff).count_ones();
            assert!((2..=5).contains(&segment_zeros), "segment {n}: {segment_zeros} zero bits");
            let distinct: std::collections::HashSet<u64> =
                values.iter().map(|&v| moved.apply(v) >> (48 - 16 * n) & 0xffff).collect();
            assert!(distinct.len() >= 1_000, "segment {n}: {} values", distinct.len());
        }
        // Before: the first segment took 4 values.
        let first: std::collections::HashSet<u64> = values.iter().map(|&v| v >> 48).collect();
        assert!(first.len() <= 4);
    }

    /// A permutation: the byte tables, the code form and the distances agree.
    #[test]
    fn a_deal_keeps_every_distance() {
        let values = short_values(1_000);
        let deal = BitDeal::for_u64s(&values, Interrupt::NEVER).expect("lean bits");
        let mut sorted = deal.source.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..64).collect::<Vec<u32>>());
        let moved = deal.for_64_bits().expect("64 bits");
        let mut state = 3;
        for _ in 0..10_000 {
            let (a, b) = (next(&mut state), next(&mut state));
            assert_eq!(moved.apply(a).to_be_bytes().to_vec(), deal.dealt(&a.to_be_bytes()));
            assert_eq!((moved.apply(a) ^ moved.apply(b)).count_ones(), (a ^ b).count_ones());
        }
        // Codes of a length that is not a multiple of 8: the bits past the end stay zero.
        let codes: Vec<[u8; 2]> = (0..100u16).map(|i| (i << 6 | 0x3f).to_be_bytes()).collect();
        let deal = BitDeal::for_codes(13, codes.len(), &|i| &codes[i][..], Interrupt::NEVER).expect("lean bits");
        for (i, a) in codes.iter().enumerate() {
            let b = &codes[(i * 7 + 3) % codes.len()];
            let (da, db) = (deal.dealt(a), deal.dealt(b));
            assert_eq!(da[1] & 0x07, 0);
            let mask = |c: &[u8; 2]| [c[0], c[1] & 0xf8];
            assert_eq!(hamming_bytes(&da, &db), hamming_bytes(&mask(a), &mask(b)));
        }
    }

    /// The zero bits of small values are lean, and all in the first of four 16-bit segments;
    /// uniform values have none; two lean bits in a segment are not a crowd.
    #[test]
    fn lean_bits_and_the_segment_they_crowd() {
        use crate::multi_index::SegmentPlan;
        let plan = SegmentPlan::with_width(64, 16).unwrap();
        let mut counts = BitCounts::new(64);
        short_values(100_000)
            .iter()
            .enumerate()
            .filter(|&(n, _)| counted(n))
            .for_each(|(_, v)| counts.add(&v.to_be_bytes()));
        // (Below 100,000 * 2654435761 < 2^48: the top 16 bits.)
        assert_eq!(counts.lean(), (0..16).collect::<Vec<u32>>());
        assert_eq!(most_crowded(&counts.lean(), &plan, 4), Some(Crowded { segment: 0, width: 16, lean: 16 }));
        // Only the indexed segments count.
        assert_eq!(most_crowded(&[40, 41, 42, 43], &plan, 2), None);
        assert_eq!(most_crowded(&[40, 41, 42, 43], &plan, 3), Some(Crowded { segment: 2, width: 16, lean: 4 }));
        assert_eq!(most_crowded(&[15, 16, 31, 32], &plan, 4), None);
        let mut state = 5;
        let mut uniform = BitCounts::new(64);
        (0..LEAN_AMONG).for_each(|_| uniform.add(&next(&mut state).to_be_bytes()));
        assert!(uniform.lean().is_empty());
        // A small table's bits are not judged.
        let mut few = BitCounts::new(64);
        short_values(LEAN_AMONG - 1).iter().for_each(|v| few.add(&v.to_be_bytes()));
        assert!(few.lean().is_empty());
        few.add(&0u64.to_be_bytes());
        assert!(!few.lean().is_empty());
        assert!(counted(0) && counted(SAMPLE - 1) && !counted(SAMPLE + 1) && counted(SAMPLE * 2));
    }

    #[test]
    fn every_length_has_a_step_prime_to_it() {
        for bits in 1..=4096 {
            let step = golden_step(bits);
            assert_eq!(gcd(step, bits), 1, "{bits}");
        }
    }
}
