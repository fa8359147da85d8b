//! All pairs within Hamming distance `k` among the entries of a bucketed index (the layout of
//! [`crate::buckets`]), a bucket or two in memory at a time.
//!
//! Two fingerprints within `k` (at most [`MAX_PROBED_RADIUS`]) have some segment `n` whose values
//! are within `r_n` bits of each other, the radii adding up to `k - 3` (the pigeonhole of
//! [`crate::probes::segment_radii`]). So, in each segment, every entry is compared with the entries
//! whose segment value is within `r` (that segment's radius) bits of its own. Those lie in buckets whose numbers (the values' top `bits` bits) are within `r` bits
//! too: each bucket `b` is paired with each such bucket `b' >= b` ([`partner_buckets`]), and within
//! the pair only runs of values within `r` bits are compared (`pairs_between`). A pair close in
//! several segments is reported only in the first of them ([`reported_in`]), so each pair comes out
//! once, with no set of the pairs seen.
//!
//! Entries with one fingerprint are one group: compared once, and reported as a group, so that a
//! million copies of one fingerprint cost one comparison, not half a trillion.
//!
//! Memory: the two buckets being compared. Work: each bucket is read once per partner (1 for
//! `k <= 3`, `1 + bits` for `k <= 7`, about `bits * bits / 2` for `k <= 11`), and each distinct
//! fingerprint is compared with those of the values within `r` bits of its own.

use crate::buckets::{reported_in, segment_value, MAX_PROBED_RADIUS};
use crate::distance::{hamming, SEGMENTS, SEGMENT_BITS};
use crate::pairs::{push, OutOfMemory};
use crate::probes::segment_radii;

/// An entry of a bucket: a fingerprint and what the caller files with it (a row's position).
pub type Entry<T> = (u64, T);

/// What hears of the pairs, a group of entries with one fingerprint at a time:
/// `on_pairs(a, None, 0)` means every two entries of `a` (equal fingerprints), `on_pairs(a, Some(b),
/// distance)` every entry of `a` with every entry of `b` (fingerprints `distance` bits apart).
pub type OnPairs<'a, T> = &'a mut dyn FnMut(&[Entry<T>], Option<&[Entry<T>]>, u32);

/// What reads a bucket: `load(segment, bucket, entries)` appends the bucket's entries.
pub type Load<'a, T> = &'a mut dyn FnMut(u32, u32, &mut Vec<Entry<T>>);

/// How many comparisons of fingerprints between two calls of `progress`.
pub(crate) const COMPARISONS_PER_PROGRESS: u64 = 1 << 20;

/// The buckets of `bits` bits at most `radius` bits from `bucket` and not below it, ascending.
pub fn partner_buckets(bucket: u32, radius: u32, bits: u32) -> Vec<u32> {
    let mut partners: Vec<u32> =
        masks(bits, radius).into_iter().map(|mask| bucket ^ mask).filter(|&other| other >= bucket).collect();
    partners.sort_unstable();
    partners
}

/// Every mask of `width` bits with at most `radius` bits set.
pub(crate) fn masks(width: u32, radius: u32) -> Vec<u32> {
    let mut all = vec![0u32];
    for _ in 0..radius.min(width) {
        let mut more = Vec::new();
        for &mask in &all {
            // Extend each mask by a bit above its highest, so that each set comes out once.
            let from = 32 - mask.leading_zeros();
            more.extend((from..width).map(|bit| mask | 1 << bit).filter(|m| !all.contains(m)));
        }
        all.extend(more);
        all.sort_unstable();
        all.dedup();
    }
    all
}

/// A bucket of one segment in memory: its entries sorted by segment value, then fingerprint; the
/// groups of entries with one fingerprint; and, for each value of the low `16 - bits` bits of the
/// segment value, the groups with that value (`runs[v]..runs[v + 1]`).
struct Bucket<T> {
    entries: Vec<Entry<T>>,
    groups: Vec<std::ops::Range<usize>>,
    runs: Vec<usize>,
}

