//! All pairs within Hamming distance `k` spread over machines: each fingerprint is filed under a
//! few keys ([`keys`]), the fingerprints of each key are paired on their own ([`pairs_of_key`]),
//! and every pair within `k` comes out under exactly one key. This is how a sharded table finds its
//! pairs: the rows are shuffled by key (Manku et al. ran the same shuffle with MapReduce), each
//! shard pairs its keys, and nothing but the pairs comes back.
//!
//! Two pigeonholes make the keys. Fingerprints within `k` (at most [`MAX_KEYED_RADIUS`]) have a
//! segment whose values are within `r = k / 4` bits of each other ([`crate::probes`]). Values within
//! `r` bits agree exactly on one of `r + 1` blocks of the segment's 16 bits ([`blocks`]). So a
//! fingerprint's keys are its `4 (r + 1)` (segment, block, block value) triples, and a pair is
//! reported under the key of its first close segment and, in it, its first equal block
//! ([`reported_under`]).
//!
//! Within a key all values share one block; they are counting-sorted by their other bits, and each
//! is compared with the values at most `r` of those bits away. The work is the candidates'
//! (about what [`crate::pairs`] compares on one machine) plus `4 (r + 1)` copies of each row moved.

use crate::buckets::{segment_value, MAX_PROBED_RADIUS};
use crate::distance::{hamming, SEGMENTS, SEGMENT_BITS};

/// The largest radius the keys serve (the segments' pigeonhole with at most 2 bits per segment).
pub const MAX_KEYED_RADIUS: u32 = MAX_PROBED_RADIUS;

/// Bits of a key below the (segment, block) number: the block's value.
const BLOCK_VALUE_BITS: u32 = SEGMENT_BITS;

/// The `r + 1` blocks of a segment for segment radius `r`, as (shift, width) from the segment's
/// lowest bit, widest first and from the top: 16 bits; 8 and 8; 6, 5 and 5.
fn blocks(radius: u32) -> Vec<(u32, u32)> {
    let count = radius + 1;
    let mut shift = SEGMENT_BITS;
    (0..count)
        .map(|j| {
            let width = SEGMENT_BITS / count + u32::from(j < SEGMENT_BITS % count);
            shift -= width;
            (shift, width)
        })
        .collect()
}

fn block_value(value: u16, (shift, width): (u32, u32)) -> u32 {
    (u32::from(value) >> shift) & ((1 << width) - 1)
}

/// A key's (segment, block) and block value, for radius `k`; `None` for a key no fingerprint has.
fn decode(key: i32, k: u32) -> Option<(u32, u32, u32)> {
    let radius = k / SEGMENTS;
    let key = u32::try_from(key).ok()?;
    let (number, value) = (key >> BLOCK_VALUE_BITS, key & ((1 << BLOCK_VALUE_BITS) - 1));
    let (segment, block) = (number / (radius + 1), number % (radius + 1));
    let (_, width) = *blocks(radius).get(block as usize)?;
    (segment < SEGMENTS && value < 1 << width).then_some((segment, block, value))
}

/// The keys of fingerprint `fp` for pairs within `k`: `4 (k / 4 + 1)` of them, each a
/// non-negative integer. `None` if `k` is above [`MAX_KEYED_RADIUS`].
pub fn keys(fp: u64, k: u32) -> Option<Vec<i32>> {
    if k > MAX_KEYED_RADIUS {
        return None;
    }
    let radius = k / SEGMENTS;
    let blocks = blocks(radius);
    let mut keys = Vec::with_capacity(SEGMENTS as usize * blocks.len());
    for segment in 0..SEGMENTS {
        let value = segment_value(fp, segment);
        for (j, &block) in blocks.iter().enumerate() {
            let number = segment * (radius + 1) + j as u32;
            keys.push((number << BLOCK_VALUE_BITS | block_value(value, block)) as i32);
        }
    }
    Some(keys)
}

/// Whether the pair `a`, `b` (within `k`) is reported under the key of `segment` and `block`: it is
/// its first segment with values within `k / 4` bits, and in it the first block where they agree.
pub fn reported_under(a: u64, b: u64, k: u32, segment: u32, block: u32) -> bool {
    let radius = k / SEGMENTS;
    let close = |m: u32| (segment_value(a, m) ^ segment_value(b, m)).count_ones() <= radius;
    if !close(segment) || (0..segment).any(close) {
        return false;
    }
    let (va, vb) = (segment_value(a, segment), segment_value(b, segment));
    let blocks = blocks(radius);
    let equal = |j: usize| block_value(va, blocks[j]) == block_value(vb, blocks[j]);
    equal(block as usize) && (0..block as usize).all(|j| !equal(j))
}

/// Why a key's entries cannot be paired.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The radius is above [`MAX_KEYED_RADIUS`].
    Radius(u32),
    /// No fingerprint has this key at this radius.
    Key(i32),
}

