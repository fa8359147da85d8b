//! The layout of `super` against brute force.

use super::*;
use crate::multi_index::{self, hamming_bytes};

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// An in-memory index: directories and (low, ordinal) entries per indexed segment.
struct Memory {
    directories: Vec<Vec<u32>>,
    entries: Vec<Vec<(u16, u32)>>,
}

impl Memory {
    fn build(layout: &Layout, codes: &[Vec<u8>]) -> Memory {
        let mut directories = Vec::new();
        let mut entries = Vec::new();
        for i in 0..layout.indexed {
            let sorted = segment_entries(layout, i, codes.iter().map(|c| c.as_slice())).unwrap();
            let split: Vec<(u32, u16, u32)> = sorted
                .iter()
                .map(|&(value, ordinal)| {
                    let (prefix, low) = layout.split(i, value);
                    (prefix, low, ordinal)
                })
                .collect();
            let mut counts = vec![0u32; layout.directory_len(i) - 1];
            for &(value, _) in &sorted {
                counts[layout.split(i, value).0 as usize] += 1;
            }
            directories.push(directory(split.iter().map(|e| e.0), layout.directory_len(i)).unwrap());
            assert_eq!(directory_of_counts(&counts).unwrap(), directories[i as usize]);
            entries.push(split.iter().map(|e| (e.1, e.2)).collect());
        }
        Memory { directories, entries }
    }
}

impl Segments for Memory {
    fn directory(&mut self, i: u32, prefix: u32) -> u32 {
        self.directories[i as usize][prefix as usize]
    }
    fn low(&mut self, i: u32, position: u32) -> u16 {
        self.entries[i as usize][position as usize].0
    }
    fn ordinal(&mut self, i: u32, position: u32) -> u32 {
        self.entries[i as usize][position as usize].1
    }
}

/// `rows` random codes of `bits` bits, every 10th a copy of an earlier one with a few bits
/// flipped (up to 40), sorted (the code store's order).
fn planted(rows: usize, bits: u32, seed: u64) -> Vec<Vec<u8>> {
    let mut state = seed;
    let bytes = bits.div_ceil(8) as usize;
    let pad = (bytes * 8) as u32 - bits;
    let mut codes: Vec<Vec<u8>> = Vec::with_capacity(rows);
    for n in 0..rows {
        let mut code: Vec<u8> = if n % 10 == 9 {
            let mut code = codes[xorshift(&mut state) as usize % n].clone();
            for _ in 0..xorshift(&mut state) % 41 {
                let bit = (xorshift(&mut state) % u64::from(bits)) as usize;
                code[bit / 8] ^= 0x80 >> (bit % 8);
            }
            code
        } else {
            (0..bytes).map(|_| xorshift(&mut state) as u8).collect()
        };
        code[bytes - 1] &= 0xffu8 << pad;
        codes.push(code);
    }
    codes.sort();
    codes
}

/// A query: one of `codes` with `flips` bits flipped at random, or a random code (`random`).
fn query_of(codes: &[Vec<u8>], bits: u32, state: &mut u64, random: bool, flips: u32) -> Vec<u8> {
    let mut query = codes[xorshift(state) as usize % codes.len()].clone();
    if random {
        query.iter_mut().for_each(|b| *b = xorshift(state) as u8);
    }
    for _ in 0..flips {
        let bit = (xorshift(state) % u64::from(bits)) as usize;
        query[bit / 8] ^= 0x80 >> (bit % 8);
    }
    let bytes = query.len();
    query[bytes - 1] &= 0xffu8 << ((bytes * 8) as u32 - bits);
    query
}

fn check_exact(rows: usize, bits: u32, seed: u64, layout_rows: u64) {
    check_exact_indexing(rows, bits, seed, layout_rows, DEFAULT_INDEXED_SEGMENTS);
}

