//! The built part of a `simhash` index of format 5, without pages (the PostgreSQL side is
//! `src/index/dense.rs`).
//!
//! An index built on a table holds its rows densely, once per 16-bit segment: in segment `n` the
//! rows are sorted by their segment value, then by the other 48 bits of the fingerprint (its
//! *residual* in that segment, [`residual`]), and a directory gives where each of the 65,536
//! values' run starts. A run is one segment value, so an entry keeps only its residual (6 bytes),
//! and only segment 0 keeps the rows' TIDs (6 bytes more): 30 bytes per row in all, against 56 for
//! four copies of fingerprint and TID. A match found in segment 1 to 3 takes its TIDs from
//! segment 0's run of its fingerprint, where the rows of that fingerprint are adjacent (sorted by
//! residual) and found by a binary search: matches are few, entries checked many.
//!
//! A lookup checks a run's entries against the query's residual in that segment: the distance of
//! an entry is the distance of the segment values (one for the whole run) plus that of the
//! residuals ([`for_each_near_residual`]).

use crate::distance::{SEGMENTS, SEGMENT_BITS};

/// Segment values: each has a run in each segment.
pub const VALUES: usize = 1 << SEGMENT_BITS;

/// The bytes of a residual as a page stores it (little-endian).
pub const RESIDUAL_BYTES: usize = 6;

/// A residual's bits.
pub const RESIDUAL_MASK: u64 = (1 << (64 - SEGMENT_BITS)) - 1;

/// The bits below segment `n` (0..4, most significant first).
fn low_bits(n: u32) -> u32 {
    (SEGMENTS - 1 - n % SEGMENTS) * SEGMENT_BITS
}

/// The 48 bits of `fp` other than segment `n`'s, in their order.
pub fn residual(fp: u64, n: u32) -> u64 {
    let low_bits = low_bits(n);
    let low = fp & ((1u64 << low_bits) - 1);
    let high = if low_bits + SEGMENT_BITS >= 64 { 0 } else { fp >> (low_bits + SEGMENT_BITS) };
    (high << low_bits) | low
}

/// The fingerprint whose segment `n` is `value` and whose residual there is `residual`.
pub fn assemble(residual: u64, value: u16, n: u32) -> u64 {
    let low_bits = low_bits(n);
    let low = residual & ((1u64 << low_bits) - 1);
    let high = if low_bits + SEGMENT_BITS >= 64 { 0 } else { (residual >> low_bits) << (low_bits + SEGMENT_BITS) };
    high | (u64::from(value) << low_bits) | low
}

/// The order of the entries of segment `n`: by segment value, then by residual.
pub fn order_key(fp: u64, n: u32) -> (u16, u64) {
    (crate::buckets::segment_value(fp, n), residual(fp, n))
}

/// Writes `residual` as entry `i` of `bytes`.
pub fn write_residual(bytes: &mut [u8], i: usize, residual: u64) {
    bytes[i * RESIDUAL_BYTES..(i + 1) * RESIDUAL_BYTES].copy_from_slice(&residual.to_le_bytes()[..RESIDUAL_BYTES]);
}

/// Entry `i` of `bytes`.
pub fn read_residual(bytes: &[u8], i: usize) -> u64 {
    let mut word = [0u8; 8];
    word[..RESIDUAL_BYTES].copy_from_slice(&bytes[i * RESIDUAL_BYTES..(i + 1) * RESIDUAL_BYTES]);
    u64::from_le_bytes(word)
}

