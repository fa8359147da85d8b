//! All pairs within Hamming distance `k` among the entries of a bucketed index (the layout of
//! [`crate::buckets`]), a bucket or two in memory at a time.
//!
//! Two fingerprints within `k` (at most [`MAX_PROBED_RADIUS`]) have some segment whose values are
//! within `r = k / 4` bits of each other (the pigeonhole of [`crate::probes`]). So, in each
//! segment, every entry is compared with the entries whose segment value is within `r` bits of
//! its own. Those lie in buckets whose numbers (the values' top `bits` bits) are within `r` bits
//! too: each bucket `b` is paired with each such bucket `b' >= b` ([`partner_buckets`]), and within
//! the pair only runs of values within `r` bits are compared ([`pairs_between`]). A pair close in
//! several segments is reported only in the first of them ([`reported_in`]), so each pair comes out
//! once, with no set of the pairs seen.
//!
//! Memory: the two buckets being compared. Work: each bucket is read once per partner (1 for
//! `k <= 3`, `1 + bits` for `k <= 7`, about `bits * bits / 2` for `k <= 11`), and each entry is
//! compared with the entries of the values within `r` bits of its own.

use crate::buckets::{reported_in, segment_value, MAX_PROBED_RADIUS};
use crate::distance::{hamming, SEGMENTS, SEGMENT_BITS};
use crate::probes::segment_radius;

/// An entry of a bucket: a fingerprint and what the caller files with it (a row's position).
pub type Entry<T> = (u64, T);

/// What hears of each pair: `on_pair(x, y, distance)`.
pub type OnPair<'a, T> = &'a mut dyn FnMut(&Entry<T>, &Entry<T>, u32);

/// What reads a bucket: `load(segment, bucket, entries)` appends the bucket's entries.
pub type Load<'a, T> = &'a mut dyn FnMut(u32, u32, &mut Vec<Entry<T>>);

/// The buckets of `bits` bits at most `radius` bits from `bucket` and not below it, ascending.
pub fn partner_buckets(bucket: u32, radius: u32, bits: u32) -> Vec<u32> {
    let mut partners: Vec<u32> =
        masks(bits, radius).into_iter().map(|mask| bucket ^ mask).filter(|&other| other >= bucket).collect();
    partners.sort_unstable();
    partners
}

/// Every mask of `width` bits with at most `radius` bits set.
fn masks(width: u32, radius: u32) -> Vec<u32> {
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

/// The positions of each run of equal segment values in `entries` (sorted by segment `n`'s
/// value), indexed by the value's low `16 - bits` bits: run `v` is `starts[v]..starts[v + 1]`.
fn runs<T>(entries: &[(u64, T)], n: u32, bits: u32) -> Vec<usize> {
    let low_bits = SEGMENT_BITS - bits;
    let low_mask = (1usize << low_bits) - 1;
    let mut starts = vec![0usize; (1 << low_bits) + 1];
    for (fp, _) in entries {
        starts[(usize::from(segment_value(*fp, n)) & low_mask) + 1] += 1;
    }
    for v in 1..starts.len() {
        starts[v] += starts[v - 1];
    }
    starts
}

/// Calls `on_pair(x, y, distance)` for each pair of an entry `x` of `left` and an entry `y` of
/// `right` (or two entries of `left` when `right` is `None`: the same bucket) whose fingerprints
/// are within `k` and that segment `n` reports ([`reported_in`]). Both are the entries of one
/// bucket of segment `n` each (`bits` bucket bits), sorted by their segment value, and the right
/// bucket's number is the left's or above it; `k` is at most [`MAX_PROBED_RADIUS`].
pub fn pairs_between<T: Copy>(
    left: &[(u64, T)],
    right: Option<&[(u64, T)]>,
    n: u32,
    k: u32,
    bits: u32,
    on_pair: OnPair<T>,
) {
    let Some(radius) = segment_radius(k) else {
        panic!("radius {k} is above {MAX_PROBED_RADIUS}");
    };
    let (Some(first), right_entries) = (left.first(), right.unwrap_or(left)) else { return };
    let Some(other) = right_entries.first() else { return };
    // The buckets' numbers are their values' top bits; the rest, `low_bits`, tell the runs apart.
    let low_bits = SEGMENT_BITS - bits;
    let low_mask = (1u32 << low_bits) - 1;
    let high = u32::from(segment_value(first.0, n) ^ segment_value(other.0, n)) & !low_mask;
    let Some(low_radius) = radius.checked_sub(high.count_ones()) else { return };
    let low_masks = masks(low_bits, low_radius);
    let (left_runs, right_runs) = (runs(left, n, bits), runs(right_entries, n, bits));
    let mut check = |x: &(u64, T), y: &(u64, T)| {
        let distance = hamming(x.0, y.0);
        if distance <= k && reported_in(x.0, y.0, n, k) {
            on_pair(x, y, distance);
        }
    };
    for v in 0..1usize << low_bits {
        let run = &left[left_runs[v]..left_runs[v + 1]];
        if run.is_empty() {
            continue;
        }
        for &mask in &low_masks {
            let p = v ^ mask as usize;
            let partners = &right_entries[right_runs[p]..right_runs[p + 1]];
            match right {
                // In one bucket, each pair of values once, and each pair within a run once.
                None if p < v => {}
                None if p == v => {
                    for (i, x) in run.iter().enumerate() {
                        for y in &run[i + 1..] {
                            check(x, y);
                        }
                    }
                }
                _ => {
                    for x in run {
                        for y in partners {
                            check(x, y);
                        }
                    }
                }
            }
        }
    }
}

/// Calls `on_pair(x, y, distance)` once for every pair of entries within `k` (at most
/// [`MAX_PROBED_RADIUS`]) of an index of `bits` bucket bits, whose buckets `load(segment, bucket,
/// entries)` fills `entries` with (cleared before). `progress()` is called after each bucket: the
/// place to check for cancellation.
pub fn for_each_pair<T: Copy>(k: u32, bits: u32, load: Load<T>, on_pair: OnPair<T>, progress: &mut dyn FnMut()) {
    let Some(radius) = segment_radius(k) else {
        panic!("radius {k} is above {MAX_PROBED_RADIUS}");
    };
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for n in 0..SEGMENTS {
        let by_value = |entry: &(u64, T)| segment_value(entry.0, n);
        for bucket in 0..1u32 << bits {
            left.clear();
            load(n, bucket, &mut left);
            if left.is_empty() {
                progress();
                continue;
            }
            left.sort_unstable_by_key(by_value);
            for partner in partner_buckets(bucket, radius, bits) {
                if partner == bucket {
                    pairs_between(&left, None, n, k, bits, on_pair);
                    continue;
                }
                right.clear();
                load(n, partner, &mut right);
                right.sort_unstable_by_key(by_value);
                pairs_between(&left, Some(&right), n, k, bits, on_pair);
            }
            progress();
        }
    }
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
        for_each_pair(k, bits, &mut load, &mut |x, y, d| pairs.push((x.1.min(y.1), x.1.max(y.1), d)), &mut || {});
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