impl<T: Copy> Bucket<T> {
    fn new() -> Self {
        Bucket { entries: Vec::new(), groups: Vec::new(), runs: Vec::new() }
    }

    /// Sorts and groups the entries (of segment `n`, `bits` bucket bits), or [`OutOfMemory`] for
    /// the groups.
    fn prepare(&mut self, n: u32, bits: u32) -> Result<(), OutOfMemory> {
        self.entries.sort_unstable_by_key(|entry| (segment_value(entry.0, n), entry.0));
        self.groups.clear();
        let mut start = 0;
        while start < self.entries.len() {
            let fp = self.entries[start].0;
            let end = start + self.entries[start..].iter().take_while(|e| e.0 == fp).count();
            push(&mut self.groups, start..end)?;
            start = end;
        }
        let low_mask = (1usize << (SEGMENT_BITS - bits)) - 1;
        self.runs.clear();
        self.runs.resize(low_mask + 2, 0);
        for group in &self.groups {
            self.runs[(usize::from(segment_value(self.entries[group.start].0, n)) & low_mask) + 1] += 1;
        }
        for v in 1..self.runs.len() {
            self.runs[v] += self.runs[v - 1];
        }
        Ok(())
    }

    fn fingerprint(&self, group: usize) -> u64 {
        self.entries[self.groups[group].start].0
    }

    fn group(&self, group: usize) -> &[Entry<T>] {
        &self.entries[self.groups[group].clone()]
    }
}

/// Reports the pairs between two prepared buckets of segment `n` (`right` `None`: within `left`)
/// whose fingerprints are within `k` and that segment `n` reports ([`reported_in`]); the right
/// bucket's number is the left's or above it. `comparisons` counts the fingerprints compared,
/// and `progress` is called every [`COMPARISONS_PER_PROGRESS`] of them.
#[allow(clippy::too_many_arguments)]
fn pairs_between<T: Copy>(
    left: &Bucket<T>,
    right: Option<&Bucket<T>>,
    n: u32,
    k: u32,
    bits: u32,
    on_pairs: OnPairs<T>,
    comparisons: &mut u64,
    progress: &mut dyn FnMut(),
) {
    let Some(radii) = segment_radii(k) else {
        panic!("radius {k} is above {MAX_PROBED_RADIUS}");
    };
    let radius = radii[n as usize];
    let other = right.unwrap_or(left);
    let (Some(first), Some(second)) = (left.entries.first(), other.entries.first()) else { return };
    // The buckets' numbers are their values' top bits; the rest, `low_bits`, tell the runs apart.
    let low_bits = SEGMENT_BITS - bits;
    let low_mask = (1u32 << low_bits) - 1;
    let high = u32::from(segment_value(first.0, n) ^ segment_value(second.0, n)) & !low_mask;
    let Some(low_radius) = radius.checked_sub(high.count_ones()) else { return };
    let low_masks = masks(low_bits, low_radius);
    let mut check = |a: usize, b: usize| {
        let (x, y) = (left.fingerprint(a), other.fingerprint(b));
        let distance = hamming(x, y);
        if distance <= k && reported_in(x, y, n, k) {
            on_pairs(left.group(a), Some(other.group(b)), distance);
        }
        *comparisons += 1;
        if comparisons.is_multiple_of(COMPARISONS_PER_PROGRESS) {
            progress();
        }
    };
    for v in 0..1usize << low_bits {
        let run = left.runs[v]..left.runs[v + 1];
        if run.is_empty() {
            continue;
        }
        for &mask in &low_masks {
            let p = v ^ mask as usize;
            match right {
                // In one bucket, each pair of values once, each pair of groups of a value once.
                None if p < v => {}
                None if p == v => {
                    for a in run.clone() {
                        for b in a + 1..run.end {
                            check(a, b);
                        }
                    }
                }
                _ => {
                    for a in run.clone() {
                        for b in other.runs[p]..other.runs[p + 1] {
                            check(a, b);
                        }
                    }
                }
            }
        }
    }
    // The entries of one fingerprint pair with each other at distance 0, reported in segment 0.
    if right.is_none() && n == 0 {
        for group in 0..left.groups.len() {
            if left.groups[group].len() > 1 {
                on_pairs(left.group(group), None, 0);
            }
        }
    }
}