fn check_exact_indexing(rows: usize, bits: u32, seed: u64, layout_rows: u64, segments: u32) {
    let codes = planted(rows, bits, seed);
    let layout = Layout::for_table(bits, layout_rows, segments).unwrap();
    assert_eq!(layout.indexed, layout.plan.count.min(segments.max(1)));
    assert!(layout.is_valid(), "{layout:?}");
    let mut memory = Memory::build(&layout, &codes);
    let mut state = seed ^ 0x5555;
    for q in 0..40 {
        // Queries: stored codes with a few bits flipped, and random codes.
        let query = query_of(&codes, bits, &mut state, q % 4 == 3, q % 7);
        for k in 0..=40 {
            let expected: Vec<u32> =
                (0..rows as u32).filter(|&o| hamming_bytes(&codes[o as usize], &query).unwrap() <= k).collect();
            let Some(radii) = layout.radii(k, rows as u64) else { continue };
            let found =
                candidates(&layout, &radii, k, &query, &mut memory, usize::MAX, crate::Interrupt::NEVER).unwrap();
            assert!(found.windows(2).all(|w| w[0] < w[1]));
            let within: Vec<u32> =
                found.into_iter().filter(|&o| hamming_bytes(&codes[o as usize], &query).unwrap() <= k).collect();
            assert_eq!(within, expected, "{bits} bits, k {k}, layout {layout:?}");
        }
    }
}

#[test]
fn lookups_equal_brute_force() {
    check_exact(10_000, 256, 0x1234_5678_9abc_def1, 10_000);
    check_exact(10_000, 64, 0x0f0f_1234_5678_9abc, 10_000);
    // 1,024 bits: every one of its 64 segments indexed.
    check_exact(3_000, 1024, 0x2468_ace0_1357_9bdf, 3_000);
    // Wider segments (as for ten million rows) over a small table, and odd lengths.
    check_exact(5_000, 256, 0x1111_2222_3333_4444, 10_000_000);
    check_exact(2_000, 100, 0x7777_2222_3333_4444, 1 << 30);
    check_exact(500, 7, 0x7777_2222_3333_9999, 500);
}

/// `WITH (segments = s)`: 16 of the 64 segments of a 1,024-bit code indexed, one of them, and
/// more than the plan has (all of them).
#[test]
fn lookups_equal_brute_force_whatever_the_segments_indexed() {
    check_exact_indexing(3_000, 1024, 0x2468_ace0_1357_9bdf, 3_000, 16);
    check_exact_indexing(2_000, 1024, 0x1357_9bdf_2468_ace0, 2_000, 1);
    check_exact_indexing(2_000, 256, 0x0f0f_2468_ace0_1357, 2_000, 40);
    check_exact_indexing(1_000, 100, 0x7777_9bdf_3333_4444, 1_000, 0);
}

