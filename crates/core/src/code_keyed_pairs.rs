//! All pairs of binary codes within `k` bits spread over machines: the counterpart of
//! [`crate::keyed_pairs`] for codes of any length (`bit(n)`), by which a sharded table finds the
//! pairs of a column of codes (each row moved to the shard of each of its keys, each shard pairing
//! its keys, only the pairs coming back).
//!
//! One pigeonhole makes the keys: a code of `bits` bits is cut into `k + 1` blocks ([`blocks`]);
//! two codes at most `k` bits apart agree exactly on at least one block. A code's keys are its
//! `k + 1` (block number, hash of the block's bits and of the code's length) pairs ([`keys`]); a pair
//! is reported under the key of its first equal block ([`first_equal_block`]), so over all keys
//! every pair within `k` comes out exactly once. Within a key the codes are looked up in a
//! [`CodeNearSet`] (a multi-index over all their bits), so a crowded key costs about its lookups,
//! not the square of its rows. A row moves `k + 1` times: the radius is kept to
//! [`MAX_CODE_KEYED_RADIUS`].

use crate::code_dedup::CodeNearSet;
use crate::dedup::NearSetError;
use crate::interrupt::{Interrupt, STEP};
use crate::multi_index::hamming_bytes;

/// The largest radius the keys serve (each row is filed under `k + 1` keys).
pub const MAX_CODE_KEYED_RADIUS: u32 = 64;

/// Bits of a key below the block number: the block's hash.
const HASH_BITS: u32 = 48;

/// The `k + 1` blocks of a code of `bits` bits, as (first bit, width), in order, the wider first
/// (blocks of no bits when `k` is not below `bits`: every code agrees on those).
pub fn blocks(bits: u32, k: u32) -> Vec<(u32, u32)> {
    let count = k + 1;
    let mut start = 0;
    (0..count)
        .map(|j| {
            let width = bits / count + u32::from(j < bits % count);
            start += width;
            (start - width, width)
        })
        .collect()
}

/// Bit `i` of a code (the first bit is the most significant bit of the first byte).
fn bit(code: &[u8], i: u32) -> bool {
    code[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
}

/// Whether codes `a` and `b` agree on the bits of `block`.
fn block_equal(a: &[u8], b: &[u8], (start, width): (u32, u32)) -> bool {
    let end = start + width;
    let mut i = start;
    // Bit by bit up to a byte boundary, then whole bytes, then the rest bit by bit.
    while i < end && i % 8 != 0 {
        if bit(a, i) != bit(b, i) {
            return false;
        }
        i += 1;
    }
    let whole = (end - i) / 8;
    let (first, last) = ((i / 8) as usize, (i / 8 + whole) as usize);
    if a[first..last] != b[first..last] {
        return false;
    }
    i += whole * 8;
    (i..end).all(|i| bit(a, i) == bit(b, i))
}

/// FNV-1a-64 of the code's length and of the bits of `block`, cut to [`HASH_BITS`].
fn block_hash(code: &[u8], bits: u32, (start, width): (u32, u32)) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |byte: u8| {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    };
    bits.to_le_bytes().into_iter().for_each(&mut feed);
    let mut byte = 0u8;
    for (n, i) in (start..start + width).enumerate() {
        byte = byte << 1 | u8::from(bit(code, i));
        if n % 8 == 7 {
            feed(byte);
            byte = 0;
        }
    }
    if width % 8 != 0 {
        feed(byte);
    }
    hash & ((1 << HASH_BITS) - 1)
}

/// The keys of a code of `bits` bits (`code`, `ceil(bits / 8)` bytes) for pairs within `k`: `k + 1`
/// of them, each a non-negative integer. `None` if `k` is above [`MAX_CODE_KEYED_RADIUS`].
pub fn keys(code: &[u8], bits: u32, k: u32) -> Option<Vec<i64>> {
    if k > MAX_CODE_KEYED_RADIUS {
        return None;
    }
    let keys = blocks(bits, k)
        .into_iter()
        .enumerate()
        .map(|(j, block)| ((j as u64) << HASH_BITS | block_hash(code, bits, block)) as i64)
        .collect();
    Some(keys)
}

