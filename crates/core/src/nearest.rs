//! Nearest-first order over the buckets of the `simhash` index ([`crate::buckets`]), for
//! `ORDER BY fp <~> q`: rows come out by distance from `q`, nearest first, without reading the
//! whole index when the first rows are near.
//!
//! The index files every fingerprint under the top `bits` bits of each of its four segments. Call
//! the *ring* of a row the fewest bits in which one of its segments' buckets differs from the
//! query's (0 to `bits`). A row within `d` bits of the query has a segment within `d / 4` bits
//! (pigeonhole), and a bucket differs in no more bits than its values, so its ring is at most
//! `d / 4`. Reading rings 0, 1, 2, ... (in each segment, every bucket `r` bits from the query's),
//! one segment after the other, finds after ring `r` of segment `n` every row within `4r + n`
//! bits (a row not met yet differs in more than `r` bits in segments `0..=n` and in more than
//! `r - 1` in the others): those can be handed out, nearest first, while the rest wait. Each row
//! is kept only where it is first met: in its ring, in the first segment that gives it that ring
//! ([`first_ring`]). When the next ring would cost more than half a
//! pass over a whole segment, one pass over segment 0 ([`Step::Rest`]) collects every row not met
//! yet, after which the order is complete.

use std::collections::TryReserveError;

use crate::distance::{SEGMENTS, SEGMENT_BITS};

/// What an ordered scan reads next.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Step {
    /// The buckets of `segment` that differ from the query's in `ring` bits ([`ring_buckets`]).
    Ring { ring: u32, segment: u32 },
    /// Every bucket of segment 0.
    Rest,
}

/// The bucket of `fp` in segment `n` (the segment's top `bits` bits).
fn bucket(fp: u64, n: u32, bits: u32) -> u32 {
    crate::buckets::bucket_of(fp, n, bits)
}

/// The buckets of segment `n` that differ from the query's bucket in exactly `r` bits, ascending.
pub fn ring_buckets(query: u64, n: u32, r: u32, bits: u32) -> Vec<u32> {
    let center = bucket(query, n, bits);
    if r > bits {
        return Vec::new();
    }
    // Every `bits`-bit mask with `r` ones (Gosper's hack walks them in ascending order).
    let mut buckets = Vec::new();
    if r == 0 {
        buckets.push(center);
    } else {
        let end = 1u64 << bits;
        let mut mask = (1u64 << r) - 1;
        while mask < end {
            buckets.push(center ^ mask as u32);
            let low = mask & mask.wrapping_neg();
            let ripple = mask + low;
            mask = (((ripple ^ mask) >> 2) / low) | ripple;
        }
    }
    buckets.sort_unstable();
    buckets
}

/// The ring of `fp` (the fewest bits in which one of its buckets differs from the query's) and the
/// first segment with that ring.
pub fn first_ring(fp: u64, query: u64, bits: u32) -> (u32, u32) {
    (0..SEGMENTS)
        .map(|n| (crate::distance::popcount(u64::from(bucket(fp, n, bits) ^ bucket(query, n, bits))), n))
        .min()
        .expect("four segments")
}

fn binomial(n: u32, k: u32) -> u64 {
    (0..k).fold(1u64, |acc, i| acc * u64::from(n - i) / u64::from(i + 1))
}

/// The rows met so far by an ordered scan, by distance, and what to read next.
///
/// Usage: while [`Nearest::begin`] names a step, read its buckets, [`Nearest::offer`] every entry
/// of them, [`Nearest::end`] the step, then hand out [`Nearest::pop_ready`] in order. Memory is
/// bounded: when more rows wait than the budget, the farthest distances are dropped (they are met
/// again by a later pass over segment 0, which keeps only what lies beyond the rows met), and
/// rows beyond the last distance kept cost only their distance.
pub struct Nearest<T> {
    query: u64,
    bits: u32,
    /// Rings of segments read so far: ring `done / 4` of segments `0..done % 4`, and every
    /// earlier ring of every segment.
    done: u32,
    /// The step under way.
    step: Option<Step>,
    /// Every row within this distance has been met (`None`: nothing yet; 64: every row).
    met_through: Option<u32>,
    /// The rows met beyond this distance were dropped (64: none).
    cutoff: u32,
    /// The pass under way keeps rows beyond `pass_floor`, and, of those met in the rings, only
    /// the ones beyond `pass_cutoff` (the others wait already).
    pass_floor: Option<u32>,
    pass_cutoff: u32,
    /// Whether rows were ever dropped (then each further pass may keep twice as many).
    dropped: bool,
    /// Whether a pass over segment 0 was made (then no more rings: the rows it dropped have rings
    /// already read).
    passed: bool,
    /// The rows met and not handed out yet, by distance, and how many.
    waiting: Vec<Vec<T>>,
    kept: usize,
    /// Rows that may wait: small at first (a `LIMIT` needs few), doubled for each pass that
    /// follows a drop, up to `max_budget`.
    budget: usize,
    max_budget: usize,
    /// Distances below this have been handed out.
    handed_out: u32,
}

