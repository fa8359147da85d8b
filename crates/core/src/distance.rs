//! Hamming distance and the 4 x 16-bit segments used for pigeonhole lookups.
//!
//! If two 64-bit fingerprints differ in at most 3 bits, at least one of their four 16-bit segments is
//! identical (4 segments, at most 3 of them can contain a differing bit). Indexing each segment
//! therefore finds every fingerprint within distance 3 with four exact-match probes.

/// Number of segments a fingerprint is split into.
pub const SEGMENTS: u32 = 4;
/// Width of one segment in bits.
pub const SEGMENT_BITS: u32 = 16;

/// Number of bit positions at which `a` and `b` differ (0..=64).
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Segment `index` of `fp`: 0 is the most significant 16 bits, 3 the least significant.
/// Returns `None` for an index outside 0..=3.
pub fn segment(fp: u64, index: i32) -> Option<u16> {
    if !(0..SEGMENTS as i32).contains(&index) {
        return None;
    }
    let shift = (SEGMENTS - 1 - index as u32) * SEGMENT_BITS;
    Some((fp >> shift) as u16)
}

/// The largest distance for which "some segment is equal" is a complete candidate test.
pub const PIGEONHOLE_RADIUS: u32 = SEGMENTS - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hamming_counts_differing_bits() {
        assert_eq!(hamming(0, 0), 0);
        assert_eq!(hamming(0, !0), 64);
        assert_eq!(hamming(0b100111, 0b101010), 3); // seed 004's example
        assert_eq!(hamming(0x8000_0000_0000_0001, 1), 1);
    }

    #[test]
    fn segments_split_most_significant_first() {
        let fp = 0x0123_4567_89ab_cdef;
        let parts: Vec<u16> = (0..4).map(|i| segment(fp, i).unwrap()).collect();
        assert_eq!(parts, vec![0x0123, 0x4567, 0x89ab, 0xcdef]);
        assert_eq!(segment(fp, -1), None);
        assert_eq!(segment(fp, 4), None);
    }

    /// Exhaustive over every way of flipping up to 3 bits of a few fingerprints: some segment survives.
    #[test]
    fn pigeonhole_holds_up_to_radius_three() {
        for &fp in &[0u64, !0, 0x0123_4567_89ab_cdef, 0xdead_beef_cafe_f00d] {
            for i in 0..64 {
                for j in i..64 {
                    for k in j..64 {
                        let other = fp ^ (1 << i) ^ (1 << j) ^ (1 << k);
                        assert!(hamming(fp, other) <= PIGEONHOLE_RADIUS);
                        assert!((0..4).any(|s| segment(fp, s) == segment(other, s)));
                    }
                }
            }
        }
        // ... and fails at 4: one flipped bit in each segment.
        let fp = 0u64;
        let other = 1 | 1 << 16 | 1 << 32 | 1 << 48;
        assert!((0..4).all(|s| segment(fp, s) != segment(other, s)));
    }
}