/// The first block (of [`blocks`]`(bits, k)`) on which `a` and `b` agree, if any: the key a pair
/// within `k` is reported under.
pub fn first_equal_block(a: &[u8], b: &[u8], bits: u32, k: u32) -> Option<u32> {
    blocks(bits, k).into_iter().position(|block| block_equal(a, b, block)).map(|j| j as u32)
}

/// Why a key's codes cannot be paired.
#[derive(Debug, PartialEq, Eq)]
pub enum CodeKeyError {
    /// The radius is above [`MAX_CODE_KEYED_RADIUS`].
    Radius(u32),
    /// No code has this key at this radius.
    Key(i64),
    /// The set of the key's codes does not fit in memory.
    OutOfMemory,
}

/// Every pair of the codes `codes` (`count` codes of `bits` bits, `ceil(bits / 8)` bytes each, one
/// after the other) within `k` that is reported under `key` (its first equal block is the key's), to
/// `on_pair(i, j, distance)` with `i < j` their positions. Codes that do not have `key` are left
/// out. `interrupt` is called between pieces of the work.
pub fn pairs_of_key(
    key: i64,
    k: u32,
    bits: u32,
    codes: &[u8],
    count: usize,
    on_pair: &mut dyn FnMut(usize, usize, u32),
    interrupt: Interrupt,
) -> Result<(), CodeKeyError> {
    if k > MAX_CODE_KEYED_RADIUS {
        return Err(CodeKeyError::Radius(k));
    }
    let bytes = bits.div_ceil(8) as usize;
    assert_eq!(codes.len(), count * bytes, "count codes of bits bits");
    let blocks = blocks(bits, k);
    let number = u64::try_from(key).ok().map(|key| key >> HASH_BITS).filter(|&j| j < blocks.len() as u64);
    let Some(number) = number else { return Err(CodeKeyError::Key(key)) };
    let block = blocks[number as usize];
    let hash = key as u64 & ((1 << HASH_BITS) - 1);
    let code = |i: usize| &codes[i * bytes..(i + 1) * bytes];
    // The codes that have the key (a code whose block hashes alike but differs is left out too).
    let mut members: Vec<usize> = Vec::new();
    for i in 0..count {
        if i % STEP == STEP - 1 {
            interrupt.check();
        }
        if block_hash(code(i), bits, block) == hash
            && members.first().is_none_or(|&m| block_equal(code(m), code(i), block))
        {
            members.try_reserve(1).map_err(|_| CodeKeyError::OutOfMemory)?;
            members.push(i);
        }
    }
    let mut flat = Vec::new();
    flat.try_reserve_exact(members.len() * bytes).map_err(|_| CodeKeyError::OutOfMemory)?;
    members.iter().for_each(|&i| flat.extend_from_slice(code(i)));
    let set = CodeNearSet::new(flat, members.len(), bits, k, interrupt).map_err(|e| match e {
        NearSetError::OutOfMemory | NearSetError::RadiusOutOfRange => CodeKeyError::OutOfMemory,
    })?;
    let mut near = Vec::new();
    for (m, &i) in members.iter().enumerate() {
        // (a check for each member: it may be within k of every other, all found by one probe)
        interrupt.check();
        near.clear();
        let mut refused = false;
        set.for_each_near(
            code(i),
            &mut |n| {
                if n > m && !refused {
                    refused = near.try_reserve(1).is_err();
                    if !refused {
                        near.push(n);
                    }
                }
            },
            interrupt,
        );
        if refused {
            return Err(CodeKeyError::OutOfMemory);
        }
        near.sort_unstable();
        near.dedup();
        for &n in &near {
            let j = members[n];
            let d = hamming_bytes(code(i), code(j)).expect("codes of one length");
            if first_equal_block(code(i), code(j), bits, k) == Some(number as u32) {
                on_pair(i, j, d);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn blocks_cover_the_code_once() {
        for (bits, k) in [(256, 0), (256, 8), (13, 3), (64, 63), (7, 10), (4096, 64)] {
            let blocks = blocks(bits, k);
            assert_eq!(blocks.len(), k as usize + 1);
            assert_eq!(blocks.iter().map(|b| b.1).sum::<u32>(), bits);
            let widths: BTreeSet<u32> = blocks.iter().map(|b| b.1).collect();
            assert!(widths.last().unwrap() - widths.first().unwrap() <= 1, "{bits} {k}");
            assert!(blocks.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        }
    }

    /// Over all keys, every pair within k exactly once, equal to brute force: codes in clusters
    /// (near copies of a few bases), of lengths that are and are not multiples of 8.
    #[test]
    fn every_pair_within_k_once_over_all_keys() {
        let mut state = 0x1234_5678_9abc_def1u64;
        for (bits, k, count) in [(256u32, 8u32, 400usize), (64, 3, 300), (13, 2, 200), (1024, 40, 120), (256, 0, 200)] {
            let bytes = bits.div_ceil(8) as usize;
            let bases: Vec<Vec<u8>> =
                (0..count / 10 + 1).map(|_| (0..bytes).map(|_| next(&mut state) as u8).collect()).collect();
            let mut codes = Vec::new();
            for _ in 0..count {
                let mut code = bases[next(&mut state) as usize % bases.len()].clone();
                for _ in 0..next(&mut state) % u64::from(k + 4) {
                    let b = (next(&mut state) % u64::from(bits)) as usize;
                    code[b / 8] ^= 0x80 >> (b % 8);
                }
                if bits % 8 != 0 {
                    *code.last_mut().unwrap() &= 0xFFu8 << (8 - bits % 8);
                }
                codes.extend_from_slice(&code);
            }
            let code = |i: usize| &codes[i * bytes..(i + 1) * bytes];
            let mut by_key: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
            for i in 0..count {
                for key in keys(code(i), bits, k).unwrap() {
                    by_key.entry(key).or_default().push(i);
                }
            }
            let mut got: Vec<(usize, usize, u32)> = Vec::new();
            for (&key, rows) in &by_key {
                // Each key with its rows only, and with every row (the others are left out).
                let mut flat = Vec::new();
                rows.iter().for_each(|&i| flat.extend_from_slice(code(i)));
                let mut once = Vec::new();
                pairs_of_key(
                    key,
                    k,
                    bits,
                    &flat,
                    rows.len(),
                    &mut |a, b, d| once.push((rows[a], rows[b], d)),
                    Interrupt::NEVER,
                )
                .unwrap();
                let mut all = Vec::new();
                pairs_of_key(key, k, bits, &codes, count, &mut |a, b, d| all.push((a, b, d)), Interrupt::NEVER)
                    .unwrap();
                assert_eq!(once, all, "{bits} bits, k {k}");
                got.extend(once);
            }
            got.sort_unstable();
            let mut want = Vec::new();
            for i in 0..count {
                for j in i + 1..count {
                    let d = hamming_bytes(code(i), code(j)).unwrap();
                    if d <= k {
                        want.push((i, j, d));
                    }
                }
            }
            assert!(want.len() > count / 5, "{bits} bits, k {k}: {} pairs", want.len());
            assert_eq!(got, want, "{bits} bits, k {k}");
        }
    }

    #[test]
    fn refuses_radii_and_keys_out_of_range() {
        assert_eq!(keys(&[0; 32], 256, MAX_CODE_KEYED_RADIUS + 1), None);
        let run = |key: i64, k: u32| pairs_of_key(key, k, 8, &[1, 2], 2, &mut |_, _, _| {}, Interrupt::NEVER);
        assert_eq!(run(0, MAX_CODE_KEYED_RADIUS + 1), Err(CodeKeyError::Radius(MAX_CODE_KEYED_RADIUS + 1)));
        assert_eq!(run(-1, 3), Err(CodeKeyError::Key(-1)));
        assert_eq!(run(4 << HASH_BITS, 3), Err(CodeKeyError::Key(4 << HASH_BITS)));
        assert_eq!(run(3 << HASH_BITS, 3), Ok(()));
    }

    /// Many copies of one code (each within k of every other, all found by one probe): the work
    /// is quadratic, and checks come between the members, not only every STEP codes.
    #[test]
    fn copies_of_one_code_are_interruptible() {
        let (bits, k, count) = (128u32, 3u32, 3000usize);
        let code = [0x5au8; 16];
        let codes: Vec<u8> = (0..count).flat_map(|_| code).collect();
        let key = keys(&code, bits, k).unwrap()[0];
        let (stopped, calls) = crate::interrupt::tests::run_stopping(usize::MAX, |interrupt| {
            pairs_of_key(key, k, bits, &codes, count, &mut |_, _, _| {}, interrupt)
        });
        assert!(!stopped && calls >= count, "{calls} checks for {count} copies");
    }
}