impl<T: Ord> Nearest<T> {
    /// Rows that may wait at first.
    pub const FIRST_BUDGET: usize = 8192;

    /// An ordered scan around `query` of an index with `bits` bucket bits, keeping at most about
    /// `max_budget` rows waiting.
    pub fn new(query: u64, bits: u32, max_budget: usize) -> Self {
        assert!(bits <= SEGMENT_BITS);
        Nearest {
            query,
            bits,
            done: 0,
            step: None,
            met_through: None,
            cutoff: 64,
            pass_floor: None,
            pass_cutoff: 64,
            dropped: false,
            passed: false,
            waiting: (0..=64).map(|_| Vec::new()).collect(),
            kept: 0,
            budget: Self::FIRST_BUDGET.min(max_budget).max(1),
            max_budget: max_budget.max(1),
            handed_out: 0,
        }
    }

    /// Starts the next step and names it, or `None` when every row has been met.
    pub fn begin(&mut self) -> Option<Step> {
        if self.met_through == Some(64) {
            return None;
        }
        // A ring reads 4 * C(bits, r) buckets; a pass over segment 0 reads 2^bits. Rings go on
        // until the first pass, and while they can still raise `met_through`: rows dropped beyond
        // `cutoff` are met again only by a pass.
        let (ring, segment) = (self.done / SEGMENTS, self.done % SEGMENTS);
        let ring_cost = u64::from(SEGMENTS) * binomial(self.bits, ring.min(self.bits));
        let rings_help = self.done == 0 || self.done - 1 < self.cutoff;
        let step = if !self.passed && rings_help && ring <= self.bits && ring_cost * 2 <= 1u64 << self.bits {
            Step::Ring { ring, segment }
        } else {
            self.pass_floor = self.met_through;
            self.pass_cutoff = self.cutoff;
            self.cutoff = 64;
            if self.dropped {
                self.budget = self.budget.saturating_mul(2).min(self.max_budget);
            }
            Step::Rest
        };
        self.step = Some(step);
        Some(step)
    }

    /// The distance beyond which [`Nearest::offer`] keeps nothing now (it only falls until the
    /// step ends; [`Nearest::begin`] may raise it): a reader may skip the entries of the step
    /// beyond it without offering them.
    pub fn cutoff(&self) -> u32 {
        self.cutoff
    }

    /// Offers an entry of a bucket of segment `n` read for the step under way: the row with
    /// fingerprint `fp`, kept as `item()` if met for the first time (an error when memory runs out).
    #[inline]
    pub fn offer(&mut self, n: u32, fp: u64, item: impl FnOnce() -> T) -> Result<(), TryReserveError> {
        self.offer_in(n, fp, self.bits, item)
    }

    /// Whether [`Nearest::offer_in`] would keep the row with fingerprint `fp` met in segment `n`
    /// of a part of the index with `bits` bucket bits.
    #[inline]
    pub fn wants(&self, n: u32, fp: u64, bits: u32) -> bool {
        let distance = crate::distance::hamming(fp, self.query);
        if distance > self.cutoff {
            return false;
        }
        let (ring, first) = first_ring(fp, self.query, bits);
        match self.step.expect("a step under way") {
            Step::Ring { ring: r, .. } => ring == r && first == n,
            Step::Rest => {
                self.pass_floor.is_none_or(|floor| distance > floor)
                    && (SEGMENTS * ring + first >= self.done || distance > self.pass_cutoff)
            }
        }
    }

