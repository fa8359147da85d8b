//! The layout of the `simhash` index access method, without pages (the PostgreSQL side is
//! `src/index/`).
//!
//! Every fingerprint is filed four times, once per 16-bit segment, in the bucket of that segment's
//! top `bits` bits. `bits` is chosen when the index is built so that a bucket averages at most a
//! page ([`bucket_bits`]); it stays fixed as the table grows (like the lists of an IVF index), so
//! a table that grows far beyond its size at build time is worth a REINDEX.
//!
//! A radius lookup `d(fp, q) <= k` with `k` up to [`MAX_PROBED_RADIUS`] reads, in each segment, the
//! buckets of the values within `k / 4` bits of the query's segment (the pigeonhole of
//! [`crate::probes`]: a fingerprint within `k` has some segment within `k / 4` bits), checks the
//! distance of every entry there, and reports a match only in the first segment whose value is
//! within `k / 4` bits of the query's ([`reported_in`]), so that each row comes out once. A larger
//! radius reads every bucket of segment 0 (each row once).

use crate::distance::{SEGMENTS, SEGMENT_BITS};
use crate::probes::{segment_probes, segment_radius};

pub use crate::probes::MAX_PROBED_RADIUS;

/// The most bucket bits: one bucket per 16-bit segment value.
pub const MAX_BUCKET_BITS: u32 = SEGMENT_BITS;

/// The bucket bits for `rows` rows with `per_page` entries to a page: the fewest with which a
/// bucket averages at most one page (0 to [`MAX_BUCKET_BITS`]).
pub fn bucket_bits(rows: u64, per_page: u64) -> u32 {
    let pages = rows.div_ceil(per_page.max(1));
    (0..MAX_BUCKET_BITS).find(|&bits| pages <= 1u64 << bits).unwrap_or(MAX_BUCKET_BITS)
}

/// Segment `n` (0..4, most significant first) of `fp`.
fn segment(fp: u64, n: u32) -> u16 {
    (fp >> ((SEGMENTS - 1 - n % SEGMENTS) * SEGMENT_BITS)) as u16
}

/// The bucket of fingerprint `fp` in segment `n` (0..4): the segment's top `bits` bits.
pub fn bucket_of(fp: u64, n: u32, bits: u32) -> u32 {
    u32::from(segment(fp, n)) >> (SEGMENT_BITS - bits)
}

/// The buckets of segment `n` that a lookup of `query` within `k` reads, ascending and distinct;
/// `None` when `k` exceeds [`MAX_PROBED_RADIUS`] (then every bucket of segment 0 is read).
pub fn probe_buckets(query: u64, n: u32, k: u32, bits: u32) -> Option<Vec<u32>> {
    let radius = segment_radius(k)?;
    let mut buckets: Vec<u32> = segment_probes(segment(query, n), radius)
        .into_iter()
        .map(|value| u32::from(value) >> (SEGMENT_BITS - bits))
        .collect();
    buckets.dedup(); // the probes are ascending, so equal buckets are adjacent
    Some(buckets)
}

/// Whether a match `fp` (within `k` of `query`, `k` at most [`MAX_PROBED_RADIUS`]) found while
/// reading segment `n`'s buckets is reported there: `n` is the first segment whose value is within
/// `k / 4` bits of the query's. Every match has such a segment, and its bucket is read there.
pub fn reported_in(fp: u64, query: u64, n: u32, k: u32) -> bool {
    let radius = k / SEGMENTS;
    let close = |m: u32| (segment(fp, m) ^ segment(query, m)).count_ones() <= radius;
    close(n) && (0..n).all(|m| !close(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distance::hamming;

    #[test]
    fn bucket_bits_fill_about_a_page() {
        assert_eq!(bucket_bits(0, 500), 0);
        assert_eq!(bucket_bits(500, 500), 0);
        assert_eq!(bucket_bits(501, 500), 1);
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
    fn large_radii_read_every_bucket() {
        assert!(probe_buckets(0, 0, MAX_PROBED_RADIUS + 1, 8).is_none());
        assert_eq!(probe_buckets(0, 0, 11, 0).unwrap(), vec![0]);
        assert_eq!(probe_buckets(0xFFFF_0000_0000_0000, 0, 0, 16).unwrap(), vec![0xFFFF]);
    }
}
