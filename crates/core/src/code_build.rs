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
use std::collections::TryReserveError;

use crate::code_index::{directory_of_counts, Layout};
use crate::interrupt::{sort_checked, STEP};
use crate::Interrupt;

/// The order of the code store, by code then by `tid_order` of the TID, into `order`: `order[p]`
/// is the row (of `codes`, `code_bytes` bytes each, and of `tids`) at place `p`. `keys` is scratch
/// space of `rows` elements (its contents are overwritten). The rows themselves stay where they
/// are: the build reads them in this order (a gather, whose reads can overlap, where moving each
/// row to its place in turn waits for every read).
///
/// The rows are sorted as `u64` keys, the code's first bits above the row's number, so most rows
/// are ordered without reading their codes again; the rows whose keys tie on those bits (codes
/// alike in their first `64 - log2(rows)` bits, as those of a cluster are) get keys of their
/// code's next bits and are sorted again, and only those that tie again (equal codes, or codes
/// alike in twice as many bits) are compared whole.
pub fn store_order<T>(
    codes: &[u8],
    code_bytes: usize,
    tids: &[T],
    tid_order: impl Fn(&T) -> u64,
    keys: &mut [u64],
    order: &mut [u32],
    interrupt: Interrupt,
) {
    let rows = tids.len();
    assert!(code_bytes > 0 && codes.len() == rows * code_bytes && keys.len() == rows && order.len() == rows);
    assert!(u32::try_from(rows).is_ok(), "rows are numbered by u32");
    let row_bits = 64 - (rows.max(2) as u64 - 1).leading_zeros();
    let row_mask = (1u64 << row_bits) - 1;
    for range in crate::interrupt::ranges(rows, interrupt) {
        for row in range {
            keys[row] = bits_at(code(codes, code_bytes, row), 0) >> row_bits << row_bits | row as u64;
        }
    }
    sort_checked(keys, &|a, b| a.cmp(b), interrupt);
    // The runs of keys equal on the code's first bits: by the code's next bits (the keys of the
    // run rewritten), then the runs equal on those by the whole code, then by TID.
    let whole = |a: &u64, b: &u64| -> Ordering {
        let (a, b) = ((a & row_mask) as usize, (b & row_mask) as usize);
        code(codes, code_bytes, a)
            .cmp(code(codes, code_bytes, b))
            .then_with(|| tid_order(&tids[a]).cmp(&tid_order(&tids[b])))
    };
    let next_bits = 64 - row_bits as usize;
    let mut since_check = 0;
    let mut start = 0;
    while start < rows {
        let end = run_end(keys, start, row_bits);
        let run = &mut keys[start..end];
        start = end;
        if run.len() > 1 {
            if next_bits < code_bytes * 8 {
                // (a run may be every row: codes alike in their first bits)
                for range in crate::interrupt::ranges(run.len(), interrupt) {
                    for key in &mut run[range] {
                        let row = (*key & row_mask) as usize;
                        *key = bits_at(code(codes, code_bytes, row), next_bits) >> row_bits << row_bits | row as u64;
                    }
                }
                sort_checked(run, &|a, b| a.cmp(b), interrupt);
                let mut tie = 0;
                while tie < run.len() {
                    let end = run_end(run, tie, row_bits);
                    if end - tie > 1 {
                        sort_checked(&mut run[tie..end], &whole, interrupt);
                    }
                    since_check += end - tie;
                    if since_check >= STEP {
                        interrupt.check();
                        since_check = 0;
                    }
                    tie = end;
                }
            } else {
                sort_checked(run, &whole, interrupt);
            }
        }
        since_check += run.len();
        if since_check >= STEP {
            interrupt.check();
            since_check = 0;
        }
    }
    for range in crate::interrupt::ranges(rows, interrupt) {
        for (place, key) in order[range.clone()].iter_mut().zip(&keys[range]) {
            *place = (key & row_mask) as u32;
        }
    }
}

