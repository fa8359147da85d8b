//! The pages of a build of an index of codes, written in block order ([`Writer`]): the metapage,
//! the code store, each indexed segment's directory and entries, the chain of NULL rows. The
//! build (`super::build`) hands them their contents from memory or from its sorts on disk
//! (`super::spill`).

use pgrx::pg_sys::{self, BlockNumber, Page};
use simhash_core::code_index::Layout;

use super::super::buffers;
use super::super::page::{self, Kind, INVALID_BLOCK, TID};
use super::meta;

/// Writes a slot of the code store: `tid`, then `code`.
pub(super) fn write_slot(slot: &mut [u8], tid: pg_sys::ItemPointerData, code: &[u8]) {
    unsafe { slot.as_mut_ptr().cast::<pg_sys::ItemPointerData>().write_unaligned(tid) };
    slot[TID..].copy_from_slice(code);
}

/// Pages WAL-logged at a time: as many as one WAL record of `log_newpage_range` takes
/// (`XLR_MAX_BLOCK_ID`).
const LOGGED_AT_ONCE: BlockNumber = pg_sys::XLR_MAX_BLOCK_ID;

/// The pages of a build, appended one after the other to a fork of the index.
pub(super) struct Writer {
    index: pg_sys::Relation,
    fork: pg_sys::ForkNumber::Type,
    /// The next block.
    pub block: BlockNumber,
    /// The block after the last one of the build: none beyond it is added.
    end: BlockNumber,
    /// Pages added ahead of `block`, pinned, in block order (reversed: the next one last).
    ahead: Vec<pg_sys::Buffer>,
    /// Whether the pages are WAL-logged.
    wal: bool,
    /// The first block not WAL-logged yet.
    logged: BlockNumber,
}

impl Writer {
    /// Writes blocks `0..end` of `fork` of `index`, which has none yet, WAL-logging them whole
    /// (`wal`) a few at a time as they are written, while they are still in the CPU's caches.
    pub fn new(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, end: BlockNumber, wal: bool) -> Writer {
        Writer { index, fork, block: 0, end, ahead: Vec::new(), wal, logged: 0 }
    }

    /// The index written.
    pub fn index(&self) -> pg_sys::Relation {
        self.index
    }

    /// The blocks written, all those counted (and WAL-logged).
    pub fn finish(mut self) -> BlockNumber {
        assert!(self.block == self.end && self.ahead.is_empty(), "simhash index build: fewer pages than counted");
        self.log();
        self.block
    }

    /// WAL-logs the pages written since the last time, whole.
    fn log(&mut self) {
        if self.wal && self.logged < self.block {
            unsafe { pg_sys::log_newpage_range(self.index, self.fork, self.logged, self.block, true) };
        }
        self.logged = self.block;
    }

    /// Appends a page filled by `fill`.
    ///
    /// # Safety
    ///
    /// `fill` writes a valid page.
    pub unsafe fn page(&mut self, fill: &mut dyn FnMut(Page)) {
        unsafe {
            if self.ahead.is_empty() {
                assert!(self.block < self.end, "simhash index build: more pages than counted");
                buffers::new_buffers(self.index, self.fork, self.end - self.block, &mut self.ahead);
                self.ahead.reverse();
            }
            let buffer = self.ahead.pop().expect("a page added");
            if pg_sys::BufferGetBlockNumber(buffer) != self.block {
                pgrx::error!(
                    "simhash index build expected block {}, got {}",
                    self.block,
                    pg_sys::BufferGetBlockNumber(buffer)
                );
            }
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            fill(pg_sys::BufferGetPage(buffer));
            pg_sys::MarkBufferDirty(buffer);
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        self.block += 1;
        if self.block - self.logged >= LOGGED_AT_ONCE {
            self.log();
        }
        if self.block.is_multiple_of(64) {
            pgrx::check_for_interrupts!();
        }
    }

    /// Appends a page of the code store of `count` rows, `slot` filling each slot in turn
    /// ([`write_slot`]).
    pub unsafe fn store_page(&mut self, code_bytes: usize, count: usize, mut slot: impl FnMut(&mut [u8])) {
        let slot_bytes = meta::store_slot(code_bytes);
        unsafe {
            self.page(&mut |store_page| {
                page::init_page(store_page, Kind::CodeStore, 0);
                let at = page::contents(store_page);
                for n in 0..count {
                    slot(std::slice::from_raw_parts_mut(at.add(n * slot_bytes), slot_bytes));
                }
                page::set_used(store_page, count * slot_bytes);
            })
        }
    }

    /// Appends segment `i`'s directory and its `rows` entries, `next` giving each entry (value
    /// `<< 32 |` ordinal) in order.
    pub unsafe fn segment(
        &mut self,
        layout: &Layout,
        i: u32,
        directory: &[u32],
        rows: usize,
        mut next: impl FnMut() -> u64,
    ) {
        unsafe {
            for chunk in directory.chunks(meta::directory_per_page()) {
                self.page(&mut |directory_page| {
                    page::init_page(directory_page, Kind::CodeDirectory, 0);
                    std::ptr::copy_nonoverlapping(
                        chunk.as_ptr(),
                        page::contents(directory_page).cast::<u32>(),
                        chunk.len(),
                    );
                    page::set_used(directory_page, chunk.len() * 4);
                });
            }
            let low_bytes = layout.low_bytes_of(i);
            let per_page = meta::entries_per_page(low_bytes);
            for first in (0..rows).step_by(per_page) {
                let here = per_page.min(rows - first);
                self.page(&mut |entries_page| {
                    page::init_page(entries_page, Kind::CodeEntries, 0);
                    let ordinals = page::contents(entries_page).cast::<u32>();
                    let lows = page::contents(entries_page).add(per_page * 4);
                    for n in 0..here {
                        let entry = next();
                        ordinals.add(n).write_unaligned(entry as u32);
                        let low = layout.split(i, (entry >> 32) as u32).1;
                        if low_bytes == 1 {
                            *lows.add(n) = low as u8;
                        } else {
                            lows.cast::<u16>().add(n).write_unaligned(low);
                        }
                    }
                    page::set_used(entries_page, meta::entries_used(here, low_bytes));
                });
            }
        }
    }

    /// Appends the chain of `count` NULL rows, `next` giving each TID in turn.
    pub unsafe fn null_pages(&mut self, count: usize, next: &mut dyn FnMut() -> pg_sys::ItemPointerData) {
        let per_page = meta::nulls_per_page();
        let pages = count.div_ceil(per_page);
        for n in 0..pages {
            let here = per_page.min(count - n * per_page);
            let follows = if n + 1 == pages { INVALID_BLOCK } else { self.block + 1 };
            unsafe {
                self.page(&mut |nulls_page| {
                    page::init_page(nulls_page, Kind::CodeNulls, 0);
                    let tids = page::contents(nulls_page).cast::<pg_sys::ItemPointerData>();
                    for i in 0..here {
                        tids.add(i).write_unaligned(next());
                    }
                    page::set_used(nulls_page, here * TID);
                    (*page::special(nulls_page)).next = follows;
                });
            }
        }
    }
}
