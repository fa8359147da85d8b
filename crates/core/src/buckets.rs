//! The layout of the `simhash` index access method, without pages (the PostgreSQL side is
//! `src/index/`).
//!
//! Every fingerprint is filed four times, once per 16-bit segment, in the bucket of that segment's
//! top `bits` bits. `bits` is chosen when the index is built so that a bucket averages at most a
//! page ([`bucket_bits`]), and is at least [`MIN_BUCKET_BITS`], so that an index built on an empty
//! or small table (before a load) still spreads what it is given; it stays fixed as the table grows
//! (like the lists of an IVF index), so a table that grows far beyond its size at build time is
//! worth a REINDEX.
//!
//! A radius lookup `d(fp, q) <= k` with `k` up to [`MAX_PROBED_RADIUS`] reads, in each segment `n`,
//! the buckets of the values within `r_n` bits of the query's segment, where the radii `r_n` add up
//! to `k - 3` (the pigeonhole of [`crate::probes::segment_radii`]: a fingerprint within `k` has some
//! segment within its radius), checks the distance of every entry there, and reports a match only
//! in the first segment whose value is within that segment's radius of the query's
//! ([`reported_in`]), so that each row comes out once. A larger radius reads every bucket of
//! segment 0 (each row once).
//!
//! A bucket holds the entries of many segment values (2^(16 - bits) of them), most of which a probe
//! does not ask for. So the entries of a page are kept sorted by their segment value where
//! possible (a page as built, or once full), and a probe checks only the runs of the values it asks
//! for there ([`for_each_probed`]), and every entry of the page's unsorted rest.

use crate::distance::{SEGMENTS, SEGMENT_BITS};
use crate::probes::{segment_probes, segment_radii};

pub use crate::probes::MAX_PROBED_RADIUS;

/// The most bucket bits: one bucket per 16-bit segment value.
pub const MAX_BUCKET_BITS: u32 = SEGMENT_BITS;

/// The fewest bucket bits: 256 buckets per segment. An index built on an empty table then holds
/// about 150,000 rows before its buckets grow chains of pages, and a lookup at k = 11 among ten
/// million rows inserted later reads a few thousand pages, not all of them. The index of a small
/// table takes a page per bucket it fills: 1,024 pages (8 MB) at most.
pub const MIN_BUCKET_BITS: u32 = 8;

/// The bucket bits for `rows` rows with `per_page` entries to a page: the fewest with which a
/// bucket averages at most one page ([`MIN_BUCKET_BITS`] to [`MAX_BUCKET_BITS`]).
pub fn bucket_bits(rows: u64, per_page: u64) -> u32 {
    let pages = rows.div_ceil(per_page.max(1));
    (MIN_BUCKET_BITS..MAX_BUCKET_BITS).find(|&bits| pages <= 1u64 << bits).unwrap_or(MAX_BUCKET_BITS)
}

/// Segment `n` (0..4, most significant first) of `fp`.
pub fn segment_value(fp: u64, n: u32) -> u16 {
    (fp >> ((SEGMENTS - 1 - n % SEGMENTS) * SEGMENT_BITS)) as u16
}

/// The bucket of fingerprint `fp` in segment `n` (0..4): the segment's top `bits` bits.
pub fn bucket_of(fp: u64, n: u32, bits: u32) -> u32 {
    u32::from(segment_value(fp, n)) >> (SEGMENT_BITS - bits)
}

/// The probes of segment `n` for a lookup of `query` within `k`, grouped by bucket: each bucket
/// read (ascending, distinct) with the segment values asked for in it (ascending); `None` when `k`
/// exceeds [`MAX_PROBED_RADIUS`].
pub fn probes_by_bucket(query: u64, n: u32, k: u32, bits: u32) -> Option<Vec<(u32, Vec<u16>)>> {
    let radius = segment_radii(k)?[(n % SEGMENTS) as usize];
    let mut probes: Vec<(u32, Vec<u16>)> = Vec::new();
    // The probes are ascending, so the values of a bucket are adjacent.
    for value in segment_probes(segment_value(query, n), radius) {
        let bucket = u32::from(value) >> (SEGMENT_BITS - bits);
        match probes.last_mut() {
            Some((last, values)) if *last == bucket => values.push(value),
            _ => probes.push((bucket, vec![value])),
        }
    }
    Some(probes)
}