    /// [`Nearest::offer`] for an entry of a part of the index whose buckets have `bits` bits, at
    /// most those of the scan (an index of format 5 has a part bucketed by each whole segment
    /// value, its rings read value by value, and a part of coarser buckets for the rows inserted
    /// since it was built: a row is in one of them, and is kept where it is first met in its part;
    /// each ring of the scan reads the ring of the same number in each part, and a row within
    /// `4r + n` bits has a segment within `r` bits in either, so the bound of the rings holds).
    #[inline]
    pub fn offer_in(&mut self, n: u32, fp: u64, bits: u32, item: impl FnOnce() -> T) -> Result<(), TryReserveError> {
        if !self.wants(n, fp, bits) {
            return Ok(());
        }
        let distance = crate::distance::hamming(fp, self.query);
        let bin = &mut self.waiting[distance as usize];
        if bin.len() == bin.capacity() {
            bin.try_reserve(bin.len().max(64))?;
        }
        bin.push(item());
        self.kept += 1;
        if self.kept > self.budget {
            self.shrink();
        }
        Ok(())
    }

    /// Drops the farthest rows waiting until at most half the budget wait (or one distance does).
    fn shrink(&mut self) {
        let lowest = self.met_through.map_or(0, |through| through + 1).max(self.handed_out);
        while self.kept > self.budget / 2 && self.cutoff > lowest {
            let bin = std::mem::take(&mut self.waiting[self.cutoff as usize]);
            self.kept -= bin.len();
            self.cutoff -= 1;
            self.dropped = true;
        }
    }

    /// Ends the step under way.
    pub fn end(&mut self) {
        match self.step.take().expect("a step under way") {
            Step::Ring { ring, segment } => {
                debug_assert_eq!(SEGMENTS * ring + segment, self.done);
                self.done += 1;
                // Ring `bits` of segment 0 completes segment 0: every row has been met.
                let rings_through = if ring >= self.bits { 64 } else { SEGMENTS * ring + segment };
                self.met_through = Some(rings_through.min(self.cutoff));
            }
            Step::Rest => {
                self.met_through = Some(self.cutoff);
                self.passed = true;
            }
        }
    }

    /// The distance up to which every row has been met (`None` before the first step).
    pub fn exact_through(&self) -> Option<u32> {
        self.met_through
    }

    /// Moves the rows of the next distance that can be handed out into `ready` (cleared first),
    /// in `T`'s order, and returns that distance; `None` when none can be until the next step.
    pub fn pop_ready(&mut self, ready: &mut Vec<T>) -> Option<u32> {
        ready.clear();
        let through = self.met_through?;
        while self.handed_out <= through {
            let distance = self.handed_out;
            let bin = &mut self.waiting[distance as usize];
            self.handed_out += 1;
            if !bin.is_empty() {
                std::mem::swap(ready, bin);
                self.kept -= ready.len();
                ready.sort_unstable();
                return Some(distance);
            }
        }
        None
    }

