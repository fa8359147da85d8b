//! The near-duplicate constraint: its limits, and [`NearSet`], the in-memory lookup its commit-time
//! recheck uses to compare a whole table against a transaction's fingerprints in one pass.

use std::collections::HashMap;

use crate::distance::{hamming, segment, SEGMENTS};
use crate::probes::{segment_probes, segment_radii};

/// The largest radius the constraint handles: that of the exact segment probes (a pair within
/// `k <= 11` bits shares a segment within `k / 4` bits, see [`crate::probes`]).
pub const MAX_DEDUP_RADIUS: u32 = crate::probes::MAX_PROBED_RADIUS;

/// A set of fingerprints that answers "which members are within `k` bits of `v`?" with the
/// pigeonhole rule: a member within `k` of `v` has a segment within that segment's radius of `v`'s
/// (radii adding up to `k - 3`, [`segment_radii`]), so `v` probes each segment's map with its values
/// within that radius (1, 17 or 137 per segment).
pub struct NearSet {
    k: u32,
    radii: [u32; 4],
    fps: Vec<u64>,
    /// Per segment: segment value -> indexes into `fps`.
    by_segment: Vec<HashMap<u16, Vec<u32>>>,
}

impl NearSet {
    /// `None` when `k` exceeds [`MAX_DEDUP_RADIUS`].
    pub fn new(fps: Vec<u64>, k: u32) -> Option<Self> {
        let radii = segment_radii(k)?;
        let mut by_segment = vec![HashMap::new(); SEGMENTS as usize];
        for (i, &fp) in fps.iter().enumerate() {
            for (n, map) in by_segment.iter_mut().enumerate() {
                map.entry(segment(fp, n as i32).expect("n < 4")).or_insert_with(Vec::new).push(i as u32);
            }
        }
        Some(NearSet { k, radii, fps, by_segment })
    }

    pub fn fingerprints(&self) -> &[u64] {
        &self.fps
    }

    /// Calls `found(i)` for each member `fps[i]` within `k` of `v` (a member may be reported once
    /// per segment it shares).
    pub fn for_each_near(&self, v: u64, found: &mut dyn FnMut(usize)) {
        for (n, map) in self.by_segment.iter().enumerate() {
            let value = segment(v, n as i32).expect("n < 4");
            let mut visit = |probe: u16| {
                if let Some(members) = map.get(&probe) {
                    for &i in members {
                        if hamming(self.fps[i as usize], v) <= self.k {
                            found(i as usize);
                        }
                    }
                }
            };
            if self.radii[n] == 0 {
                visit(value);
            } else {
                segment_probes(value, self.radii[n]).into_iter().for_each(&mut visit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Equal to a linear scan for every radius, on members and on flipped variants of them.
    #[test]
    fn near_set_matches_a_linear_scan() {
        let mut state = 7;
        let fps: Vec<u64> = (0..300).map(|_| next(&mut state)).collect();
        for k in 0..=MAX_DEDUP_RADIUS {
            let set = NearSet::new(fps.clone(), k).unwrap();
            for q in 0..200 {
                let mut v = fps[q % fps.len()];
                for _ in 0..(next(&mut state) % 13) {
                    v ^= 1 << (next(&mut state) % 64);
                }
                let mut got = Vec::new();
                set.for_each_near(v, &mut |i| got.push(i));
                got.sort_unstable();
                got.dedup();
                let want: Vec<usize> = (0..fps.len()).filter(|&i| hamming(fps[i], v) <= k).collect();
                assert_eq!(got, want, "k = {k}");
            }
        }
        assert!(NearSet::new(fps, MAX_DEDUP_RADIUS + 1).is_none());
    }
}