/// Calls `each` with the entries of a page of a bucket of `bits` bits that a probe of `values`
/// (ascending) must check: among the first `sorted` entries, which are in ascending order of `key`
/// (their segment value), the runs whose value is one of `values`; then every entry after them.
///
/// Each run is found from where a uniform spread of the bucket's values would put it, galloping
/// from there: a page is thousands of bytes and mostly not in the CPU's caches, so a few reads near
/// the guess cost far less than a binary search's chain of dependent reads across the page. A run
/// is then read once, its end found as its entries are handed out.
pub fn for_each_probed<T>(
    entries: &[T],
    sorted: usize,
    values: &[u16],
    bits: u32,
    key: impl Fn(&T) -> u16,
    mut each: impl FnMut(&T),
) {
    let (sorted, rest) = entries.split_at(sorted.min(entries.len()));
    for &value in values {
        let guess = run_guess(value, sorted.len(), bits);
        let start = lower_bound_from(sorted, value, guess, &key);
        for entry in &sorted[start..] {
            if key(entry) != value {
                break;
            }
            each(entry);
        }
    }
    rest.iter().for_each(each);
}

/// Where the run of segment value `value` should start among `sorted` entries of a bucket of
/// `bits` bits if its values were spread evenly (the values of a bucket differ in their low
/// 16 - bits bits).
pub fn run_guess(value: u16, sorted: usize, bits: u32) -> usize {
    let low_bits = SEGMENT_BITS - bits.min(SEGMENT_BITS);
    let low = usize::from(value) & ((1usize << low_bits) - 1);
    (low * sorted) >> low_bits
}

/// The first position of `sorted` (ascending by `key`) whose key is at least `value`, searched
/// outward from `guess` with steps of 1, 2, 4, ... and then a binary search of the last step.
fn lower_bound_from<T>(sorted: &[T], value: u16, guess: usize, key: &impl Fn(&T) -> u16) -> usize {
    let n = sorted.len();
    let guess = guess.min(n);
    // Every position before `lo` is below `value`; `hi` is `n` or at least `value`.
    let (lo, hi);
    if guess < n && key(&sorted[guess]) < value {
        let (mut below, mut step) = (guess + 1, 1);
        loop {
            let probe = guess + step;
            if probe >= n {
                (lo, hi) = (below, n);
                break;
            }
            if key(&sorted[probe]) >= value {
                (lo, hi) = (below, probe);
                break;
            }
            below = probe + 1;
            step *= 2;
        }
    } else {
        let (mut at_least, mut step) = (guess, 1);
        loop {
            if step > guess {
                (lo, hi) = (0, at_least);
                break;
            }
            let probe = guess - step;
            if key(&sorted[probe]) < value {
                (lo, hi) = (probe + 1, at_least);
                break;
            }
            at_least = probe;
            step *= 2;
        }
    }
    lo + sorted[lo..hi].partition_point(|e| key(e) < value)
}