    /// The rows waiting (met, not handed out).
    pub fn waiting(&self) -> usize {
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn rings_partition_the_buckets() {
        for bits in [0, 1, 5, 11, 16] {
            let query = 0xDEAD_BEEF_1234_5678;
            let mut all: Vec<u32> = (0..=bits).flat_map(|r| ring_buckets(query, 2, r, bits)).collect();
            all.sort_unstable();
            assert_eq!(all, (0..1u32 << bits).collect::<Vec<_>>(), "bits {bits}");
            for r in 0..=bits {
                let center = bucket(query, 2, bits);
                assert!(ring_buckets(query, 2, r, bits).iter().all(|b| (b ^ center).count_ones() == r));
                assert_eq!(ring_buckets(query, 2, r, bits).len() as u64, binomial(bits, r));
            }
        }
    }

    /// An index in memory (per segment, per bucket, its fingerprints), read the way the scan reads
    /// it: every row comes out once, by distance, ascending; returns them and the steps taken.
    fn ordered(rows: &[u64], query: u64, bits: u32, budget: usize) -> (Vec<(u32, usize)>, Vec<Step>) {
        let mut buckets = vec![vec![Vec::new(); 1 << bits]; SEGMENTS as usize];
        for (i, &fp) in rows.iter().enumerate() {
            for n in 0..SEGMENTS {
                buckets[n as usize][bucket(fp, n, bits) as usize].push(i);
            }
        }
        let mut nearest = Nearest::new(query, bits, budget);
        nearest.budget = budget.min(nearest.budget);
        let mut out = Vec::new();
        let mut steps = Vec::new();
        let mut ready = Vec::new();
        while let Some(step) = nearest.begin() {
            steps.push(step);
            let read: Vec<(u32, u32)> = match step {
                Step::Ring { ring, segment } => {
                    ring_buckets(query, segment, ring, bits).into_iter().map(|b| (segment, b)).collect()
                }
                Step::Rest => (0..1u32 << bits).map(|b| (0, b)).collect(),
            };
            for (n, b) in read {
                for &i in &buckets[n as usize][b as usize] {
                    nearest.offer(n, rows[i], || (hamming(rows[i], query), i)).unwrap();
                }
            }
            nearest.end();
            // The bound: every row within `exact_through` has been met (in a ring read, or by a
            // pass), so none nearer can come later.
            if let (Some(through), false) = (nearest.exact_through(), nearest.passed) {
                for &fp in rows {
                    let (ring, first) = first_ring(fp, query, bits);
                    if hamming(fp, query) <= through {
                        assert!(SEGMENTS * ring + first < nearest.done, "fp {fp:x} within {through} not met");
                    }
                }
            }
            while let Some(distance) = nearest.pop_ready(&mut ready) {
                assert!(ready.iter().all(|&(d, _)| d == distance));
                out.append(&mut ready);
            }
        }
        assert_eq!(nearest.waiting(), 0);
        (out, steps)
    }

    #[test]
    fn every_row_once_nearest_first() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        // Passes over segment 0 that start in the middle of a ring (budget shrinks stop the rings;
        // the cutoff is then below the rings' bound, so such a pass keeps rows by distance alone).
        let mut mid_ring_passes = 0;
        for bits in [0, 3, 6, 9, 12] {
            for budget in [1, 100, 1000, usize::MAX] {
                for _ in 0..10 {
                    let query = xorshift(&mut state);
                    // Random rows plus rows near the query, and rows just beyond each bound 4r + n:
                    // r + 1 bits flipped in the top bits of segments 0..=n, r in the others.
                    let mut rows: Vec<u64> = (0..2000).map(|_| xorshift(&mut state)).collect();
                    for r in 0..3u32 {
                        for n in 0..SEGMENTS {
                            let mut fp = query;
                            for m in 0..SEGMENTS {
                                let flips = if m <= n { r + 1 } else { r };
                                for bit in 0..flips.min(bits) {
                                    fp ^= 1 << ((SEGMENTS - 1 - m) * SEGMENT_BITS + SEGMENT_BITS - 1 - bit);
                                }
                            }
                            rows.push(fp);
                        }
                    }
                    for flips in 0..30 {
                        let mut fp = query;
                        for _ in 0..flips {
                            fp ^= 1 << (xorshift(&mut state) % 64);
                        }
                        rows.push(fp);
                    }
                    let (out, steps) = ordered(&rows, query, bits, budget);
                    let mut expected: Vec<(u32, usize)> =
                        rows.iter().enumerate().map(|(i, &fp)| (hamming(fp, query), i)).collect();
                    expected.sort_unstable();
                    assert_eq!(out, expected, "bits {bits} budget {budget} steps {steps:?}");
                    mid_ring_passes += steps
                        .windows(2)
                        .filter(|w| matches!(w, [Step::Ring { segment, .. }, Step::Rest] if *segment != 3))
                        .count();
                }
            }
        }
        assert!(mid_ring_passes > 0);
    }

