//! The in-memory build of an index of codes ([`crate::code_index`]), without pages: the rows put
//! in the code store's order (by code, then by TID) in place, and each indexed segment's entries
//! sorted by (value, ordinal) with its directory. The caller holds every code in one flat array
//! (`code_bytes` bytes a row) and allocates the buffers, so that it can account for them.
//!
//! Both orders are strict (a TID is unique, an ordinal too), so any correct sort gives the same
//! result: the tests compare with plain comparison sorts ([`segment_entries`] for the segments).
//!
//! [`segment_entries`]: crate::code_index::segment_entries

use std::cmp::Ordering;

use crate::code_index::{directory_of_counts, Layout};
use crate::interrupt::STEP;
use crate::Interrupt;

/// Elements a comparison sort takes in one go between two checks for interrupts (about 30 ms).
const SORTED_AT_ONCE: usize = 1 << 20;

/// Puts the `rows` rows of `codes` (`code_bytes` bytes each) and `tids` in the order of the code
/// store, in place: by code, then by `tid_order` of the TID. `keys` is scratch space of `rows`
/// elements (its contents are overwritten).
///
/// The rows are sorted as `u64` keys, the code's first bits above the row's number, so most rows
/// are ordered without reading their codes again; only the rows whose keys tie on those bits
/// (equal codes, or codes alike in their first `64 - log2(rows)` bits) are compared whole. Then
/// each row moves to its place along the cycles of the permutation, once.
pub fn sort_rows<T: Copy>(
    codes: &mut [u8],
    code_bytes: usize,
    tids: &mut [T],
    tid_order: impl Fn(&T) -> u64,
    keys: &mut [u64],
    interrupt: Interrupt,
) {
    let rows = tids.len();
    assert!(code_bytes > 0 && codes.len() == rows * code_bytes && keys.len() == rows);
    assert!(u32::try_from(rows).is_ok(), "rows are numbered by u32");
    let row_bits = 64 - (rows.max(2) as u64 - 1).leading_zeros();
    let row_mask = (1u64 << row_bits) - 1;
    for range in crate::interrupt::ranges(rows, interrupt) {
        for row in range {
            keys[row] = first_bits(code(codes, code_bytes, row)) >> row_bits << row_bits | row as u64;
        }
    }
    sort_checked(keys, &|a, b| a.cmp(b), interrupt);
    // The runs of keys equal on the code's bits: by the whole code, then by TID.
    let mut start = 0;
    let mut since_check = 0;
    while start < rows {
        let mut end = start + 1;
        while end < rows && keys[end] >> row_bits == keys[start] >> row_bits {
            end += 1;
        }
        if end - start > 1 {
            let codes = &*codes;
            let tids = &*tids;
            let whole = |a: &u64, b: &u64| -> Ordering {
                let (a, b) = ((a & row_mask) as usize, (b & row_mask) as usize);
                code(codes, code_bytes, a)
                    .cmp(code(codes, code_bytes, b))
                    .then_with(|| tid_order(&tids[a]).cmp(&tid_order(&tids[b])))
            };
            sort_checked(&mut keys[start..end], &whole, interrupt);
        }
        since_check += end - start;
        if since_check >= STEP {
            interrupt.check();
            since_check = 0;
        }
        start = end;
    }
    // keys[p] is now the row that goes to place p. Each cycle of that permutation is followed
    // from its first place, each row moved once; a place done is marked `u64::MAX`.
    for key in keys.iter_mut() {
        *key &= row_mask;
    }
    let mut held = vec![0u8; code_bytes];
    let mut moved = 0;
    for first in 0..rows {
        if keys[first] == u64::MAX {
            continue;
        }
        held.copy_from_slice(code(codes, code_bytes, first));
        let held_tid = tids[first];
        let mut place = first;
        loop {
            let from = keys[place] as usize;
            keys[place] = u64::MAX;
            if from == first {
                codes[place * code_bytes..(place + 1) * code_bytes].copy_from_slice(&held);
                tids[place] = held_tid;
                break;
            }
            codes.copy_within(from * code_bytes..(from + 1) * code_bytes, place * code_bytes);
            tids[place] = tids[from];
            place = from;
            moved += 1;
            if moved % STEP == 0 {
                interrupt.check();
            }
        }
    }
}