/// Whether a match `fp` (within `k` of `query`, `k` at most [`MAX_PROBED_RADIUS`]) found while
/// reading segment `n`'s buckets is reported there: `n` is the first segment whose value is within
/// that segment's radius ([`segment_radii`]) of the query's. Every match has such a segment, and
/// its bucket is read there.
pub fn reported_in(fp: u64, query: u64, n: u32, k: u32) -> bool {
    let Some(radii) = segment_radii(k) else { return n == 0 };
    let close = |m: u32| {
        crate::distance::popcount(u64::from(segment_value(fp, m) ^ segment_value(query, m))) <= radii[m as usize]
    };
    n < SEGMENTS && close(n) && (0..n).all(|m| !close(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    /// The buckets of segment `n` that a lookup of `query` within `k` reads, ascending and
    /// distinct, computed apart from [`probes_by_bucket`] (which the scan uses) as a reference;
    /// `None` when `k` exceeds [`MAX_PROBED_RADIUS`] (then every bucket of segment 0 is read).
    fn probe_buckets(query: u64, n: u32, k: u32, bits: u32) -> Option<Vec<u32>> {
        let radius = segment_radii(k)?[n as usize];
        let mut buckets: Vec<u32> = segment_probes(segment_value(query, n), radius)
            .into_iter()
            .map(|value| u32::from(value) >> (SEGMENT_BITS - bits))
            .collect();
        buckets.dedup(); // the probes are ascending, so equal buckets are adjacent
        Some(buckets)
    }

    #[test]
    fn bucket_bits_fill_about_a_page() {
        assert_eq!(bucket_bits(0, 500), MIN_BUCKET_BITS);
        assert_eq!(bucket_bits(500 << 8, 500), 8);
        assert_eq!(bucket_bits((500 << 8) + 1, 500), 9);
        assert_eq!(bucket_bits(1_000_000, 500), 11);
        assert_eq!(bucket_bits(u64::MAX, 500), MAX_BUCKET_BITS);
    }

    /// Every fingerprint within k of the query is reported exactly once, in a bucket the lookup
    /// reads, for every radius the probes answer and several bucket sizes.
    #[test]
    fn each_match_is_reported_once_in_a_read_bucket() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..300 {
            let query = next();
            for k in 0..=MAX_PROBED_RADIUS {
                for bits in [0, 5, 12, 16] {
                    // Candidates near the query: flip up to k random bits, plus some farther away.
                    for flips in [0, 1, k / 2, k, k + 1, 20] {
                        let mut fp = query;
                        for _ in 0..flips {
                            fp ^= 1 << (next() % 64);
                        }
                        if hamming(fp, query) > k {
                            continue; // (the scan checks the distance first)
                        }
                        let reported: Vec<u32> = (0..SEGMENTS)
                            .filter(|&n| {
                                let read = probe_buckets(query, n, k, bits).unwrap();
                                read.binary_search(&bucket_of(fp, n, bits)).is_ok() && reported_in(fp, query, n, k)
                            })
                            .collect();
                        assert_eq!(reported.len(), 1, "fp {fp:x} q {query:x} k {k} bits {bits}");
                    }
                }
            }
        }
    }

    #[test]
    fn probes_by_bucket_group_the_probe_values() {
        let query = 0x0123_4567_89AB_CDEF;
        for k in 0..=MAX_PROBED_RADIUS {
            for bits in [0, 5, 11, 16] {
                for n in 0..SEGMENTS {
                    let grouped = probes_by_bucket(query, n, k, bits).unwrap();
                    let buckets: Vec<u32> = grouped.iter().map(|(b, _)| *b).collect();
                    assert_eq!(buckets, probe_buckets(query, n, k, bits).unwrap());
                    let values: Vec<u16> = grouped.iter().flat_map(|(_, v)| v.iter().copied()).collect();
                    assert_eq!(values, segment_probes(segment_value(query, n), segment_radii(k).unwrap()[n as usize]));
                    for (bucket, values) in &grouped {
                        assert!(values.iter().all(|&v| u32::from(v) >> (SEGMENT_BITS - bits) == *bucket));
                        assert!(values.windows(2).all(|w| w[0] < w[1]));
                    }
                }
            }
        }
        assert!(probes_by_bucket(0, 0, MAX_PROBED_RADIUS + 1, 8).is_none());
    }

    /// The runs hold exactly the sorted entries whose value is asked for, then the unsorted rest.
    #[test]
    fn probed_entries_are_the_asked_values_and_the_rest() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..500 {
            let len = (next() % 40) as usize;
            // Values from a small range, so that runs of equal values occur.
            let mut entries: Vec<(u16, usize)> = (0..len).map(|i| ((next() % 24) as u16, i)).collect();
            let sorted = if len == 0 { 0 } else { (next() as usize) % (len + 1) };
            entries[..sorted].sort_by_key(|e| e.0);
            let mut values: Vec<u16> = (0..next() % 8).map(|_| (next() % 26) as u16).collect();
            values.sort_unstable();
            values.dedup();
            // Values 0..26 in buckets of 16 or 32 values, or a single bucket of every value.
            let bits = [0, 11, 12][(next() % 3) as usize];
            let mut found: Vec<(u16, usize)> = Vec::new();
            for_each_probed(&entries, sorted, &values, bits, |e| e.0, |e| found.push(*e));
            let expected: Vec<(u16, usize)> =
                entries[..sorted].iter().filter(|e| values.contains(&e.0)).chain(&entries[sorted..]).copied().collect();
            assert_eq!(found, expected, "entries {entries:?} sorted {sorted} values {values:?}");
        }
        // A sorted count beyond the entries (a corrupt page) reads them all as sorted.
        let entries = [(1u16, 0usize), (2, 1)];
        let mut count = 0;
        for_each_probed(&entries, 9, &[2], 16, |e| e.0, |_| count += 1);
        assert_eq!(count, 1);
    }

    #[test]
    fn lower_bound_from_any_guess() {
        let sorted: Vec<u16> = vec![1, 1, 3, 3, 3, 4, 7, 9, 9, 12];
        for value in 0..14u16 {
            let expected = sorted.partition_point(|&v| v < value);
            for guess in 0..=sorted.len() + 2 {
                assert_eq!(lower_bound_from(&sorted, value, guess, &|&v| v), expected, "value {value} guess {guess}");
            }
        }
        assert_eq!(lower_bound_from(&[] as &[u16], 5, 3, &|&v| v), 0);
    }

    #[test]
    fn large_radii_read_every_bucket() {
        assert!(probe_buckets(0, 0, MAX_PROBED_RADIUS + 1, 8).is_none());
        assert_eq!(probe_buckets(0, 0, 11, 0).unwrap(), vec![0]);
        assert_eq!(probe_buckets(0xFFFF_0000_0000_0000, 0, 0, 16).unwrap(), vec![0xFFFF]);
    }
}
