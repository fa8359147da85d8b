//! The build's writes of the built part (`super::dense`): the rows sorted segment by segment
//! ([`SortedRows`], in memory or from sorts that spilled to disk) and written page by page
//! ([`write`]), each segment's directory and then its entries.

use pgrx::pg_sys::{self, BlockNumber, Page};
use simhash_core::dense::{self as layout, RESIDUAL_BYTES};
use simhash_core::SEGMENTS;

use super::dense::{directory_pages, directory_per_page, per_page, used_bytes, Dense};
use super::page::{self, Kind};

/// The rows of a build as the built part orders them, one segment after the other: in memory
/// ([`InMemory`]), or from sorts that spilled to disk (`super::build`).
pub(super) trait SortedRows {
    /// The rows (each segment has them all).
    fn rows(&self) -> u32;
    /// Gets segment `n` ready (0 to 3, in turn) and returns where each segment value's run
    /// starts (`VALUES + 1` positions).
    fn begin(&mut self, n: u32) -> Vec<u32>;
    /// The next entry of the segment begun: its order key (`(value << 48) | residual`,
    /// `simhash_core::dense::order_key`) and its TID (read in segment 0 only).
    fn next(&mut self) -> Option<(u64, pg_sys::ItemPointerData)>;
}

/// The order key of `fp` in segment `n`, as [`SortedRows::next`] returns it.
pub(super) fn order_key(fp: u64, n: u32) -> u64 {
    let (value, residual) = layout::order_key(fp, n);
    (u64::from(value) << 48) | residual
}

/// A build's rows in memory, each segment sorted when begun: 16 bytes a row besides the entries.
pub(super) struct InMemory<'a> {
    entries: &'a [page::Entry],
    keys: Vec<(u64, u32)>,
    at: usize,
}

impl<'a> InMemory<'a> {
    /// The rows of `entries` (at most `u32::MAX`).
    pub fn new(entries: &'a [page::Entry]) -> InMemory<'a> {
        let mut keys = Vec::new();
        crate::memory::reserve_entries(&mut keys, entries.len());
        InMemory { entries, keys, at: 0 }
    }
}

impl SortedRows for InMemory<'_> {
    fn rows(&self) -> u32 {
        self.entries.len() as u32
    }
    fn begin(&mut self, n: u32) -> Vec<u32> {
        self.keys.clear();
        self.keys.extend(self.entries.iter().enumerate().map(|(i, entry)| (order_key(entry.fp, n), i as u32)));
        crate::memory::sort_interruptibly(&mut self.keys, |&key| key);
        self.at = 0;
        layout::directory(self.keys.iter().map(|&(key, _)| (key >> 48) as u16))
    }
    fn next(&mut self) -> Option<(u64, pg_sys::ItemPointerData)> {
        let &(key, row) = self.keys.get(self.at)?;
        self.at += 1;
        Some((key, self.entries[row as usize].tid))
    }
}

/// Writes the built part of `rows` from block `start` on, one block after the other with
/// `write_page(block, fill)`: segment by segment, its directory and then its entries; returns the
/// built part.
///
/// # Safety
///
/// `write_page` writes block `block` of the index, new, as `fill` makes it.
pub(super) unsafe fn write(
    rows: &mut dyn SortedRows,
    start: BlockNumber,
    mut write_page: impl FnMut(BlockNumber, &mut dyn FnMut(Page)),
) -> Dense {
    unsafe {
        let dense = Dense { start, rows: rows.rows() };
        let mut block = start;
        for n in 0..SEGMENTS {
            let starts = rows.begin(n);
            let per_directory = directory_per_page();
            for d in 0..directory_pages() as usize {
                write_page(block, &mut |directory: Page| {
                    page::init_page(directory, Kind::DenseDirectory, n as u16);
                    let slots = &starts[d * per_directory..((d + 1) * per_directory).min(starts.len())];
                    std::ptr::copy_nonoverlapping(slots.as_ptr(), page::contents(directory).cast::<u32>(), slots.len());
                    page::set_used(directory, std::mem::size_of_val(slots));
                });
                block += 1;
            }
            let per = per_page(n);
            let mut written = 0u64;
            for _ in 0..dense.data_pages(n) {
                write_page(block, &mut |data: Page| {
                    page::init_page(data, Kind::Dense, n as u16);
                    let contents = page::contents(data);
                    let residuals = std::slice::from_raw_parts_mut(contents, per * RESIDUAL_BYTES);
                    let tids = contents.add(per * RESIDUAL_BYTES).cast::<pg_sys::ItemPointerData>();
                    for i in 0..per {
                        let Some((key, tid)) = rows.next() else { break };
                        layout::write_residual(residuals, i, key & layout::RESIDUAL_MASK);
                        if n == 0 {
                            tids.add(i).write_unaligned(tid);
                        }
                        written += 1;
                    }
                    page::set_used(data, used_bytes(n));
                });
                block += 1;
                if block.is_multiple_of(64) {
                    pgrx::check_for_interrupts!();
                }
            }
            if written != u64::from(dense.rows) || rows.next().is_some() {
                pgrx::error!("simhash index build: segment {n} has {written} rows or more, not {}", dense.rows);
            }
            pgrx::check_for_interrupts!();
        }
        debug_assert_eq!(block, dense.segment_start(SEGMENTS));
        dense
    }
}