/// The slack filter of [`candidates`] keeps every row within `k`, whatever radii it is given
/// (`k + 1` to `k + 7` units spread at random over the indexed segments), and keeps fewer rows
/// than were met once the radii have more units than `k + 1`: 256 bits cut as for ten million
/// rows (a last segment of 14 bits), 100 bits (a last one of 2), 12 bits in one segment, and 7 bits
/// (k up to and beyond the length).
#[test]
fn slack_filter_keeps_every_row_within_k() {
    for (rows, bits, layout_rows, seed) in [
        (4_000usize, 256u32, 10_000_000u64, 0x0bad_cafe_1234_5678u64),
        (3_000, 100, 1 << 30, 0x1357_2468_0bad_f00d),
        (1_000, 12, 1_000, 0x2222_3333_4444_5555),
        (300, 7, 300, 0x9999_8888_7777_6666),
    ] {
        let codes = planted(rows, bits, seed);
        let layout = Layout::for_table(bits, layout_rows, DEFAULT_INDEXED_SEGMENTS).unwrap();
        let mut memory = Memory::build(&layout, &codes);
        let mut state = seed ^ 0xaaaa;
        let mut filtered = 0usize;
        for q in 0..6 {
            let mut query = codes[xorshift(&mut state) as usize % rows].clone();
            if q % 3 == 2 {
                query.iter_mut().for_each(|b| *b = xorshift(&mut state) as u8);
            }
            for _ in 0..q % 5 {
                let bit = (xorshift(&mut state) % u64::from(bits)) as usize;
                query[bit / 8] ^= 0x80 >> (bit % 8);
            }
            let bytes = query.len();
            query[bytes - 1] &= 0xffu8 << ((bytes * 8) as u32 - bits);
            let ks = [0, 1, 2, 3, 5, 8, 12, 16, 24, 32, 40].into_iter().filter(|&k| k <= bits.min(40));
            for k in ks.chain([bits, bits + 3]) {
                let expected: Vec<u32> =
                    (0..rows as u32).filter(|&o| hamming_bytes(&codes[o as usize], &query).unwrap() <= k).collect();
                for extra in 0..=6u32 {
                    // k + 1 + extra units at random: a radius of at most 3 in a wide segment, else
                    // up to the segment's width and beyond.
                    let mut budgets = vec![0u32; layout.indexed as usize];
                    let cap = |i: u32| if layout.plan.width_of(i) > 12 { 4 } else { layout.plan.width_of(i) + 3 };
                    let mut placed = 0;
                    for _ in 0..(k + 1 + extra) * 8 {
                        if placed == k + 1 + extra {
                            break;
                        }
                        let i = (xorshift(&mut state) % u64::from(layout.indexed)) as usize;
                        if budgets[i] < cap(i as u32) {
                            budgets[i] += 1;
                            placed += 1;
                        }
                    }
                    if placed < k + 1 + extra {
                        continue;
                    }
                    let radii: Vec<Option<u32>> = budgets.iter().map(|b| b.checked_sub(1)).collect();
                    let found =
                        candidates(&layout, &radii, k, &query, &mut memory, usize::MAX, crate::Interrupt::NEVER)
                            .unwrap();
                    assert!(found.windows(2).all(|w| w[0] < w[1]));
                    let within: Vec<u32> = found
                        .iter()
                        .copied()
                        .filter(|&o| hamming_bytes(&codes[o as usize], &query).unwrap() <= k)
                        .collect();
                    assert_eq!(within, expected, "{bits} bits, k {k}, radii {radii:?}");
                    // Every row met, unfiltered (as for a lookup within units - 1 bits).
                    let units = multi_index::units(&radii) as u32;
                    let met = candidates(
                        &layout,
                        &radii,
                        units - 1,
                        &query,
                        &mut memory,
                        usize::MAX,
                        crate::Interrupt::NEVER,
                    )
                    .unwrap();
                    assert!(found.iter().all(|o| met.binary_search(o).is_ok()));
                    if extra == 0 {
                        assert_eq!(found, met);
                    }
                    filtered += met.len() - found.len();
                }
            }
        }
        assert!(filtered > 0, "{bits} bits: the filter never dropped a row");
    }
}

