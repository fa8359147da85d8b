//! `super` against plain comparison sorts (the build's code before these routines).

use super::*;
use crate::code_index::{self, directory, DEFAULT_INDEXED_SEGMENTS};
use crate::interrupt::sort_in_pieces;
use crate::interrupt::tests::run_stopping;
use crate::multi_index::SegmentPlan;

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// `rows` codes of `code_bytes` bytes, flat: some random, some copies of earlier ones, some alike
/// in their first bytes (a bit flipped near the end, or in their second 8 bytes), some all zeros or
/// all ones.
fn codes(rows: usize, code_bytes: usize, seed: u64) -> Vec<u8> {
    let mut state = seed;
    let mut codes: Vec<u8> = Vec::with_capacity(rows * code_bytes);
    for row in 0..rows {
        let kind = xorshift(&mut state) % 8;
        let start = codes.len();
        if row > 0 && kind < 2 {
            let other = (xorshift(&mut state) % row as u64) as usize;
            codes.extend_from_within(other * code_bytes..(other + 1) * code_bytes);
        } else if row > 0 && kind < 5 {
            let other = (xorshift(&mut state) % row as u64) as usize;
            codes.extend_from_within(other * code_bytes..(other + 1) * code_bytes);
            let byte = code_bytes - 1 - (xorshift(&mut state) as usize % code_bytes.min(3));
            codes[start + byte] ^= 1 << (xorshift(&mut state) % 8);
        } else if row > 0 && kind == 7 {
            let other = (xorshift(&mut state) % row as u64) as usize;
            codes.extend_from_within(other * code_bytes..(other + 1) * code_bytes);
            let byte = (8 + xorshift(&mut state) as usize % 8).min(code_bytes - 1);
            codes[start + byte] ^= 1 << (xorshift(&mut state) % 8);
        } else if kind == 5 {
            codes.extend(std::iter::repeat_n(if row % 2 == 0 { 0 } else { 0xff }, code_bytes));
        } else {
            codes.extend((0..code_bytes).map(|_| xorshift(&mut state) as u8));
        }
    }
    codes
}

/// What the build did before [`store_order`]: the row numbers sorted by code, then TID.
fn reference_order(codes: &[u8], code_bytes: usize, tids: &[u64]) -> Vec<usize> {
    let code = |row: usize| &codes[row * code_bytes..(row + 1) * code_bytes];
    let mut order: Vec<usize> = (0..tids.len()).collect();
    order.sort_unstable_by(|&a, &b| code(a).cmp(code(b)).then(tids[a].cmp(&tids[b])));
    order
}

/// The order of the code store ([`store_order`]).
fn order_of(codes: &[u8], code_bytes: usize, tids: &[u64], interrupt: Interrupt) -> Vec<u32> {
    let rows = tids.len();
    let mut order = vec![0u32; rows];
    store_order(codes, code_bytes, tids, |&t| t, &mut vec![0; rows], &mut order, interrupt);
    order
}

/// The codes in the code store's order.
fn sorted(codes: &[u8], code_bytes: usize, tids: &[u64]) -> Vec<u8> {
    let order = order_of(codes, code_bytes, tids, Interrupt::NEVER);
    order.iter().flat_map(|&r| codes[r as usize * code_bytes..(r as usize + 1) * code_bytes].iter().copied()).collect()
}

#[test]
fn rows_sort_as_by_code_then_tid() {
    for (rows, code_bytes) in [
        (0, 8),
        (1, 32),
        (2, 1),
        (3, 3),
        (1000, 1),
        (1000, 2),
        (5000, 8),
        (5000, 9),
        (5000, 32),
        (3000, 128),
        (70_000, 16),
    ] {
        let original = codes(rows, code_bytes, 0x1234_5678 + rows as u64 + code_bytes as u64);
        // TIDs in an order of their own (a scan that started in the middle of the table).
        let tids: Vec<u64> = (0..rows as u64).map(|r| (r * 7919 + 13) % (rows as u64).max(1) * 3).collect();
        let expected = reference_order(&original, code_bytes, &tids);
        let order = order_of(&original, code_bytes, &tids, Interrupt::NEVER);
        assert!(order.iter().map(|&r| r as usize).eq(expected), "{rows} rows of {code_bytes} bytes");
    }
}