    /// An index of two parts (format 5): the rows with an even position in a part bucketed by
    /// whole segment values (16 bits, the scan's bits), the others in buckets of `bits` bits; each
    /// step reads the ring of the same number in both, offering each part's rows with its bits.
    /// Every row comes out once, by distance.
    #[test]
    fn two_parts_with_their_own_bits_every_row_once_nearest_first() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for bits in [8, 12] {
            for budget in [1, 100, 1000, usize::MAX] {
                for _ in 0..4 {
                    let query = xorshift(&mut state);
                    let mut rows: Vec<u64> = (0..1500).map(|_| xorshift(&mut state)).collect();
                    for flips in 0..40 {
                        let mut fp = query;
                        for _ in 0..flips {
                            fp ^= 1 << (xorshift(&mut state) % 64);
                        }
                        rows.push(fp);
                        rows.push(fp); // one fingerprint in both parts
                    }
                    let bits_of = |i: usize| if i.is_multiple_of(2) { SEGMENT_BITS } else { bits };
                    let mut nearest = Nearest::new(query, SEGMENT_BITS, budget);
                    nearest.budget = budget.min(nearest.budget);
                    let (mut out, mut ready) = (Vec::new(), Vec::new());
                    while let Some(step) = nearest.begin() {
                        for (i, &fp) in rows.iter().enumerate() {
                            let part_bits = bits_of(i);
                            let read_in = |n: u32| match step {
                                Step::Ring { ring, segment } => {
                                    segment == n
                                        && (bucket(fp, n, part_bits) ^ bucket(query, n, part_bits)).count_ones() == ring
                                }
                                Step::Rest => n == 0,
                            };
                            for n in (0..SEGMENTS).filter(|&n| read_in(n)) {
                                nearest.offer_in(n, fp, part_bits, || (hamming(fp, query), i)).unwrap();
                            }
                        }
                        nearest.end();
                        while let Some(distance) = nearest.pop_ready(&mut ready) {
                            assert!(ready.iter().all(|&(d, _)| d == distance));
                            out.append(&mut ready);
                        }
                    }
                    let mut expected: Vec<(u32, usize)> =
                        rows.iter().enumerate().map(|(i, &fp)| (hamming(fp, query), i)).collect();
                    expected.sort_unstable();
                    assert_eq!(out, expected, "bits {bits} budget {budget}");
                }
            }
        }
    }

    #[test]
    fn rings_first_then_passes_over_segment_0() {
        let mut nearest = Nearest::<u32>::new(0, 11, 1000);
        let mut ready = Vec::new();
        // Ring 0 of segment 0 (0b11 and 0b11111 differ from the query 0 only in segment 3, in
        // bits below the top 11: bucket 0 of every segment); then the ring 0 of segments 1 to 3.
        assert_eq!(nearest.begin(), Some(Step::Ring { ring: 0, segment: 0 }));
        nearest.offer(0, 0b11, || 7).unwrap(); // distance 2, ring 0 in segment 0
        nearest.offer(0, 0b11111, || 8).unwrap(); // distance 5
        nearest.end();
        assert_eq!(nearest.exact_through(), Some(0));
        assert_eq!(nearest.pop_ready(&mut ready), None);
        for segment in 1..4 {
            assert_eq!(nearest.begin(), Some(Step::Ring { ring: 0, segment }));
            nearest.end();
            assert_eq!(nearest.exact_through(), Some(segment));
        }
        assert_eq!(nearest.pop_ready(&mut ready), Some(2));
        assert_eq!(ready, vec![7]);
        assert_eq!(nearest.pop_ready(&mut ready), None);
        // 11 bits: rings 0..3 (at most 4 * 165 = 660 buckets), then a pass over 2048 buckets.
        // Distance 5 is handed out after ring 1 of segment 1 (4 * 1 + 1).
        for ring in 1..4 {
            for segment in 0..4 {
                assert_eq!(nearest.begin(), Some(Step::Ring { ring, segment }));
                nearest.end();
                assert_eq!(nearest.exact_through(), Some(4 * ring + segment));
                if (ring, segment) == (1, 0) {
                    assert_eq!(nearest.pop_ready(&mut ready), None);
                }
                if (ring, segment) == (1, 1) {
                    assert_eq!(nearest.pop_ready(&mut ready), Some(5));
                    assert_eq!(ready, vec![8]);
                }
            }
        }
        assert_eq!(nearest.begin(), Some(Step::Rest));
        nearest.end();
        assert_eq!(nearest.begin(), None);
    }
}