/// The rounds of a nearest-rows search through [`Meetings`]: each round within `r` (0, 1, 2, 3, 4,
/// 6, 9, ...) probes at the radii of a lookup within `r`, reads the rows it has not read, and
/// hands out the rows read (now or before) between the last round's radius and `r`: every row
/// within each radius exactly once, as brute force has them. With every segment of a 1,024-bit
/// code indexed, most rounds keep the rows met before.
#[test]
fn rounds_of_meetings_hand_out_each_row_once() {
    for (rows, bits, segments, seed) in [
        (3_000usize, 1024u32, MAX_INDEXED_SEGMENTS, 0x0123_4567_89ab_cdefu64),
        (3_000, 1024, 16, 0x1111_4567_89ab_cdef),
        (4_000, 256, DEFAULT_INDEXED_SEGMENTS, 0x2222_4567_89ab_cdef),
        (500, 7, DEFAULT_INDEXED_SEGMENTS, 0x3333_4567_89ab_cdef),
    ] {
        let codes = planted(rows, bits, seed);
        let layout = Layout::for_table(bits, rows as u64, segments).unwrap();
        let mut memory = Memory::build(&layout, &codes);
        let mut state = seed ^ 0x7777;
        let mut kept_rounds = 0;
        let mut unchanged_reads = 0;
        for q in 0..12 {
            let query = query_of(&codes, bits, &mut state, q % 4 == 3, q % 5);
            let distance = |o: u32| hamming_bytes(&codes[o as usize], &query).unwrap();
            let mut meetings = Meetings::default();
            let mut carry: Vec<(u32, u32)> = Vec::new();
            let mut handed: Vec<u32> = Vec::new();
            let mut last: Option<u32> = None;
            let mut r = 0;
            while r <= bits.min(64) {
                let Some(radii) = layout.radii(r, rows as u64) else { break };
                let read_before: Vec<u64> = meetings.met.iter().copied().filter(|m| m & READ != 0).collect();
                let kept =
                    meetings.probe(&layout, &radii, &query, &mut memory, usize::MAX, crate::Interrupt::NEVER).unwrap();
                if kept {
                    kept_rounds += 1;
                    // The rows read before are kept as they were: their meetings in the segments
                    // probed since were dropped, not summed.
                    let read_after: Vec<u64> = meetings.met.iter().copied().filter(|m| m & READ != 0).collect();
                    assert_eq!(read_after, read_before, "{bits} bits, {segments} segments, round {r}");
                    unchanged_reads += read_before.len();
                } else {
                    carry.clear();
                }
                assert!(meetings.units() > u64::from(r));
                let mut round: Vec<(u32, u32)> = Vec::new();
                for o in meetings.unread_within(r).unwrap() {
                    let d = distance(o);
                    if d > r {
                        carry.push((d, o));
                    } else if last.is_none_or(|last| d > last) {
                        round.push((d, o));
                    }
                }
                round.extend(carry.iter().filter(|&&(d, _)| d <= r));
                carry.retain(|&(d, _)| d > r);
                round.sort_unstable();
                let expected: Vec<(u32, u32)> = {
                    let mut e: Vec<(u32, u32)> = (0..rows as u32)
                        .map(|o| (distance(o), o))
                        .filter(|&(d, _)| d <= r && last.is_none_or(|last| d > last))
                        .collect();
                    e.sort_unstable();
                    e
                };
                assert_eq!(round, expected, "{bits} bits, {segments} segments, round {r}");
                handed.extend(round.iter().map(|&(_, o)| o));
                last = Some(r);
                r = if r < 4 { r + 1 } else { r + r / 2 };
            }
            let mut unique = handed.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), handed.len());
        }
        if bits == 1024 && segments == MAX_INDEXED_SEGMENTS {
            assert!(kept_rounds >= 12 * 8, "{kept_rounds} rounds kept the rows met before");
            assert!(unchanged_reads > 200, "{unchanged_reads} rows read before a round that kept them");
        }
    }
}

/// The radii a lookup takes are complete (at least `k + 1` units) and, among many rows, take
/// extra units for the filter at k = 16 and 32 over 256 bits; their expected work is read codes
/// far fewer than candidates met.
#[test]
fn lookup_radii_buy_slack() {
    for rows in [1_000u64, 2_000_000, 10_000_000] {
        let layout = Layout::for_table(256, rows, DEFAULT_INDEXED_SEGMENTS).unwrap();
        for k in 0..=64 {
            let Some(radii) = layout.radii(k, rows) else { continue };
            assert!(multi_index::units(&radii) > u64::from(k));
            assert!(multi_index::units(&radii) <= u64::from(k + 1 + multi_index::MAX_EXTRA_UNITS));
        }
    }
    let layout = Layout::for_table(256, 10_000_000, DEFAULT_INDEXED_SEGMENTS).unwrap();
    for k in [16, 32] {
        let radii = layout.radii(k, 10_000_000).unwrap();
        assert!(multi_index::units(&radii) > u64::from(k + 1), "k {k}: {radii:?}");
        let work = layout.work(&radii, k, 10_000_000);
        assert!(work.checks * 4.0 < work.candidates, "k {k}: {work:?}");
    }
    // Nothing to probe at k >= bits over short codes.
    assert_eq!(Layout::for_table(7, 300, DEFAULT_INDEXED_SEGMENTS).unwrap().radii(7, 300), None);
}