/// Every pair of `entries` within `k` that is reported under `key` ([`reported_under`]), as
/// `on_pair(a, b, distance)` with `a` before `b` in `entries`. Entries whose fingerprint does not
/// have `key` are left out. Memory: one index per entry and one offset per value of the bits
/// outside the key's block (at most 2^11).
pub fn pairs_of_key<T>(
    key: i32,
    k: u32,
    entries: &[(u64, T)],
    on_pair: &mut dyn FnMut(&T, &T, u32),
) -> Result<(), KeyError> {
    if k > MAX_KEYED_RADIUS {
        return Err(KeyError::Radius(k));
    }
    let (segment, block, value) = decode(key, k).ok_or(KeyError::Key(key))?;
    let radius = k / SEGMENTS;
    let (shift, width) = blocks(radius)[block as usize];
    let rest_bits = SEGMENT_BITS - width;
    // The segment value without the block's bits (which every entry of the key shares).
    let rest = |fp: u64| {
        let v = u32::from(segment_value(fp, segment));
        (v >> (shift + width)) << shift | (v & ((1 << shift) - 1))
    };
    let mine = |fp: u64| block_value(segment_value(fp, segment), (shift, width)) == value;

    // Counting sort of the entries of the key by `rest`.
    let slots = 1usize << rest_bits;
    let mut start = vec![0u32; slots + 1];
    for (fp, _) in entries.iter().filter(|(fp, _)| mine(*fp)) {
        start[rest(*fp) as usize + 1] += 1;
    }
    for i in 0..slots {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    let mut sorted = vec![0u32; start[slots] as usize];
    for (i, (fp, _)) in entries.iter().enumerate().filter(|(_, (fp, _))| mine(*fp)) {
        let slot = &mut next[rest(*fp) as usize];
        sorted[*slot as usize] = i as u32;
        *slot += 1;
    }

    let masks = crate::bucket_pairs::masks(rest_bits, radius);
    let run = |slot: usize| &sorted[start[slot] as usize..start[slot + 1] as usize];
    let mut check = |x: u32, y: u32| {
        let (x, y) = (x.min(y) as usize, x.max(y) as usize);
        let (a, b) = (&entries[x], &entries[y]);
        let distance = hamming(a.0, b.0);
        if distance <= k && reported_under(a.0, b.0, k, segment, block) {
            on_pair(&a.1, &b.1, distance);
        }
    };
    for slot in 0..slots {
        let here = run(slot);
        if here.is_empty() {
            continue;
        }
        for &mask in &masks {
            let other = slot ^ mask as usize;
            if mask == 0 {
                for (i, &x) in here.iter().enumerate() {
                    for &y in &here[i + 1..] {
                        check(x, y);
                    }
                }
            } else if other > slot {
                for &x in here {
                    for &y in run(other) {
                        check(x, y);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    fn random_fps(n: usize, seed: u64) -> Vec<u64> {
        let mut state = seed;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut fps: Vec<u64> = (0..n).map(|_| next()).collect();
        // Near copies at every distance up to 12, and exact copies.
        for i in 0..n / 2 {
            let base = fps[i];
            let flips = (next() % 13) as u32;
            let mut fp = base;
            for _ in 0..flips {
                fp ^= 1 << (next() % 64);
            }
            fps.push(fp);
        }
        fps.extend_from_within(..10);
        fps
    }

    /// Every pair within `k` comes out under exactly one key, and nothing else does.
    #[test]
    fn each_pair_once_under_some_key() {
        let fps = random_fps(3000, 0x9e37_79b9_7f4a_7c15);
        for k in 0..=MAX_KEYED_RADIUS {
            let mut by_key: BTreeMap<i32, Vec<(u64, usize)>> = BTreeMap::new();
            for (i, &fp) in fps.iter().enumerate() {
                let keys = keys(fp, k).unwrap();
                assert_eq!(keys.len() as u32, SEGMENTS * (k / SEGMENTS + 1));
                for key in keys {
                    assert!(key >= 0);
                    by_key.entry(key).or_default().push((fp, i));
                }
            }
            let mut found: HashMap<(usize, usize), u32> = HashMap::new();
            for (&key, entries) in &by_key {
                pairs_of_key(key, k, entries, &mut |&a, &b, d| {
                    assert!(a < b);
                    assert!(found.insert((a, b), d).is_none(), "pair {a} {b} twice at k = {k}");
                })
                .unwrap();
            }
            let mut expected = 0;
            for i in 0..fps.len() {
                for j in i + 1..fps.len() {
                    let d = hamming(fps[i], fps[j]);
                    if d <= k {
                        expected += 1;
                        assert_eq!(found.get(&(i, j)), Some(&d), "pair {i} {j} at k = {k}");
                    }
                }
            }
            assert_eq!(found.len(), expected, "k = {k}");
        }
    }

    #[test]
    fn blocks_cover_the_segment() {
        assert_eq!(blocks(0), vec![(0, 16)]);
        assert_eq!(blocks(1), vec![(8, 8), (0, 8)]);
        assert_eq!(blocks(2), vec![(10, 6), (5, 5), (0, 5)]);
    }

    #[test]
    fn foreign_entries_and_bad_keys() {
        let fp = 0x0123_4567_89ab_cdefu64;
        let key = keys(fp, 3).unwrap()[0];
        // An entry without the key is left out; a key no fingerprint has is an error.
        let mut n = 0;
        pairs_of_key(key, 3, &[(fp, 1), (fp, 2), (!fp, 3)], &mut |_, _, _| n += 1).unwrap();
        assert_eq!(n, 1);
        assert_eq!(pairs_of_key(-1, 3, &[(fp, 1)], &mut |_, _, _| {}), Err(KeyError::Key(-1)));
        assert_eq!(pairs_of_key(4 << 16, 3, &[(fp, 1)], &mut |_, _, _| {}), Err(KeyError::Key(4 << 16)));
        assert_eq!(pairs_of_key(63, 11, &[] as &[(u64, u8)], &mut |_, _, _| {}), Ok(()));
        assert_eq!(pairs_of_key(64, 11, &[] as &[(u64, u8)], &mut |_, _, _| {}), Err(KeyError::Key(64)));
        assert_eq!(pairs_of_key(0, 12, &[] as &[(u64, u8)], &mut |_, _, _| {}), Err(KeyError::Radius(12)));
        assert_eq!(keys(fp, 12), None);
    }
}
