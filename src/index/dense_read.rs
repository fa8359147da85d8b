//! Reads of the built part (`super::dense`): the runs of entries of segment values, found in a
//! segment's directory ([`runs`]) and read a page at a time with read-ahead ([`read_runs`]); the
//! rows of fingerprints met in segments 1 to 3, whose TIDs segment 0 holds ([`rows_of`]); every
//! entry of a range of values ([`read_values`]).

use pgrx::pg_sys::{self, BlockNumber, Buffer, Page};
use simhash_core::dense::{self as layout, RESIDUAL_BYTES};

use super::buffers;
use super::dense::{directory_per_page, expect_page, is_live, page_entries, per_page, Dense, Tids};
use super::page::{self, Kind};
use super::readahead::{prefetch_bytes, ReadAhead};

/// A page of the built part at a time, share-locked (the pages after one another, each left when
/// the next is asked for).
struct Reader {
    index: pg_sys::Relation,
    current: Option<(BlockNumber, Buffer)>,
}

impl Reader {
    fn new(index: pg_sys::Relation) -> Reader {
        Reader { index, current: None }
    }

    /// Page `block`, of `kind` and segment `n` (else an ERROR: the index is corrupt).
    unsafe fn page(&mut self, block: BlockNumber, kind: Kind, n: u32) -> Page {
        unsafe {
            match self.current {
                Some((current, buffer)) if current == block => return pg_sys::BufferGetPage(buffer),
                Some((_, buffer)) => {
                    pg_sys::UnlockReleaseBuffer(buffer);
                    self.current = None;
                    pgrx::check_for_interrupts!();
                }
                None => {}
            }
            let buffer = buffers::read_locked(self.index, block, pg_sys::BUFFER_LOCK_SHARE);
            self.current = Some((block, buffer));
            let dense_page = pg_sys::BufferGetPage(buffer);
            expect_page(self.index, dense_page, block, kind, n);
            dense_page
        }
    }

    fn finish(self) {
        if let Some((_, buffer)) = self.current {
            unsafe { pg_sys::UnlockReleaseBuffer(buffer) };
        }
    }
}

/// Position `value` (0..=VALUES) of the directory of segment `n`.
unsafe fn directory_at(reader: &mut Reader, dense: &Dense, n: u32, value: usize) -> u32 {
    unsafe {
        let (block, slot) = dense.directory_position(n, value);
        let directory = reader.page(block, Kind::DenseDirectory, n);
        let position = page::contents(directory).cast::<u32>().add(slot).read();
        if position > dense.rows {
            page::corrupt(
                reader.index,
                format!("the directory of segment {n} gives position {position} of {}", dense.rows),
            );
        }
        position
    }
}

/// The runs of entries of `values` (segment values) in segment `n`: (first, end) positions.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn runs(index: pg_sys::Relation, dense: &Dense, n: u32, values: &[u16]) -> Vec<(u32, u32)> {
    unsafe {
        let mut reader = Reader::new(index);
        let mut runs = Vec::new();
        crate::memory::reserve_entries(&mut runs, values.len());
        // The positions asked for, requested from memory a page at a time ahead of their reads.
        let per = directory_per_page();
        let mut requested = usize::MAX;
        for (i, &value) in values.iter().enumerate() {
            let value = usize::from(value);
            if value / per != requested {
                requested = value / per;
                let (block, _) = dense.directory_position(n, value);
                let directory = reader.page(block, Kind::DenseDirectory, n);
                for &other in values[i..].iter().take_while(|&&v| usize::from(v) / per == requested) {
                    prefetch_bytes(page::contents(directory).add(usize::from(other) % per * 4), 8);
                }
            }
        }
        for &value in values {
            let first = directory_at(&mut reader, dense, n, usize::from(value));
            let end = directory_at(&mut reader, dense, n, usize::from(value) + 1);
            if end < first {
                page::corrupt(index, format!("the run of value {value} in segment {n} ends before it starts"));
            }
            runs.push((first, end));
        }
        reader.finish();
        runs
    }
}

/// The entries of a run on one page.
pub(super) struct Part<'a> {
    /// Which run (its position in the runs read).
    pub run: usize,
    /// The page's residuals.
    pub residuals: &'a [u8],
    /// The run's entries on the page: `from..to`.
    pub from: usize,
    pub to: usize,
    /// The page's TIDs (segment 0).
    pub tids: Option<Tids>,
    /// The position in the segment of the page's first entry.
    pub base: u32,
}

impl Part<'_> {
    /// Calls `found(i, fp)` for each entry `i` of the part, whose segment `n` is `value`, within
    /// `k` bits of `query` (its fingerprint `fp`): the value's distance, one for the run, and the
    /// residuals' ([`layout::for_each_near_residual`]).
    pub fn near(&self, value: u16, n: u32, query: u64, k: u32, mut found: impl FnMut(usize, u64)) {
        let value_distance = (value ^ simhash_core::buckets::segment_value(query, n)).count_ones();
        let Some(limit) = k.checked_sub(value_distance) else { return };
        layout::for_each_near_residual(
            self.residuals,
            self.from,
            self.to,
            layout::residual(query, n),
            limit,
            |i, r| found(i, layout::assemble(r, value, n)),
        );
    }
}