#[test]
fn layouts() {
    for bits in [1, 7, 64, 100, 256, 1000, 1024, 4096] {
        for rows in [0u64, 1, 255, 1000, 20_000, 1_000_000, 10_000_000, 1 << 40] {
            let layout = Layout::for_table(bits, rows, DEFAULT_INDEXED_SEGMENTS).unwrap();
            assert!(layout.is_valid(), "{bits} {rows} {layout:?}");
            for i in 0..layout.indexed {
                assert!(layout.low_bits_of(i) <= MAX_LOW_BITS);
            }
        }
    }
    let layout = Layout::for_table(1024, 1_000_000, DEFAULT_INDEXED_SEGMENTS).unwrap();
    assert_eq!((layout.indexed, layout.plan.count, layout.prefix_bits), (52, 52, 16));
    let layout = Layout::for_table(1024, 1_000_000, 16).unwrap();
    assert_eq!((layout.indexed, layout.plan.count, layout.prefix_bits), (16, 52, 16));
    assert_eq!(layout.indexed_plan().count, 16);
    assert_eq!(Layout::for_table(256, 20_000, DEFAULT_INDEXED_SEGMENTS).unwrap().prefix_bits, 15);
    // One byte of low bits an entry up to 8 low bits (1M rows: 20-bit segments, 16-bit prefix).
    assert_eq!(Layout::for_table(256, 1_000_000, DEFAULT_INDEXED_SEGMENTS).unwrap().low_bytes_of(0), 1);
    assert_eq!(Layout::for_table(256, 1 << 30, DEFAULT_INDEXED_SEGMENTS).unwrap().low_bytes_of(0), 2);
    // Damaged fields are refused.
    assert!(Layout { indexed: 52, ..layout }.is_valid());
    let all = Layout::for_table(1024, 1_000_000, 99).unwrap();
    assert_eq!((all.indexed, all.indexed_plan()), (52, all.plan));
    assert!(!Layout { indexed: 53, ..layout }.is_valid());
    assert!(!Layout { indexed: 0, ..layout }.is_valid());
    assert!(!Layout { prefix_bits: 3, ..layout }.is_valid());
}

#[test]
fn probe_runs() {
    let lows = [1u16, 3, 3, 3, 7, 9];
    assert_eq!(probe_run(0, 6, 3, |p| lows[p as usize]), 1..4);
    assert_eq!(probe_run(0, 6, 4, |p| lows[p as usize]), 4..4);
    assert_eq!(probe_run(2, 5, 9, |p| lows[p as usize]), 5..5);
    assert_eq!(probe_run(0, 6, 0, |p| lows[p as usize]), 0..0);
    assert_eq!(directory([0u32, 0, 2, 3, 3].into_iter(), 5).unwrap(), vec![0, 2, 2, 3, 5]);
    assert_eq!(directory_of_counts(&[2, 0, 1, 2]).unwrap(), vec![0, 2, 2, 3, 5]);
}

#[test]
fn smallest_in_passes_equals_a_sort() {
    let mut state = 99u64;
    let keys: Vec<(u32, u64)> =
        (0..5000).map(|_| ((xorshift(&mut state) % 50) as u32, xorshift(&mut state) % 2000)).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let mut pass = Smallest::new(37, after);
        keys.iter().for_each(|&key| pass.offer(key).unwrap());
        let (mut batch, all) = pass.finish(crate::Interrupt::NEVER);
        batch.dedup();
        after = batch.last().copied().or(after);
        out.extend(batch);
        if all {
            break;
        }
    }
    assert_eq!(out, sorted);
}

/// [`sort_by_ordinal`] orders by ordinal as a full sort does, keeping every meeting: small and
/// large inputs, ordinals of 1 to 32 bits, repeats.
#[test]
fn sort_by_ordinal_orders_by_ordinal() {
    let mut state = 0x0123_4567_89ab_cdefu64;
    for (len, ordinal_bits) in
        [(0usize, 1u32), (10, 3), (1023, 20), (1024, 1), (5000, 11), (5000, 12), (30_000, 20), (20_000, 32)]
    {
        let mask = if ordinal_bits == 32 { u64::from(u32::MAX) } else { (1u64 << ordinal_bits) - 1 };
        let mut met: Vec<u64> =
            (0..len).map(|_| ((xorshift(&mut state) & mask) << 32) | (xorshift(&mut state) % 7)).collect();
        let mut expected = met.clone();
        expected.sort_unstable();
        sort_by_ordinal(&mut met, crate::Interrupt::NEVER);
        assert!(met.windows(2).all(|w| w[0] >> 32 <= w[1] >> 32), "{len} x {ordinal_bits} bits");
        met.sort_unstable();
        assert_eq!(met, expected);
    }
}