#[test]
fn rows_of_one_code_sort_by_tid() {
    let rows = 4000;
    let codes = vec![0xa5u8; rows * 16];
    let tids: Vec<u64> = (0..rows as u64).rev().collect();
    let order = order_of(&codes, 16, &tids, Interrupt::NEVER);
    assert!(order.iter().map(|&r| tids[r as usize]).eq(0..rows as u64));
}

#[test]
fn bits_from_any_bit() {
    let code: Vec<u8> = (0..19u8).map(|b| b.wrapping_mul(73) ^ 0x5c).collect();
    let bit = |n: usize| n < code.len() * 8 && code[n / 8] >> (7 - n % 8) & 1 == 1;
    for from in 0..code.len() * 8 + 3 {
        let expected = (0..64).fold(0u64, |w, n| w << 1 | u64::from(bit(from + n)));
        assert_eq!(bits_at(&code, from), expected, "from bit {from}");
    }
}

/// The entries and directory as the build made them before [`segment_entries`] (value and ordinal
/// in a `u64`, sorted; the directory of the prefixes in order), from [`code_index::segment_entries`].
fn reference_segment(layout: &Layout, i: u32, codes: &[u8], code_bytes: usize) -> (Vec<u64>, Vec<u32>) {
    let sorted = code_index::segment_entries(layout, i, codes.chunks_exact(code_bytes)).unwrap();
    let entries = sorted.iter().map(|&(value, ordinal)| u64::from(value) << 32 | u64::from(ordinal)).collect();
    let directory =
        directory(sorted.iter().map(|&(value, _)| layout.split(i, value).0), layout.directory_len(i)).unwrap();
    (entries, directory)
}

#[test]
fn segments_sort_as_by_value_then_ordinal() {
    let custom = |bits, width, prefix_bits| {
        let plan = SegmentPlan::with_width(bits, width).unwrap();
        let layout = Layout { plan, indexed: plan.count.min(16), prefix_bits };
        assert!(layout.is_valid());
        layout
    };
    let layouts = [
        (Layout::for_table(256, 5000, DEFAULT_INDEXED_SEGMENTS).unwrap(), 5000),
        (Layout::for_table(64, 3000, DEFAULT_INDEXED_SEGMENTS).unwrap(), 3000),
        // Every segment of a long code indexed (the default: 64 here), and 16 of them (`WITH
        // (segments = 16)`).
        (Layout::for_table(1024, 2000, DEFAULT_INDEXED_SEGMENTS).unwrap(), 2000),
        (Layout::for_table(1024, 2000, 16).unwrap(), 2000),
        (Layout::for_table(20, 100, DEFAULT_INDEXED_SEGMENTS).unwrap(), 100),
        (Layout::for_table(7, 300, DEFAULT_INDEXED_SEGMENTS).unwrap(), 300),
        // Few prefixes (long runs) and two bytes of low bits; a prefix of whole segments.
        (custom(256, 20, 4), 4000),
        (custom(100, 24, 8), 4000),
        (custom(96, 12, 12), 1000),
        (Layout::for_table(256, 1, DEFAULT_INDEXED_SEGMENTS).unwrap(), 1),
    ];
    for (layout, rows) in layouts {
        let code_bytes = layout.plan.code_bits.div_ceil(8) as usize;
        let codes = codes(rows, code_bytes, 99 + rows as u64);
        let tids: Vec<u64> = (0..rows as u64).collect();
        assert_segments_as_reference(&layout, &sorted(&codes, code_bytes, &tids), code_bytes, rows);
    }
}

#[test]
fn sorts_in_pieces_sort() {
    let mut state = 7u64;
    let items: Vec<u64> = (0..10_000).map(|_| xorshift(&mut state) % 5000).collect();
    let mut expected = items.clone();
    expected.sort_unstable();
    for at_once in [1, 2, 100, 10_000] {
        let mut sorted = items.clone();
        sort_in_pieces(&mut sorted, &|a, b| a.cmp(b), at_once, Interrupt::NEVER);
        assert_eq!(sorted, expected, "pieces of {at_once}");
    }
}