/// Row `row` of `codes`, `code_bytes` bytes a row.
fn code(codes: &[u8], code_bytes: usize, row: usize) -> &[u8] {
    &codes[row * code_bytes..(row + 1) * code_bytes]
}

/// The first 64 bits of `code` (zeros beyond its end), as an unsigned number.
fn first_bits(code: &[u8]) -> u64 {
    match code.get(..8) {
        Some(bytes) => u64::from_be_bytes(bytes.try_into().expect("8 bytes")),
        None => code.iter().enumerate().fold(0, |w, (n, &b)| w | u64::from(b) << (56 - 8 * n)),
    }
}

/// The entries of indexed segment `i` of the codes of the code store (`codes`, in ordinal order,
/// `code_bytes` bytes each), each `value << 32 | ordinal`, sorted, into `entries` (one element a
/// row; its contents are overwritten), and the segment's directory, returned. `values` is scratch
/// space of one element a row: [`segment_values`] of segment `i`, then [`entries_of_values`].
pub fn segment_entries(
    layout: &Layout,
    i: u32,
    codes: &[u8],
    code_bytes: usize,
    values: &mut [u32],
    entries: &mut [u64],
    interrupt: Interrupt,
) -> Vec<u32> {
    segment_values(layout, i, codes, code_bytes, values, interrupt);
    entries_of_values(layout, i, values, entries, interrupt)
}

/// The values of segments `first..first + n` of the codes of the code store (`codes`, in ordinal
/// order, `code_bytes` bytes each), into `values`: `n` arrays of one element a row, one after the
/// other (`values.len()` is `n` times the rows).
///
/// One pass over the codes for the `n` segments: a code is read from memory once for all of them
/// (a pass per segment reads a cache line of every code each time, the build's slowest part on
/// long codes).
pub fn segment_values(
    layout: &Layout,
    first: u32,
    codes: &[u8],
    code_bytes: usize,
    values: &mut [u32],
    interrupt: Interrupt,
) {
    assert!(code_bytes > 0 && codes.len().is_multiple_of(code_bytes));
    let rows = codes.len() / code_bytes;
    let n = values.len().checked_div(rows).unwrap_or(0);
    assert!(values.len() == n * rows && first + n as u32 <= layout.plan.count);
    if rows == 0 {
        return;
    }
    let mut columns: Vec<&mut [u32]> = values.chunks_exact_mut(rows).collect();
    for range in crate::interrupt::ranges(rows, interrupt) {
        let codes = codes[range.start * code_bytes..range.end * code_bytes].chunks_exact(code_bytes);
        for (row, code) in range.zip(codes) {
            for (g, column) in (first..).zip(columns.iter_mut()) {
                column[row] = layout.plan.segment(code, g);
            }
        }
    }
}