/// The end of the run of `keys` from `start` equal above their `low_bits` low bits.
fn run_end(keys: &[u64], start: usize, low_bits: u32) -> usize {
    let high = keys[start] >> low_bits;
    start + 1 + keys[start + 1..].iter().take_while(|&&key| key >> low_bits == high).count()
}

/// Row `row` of `codes`, `code_bytes` bytes a row.
fn code(codes: &[u8], code_bytes: usize, row: usize) -> &[u8] {
    &codes[row * code_bytes..(row + 1) * code_bytes]
}

/// The 64 bits of `code` from bit `from` (zeros beyond its end), as an unsigned number.
fn bits_at(code: &[u8], from: usize) -> u64 {
    let (byte, shift) = (from / 8, from % 8);
    let word = |at: usize| match code.get(at..at + 8) {
        Some(bytes) => u64::from_be_bytes(bytes.try_into().expect("8 bytes")),
        None => code.iter().skip(at).enumerate().fold(0, |w, (n, &b)| w | u64::from(b) << (56 - 8 * n)),
    };
    if shift == 0 {
        word(byte)
    } else {
        word(byte) << shift | word(byte + 8) >> (64 - shift)
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
) -> Result<Vec<u32>, TryReserveError> {
    segment_values(layout, i, codes, code_bytes, None, values, interrupt);
    entries_of_values(layout, i, values, entries, interrupt)
}

/// The values of segments `first..first + n` of the codes of the code store, into `values`: `n`
/// arrays of one element a row (in ordinal order), one after the other (`values.len()` is `n`
/// times the rows). The codes are `codes` (`code_bytes` bytes each), in ordinal order, or with
/// `order` the rows of `codes` in that order ([`store_order`]).
///
/// One pass over the codes for the `n` segments: a code is read from memory once for all of them
/// (a pass per segment reads a cache line of every code each time, the build's slowest part on
/// long codes).
pub fn segment_values(
    layout: &Layout,
    first: u32,
    codes: &[u8],
    code_bytes: usize,
    order: Option<&[u32]>,
    values: &mut [u32],
    interrupt: Interrupt,
) {
    assert!(code_bytes > 0 && codes.len().is_multiple_of(code_bytes));
    let rows = codes.len() / code_bytes;
    let n = values.len().checked_div(rows).unwrap_or(0);
    assert!(values.len() == n * rows && first + n as u32 <= layout.plan.count);
    assert!(order.is_none_or(|order| order.len() == rows));
    for range in crate::interrupt::ranges(rows, interrupt) {
        for place in range {
            let row = match order {
                Some(order) => {
                    // (the rows read in the code store's order are scattered in `codes`: each
                    // read waits for memory unless asked for ahead)
                    if let Some(&ahead) = order.get(place + PREFETCH_AHEAD) {
                        prefetch(code(codes, code_bytes, ahead as usize));
                    }
                    order[place] as usize
                }
                None => place,
            };
            put_values(layout, first, code(codes, code_bytes, row), place, values, rows);
        }
    }
}

/// How many rows ahead [`segment_values`] asks for the code it will read.
const PREFETCH_AHEAD: usize = 16;

/// Asks the processor to bring the cache lines of `bytes` in: a hint, which changes no result.
#[inline(always)]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let lines = bytes.chunks(64).map(|line| line.as_ptr()).chain(bytes.last().map(|b| b as *const u8));
        for at in lines {
            // SAFETY: a prefetch reads nothing and faults on no address (x86-64 has SSE).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The values of segments `first..first + n` of `code`, the code at ordinal `place`, into
/// `values` ([`segment_values`]: `n` arrays of `rows` elements).
#[inline]
pub fn put_values(layout: &Layout, first: u32, code: &[u8], place: usize, values: &mut [u32], rows: usize) {
    for (g, column) in (first..).zip(values.chunks_exact_mut(rows)) {
        column[place] = layout.plan.segment(code, g);
    }
}

/// The entries of indexed segment `i` from its `values` (one a row, in ordinal order,
/// [`segment_values`]), each `value << 32 | ordinal`, sorted, into `entries` (one element a row;
/// its contents are overwritten), and the segment's directory, returned; `Err` when memory for
/// the directory and the counts (one element a prefix) or for sorting a run runs out.
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
) -> Result<Vec<u32>, TryReserveError> {
    let rows = entries.len();
    assert!(values.len() == rows);
    assert!(u32::try_from(rows).is_ok(), "ordinals are u32");
    let mut counts = zeros(layout.directory_len(i) - 1)?;
    let low_bits = layout.low_bits_of(i);
    for range in crate::interrupt::ranges(rows, interrupt) {
        for &value in &values[range] {
            counts[(value as u64 >> low_bits) as usize] += 1;
        }
    }
    let directory = directory_of_counts(&counts)?;
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
    let mut low_counts = zeros(lows + 1)?;
    let mut scratch: Vec<u64> = Vec::new();
    let mut since_check = 0;
    for run in directory.windows(2) {
        let (start, end) = (run[0] as usize, run[1] as usize);
        let run = &mut entries[start..end];
        if run.len() <= SHORT_RUN {
            insertion_sort(run);
        } else if run.len() <= COUNTED_RUN && run.len() >= lows {
            if scratch.len() < run.len() {
                let len = run.len().next_power_of_two().min(COUNTED_RUN);
                scratch.try_reserve_exact(len - scratch.len())?;
                scratch.resize(len, 0);
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
    Ok(directory)
}

/// The bytes [`entries_of_values`] takes for segment `i` of `rows` rows besides its `values` and
/// `entries`, at most: the counts and the directory (4 bytes a prefix each), the counts of a run's
/// low bits, and the scratch space of sorting a run by counting (8 bytes an entry of the longest
/// run so sorted).
pub fn entries_scratch_bytes(layout: &Layout, i: u32, rows: usize) -> usize {
    let prefixes = layout.directory_len(i);
    let lows = (1usize << layout.low_bits_of(i)) + 1;
    8 * prefixes + 4 * lows + 8 * rows.next_power_of_two().min(COUNTED_RUN)
}

/// `n` zeros, or `Err` when memory runs out.
fn zeros(n: usize) -> Result<Vec<u32>, TryReserveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)?;
    v.resize(n, 0);
    Ok(v)
}

/// Why [`segments_on_thread`] stopped before every segment was written.
#[derive(Debug, PartialEq, Eq)]
pub enum ThreadError {
    /// The second thread ended before its work was done (a panic: a bug).
    Failed,
    /// The second thread was refused memory for a segment's counts and directory, or for sorting
    /// a run (the big buffers are the caller's).
    OutOfMemory,
}

/// What [`segments_on_thread`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum OnThread {
    /// Every segment was written.
    Written,
    /// The system refused the second thread (a limit of processes or memory): nothing was
    /// written, `first` not called; the caller builds on its own thread.
    NotStarted,
}

/// The entries of every indexed segment ([`segment_values`] through `order`, then
/// [`entries_of_values`]) made on a second thread, while this one runs `first(context)` and then
/// `write(context, i, directory, entries)` for each segment `i` in order as its entries come.
/// `values` holds the values of up to `values.len() / rows` segments at once; `entries` are two
/// buffers of one element a row, one filled there while the other is written here.
///
/// The second thread runs this crate's code alone, on the data given: nothing of the caller's.
/// `spawning()` is called on this thread just before the thread starts and its result dropped just
/// after (in PostgreSQL it blocks every signal, which the new thread inherits, so that the signals
/// reach this thread alone). This thread checks `interrupt` before it waits for each segment and
/// every [`WAIT_MS`] of waiting; when it unwinds (`first`, `write` or `interrupt` unwinding), the
/// second thread stops at its next check, and this returns once it has. A thread the system
/// refuses is [`OnThread::NotStarted`], not an error; memory it refuses to the second thread is
/// [`ThreadError::OutOfMemory`].
#[allow(clippy::too_many_arguments)]
pub fn segments_on_thread<C, G>(
    layout: &Layout,
    codes: &[u8],
    code_bytes: usize,
    order: &[u32],
    mut values: Vec<u32>,
    entries: [Vec<u64>; 2],
    interrupt: Interrupt,
    spawning: impl FnOnce() -> G,
    context: &mut C,
    first: impl FnOnce(&mut C),
    mut write: impl FnMut(&mut C, u32, &[u32], &[u64]),
) -> Result<OnThread, ThreadError> {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::mpsc;
    let rows = order.len();
    assert!(entries.iter().all(|entries| entries.len() == rows) && rows > 0);
    let at_once = values.len() / rows;
    assert!(at_once > 0 && values.len() == at_once * rows);
    let stop = AtomicBool::new(false);
    // Tells the second thread to stop when this one leaves, done or unwinding.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }
    /// The payload of the second thread's unwinding when told to stop.
    struct Stopped;
    let stop = &stop;
    std::thread::scope(|scope| {
        let _stop = Stop(stop);
        let (done_send, done) = mpsc::channel::<Result<(u32, Vec<u32>, Vec<u64>), TryReserveError>>();
        let (free, free_receive) = mpsc::channel::<Vec<u64>>();
        for buffer in entries {
            free.send(buffer).expect("the receiver is here");
        }
        let work = move || {
            let check = || {
                if stop.load(Relaxed) {
                    std::panic::resume_unwind(Box::new(Stopped));
                }
            };
            let interrupt = Interrupt::new(&check);
            let mut first = 0;
            while first < layout.indexed {
                let n = at_once.min((layout.indexed - first) as usize);
                let values = &mut values[..rows * n];
                segment_values(layout, first, codes, code_bytes, Some(order), values, interrupt);
                for (i, values) in (first..).zip(values.chunks_exact(rows)) {
                    // (an error: this thread's side has left)
                    let Ok(mut entries) = free_receive.recv() else { return };
                    let made = entries_of_values(layout, i, values, &mut entries, interrupt)
                        .map(|directory| (i, directory, entries));
                    let refused = made.is_err();
                    if done_send.send(made).is_err() || refused {
                        return;
                    }
                }
                first += n as u32;
            }
        };
        let guard = spawning();
        let thread = std::thread::Builder::new().spawn_scoped(scope, move || {
            // (a stop unwinds quietly: resume_unwind calls no panic hook)
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|payload| {
                if !payload.is::<Stopped>() {
                    std::panic::resume_unwind(payload);
                }
            });
        });
        drop(guard);
        let Ok(thread) = thread else { return Ok(OnThread::NotStarted) };
        first(context);
        for i in 0..layout.indexed {
            // A check before each wait, not only when one times out: the other thread may hand
            // over every segment within a wait.
            interrupt.check();
            let (segment, directory, entries) = loop {
                match done.recv_timeout(std::time::Duration::from_millis(WAIT_MS)) {
                    Ok(Ok(made)) => break made,
                    Ok(Err(_)) => {
                        let _ = thread.join();
                        return Err(ThreadError::OutOfMemory);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => interrupt.check(),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let _ = thread.join();
                        return Err(ThreadError::Failed);
                    }
                }
            };
            assert_eq!(segment, i, "segments in order");
            write(context, i, &directory, &entries);
            let _ = free.send(entries);
        }
        thread.join().map(|()| OnThread::Written).map_err(|_| ThreadError::Failed)
    })
}

/// How long this thread of [`segments_on_thread`] waits for the other at a time between two checks
/// for interrupts.
const WAIT_MS: u64 = 10;

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

#[cfg(test)]
mod tests;