#[test]
fn long_builds_check_for_interrupts() {
    let (rows, code_bytes) = (100_000, 32);
    let original = codes(rows, code_bytes, 5);
    let tids: Vec<u64> = (0..rows as u64).collect();
    let sort = |interrupt: Interrupt<'_>| order_of(&original, code_bytes, &tids, interrupt);
    let (stopped, calls) = run_stopping(usize::MAX, sort);
    assert!(!stopped && calls >= 3 * rows / STEP, "{calls} checks");
    assert!(run_stopping(2, sort).0);
    let layout = Layout::for_table(256, rows as u64, DEFAULT_INDEXED_SEGMENTS).unwrap();
    let sorted = sorted(&original, code_bytes, &tids);
    let segment = |interrupt: Interrupt<'_>| {
        segment_entries(&layout, 0, &sorted, code_bytes, &mut vec![0; rows], &mut vec![0; rows], interrupt)
    };
    let (stopped, calls) = run_stopping(usize::MAX, segment);
    assert!(!stopped && calls >= 3 * rows / STEP, "{calls} checks");
    assert!(run_stopping(2, segment).0);
}

#[test]
fn values_of_several_segments_at_once() {
    let layout = Layout::for_table(1000, 3000, code_index::MAX_INDEXED_SEGMENTS).unwrap();
    let (rows, code_bytes) = (3000, 125);
    let codes = codes(rows, code_bytes, 17);
    let order: Vec<u32> = (0..rows as u32).map(|r| (r * 1237 + 5) % rows as u32).collect();
    for n in [1, 3, 16, layout.plan.count as usize] {
        let mut first = 0;
        while first < layout.plan.count {
            let n = n.min((layout.plan.count - first) as usize);
            let mut values = vec![0u32; n * rows];
            segment_values(&layout, first, &codes, code_bytes, None, &mut values, Interrupt::NEVER);
            for (g, column) in (first..).zip(values.chunks_exact(rows)) {
                let expected: Vec<u32> = codes.chunks_exact(code_bytes).map(|c| layout.plan.segment(c, g)).collect();
                assert!(column == expected, "segment {g} in a group of {n}");
            }
            // Through an order: the values of the rows in that order.
            segment_values(&layout, first, &codes, code_bytes, Some(&order), &mut values, Interrupt::NEVER);
            for (g, column) in (first..).zip(values.chunks_exact(rows)) {
                let expected =
                    order.iter().map(|&r| layout.plan.segment(&codes[r as usize * code_bytes..][..code_bytes], g));
                assert!(column.iter().copied().eq(expected), "segment {g} in a group of {n}, in order");
            }
            first += n as u32;
        }
    }
}

/// Runs long enough for the counting sort by low bits (rows of a few codes, as clustered codes
/// give), and runs longer than it takes.
#[test]
fn long_runs_sort_as_by_value_then_ordinal() {
    let custom = |bits, width, prefix_bits| {
        let plan = SegmentPlan::with_width(bits, width).unwrap();
        Layout { plan, indexed: plan.count, prefix_bits }
    };
    let mut state = 3u64;
    for (layout, rows, kinds) in [
        (custom(64, 16, 12), 20_000, 40),
        (custom(64, 16, 8), 5000, 3),
        (custom(64, 20, 16), 4000, 7),
        (custom(64, 16, 1), COUNTED_RUN * 2 + 10, 5),
    ] {
        let code_bytes = 8;
        let centres: Vec<u64> = (0..kinds).map(|_| xorshift(&mut state)).collect();
        let mut codes: Vec<u8> = Vec::new();
        for _ in 0..rows {
            let centre = centres[(xorshift(&mut state) % kinds) as usize];
            // A few of the low bits of each segment flipped.
            let flips = xorshift(&mut state) & xorshift(&mut state) & 0x000f_000f_000f_000f;
            codes.extend_from_slice(&(centre ^ flips).to_be_bytes());
        }
        assert_segments_as_reference(&layout, &codes, code_bytes, rows);
    }
}

/// Every indexed segment's entries and directory from [`segment_entries`] equal the reference's.
fn assert_segments_as_reference(layout: &Layout, codes: &[u8], code_bytes: usize, rows: usize) {
    let (mut values, mut entries) = (vec![0u32; rows], vec![0u64; rows]);
    for i in 0..layout.indexed {
        let directory =
            segment_entries(layout, i, codes, code_bytes, &mut values, &mut entries, Interrupt::NEVER).unwrap();
        let (expected, expected_directory) = reference_segment(layout, i, codes, code_bytes);
        assert!(entries == expected, "entries of segment {i}, {layout:?}");
        assert_eq!(directory, expected_directory, "directory of segment {i}, {layout:?}");
    }
}