/// The first of entries `from..to` of `bytes` (ascending) whose residual is at least `residual`.
pub fn lower_bound(bytes: &[u8], from: usize, to: usize, residual: u64) -> usize {
    let (mut lo, mut hi) = (from, to);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if read_residual(bytes, mid) < residual {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Calls `each(i, residual)` for each entry `i` of `from..to` of `bytes` whose residual is within
/// `limit` bits of `query`: the tight loop of a lookup, compiled a second time with the POPCNT
/// instruction, taken when the CPU has it (as `crate::buckets::for_each_near`).
///
/// `bytes` holds entries `from..to` (else a panic).
#[inline]
pub fn for_each_near_residual(
    bytes: &[u8],
    from: usize,
    to: usize,
    query: u64,
    limit: u32,
    each: impl FnMut(usize, u64),
) {
    if from >= to {
        return;
    }
    assert!(bytes.len() >= to * RESIDUAL_BYTES, "{} bytes hold no {to} residuals", bytes.len());
    #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked above).
        unsafe { near_with_popcnt(bytes, from, to, query, limit, each) };
        return;
    }
    near(bytes, from, to, query, limit, each);
}

/// [`near`] compiled with POPCNT.
///
/// # Safety
///
/// The CPU has the POPCNT instruction.
#[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
#[target_feature(enable = "popcnt")]
unsafe fn near_with_popcnt(bytes: &[u8], from: usize, to: usize, query: u64, limit: u32, each: impl FnMut(usize, u64)) {
    near(bytes, from, to, query, limit, each);
}

/// The body of [`for_each_near_residual`].
#[inline(always)]
fn near(bytes: &[u8], from: usize, to: usize, query: u64, limit: u32, mut each: impl FnMut(usize, u64)) {
    let window = &bytes[from * RESIDUAL_BYTES..to * RESIDUAL_BYTES];
    for (j, entry) in window.chunks_exact(RESIDUAL_BYTES).enumerate() {
        let low = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
        let high = u16::from_le_bytes([entry[4], entry[5]]);
        let residual = u64::from(low) | u64::from(high) << 32;
        if (residual ^ query).count_ones() <= limit {
            each(from + j, residual);
        }
    }
}

/// Where each value's run starts among `count` entries whose segment values are `values` (in
/// order): `VALUES + 1` positions, the last `count`.
pub fn directory(values: impl Iterator<Item = u16>) -> Vec<u32> {
    let mut counts = vec![0u32; VALUES];
    for value in values {
        counts[usize::from(value)] += 1;
    }
    directory_of_counts(&counts)
}

/// Where each value's run starts when `counts[v]` entries have value `v` (`VALUES` counts):
/// `VALUES + 1` positions, the last their sum.
pub fn directory_of_counts(counts: &[u32]) -> Vec<u32> {
    assert_eq!(counts.len(), VALUES);
    let mut starts = vec![0u32; VALUES + 1];
    for v in 0..VALUES {
        starts[v + 1] = starts[v] + counts[v];
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::segment_value;

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn residual_and_value_make_the_fingerprint() {
        let mut state = 0x1234_5678_9abc_def0;
        for _ in 0..10_000 {
            let fp = xorshift(&mut state);
            for n in 0..SEGMENTS {
                let r = residual(fp, n);
                assert!(r <= RESIDUAL_MASK);
                assert_eq!(assemble(r, segment_value(fp, n), n), fp, "fp {fp:x} segment {n}");
                // The distance splits into the value's and the residual's.
                let q = xorshift(&mut state);
                let value_distance = (segment_value(fp, n) ^ segment_value(q, n)).count_ones();
                assert_eq!((fp ^ q).count_ones(), value_distance + (r ^ residual(q, n)).count_ones());
            }
        }
        assert_eq!(residual(0xAAAA_BBBB_CCCC_DDDD, 0), 0xBBBB_CCCC_DDDD);
        assert_eq!(residual(0xAAAA_BBBB_CCCC_DDDD, 1), 0xAAAA_CCCC_DDDD);
        assert_eq!(residual(0xAAAA_BBBB_CCCC_DDDD, 3), 0xAAAA_BBBB_CCCC);
    }

    #[test]
    fn near_residuals_are_those_within_the_limit() {
        let mut state = 0xfeed_beef_u64;
        let residuals: Vec<u64> = (0..1000).map(|_| xorshift(&mut state) & RESIDUAL_MASK).collect();
        let mut bytes = vec![0u8; residuals.len() * RESIDUAL_BYTES];
        for (i, &r) in residuals.iter().enumerate() {
            write_residual(&mut bytes, i, r);
        }
        for (i, &r) in residuals.iter().enumerate() {
            assert_eq!(read_residual(&bytes, i), r);
        }
        let query = residuals[500] ^ 0b1011;
        for (from, to, limit) in [(0, 1000, 24), (10, 20, 48), (500, 501, 3), (500, 501, 2), (7, 7, 5)] {
            let mut found = Vec::new();
            for_each_near_residual(&bytes, from, to, query, limit, |i, r| found.push((i, r)));
            let expected: Vec<(usize, u64)> = (from..to)
                .filter(|&i| (residuals[i] ^ query).count_ones() <= limit)
                .map(|i| (i, residuals[i]))
                .collect();
            assert_eq!(found, expected, "{from}..{to} within {limit}");
        }
    }

    #[test]
    fn lower_bound_finds_the_first_not_below() {
        let residuals = [1u64, 3, 3, 3, 9, 40];
        let mut bytes = vec![0u8; residuals.len() * RESIDUAL_BYTES];
        for (i, &r) in residuals.iter().enumerate() {
            write_residual(&mut bytes, i, r);
        }
        assert_eq!(lower_bound(&bytes, 0, 6, 0), 0);
        assert_eq!(lower_bound(&bytes, 0, 6, 3), 1);
        assert_eq!(lower_bound(&bytes, 0, 6, 4), 4);
        assert_eq!(lower_bound(&bytes, 2, 6, 3), 2);
        assert_eq!(lower_bound(&bytes, 0, 6, 41), 6);
    }

    #[test]
    fn the_directory_gives_each_values_run() {
        let values = [0u16, 0, 5, 5, 5, 65535];
        let starts = directory(values.iter().copied());
        assert_eq!(starts.len(), VALUES + 1);
        assert_eq!((starts[0], starts[1]), (0, 2));
        assert_eq!((starts[5], starts[6]), (2, 5));
        assert_eq!((starts[65535], starts[65536]), (5, 6));
    }
}
