//! Exact candidate probes for radius lookups, per 16-bit segment (Manku et al.'s pigeonhole, one table
//! per segment).
//!
//! If two fingerprints differ in at most `k` bits, the differing bits fall into four segments, so some
//! segment differs in at most `k / 4` of them (else the total would be at least `4 * (k / 4 + 1) > k`).
//! Probing each segment index with every value within `k / 4` bits of the query's segment is therefore
//! a complete candidate test: 1 value per segment for k <= 3, 17 for k <= 7, 137 for k <= 11. The
//! segments may also take unequal radii that add up to `k - 3` ([`segment_radii`]), which the
//! lookups use: fewer values in all for every k not of the form 4r + 3.

use crate::distance::{segment, SEGMENTS, SEGMENT_BITS};

/// The largest radius answered with probes; beyond it one segment's probe set (697 values at k <= 15)
/// makes a scan the better plan.
pub const MAX_PROBED_RADIUS: u32 = 11;

/// The per-segment bit radius that makes radius `k` exact: `k / 4`, or `None` above [`MAX_PROBED_RADIUS`].
pub fn segment_radius(k: u32) -> Option<u32> {
    (k <= MAX_PROBED_RADIUS).then_some(k / SEGMENTS)
}

/// The bit radius of each segment that makes radius `k` exact when the radii may differ, or `None`
/// above [`MAX_PROBED_RADIUS`]: `k - 3` bits spread over the four segments, the first ones taking
/// what does not divide evenly (k = 9: 2, 2, 1, 1).
///
/// The pigeonhole with unequal holes: if every segment differed in more than its radius `r_i`,
/// the fingerprints would differ in at least `sum(r_i + 1) = k + 1` bits. So some segment is within
/// its radius, and probing each segment with the values within its own radius is complete. Against
/// `k / 4` in every segment ([`segment_radius`]) this probes 308 values instead of 548 at k = 9,
/// 188 instead of 548 at k = 8, 20 instead of 68 at k = 4; the same at k = 3, 7 and 11.
pub fn segment_radii(k: u32) -> Option<[u32; 4]> {
    if k > MAX_PROBED_RADIUS {
        return None;
    }
    let spare = k.saturating_sub(SEGMENTS - 1);
    Some(std::array::from_fn(|n| spare / SEGMENTS + u32::from((n as u32) < spare % SEGMENTS)))
}

/// The probe values per segment at radius `k`, averaged over the four segments' radii
/// ([`segment_radii`]): 1 up to k = 3, 5 at k = 4, 17 at k = 7, 77 at k = 9, 137 at k = 11.
pub fn mean_probes_per_segment(k: u32) -> Option<f64> {
    let radii = segment_radii(k)?;
    Some(radii.iter().map(|&r| probes_per_segment(r) as f64).sum::<f64>() / f64::from(SEGMENTS))
}

/// Every 16-bit value within `radius` bits of `value`, ascending. `radius` is at most 3.
pub fn segment_probes(value: u16, radius: u32) -> Vec<u16> {
    assert!(radius <= 3, "segment radius {radius} is out of range");
    let mut probes = vec![value];
    for i in 0..SEGMENT_BITS {
        if radius >= 1 {
            probes.push(value ^ 1 << i);
        }
        for j in i + 1..SEGMENT_BITS {
            if radius >= 2 {
                probes.push(value ^ 1 << i ^ 1 << j);
            }
            for l in j + 1..SEGMENT_BITS {
                if radius >= 3 {
                    probes.push(value ^ 1 << i ^ 1 << j ^ 1 << l);
                }
            }
        }
    }
    probes.sort_unstable();
    probes
}

/// The probes of [`segment_probes`] as inclusive ranges of consecutive values, ascending: one index
/// range scan per range instead of one descent per value (radius 2: 137 values in about 112 ranges).
pub fn probe_ranges(value: u16, radius: u32) -> Vec<(u16, u16)> {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for probe in segment_probes(value, radius) {
        match ranges.last_mut() {
            Some((_, last)) if u32::from(*last) + 1 == u32::from(probe) => *last = probe,
            _ => ranges.push((probe, probe)),
        }
    }
    ranges
}

/// Number of probes per segment for a segment radius: 1, 17, 137, 697.
pub fn probes_per_segment(radius: u32) -> usize {
    (0..=radius as usize).map(|r| binomial(SEGMENT_BITS as usize, r)).sum()
}

/// The share of uniformly random 64-bit fingerprints within `k` bits of a given one (a binomial
/// tail): what a radius test keeps of data without near-duplicates, for cost estimates.
pub fn uniform_share_within(k: u32) -> f64 {
    let mut binomial = 1.0;
    let mut total = 0.0;
    for i in 0..=k.min(64) {
        if i > 0 {
            binomial = binomial * f64::from(64 - i + 1) / f64::from(i);
        }
        total += binomial;
    }
    total / 2f64.powi(64)
}

fn binomial(n: usize, r: usize) -> usize {
    (0..r).fold(1, |acc, i| acc * (n - i) / (i + 1))
}

/// A band key: segment number in the high 16 bits, segment value in the low 16 bits, so the four
/// segments share one GIN index without colliding.
pub fn band_key(segment_number: u32, value: u16) -> i32 {
    ((segment_number << SEGMENT_BITS) | value as u32) as i32
}