/// The segments made on a second thread: each handed over in order, after `first`, equal to the
/// reference's, with the values of one, several or all segments at once.
#[test]
fn segments_on_a_thread_as_reference() {
    let (rows, code_bits) = (3000, 1000);
    let code_bytes = 125;
    let codes = codes(rows, code_bytes, 23);
    let tids: Vec<u64> = (0..rows as u64).collect();
    let order = order_of(&codes, code_bytes, &tids, Interrupt::NEVER);
    let sorted = sorted(&codes, code_bytes, &tids);
    for segments in [1, 3, code_index::MAX_INDEXED_SEGMENTS] {
        let layout = Layout::for_table(code_bits, rows as u64, segments).unwrap();
        for at_once in [1, 4, layout.indexed as usize] {
            let mut events: Vec<String> = Vec::new();
            let spawned = std::cell::Cell::new(0);
            let result = segments_on_thread(
                &layout,
                &codes,
                code_bytes,
                &order,
                vec![0; rows * at_once],
                [vec![0; rows], vec![0; rows]],
                Interrupt::NEVER,
                || spawned.set(spawned.get() + 1),
                &mut events,
                |events| events.push("first".into()),
                |events, i, directory, entries| {
                    let (expected, expected_directory) = reference_segment(&layout, i, &sorted, code_bytes);
                    assert!(entries == expected, "entries of segment {i}, {layout:?}, {at_once} at once");
                    assert_eq!(directory, expected_directory, "directory of segment {i}");
                    events.push(format!("{i}"));
                },
            );
            assert_eq!(result, Ok(OnThread::Written));
            assert_eq!(spawned.get(), 1);
            let expected: Vec<String> =
                std::iter::once("first".into()).chain((0..layout.indexed).map(|i| format!("{i}"))).collect();
            assert_eq!(events, expected);
        }
    }
}

/// This thread unwinding (an error while writing, or an interrupt while waiting) stops the second
/// thread and unwinds out; the second thread failing is an error here.
#[test]
fn segments_on_a_thread_stop() {
    let (rows, code_bytes) = (200_000, 128);
    let codes = codes(rows, code_bytes, 31);
    let tids: Vec<u64> = (0..rows as u64).collect();
    let order = order_of(&codes, code_bytes, &tids, Interrupt::NEVER);
    let layout = Layout::for_table(1024, rows as u64, code_index::MAX_INDEXED_SEGMENTS).unwrap();
    let run = |order: &[u32], interrupt: Interrupt, fail_at: u32| {
        let mut written = 0;
        segments_on_thread(
            &layout,
            &codes,
            code_bytes,
            order,
            vec![0; rows],
            [vec![0; rows], vec![0; rows]],
            interrupt,
            || (),
            &mut written,
            |_| (),
            |written, i, _, _| {
                assert!(i != fail_at, "failing at segment {i}");
                *written += 1;
            },
        )
        .map(|on_thread| {
            assert_eq!(on_thread, OnThread::Written);
            written
        })
    };
    assert_eq!(run(&order, Interrupt::NEVER, u32::MAX), Ok(layout.indexed));
    // An error while writing segment 2.
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&order, Interrupt::NEVER, 2)));
    assert!(unwound.is_err());
    // An interrupt while waiting: the first check, before the first segment's wait, stops (it
    // does not depend on the other thread being slower than a wait, which it need not be).
    let (stopped, calls) = run_stopping(1, |interrupt| run(&order, interrupt, u32::MAX));
    assert!(stopped && calls == 1, "{calls} checks");
    // Checks are made however fast the other thread is: at least one a segment.
    let (stopped, calls) = run_stopping(usize::MAX, |interrupt| run(&order, interrupt, u32::MAX));
    assert!(!stopped && calls >= layout.indexed as usize, "{calls} checks");
    // The other thread failing (a row beyond the codes).
    let mut broken = order.clone();
    broken[rows / 2] = rows as u32;
    assert_eq!(run(&broken, Interrupt::NEVER, u32::MAX), Err(ThreadError::Failed));
}