/// [`sum_by_ordinal`] gives what a full sort and a sum of the slacks of each ordinal give: in
/// order already, by hashing (many meetings of few rows) and by sorting (rows met once or twice),
/// with large slacks kept at most [`SLACK`].
#[test]
fn sum_by_ordinal_equals_a_sort_and_sum() {
    let mut state = 0x0fed_cba9_8765_4321u64;
    for (len, base, spread, slacks) in [
        (0usize, 0u64, 1u64, 3u64),
        (63, 5, 10, 3),
        (64, 5, 10, 3),
        (64, 5, 16, 3),
        (64, 5, 17, 3),
        (5000, 40_000, 1000, 2),
        (5000, 40_000, 20_000, 2),
        (5000, 0, 1 << 20, 4),
        (300, u64::from(u32::MAX) - 50, 50, 3),
        (100, 7, 3, SLACK),
        (30_000, 0, 1 << 30, 1),
    ] {
        let mut met: Vec<u64> = (0..len)
            .map(|_| (base + xorshift(&mut state) % spread) << 32 | (1 + xorshift(&mut state) % slacks))
            .collect();
        let mut expected = met.clone();
        expected.sort_unstable();
        let mut summed: Vec<u64> = Vec::new();
        for m in expected {
            match summed.last_mut() {
                Some(last) if *last >> 32 == m >> 32 => {
                    *last = (*last >> 32) << 32 | ((*last & SLACK) + (m & SLACK)).min(SLACK)
                }
                _ => summed.push(m),
            }
        }
        sum_by_ordinal(&mut met, crate::Interrupt::NEVER);
        assert_eq!(met, summed, "{len} meetings around {base} within {spread}");
    }
    let mut sorted: Vec<u64> = (0..100u64).map(|at| (at / 3) << 32 | 1).collect();
    sum_by_ordinal(&mut sorted, crate::Interrupt::NEVER);
    assert_eq!(sorted, (0..34u64).map(|at| at << 32 | if at < 33 { 3 } else { 1 }).collect::<Vec<_>>());
}

/// A segment's tables that do not fit in memory are refused (`Err`), not an abort: here more
/// entries than an address space holds.
#[test]
fn tables_beyond_memory_are_refused() {
    let layout = Layout::for_table(256, 1000, DEFAULT_INDEXED_SEGMENTS).unwrap();
    let code = [0u8; 32];
    assert!(segment_entries(&layout, 0, std::iter::repeat_n(&code[..], usize::MAX)).is_err());
    assert!(directory(std::iter::empty(), usize::MAX).is_err());
}

/// Segments whose one prefix holds `u32::MAX` entries of low bits 0 (their ordinals are never to
/// be read: there is no memory for them).
struct Crowded;

impl Segments for Crowded {
    fn directory(&mut self, _: u32, prefix: u32) -> u32 {
        if prefix == 0 {
            0
        } else {
            u32::MAX
        }
    }

    fn low(&mut self, _: u32, _: u32) -> u16 {
        0
    }

    fn ordinal(&mut self, _: u32, _: u32) -> u32 {
        unreachable!("the ordinals are read through `ordinals`")
    }

    fn ordinals(&mut self, _: u32, _: std::ops::Range<u32>, _: u64, _: &[u64], _: &mut Vec<u64>) {
        panic!("the meetings were read with no room made for them")
    }
}

/// Whether this is the run of `test` under a limit of the address space of `kib` KiB: else runs
/// the test binary again for `test` alone under `ulimit -v` (so that the machine's memory does not
/// matter), asserts that it passed, and is `false`.
pub(crate) fn under_ulimit(kib: u64, test: &str) -> bool {
    const LIMITED: &str = "SIMHASH_CORE_TEST_ULIMIT";
    if std::env::var_os(LIMITED).is_some() {
        return true;
    }
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" --exact {test}"))
        .arg(std::env::current_exe().expect("the test binary"))
        .env(LIMITED, "1")
        .status()
        .expect("sh runs");
    assert!(status.success(), "{test} under ulimit -v {kib}: {status}");
    false
}