/// The entries of indexed segment `i` from its `values` (one a row, in ordinal order,
/// [`segment_values`]), each `value << 32 | ordinal`, sorted, into `entries` (one element a row;
/// its contents are overwritten), and the segment's directory, returned.
///
/// The entries are put in order by a counting sort by the directory's prefix (the counts are the
/// directory), which keeps the ordinals of a prefix ascending, and each prefix's run sorted alone
/// (a run holds about one row per prefix on uniform codes: the directory has about one prefix per
/// row), short runs by insertion.
pub fn entries_of_values(
    layout: &Layout,
    i: u32,
    values: &[u32],
    entries: &mut [u64],
    interrupt: Interrupt,
) -> Vec<u32> {
    let rows = entries.len();
    assert!(values.len() == rows);
    assert!(u32::try_from(rows).is_ok(), "ordinals are u32");
    let mut counts = vec![0u32; layout.directory_len(i) - 1];
    let low_bits = layout.low_bits_of(i);
    for range in crate::interrupt::ranges(rows, interrupt) {
        for &value in &values[range] {
            counts[(value as u64 >> low_bits) as usize] += 1;
        }
    }
    let directory = directory_of_counts(&counts);
    // counts[p]: the next place of prefix p.
    let prefixes = counts.len();
    counts.copy_from_slice(&directory[..prefixes]);
    for range in crate::interrupt::ranges(rows, interrupt) {
        for (ordinal, &value) in range.clone().zip(&values[range]) {
            let next = &mut counts[(value as u64 >> low_bits) as usize];
            entries[*next as usize] = u64::from(value) << 32 | ordinal as u64;
            *next += 1;
        }
    }
    // Each run by its low bits, stably (its ordinals are ascending): short ones by insertion,
    // longer ones by a counting sort through `scratch` (clustered codes put most rows in runs of
    // thousands), the longest by comparison.
    let lows = 1usize << low_bits;
    let mut low_counts = vec![0u32; lows + 1];
    let mut scratch: Vec<u64> = Vec::new();
    let mut since_check = 0;
    for run in directory.windows(2) {
        let (start, end) = (run[0] as usize, run[1] as usize);
        let run = &mut entries[start..end];
        if run.len() <= SHORT_RUN {
            insertion_sort(run);
        } else if run.len() <= COUNTED_RUN && run.len() >= lows {
            if scratch.len() < run.len() {
                scratch.resize(run.len().next_power_of_two().min(COUNTED_RUN), 0);
            }
            counting_sort_by_low(run, low_bits, &mut low_counts, &mut scratch[..run.len()]);
        } else {
            sort_checked(run, &|a, b| a.cmp(b), interrupt);
        }
        since_check += end - start;
        if since_check >= STEP {
            interrupt.check();
            since_check = 0;
        }
    }
    directory
}

/// The longest run of a segment sorted by insertion.
const SHORT_RUN: usize = 32;

/// The longest run of a segment sorted by counting (the scratch space it takes at most).
const COUNTED_RUN: usize = 1 << 16;

/// Sorts a short slice by insertion.
fn insertion_sort(items: &mut [u64]) {
    for n in 1..items.len() {
        let item = items[n];
        let mut at = n;
        while at > 0 && items[at - 1] > item {
            items[at] = items[at - 1];
            at -= 1;
        }
        items[at] = item;
    }
}

/// Sorts `run` (entries `value << 32 | ordinal` of one prefix, ordinals ascending) by the value's
/// `low_bits` low bits, stably: so by (value, ordinal). `counts` has `2^low_bits + 1` elements,
/// `scratch` as many as `run` (the contents of both are overwritten).
fn counting_sort_by_low(run: &mut [u64], low_bits: u32, counts: &mut [u32], scratch: &mut [u64]) {
    let mask = (1u64 << low_bits) - 1;
    let low = |entry: u64| (entry >> 32 & mask) as usize;
    counts.fill(0);
    for &entry in run.iter() {
        counts[low(entry) + 1] += 1;
    }
    for n in 1..counts.len() {
        counts[n] += counts[n - 1];
    }
    for &entry in run.iter() {
        let next = &mut counts[low(entry)];
        scratch[*next as usize] = entry;
        *next += 1;
    }
    run.copy_from_slice(scratch);
}

/// `items.sort_unstable_by(compare)`, in pieces of at most [`SORTED_AT_ONCE`] elements with a
/// check for interrupts between them: a longer slice is split at its median
/// (`select_nth_unstable_by`, linear) and its halves sorted alone.
fn sort_checked<T>(items: &mut [T], compare: &impl Fn(&T, &T) -> Ordering, interrupt: Interrupt) {
    sort_in_pieces(items, compare, SORTED_AT_ONCE, interrupt)
}

/// [`sort_checked`] in pieces of at most `at_once` elements.
fn sort_in_pieces<T>(items: &mut [T], compare: &impl Fn(&T, &T) -> Ordering, at_once: usize, interrupt: Interrupt) {
    if items.len() <= at_once {
        items.sort_unstable_by(compare);
    } else {
        let middle = items.len() / 2;
        items.select_nth_unstable_by(middle, compare);
        interrupt.check();
        let (low, high) = items.split_at_mut(middle);
        sort_in_pieces(low, compare, at_once, interrupt);
        sort_in_pieces(high, compare, at_once, interrupt);
        interrupt.check();
    }
}

#[cfg(test)]
mod tests;
