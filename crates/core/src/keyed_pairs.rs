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

use crate::bucket_pairs::COMPARISONS_PER_PROGRESS;
use crate::buckets::{segment_value, MAX_PROBED_RADIUS};
use crate::distance::{hamming, SEGMENTS, SEGMENT_BITS};
use crate::pairs::{push, vec_with_room};

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
    let close = |m: u32| crate::distance::popcount(u64::from(segment_value(a, m) ^ segment_value(b, m))) <= radius;
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
    /// The system refused memory for the key's entries.
    OutOfMemory,
}

impl From<crate::pairs::OutOfMemory> for KeyError {
    fn from(_: crate::pairs::OutOfMemory) -> Self {
        KeyError::OutOfMemory
    }
}

/// What hears of the pairs of a key, a group of entries with one fingerprint at a time (their
/// positions in `entries`, ascending): `on_pairs(a, None, 0)` means every two entries of `a` (equal
/// fingerprints), `on_pairs(a, Some(b), distance)` every entry of `a` with every entry of `b`.
pub type OnGroupPairs<'a> = &'a mut dyn FnMut(&[u32], Option<&[u32]>, u32);

/// Every pair of `entries` within `k` that is reported under `key` ([`reported_under`]), to
/// `on_pairs`, a group of entries with one fingerprint at a time, so that many copies of one
/// fingerprint cost one comparison (and, where the caller wants groups, not pairs, one call).
/// Entries whose fingerprint does not have `key` are left out. `progress` is called every million
/// comparisons: the place to check for cancellation. Memory: two indexes per entry and one offset
/// per value of the bits outside the key's block (at most 2^11); [`KeyError::OutOfMemory`] when the
/// key's entries do not fit.
pub fn pairs_of_key(
    key: i32,
    k: u32,
    entries: &[u64],
    on_pairs: OnGroupPairs,
    progress: &mut dyn FnMut(),
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

    // Counting sort of the entries of the key by `rest`, then by fingerprint and position.
    let slots = 1usize << rest_bits;
    let mut start = vec![0u32; slots + 1];
    for &fp in entries.iter().filter(|&&fp| mine(fp)) {
        start[rest(fp) as usize + 1] += 1;
    }
    for i in 0..slots {
        start[i + 1] += start[i];
    }
    let mut next = start.clone();
    let mut sorted = vec_with_room(start[slots] as usize)?;
    sorted.resize(start[slots] as usize, 0u32);
    for (i, &fp) in entries.iter().enumerate().filter(|&(_, &fp)| mine(fp)) {
        let slot = &mut next[rest(fp) as usize];
        sorted[*slot as usize] = i as u32;
        *slot += 1;
    }
    // The groups of one fingerprint, slot by slot: `groups[group_start[slot]..group_start[slot + 1]]`.
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut group_start = vec![0usize; slots + 1];
    for slot in 0..slots {
        let run = &mut sorted[start[slot] as usize..start[slot + 1] as usize];
        run.sort_unstable_by_key(|&i| (entries[i as usize], i));
        let mut at = 0;
        while at < run.len() {
            let fp = entries[run[at] as usize];
            let len = run[at..].iter().take_while(|&&i| entries[i as usize] == fp).count();
            let offset = start[slot] as usize;
            push(&mut groups, offset + at..offset + at + len)?;
            at += len;
        }
        group_start[slot + 1] = groups.len();
    }

    let masks = crate::bucket_pairs::masks(rest_bits, radius);
    let group = |g: usize| &sorted[groups[g].clone()];
    let fingerprint = |g: usize| entries[sorted[groups[g].start] as usize];
    let mut comparisons = 0u64;
    let mut check = |a: usize, b: usize| {
        let (x, y) = (fingerprint(a), fingerprint(b));
        let distance = hamming(x, y);
        if distance <= k && reported_under(x, y, k, segment, block) {
            on_pairs(group(a), Some(group(b)), distance);
        }
        comparisons += 1;
        if comparisons.is_multiple_of(COMPARISONS_PER_PROGRESS) {
            progress();
        }
    };
    for slot in 0..slots {
        let here = group_start[slot]..group_start[slot + 1];
        if here.is_empty() {
            continue;
        }
        for &mask in &masks {
            let other = slot ^ mask as usize;
            if mask == 0 {
                for a in here.clone() {
                    for b in a + 1..here.end {
                        check(a, b);
                    }
                }
            } else if other > slot {
                for a in here.clone() {
                    for b in group_start[other]..group_start[other + 1] {
                        check(a, b);
                    }
                }
            }
        }
    }
    // Equal fingerprints pair with each other under their first key only.
    for (g, range) in groups.iter().enumerate() {
        let fp = fingerprint(g);
        if range.len() > 1 && reported_under(fp, fp, k, segment, block) {
            on_pairs(group(g), None, 0);
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
                let fps: Vec<u64> = entries.iter().map(|e| e.0).collect();
                let mut add = |a: usize, b: usize, d: u32| {
                    let (a, b) = (entries[a].1, entries[b].1);
                    assert!(found.insert((a.min(b), a.max(b)), d).is_none(), "pair {a} {b} twice at k = {k}");
                };
                let mut on_pairs = |a: &[u32], b: Option<&[u32]>, d: u32| match b {
                    None => {
                        for (i, &x) in a.iter().enumerate() {
                            for &y in &a[i + 1..] {
                                assert!(x < y);
                                add(x as usize, y as usize, d);
                            }
                        }
                    }
                    Some(b) => {
                        for &x in a {
                            for &y in b {
                                add(x as usize, y as usize, d);
                            }
                        }
                    }
                };
                pairs_of_key(key, k, &fps, &mut on_pairs, &mut || {}).unwrap();
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
    fn foreign_entries_bad_keys_and_copies() {
        let fp = 0x0123_4567_89ab_cdefu64;
        let key = keys(fp, 3).unwrap()[0];
        // An entry without the key is left out; copies of a fingerprint are one group, reported
        // under its first key only.
        let mut calls = Vec::new();
        let mut on_pairs = |a: &[u32], b: Option<&[u32]>, d: u32| {
            // (the two groups of a pair in either order)
            let (a, b) = match b {
                Some(b) if b < a => (b.to_vec(), Some(a.to_vec())),
                _ => (a.to_vec(), b.map(|b| b.to_vec())),
            };
            calls.push((a, b, d))
        };
        pairs_of_key(key, 3, &[fp, !fp, fp ^ 1, fp, fp], &mut on_pairs, &mut || {}).unwrap();
        calls.sort();
        assert_eq!(calls, vec![(vec![0, 3, 4], None, 0), (vec![0, 3, 4], Some(vec![2]), 1)]);
        let later = keys(fp, 3).unwrap()[1];
        let mut n = 0;
        pairs_of_key(later, 3, &[fp, fp], &mut |_, _, _| n += 1, &mut || {}).unwrap();
        assert_eq!(n, 0);
        let none = &mut |_: &[u32], _: Option<&[u32]>, _: u32| {};
        assert_eq!(pairs_of_key(-1, 3, &[fp], none, &mut || {}), Err(KeyError::Key(-1)));
        assert_eq!(pairs_of_key(4 << 16, 3, &[fp], none, &mut || {}), Err(KeyError::Key(4 << 16)));
        assert_eq!(pairs_of_key(63, 11, &[], none, &mut || {}), Ok(()));
        assert_eq!(pairs_of_key(64, 11, &[], none, &mut || {}), Err(KeyError::Key(64)));
        assert_eq!(pairs_of_key(0, 12, &[], none, &mut || {}), Err(KeyError::Radius(12)));
        assert_eq!(keys(fp, 12), None);
    }

    /// 100,000 copies of one fingerprint cost one group, not five billion comparisons.
    #[test]
    fn many_copies_are_one_group() {
        let fps = vec![42u64; 100_000];
        let mut calls = 0;
        for key in keys(42, 11).unwrap() {
            pairs_of_key(
                key,
                11,
                &fps,
                &mut |a, b, _| {
                    assert_eq!((a.len(), b), (100_000, None));
                    calls += 1;
                },
                &mut || panic!("no comparison to make"),
            )
            .unwrap();
        }
        assert_eq!(calls, 1);
    }
}