/// Calls `each` with the entries of each run of `runs` (first and end position in segment `n`), a
/// page at a time ([`Part`]). The pages are read in block order, each once for the runs on it,
/// pinned ahead of their read with the entries to check requested from memory.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn read_runs(
    index: pg_sys::Relation,
    dense: &Dense,
    n: u32,
    runs: &[(u32, u32)],
    mut each: impl FnMut(Part<'_>),
) {
    unsafe {
        // The parts of the runs on each page: (block, run, from, to), in block order.
        let mut parts: Vec<(BlockNumber, u32, u16, u16)> = Vec::new();
        for (j, &(first, end)) in runs.iter().enumerate() {
            let mut at = first;
            while at < end {
                let (block, slot) = dense.position(n, at);
                let on_page = (per_page(n) - slot).min((end - at) as usize);
                crate::memory::push_entry(&mut parts, (block, j as u32, slot as u16, (slot + on_page) as u16));
                at += on_page as u32;
            }
        }
        parts.sort_by_key(|&(block, ..)| block);
        let mut blocks: Vec<BlockNumber> = parts.iter().map(|&(block, ..)| block).collect();
        blocks.dedup();
        let mut pages = ReadAhead::new(index, &blocks);
        let mut part = 0; // the first part on the page being read
        let request = |j: usize, ahead: Page, part: usize| {
            let first = part + parts[part..].iter().take_while(|p| p.0 < blocks[j]).count();
            for p in parts[first..].iter().take_while(|p| p.0 == blocks[j]) {
                prefetch_residuals(ahead, usize::from(p.2), usize::from(p.3));
            }
        };
        while let Some((i, buffer)) = pages.next(|j, ahead| request(j, ahead, part)) {
            let block = blocks[i];
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32);
            let dense_page = pg_sys::BufferGetPage(buffer);
            expect_page(index, dense_page, block, Kind::Dense, n);
            let (base, entries) = dense.entries_of(n, block);
            let (residuals, tids) = page_entries(dense_page, n, entries);
            while let Some(&(at, run, from, to)) = parts.get(part) {
                if at != block {
                    break;
                }
                each(Part { run: run as usize, residuals, from: usize::from(from), to: usize::from(to), tids, base });
                part += 1;
            }
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
        }
    }
}

/// Asks the CPU for residuals `from..to` of a page.
unsafe fn prefetch_residuals(dense_page: Page, from: usize, to: usize) {
    unsafe {
        let start = page::contents(dense_page) as *const u8;
        prefetch_bytes(start.add(from * RESIDUAL_BYTES), (to - from) * RESIDUAL_BYTES);
    }
}

/// Calls `each(fp, tid)` for the live rows of the built part whose fingerprint is one of `fps`
/// (sorted and deduplicated here): for the matches found in segments 1 to 3, which keep no TIDs.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn rows_of(
    index: pg_sys::Relation,
    dense: &Dense,
    fps: &mut Vec<u64>,
    mut each: impl FnMut(u64, pg_sys::ItemPointerData),
) {
    unsafe {
        crate::memory::sort_interruptibly(fps, |&fp| fp);
        fps.dedup();
        if fps.is_empty() {
            return;
        }
        let values: Vec<u16> = fps.iter().map(|&fp| simhash_core::buckets::segment_value(fp, 0)).collect();
        let runs = runs(index, dense, 0, &values);
        read_runs(index, dense, 0, &runs, |part| {
            let fp = fps[part.run];
            let residual = layout::residual(fp, 0);
            let tids = part.tids.expect("segment 0 has TIDs");
            let mut i = layout::lower_bound(part.residuals, part.from, part.to, residual);
            while i < part.to && layout::read_residual(part.residuals, i) == residual {
                let tid = tids.get(i);
                if is_live(&tid) {
                    each(fp, tid);
                }
                i += 1;
            }
        });
    }
}

/// Calls `each(fp, tid)` for every entry of the built part whose segment `n` value is in
/// `from..to`, in order (`tid`: `None` in segments 1 to 3; in segment 0 perhaps of a removed row,
/// [`is_live`]).
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn read_values(
    index: pg_sys::Relation,
    dense: &Dense,
    n: u32,
    from: usize,
    to: usize,
    mut each: impl FnMut(u64, Option<pg_sys::ItemPointerData>),
) {
    unsafe {
        // Where each value's run starts: the entries' values.
        let mut starts = Vec::new();
        crate::memory::reserve_entries(&mut starts, to - from + 1);
        let mut reader = Reader::new(index);
        for value in from..=to {
            starts.push(directory_at(&mut reader, dense, n, value));
        }
        reader.finish();
        if starts.windows(2).any(|w| w[1] < w[0]) {
            page::corrupt(index, format!("the directory of segment {n} is not in order"));
        }
        let mut value = from;
        read_runs(index, dense, n, &[(starts[0], starts[to - from])], |part| {
            for i in part.from..part.to {
                let position = part.base + i as u32;
                while starts[value + 1 - from] <= position {
                    value += 1;
                }
                let fp = layout::assemble(layout::read_residual(part.residuals, i), value as u16, n);
                each(fp, part.tids.map(|tids| tids.get(i)));
            }
        });
    }
}