/// Reports once every pair of entries within `k` (at most [`MAX_PROBED_RADIUS`]) of an index of
/// `bits` bucket bits, whose buckets `load(segment, bucket, entries)` reads, to `on_pairs`, a group
/// of entries with one fingerprint at a time (so that many copies of one fingerprint cost one
/// comparison, not one per pair of them). `progress(buckets finished, of 4 << bits)` is called after
/// each bucket and every million comparisons: the place to check for cancellation. [`OutOfMemory`]
/// when the groups of a bucket's entries do not fit.
pub fn for_each_pair<T: Copy>(
    k: u32,
    bits: u32,
    load: Load<T>,
    on_pairs: OnPairs<T>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), OutOfMemory> {
    let Some(radii) = segment_radii(k) else {
        panic!("radius {k} is above {MAX_PROBED_RADIUS}");
    };
    let (mut left, mut right) = (Bucket::new(), Bucket::new());
    let mut comparisons = 0u64;
    // (the buckets finished, of 4 << bits, for `progress`)
    let finished = std::cell::Cell::new(0u64);
    let progress = &mut || progress(finished.get());
    for n in 0..SEGMENTS {
        for bucket in 0..1u32 << bits {
            left.entries.clear();
            load(n, bucket, &mut left.entries);
            if left.entries.is_empty() {
                finished.set(finished.get() + 1);
                progress();
                continue;
            }
            left.prepare(n, bits)?;
            for partner in partner_buckets(bucket, radii[n as usize], bits) {
                if partner == bucket {
                    pairs_between(&left, None, n, k, bits, on_pairs, &mut comparisons, progress);
                    continue;
                }
                right.entries.clear();
                load(n, partner, &mut right.entries);
                right.prepare(n, bits)?;
                pairs_between(&left, Some(&right), n, k, bits, on_pairs, &mut comparisons, progress);
            }
            finished.set(finished.get() + 1);
            progress();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::bucket_of;
    use std::collections::HashMap;

    /// Fingerprints with many near pairs: a few centers and copies of each at distances 0..12,
    /// spread over every segment.
    fn clustered(seed: u64, centers: usize, copies: usize) -> Vec<u64> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut fps = Vec::new();
        for _ in 0..centers {
            let center = next();
            fps.push(center);
            for _ in 0..copies {
                let flips = next() % 13;
                let mut fp = center;
                for _ in 0..flips {
                    fp ^= 1 << (next() % 64);
                }
                fps.push(fp);
            }
        }
        fps
    }

    fn brute_force(fps: &[u64], k: u32) -> Vec<(usize, usize, u32)> {
        let mut pairs = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = hamming(fps[i], fps[j]);
                if d <= k {
                    pairs.push((i, j, d));
                }
            }
        }
        pairs
    }

    fn through_buckets(fps: &[u64], k: u32, bits: u32) -> Vec<(usize, usize, u32)> {
        let mut buckets: HashMap<(u32, u32), Vec<(u64, usize)>> = HashMap::new();
        // In an order of their own (reversed), as the entries appended since a page's sort are.
        for (i, &fp) in fps.iter().enumerate().rev() {
            for n in 0..SEGMENTS {
                buckets.entry((n, bucket_of(fp, n, bits))).or_default().push((fp, i));
            }
        }
        let mut load = |n: u32, bucket: u32, entries: &mut Vec<(u64, usize)>| {
            entries.extend(buckets.get(&(n, bucket)).into_iter().flatten());
        };
        let mut pairs = Vec::new();
        let mut on_pairs = |a: &[(u64, usize)], b: Option<&[(u64, usize)]>, d: u32| match b {
            None => {
                for (i, x) in a.iter().enumerate() {
                    for y in &a[i + 1..] {
                        pairs.push((x.1.min(y.1), x.1.max(y.1), d));
                    }
                }
            }
            Some(b) => {
                for x in a {
                    for y in b {
                        pairs.push((x.1.min(y.1), x.1.max(y.1), d));
                    }
                }
            }
        };
        // The progress counts every bucket once, whatever the comparisons.
        let mut finished = 0;
        for_each_pair(k, bits, &mut load, &mut on_pairs, &mut |done| {
            assert!(done >= finished && done <= 4 << bits);
            finished = done;
        })
        .unwrap();
        assert_eq!(finished, 4 << bits);
        pairs.sort_unstable();
        pairs
    }

    #[test]
    fn every_pair_once_at_every_radius_and_bucket_width() {
        let fps = clustered(7, 40, 12);
        for bits in [0, 3, 8, 11, 16] {
            for k in 0..=MAX_PROBED_RADIUS {
                let found = through_buckets(&fps, k, bits);
                assert_eq!(found, brute_force(&fps, k), "k = {k}, bits = {bits}");
            }
        }
    }

    #[test]
    fn many_copies_of_a_fingerprint_are_one_group() {
        let fps: Vec<u64> = (0..20_000).map(|i| if i % 2 == 0 { 42 } else { 43 }).collect();
        let mut buckets: HashMap<(u32, u32), Vec<(u64, usize)>> = HashMap::new();
        for (i, &fp) in fps.iter().enumerate() {
            for n in 0..SEGMENTS {
                buckets.entry((n, bucket_of(fp, n, 8))).or_default().push((fp, i));
            }
        }
        let mut load = |n: u32, bucket: u32, entries: &mut Vec<(u64, usize)>| {
            entries.extend(buckets.get(&(n, bucket)).into_iter().flatten());
        };
        let mut calls = Vec::new();
        for_each_pair(1, 8, &mut load, &mut |a, b, d| calls.push((a.len(), b.map(|b| b.len()), d)), &mut |_| {})
            .unwrap();
        calls.sort_unstable();
        assert_eq!(calls, vec![(10_000, None, 0), (10_000, None, 0), (10_000, Some(10_000), 1)]);
    }

    #[test]
    fn exact_copies_pair_with_each_other() {
        let fps = vec![5u64, 5, 5, 1 << 40, 5 ^ 1];
        assert_eq!(through_buckets(&fps, 0, 8), vec![(0, 1, 0), (0, 2, 0), (1, 2, 0)]);
        assert_eq!(through_buckets(&fps, 1, 8).len(), 6);
    }

    #[test]
    fn partners_are_within_the_radius_and_not_below() {
        assert_eq!(partner_buckets(0, 0, 8), vec![0]);
        assert_eq!(partner_buckets(0b101, 1, 3), vec![0b101, 0b111]);
        let partners = partner_buckets(0, 2, 11);
        assert_eq!(partners.len(), 1 + 11 + 55);
        for bucket in [0u32, 1, 77, 2047] {
            let partners = partner_buckets(bucket, 2, 11);
            let expected: Vec<u32> = (bucket..2048).filter(|&b| (b ^ bucket).count_ones() <= 2).collect();
            assert_eq!(partners, expected);
        }
    }

    #[test]
    fn masks_are_each_set_once() {
        assert_eq!(masks(4, 0), vec![0]);
        assert_eq!(masks(3, 1), vec![0, 1, 2, 4]);
        assert_eq!(masks(8, 2).len(), 1 + 8 + 28);
        assert_eq!(masks(0, 2), vec![0]);
    }
}