/// The four band keys of a fingerprint (what a GIN index over `simhash_bands(fp)` holds).
pub fn bands(fp: u64) -> [i32; 4] {
    std::array::from_fn(|n| band_key(n as u32, segment(fp, n as i32).expect("0..4 is a valid segment")))
}

/// The band keys to probe for segment radius `radius`: the probes of every segment, tagged.
pub fn band_probes(fp: u64, radius: u32) -> Vec<i32> {
    (0..SEGMENTS)
        .flat_map(|n| {
            let value = segment(fp, n as i32).expect("0..4 is a valid segment");
            segment_probes(value, radius).into_iter().map(move |v| band_key(n, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_radii_spread_k_minus_3() {
        assert_eq!(segment_radii(0), Some([0, 0, 0, 0]));
        assert_eq!(segment_radii(3), Some([0, 0, 0, 0]));
        assert_eq!(segment_radii(4), Some([1, 0, 0, 0]));
        assert_eq!(segment_radii(7), Some([1, 1, 1, 1]));
        assert_eq!(segment_radii(9), Some([2, 2, 1, 1]));
        assert_eq!(segment_radii(11), Some([2, 2, 2, 2]));
        assert_eq!(segment_radii(12), None);
        for k in 0..=MAX_PROBED_RADIUS {
            let radii = segment_radii(k).unwrap();
            // Complete (the radii plus one each add up to more than k), and never wider than k / 4.
            assert!(radii.iter().map(|r| r + 1).sum::<u32>() > k);
            assert!(radii.iter().all(|&r| r <= segment_radius(k).unwrap()));
        }
    }
    use crate::distance::hamming;

    #[test]
    fn share_within_radius_is_a_binomial_tail() {
        assert!((uniform_share_within(64) - 1.0).abs() < 1e-12);
        assert!((uniform_share_within(32) - 0.549_67).abs() < 1e-5);
        // 1 + 64 + 2016 + 41664 fingerprints within 3 bits
        assert_eq!(uniform_share_within(3), 43745.0 / 2f64.powi(64));
    }

    #[test]
    fn probe_counts() {
        for radius in 0..=3 {
            let probes = segment_probes(0xa5a5, radius);
            assert_eq!(probes.len(), probes_per_segment(radius));
            assert!(probes.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
            assert!(probes.iter().all(|&p| (p ^ 0xa5a5).count_ones() <= radius));
        }
        assert_eq!([0, 1, 2, 3].map(probes_per_segment), [1, 17, 137, 697]);
        assert_eq!(segment_radius(3), Some(0));
        assert_eq!(segment_radius(7), Some(1));
        assert_eq!(segment_radius(11), Some(2));
        assert_eq!(segment_radius(12), None);
    }

    #[test]
    fn probe_ranges_cover_exactly_the_probes() {
        for value in [0u16, 0xa5a5, 0xffff, 0x7ffe] {
            for radius in 0..=3 {
                let ranges = probe_ranges(value, radius);
                let expanded: Vec<u16> = ranges.iter().flat_map(|&(lo, hi)| lo..=hi).collect();
                assert_eq!(expanded, segment_probes(value, radius));
                assert!(ranges.windows(2).all(|w| u32::from(w[0].1) + 1 < u32::from(w[1].0)), "maximal");
            }
        }
        assert!(probe_ranges(0xa5a5, 2).len() < 120);
    }

    #[test]
    fn bands_are_tagged_by_segment() {
        assert_eq!(bands(0x0123_4567_89ab_cdef), [0x0000_0123, 0x0001_4567, 0x0002_89ab, 0x0003_cdef]);
        assert_eq!(band_probes(0, 1).len(), 4 * 17);
    }

    /// Every fingerprint within k of the query shares a probed value in some segment, k = 0..=11:
    /// flips of k bits spread as evenly as possible over the segments (the hardest case), and
    /// pseudo-random flips.
    #[test]
    fn probes_are_complete_up_to_radius_eleven() {
        let query = 0x0123_4567_89ab_cdefu64;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for k in 0..=MAX_PROBED_RADIUS {
            let r = segment_radius(k).unwrap();
            let probe_sets: Vec<Vec<u16>> = (0..4).map(|n| segment_probes(segment(query, n).unwrap(), r)).collect();
            let found = |other: u64| (0..4).any(|n| probe_sets[n as usize].contains(&segment(other, n).unwrap()));
            // Round-robin over segments: bit 16*s + i for the i-th flip in segment s.
            let spread = (0..k).fold(query, |fp, t| fp ^ 1 << ((t % 4) * 16 + t / 4));
            assert_eq!(hamming(query, spread), k);
            assert!(found(spread), "k={k} spread");
            for _ in 0..2000 {
                let mut other = query;
                while hamming(query, other) < k {
                    other ^= 1 << (next() % 64);
                }
                assert!(found(other), "k={k} other={other:016x}");
            }
        }
        // One more flip in every segment than the probes allow is not found: the bound is tight.
        let r = segment_radius(7).unwrap();
        let beyond = (0..8).fold(query, |fp, t| fp ^ 1 << ((t % 4) * 16 + t / 4));
        assert_eq!(hamming(query, beyond), 8);
        assert!((0..4).all(|n| !segment_probes(segment(query, n).unwrap(), r).contains(&segment(beyond, n).unwrap())));
    }
}