/// A lookup whose meetings do not fit in memory is refused (`None`: the caller compares the rows
/// whole) instead of growing its vector until the allocation aborts the process: here 32 GB of
/// meetings under an address space of 4 GB (the test runs itself again under `ulimit -v`, so that
/// the machine's memory does not matter).
#[test]
fn meetings_beyond_memory_are_refused() {
    if !under_ulimit(4_194_304, "code_index::tests::meetings_beyond_memory_are_refused") {
        return;
    }
    let layout = Layout::for_table(256, 1000, DEFAULT_INDEXED_SEGMENTS).unwrap();
    let mut radii = vec![None; layout.indexed as usize];
    radii[0] = Some(0);
    let query = [0u8; 32];
    assert_eq!(candidates(&layout, &radii, 0, &query, &mut Crowded, usize::MAX, crate::Interrupt::NEVER), None);
}

/// [`Layout::lookup`] gives what [`Layout::radii`] and [`Layout::work`] work out, the first time
/// and when remembered, for more lookups than a thread remembers.
#[test]
fn lookups_remembered_equal_lookups_worked_out() {
    for round in 0..2 {
        for (bits, rows, segments) in
            [(64u32, 1000u64, 4u32), (256, 1_000_000, 16), (1024, 1_000_000, 256), (1024, 5, 16)]
        {
            let layout = Layout::for_table(bits, rows, segments).unwrap();
            // (an index's rows change with its tail and VACUUM: the same layout, more rows)
            for rows in [rows, rows * 3] {
                for k in 0..=(REMEMBERED_LOOKUPS as u32 / 6) {
                    let worked_out =
                        layout.radii(k, rows).map(|radii| Lookup { work: layout.work(&radii, k, rows), radii });
                    assert_eq!(
                        layout.lookup(k, rows).as_deref(),
                        worked_out.as_ref(),
                        "round {round}: {layout:?} k {k}"
                    );
                }
            }
        }
    }
}

/// Under a limit of the address space (`ulimit -v`, in a child process), a pass whose keys outgrow
/// the memory the system grants keeps those it holds (its capacity shrinks to them) instead of
/// aborting, and passes of such batches still give every key in order.
#[test]
fn smallest_beyond_memory_keeps_what_it_holds() {
    if !under_ulimit(131_072, "code_index::tests::smallest_beyond_memory_keeps_what_it_holds") {
        return;
    }
    // 12M keys, 192 MB if all were kept, under a limit of 128 MB (offered in ascending order: once
    // a pass is full, the rest are skipped at once).
    const KEYS: u64 = 12 << 20;
    let mut after = None;
    let mut next = 0u64;
    let mut passes = 0;
    loop {
        let mut pass = Smallest::new(usize::MAX, after);
        for key in 0..KEYS {
            pass.offer((0, key)).expect("memory for the first key");
        }
        let (batch, all) = pass.finish(crate::Interrupt::NEVER);
        passes += 1;
        for &(_, key) in &batch {
            assert_eq!(key, next);
            next += 1;
        }
        after = batch.last().copied().or(after);
        if all {
            break;
        }
    }
    assert_eq!(next, KEYS);
    assert!(passes > 1, "every key fitted: {passes} pass");
}

/// Summing many meetings checks for interrupts as it goes, by hashing (many meetings of few rows)
/// and by the radix sort (rows met once).
#[test]
fn summing_meetings_is_interruptible() {
    use crate::interrupt::tests::run_stopping;
    let mut state = 0x5151_2323_4545_6767u64;
    let few_rows: Vec<u64> = (0..200_000).map(|_| (xorshift(&mut state) % 1000) << 32 | 1).collect();
    let many_rows: Vec<u64> = (0..200_000).map(|_| (xorshift(&mut state) % (1 << 30)) << 32 | 1).collect();
    for met in [few_rows, many_rows] {
        let sum = |interrupt: crate::Interrupt<'_>| sum_by_ordinal(&mut met.clone(), interrupt);
        let (stopped, calls) = run_stopping(usize::MAX, sum);
        assert!(!stopped && calls >= 8, "{calls} checks");
        assert!(run_stopping(2, sum).0);
    }
}
