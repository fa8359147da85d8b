//! Lock keys for the near-duplicate constraint: which buckets a writer of a fingerprint must hold.
//!
//! Two fingerprints within `k <= 11` bits share a segment whose values differ in at most `k / 4` bits
//! (see [`crate::probes`]). A writer that locks, for every segment, the buckets of all values within
//! `k / 4` bits of its own value therefore holds the bucket of the other writer's own value of that
//! segment, which the other writer also locks: two conflicting writers always meet on a bucket, and
//! the second waits until the first commits or aborts. Buckets hash the tagged segment value (and the
//! table, so that different tables rarely share buckets) into a fixed number of rows; a collision only
//! makes an unrelated writer wait, it never lets a conflicting one through.

use crate::probes::{band_probes, segment_radius};

/// Rows of the bucket table (`simhash_dedup_buckets`): bucket numbers are `0..DEDUP_BUCKETS`.
pub const DEDUP_BUCKETS: u32 = 65_536;

/// The largest radius the constraint handles (that of the exact probes).
pub const MAX_DEDUP_RADIUS: u32 = crate::probes::MAX_PROBED_RADIUS;

/// The buckets a writer of `fp` into table `scope` locks for radius `k`, ascending and distinct
/// (4 keys for k <= 3, at most 68 for k <= 7, at most 548 for k <= 11). `None` above [`MAX_DEDUP_RADIUS`].
pub fn lock_buckets(scope: u32, fp: u64, k: u32) -> Option<Vec<i32>> {
    let radius = segment_radius(k)?;
    let mut buckets: Vec<i32> = band_probes(fp, radius).into_iter().map(|key| bucket(scope, key)).collect();
    buckets.sort_unstable();
    buckets.dedup();
    Some(buckets)
}

/// The bucket of one tagged segment value of table `scope`: a SplitMix64 finaliser of both.
fn bucket(scope: u32, band_key: i32) -> i32 {
    let mut x = (scope as u64) << 32 | band_key as u32 as u64;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % DEDUP_BUCKETS as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip(fp: u64, bits: &[u32]) -> u64 {
        bits.iter().fold(fp, |fp, &b| fp ^ 1 << b)
    }

    #[test]
    fn conflicting_writers_always_share_a_bucket() {
        // Deterministic pseudo-random fingerprints and bit choices (xorshift).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for k in 0..=MAX_DEDUP_RADIUS {
            for _ in 0..2_000 {
                let a = next();
                let bits: Vec<u32> = (0..k).map(|_| (next() % 64) as u32).collect();
                let b = flip(a, &bits);
                let (la, lb) = (lock_buckets(7, a, k).unwrap(), lock_buckets(7, b, k).unwrap());
                assert!(la.iter().any(|x| lb.binary_search(x).is_ok()), "k={k}: {a:016x} and {b:016x} never meet");
            }
        }
    }

    #[test]
    fn bucket_counts_and_range() {
        let fp = 0x0123_4567_89ab_cdef;
        assert_eq!(lock_buckets(1, fp, 3).unwrap().len(), 4);
        assert!(lock_buckets(1, fp, 7).unwrap().len() <= 68);
        assert!(lock_buckets(1, fp, 11).unwrap().len() <= 548);
        assert!(lock_buckets(1, fp, 12).is_none());
        let all = lock_buckets(99, fp, 11).unwrap();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert!(all.iter().all(|&b| (0..DEDUP_BUCKETS as i32).contains(&b)));
        // Different tables use different buckets for the same value.
        assert_ne!(lock_buckets(1, fp, 3), lock_buckets(2, fp, 3));
    }
}
