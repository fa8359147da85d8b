//! Reads of an index of codes: pages share-locked one or two at a time ([`Pages`]), the rows of
//! the code store and the tail ([`Reader::for_each_row`]), the NULL rows, and a radius lookup
//! through the segments ([`Reader::probe`]). Every offset and ordinal read from a page is checked
//! before it is followed (ERROR XX002), and every chain walk is bounded by the index's size.

use pgrx::pg_sys::{self, BlockNumber, Page};
use simhash_core::code_index::{self, Layout, Lookup};
use std::rc::Rc;

use super::segment_pages::SegmentPages;
use simhash_core::multi_index::{hamming_bytes, Work};

use super::super::buffers::{number_of_blocks, read_locked};
use super::super::page::{self, corrupt, Kind, INVALID_BLOCK, TID};
use super::super::readahead::prefetch_bytes;
use super::meta::{self, CodesMeta, Places};
use crate::pg::tid::tid_order;

/// Up to two pages share-locked at a time (a directory's and an entries' page, say), each kept
/// until another block is asked for in its place.
pub(super) struct Pages {
    index: pg_sys::Relation,
    held: [(BlockNumber, pg_sys::Buffer); 2],
}

impl Pages {
    pub fn new(index: pg_sys::Relation) -> Pages {
        Pages { index, held: [(INVALID_BLOCK, pg_sys::InvalidBuffer as pg_sys::Buffer); 2] }
    }

    /// Block `block`, of `kind`, in place `place` (0 or 1), share-locked until released.
    pub unsafe fn page(&mut self, place: usize, block: BlockNumber, kind: Kind) -> Page {
        unsafe {
            let (held, buffer) = self.held[place];
            if held != block {
                if held != INVALID_BLOCK {
                    pg_sys::UnlockReleaseBuffer(buffer);
                    self.held[place].0 = INVALID_BLOCK;
                }
                let buffer = read_locked(self.index, block, pg_sys::BUFFER_LOCK_SHARE);
                self.held[place] = (block, buffer);
                page::expect_kind(pg_sys::BufferGetPage(buffer), kind, self.index, block);
            }
            pg_sys::BufferGetPage(self.held[place].1)
        }
    }

    pub fn release(&mut self) {
        for (block, buffer) in &mut self.held {
            if *block != INVALID_BLOCK {
                unsafe { pg_sys::UnlockReleaseBuffer(*buffer) };
                *block = INVALID_BLOCK;
            }
        }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // (after an ERROR the buffers are released by the abort; this is for the normal end)
        self.release();
    }
}

/// How many rows ahead [`Reader::for_each_store_row_at`] asks for the slot it will read.
const STORE_AHEAD: usize = 4;

/// The TID of a slot whose row VACUUM removed.
pub(super) fn is_removed(tid: &pg_sys::ItemPointerData) -> bool {
    tid.ip_posid == 0
}

/// The slots of a page of the code store or the tail, checked against its size.
///
/// # Safety
///
/// `store_page` is a locked page of such a kind.
pub(super) unsafe fn slots<'a>(
    index: pg_sys::Relation,
    store_page: Page,
    block: BlockNumber,
    code_bytes: usize,
) -> impl Iterator<Item = (pg_sys::ItemPointerData, &'a [u8])> {
    unsafe {
        let slot = meta::store_slot(code_bytes);
        let used = slot_count(index, store_page, block, code_bytes) * slot;
        let contents = std::slice::from_raw_parts(page::contents(store_page) as *const u8, used);
        contents.chunks_exact(slot).map(|s| (s.as_ptr().cast::<pg_sys::ItemPointerData>().read_unaligned(), &s[TID..]))
    }
}

/// The number of slots of a page of the code store or the tail, checked against its size.
///
/// # Safety
///
/// `store_page` is a locked page of such a kind.
pub(super) unsafe fn slot_count(
    index: pg_sys::Relation,
    store_page: Page,
    block: BlockNumber,
    code_bytes: usize,
) -> usize {
    let slot = meta::store_slot(code_bytes);
    let used = unsafe { page::used(store_page) };
    if !used.is_multiple_of(slot) || used / slot > meta::store_per_page(code_bytes) {
        corrupt(index, format!("block {block} holds {used} bytes, not slots of {slot}"));
    }
    used / slot
}

/// The TIDs of a page of the NULL rows' chain.
pub(super) unsafe fn null_slots(
    index: pg_sys::Relation,
    nulls_page: Page,
    block: BlockNumber,
) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        let used = page::used(nulls_page);
        if !used.is_multiple_of(TID) || used / TID > meta::nulls_per_page() {
            corrupt(index, format!("block {block} holds {used} bytes, not TIDs"));
        }
        let tids = page::contents(nulls_page) as *const pg_sys::ItemPointerData;
        (0..used / TID).map(|i| tids.add(i).read_unaligned()).collect()
    }
}

/// An index of codes being read.
pub(super) struct Reader {
    pub index: pg_sys::Relation,
    pub meta: CodesMeta,
    pub layout: Layout,
    pub places: Places,
    pub pages: Pages,
    blocks: BlockNumber,
}

impl Reader {
    /// # Safety
    ///
    /// `index` is an open simhash index of codes.
    pub unsafe fn new(index: pg_sys::Relation) -> Reader {
        unsafe {
            let meta = meta::load_meta(index);
            Reader {
                index,
                meta,
                layout: meta.layout(),
                places: Places::of(&meta),
                pages: Pages::new(index),
                blocks: number_of_blocks(index),
            }
        }
    }

    /// Each page of the chain from `head` (of `kind`), share-locked in turn, with `visit`.
    pub unsafe fn walk_chain(&mut self, head: BlockNumber, kind: Kind, mut visit: impl FnMut(BlockNumber, Page)) {
        unsafe {
            let mut block = head;
            let mut steps = 0u32;
            while block != INVALID_BLOCK {
                pgrx::check_for_interrupts!();
                steps += 1;
                if block >= self.blocks.max(number_of_blocks(self.index))
                    || steps > self.blocks.max(number_of_blocks(self.index))
                {
                    corrupt(self.index, format!("a chain of {kind:?} pages leads to block {block} (step {steps})"));
                }
                let buffer = read_locked(self.index, block, pg_sys::BUFFER_LOCK_SHARE);
                let chain_page = pg_sys::BufferGetPage(buffer);
                page::expect_kind(chain_page, kind, self.index, block);
                visit(block, chain_page);
                let next = (*page::special(chain_page)).next;
                pg_sys::UnlockReleaseBuffer(buffer);
                block = next;
            }
        }
    }

    /// Every live row with a code, with `visit(code, TID)`: the code store in order, then the tail.
    pub unsafe fn for_each_row(&mut self, visit: &mut dyn FnMut(&[u8], &pg_sys::ItemPointerData)) {
        unsafe {
            self.for_each_store_row(visit);
            self.for_each_tail_row(visit);
        }
    }

    /// Every live row of the code store (the rows of the build), in order, with `visit(code, TID)`.
    pub unsafe fn for_each_store_row(&mut self, visit: &mut dyn FnMut(&[u8], &pg_sys::ItemPointerData)) {
        unsafe {
            let code_bytes = self.meta.code_bytes();
            let per_page = meta::store_per_page(code_bytes);
            for p in 0..self.places.store_pages {
                // (with no page locked: a held lock holds interrupts off)
                self.pages.release();
                pgrx::check_for_interrupts!();
                let block = self.meta.store_start + p;
                let store_page = self.pages.page(0, block, Kind::CodeStore);
                let expected = (self.meta.rows as usize - p as usize * per_page).min(per_page);
                let mut n = 0;
                for (tid, code) in slots(self.index, store_page, block, code_bytes) {
                    n += 1;
                    if !is_removed(&tid) {
                        visit(code, &tid);
                    }
                }
                if n != expected {
                    corrupt(self.index, format!("code store block {block} has {n} rows, not {expected}"));
                }
            }
            self.pages.release();
        }
    }

    /// Every live row of the tail, with `visit(code, TID)`.
    pub unsafe fn for_each_tail_row(&mut self, visit: &mut dyn FnMut(&[u8], &pg_sys::ItemPointerData)) {
        unsafe {
            let (index, code_bytes) = (self.index, self.meta.code_bytes());
            self.walk_chain(self.meta.tail_head, Kind::CodeTail, |block, tail_page| {
                for (tid, code) in slots(index, tail_page, block, code_bytes) {
                    if !is_removed(&tid) {
                        visit(code, &tid);
                    }
                }
            });
        }
    }

    /// Every live row whose code is NULL, with `visit(TID order key)`, in the order of its pages
    /// (not TID order: a caller that wants it sorts, or keeps the smallest).
    pub unsafe fn for_each_null_row(&mut self, visit: &mut dyn FnMut(u64)) {
        unsafe {
            let index = self.index;
            self.walk_chain(self.meta.nulls_head, Kind::CodeNulls, |block, nulls_page| {
                for tid in null_slots(index, nulls_page, block).iter().filter(|t| !is_removed(t)) {
                    visit(tid_order(tid));
                }
            });
        }
    }

    /// Whether a lookup within `k` probes the segments (or reads the code store whole): its radii.
    pub fn probes_pay(&self, k: u32) -> Option<Rc<Lookup>> {
        if self.meta.rows == 0 {
            // (the tail alone: `probe` looks it up)
            return Some(Rc::new(Lookup {
                radii: Vec::new(),
                work: Work { probes: 0.0, candidates: 0.0, checks: 0.0 },
            }));
        }
        let lookup = self.layout.lookup(k, u64::from(self.meta.rows))?;
        self.pays_after(&lookup, 0.0)?;
        Some(lookup)
    }

    /// Whether `lookup` pays after `spent` units of probing already: its units. The index holds
    /// rows in its code store.
    pub fn pays_after(&self, lookup: &Lookup, spent: f64) -> Option<f64> {
        let rows = u64::from(self.meta.rows);
        let units = code_index::units(lookup.work);
        let total = Work { probes: lookup.work.probes + spent, ..lookup.work };
        code_index::probing_pays(total, rows).then_some(units)
    }

    /// The live rows of the code store at `ordinals` (ascending), with `visit(code, TID)`.
    pub unsafe fn for_each_store_row_at(
        &mut self,
        ordinals: &[u32],
        visit: &mut dyn FnMut(&[u8], &pg_sys::ItemPointerData),
    ) {
        unsafe {
            let code_bytes = self.meta.code_bytes();
            let per_page = meta::store_per_page(code_bytes);
            let slot = meta::store_slot(code_bytes);
            for (n, &ordinal) in ordinals.iter().enumerate() {
                if n % 1024 == 0 {
                    self.pages.release();
                    pgrx::check_for_interrupts!();
                }
                let block = self.meta.store_start + ordinal / per_page as u32;
                let store_page = self.pages.page(0, block, Kind::CodeStore);
                let at = ordinal as usize % per_page;
                if at >= slot_count(self.index, store_page, block, code_bytes) {
                    corrupt(self.index, format!("code store block {block} has no row {ordinal}"));
                }
                let bytes = page::contents(store_page).add(at * slot);
                // (the slot of the row a few ahead asked for, when on this page: the rows of a
                // round are scattered over the page)
                if let Some(&next) =
                    ordinals.get(n + STORE_AHEAD).filter(|&&next| next / per_page as u32 == ordinal / per_page as u32)
                {
                    prefetch_bytes(page::contents(store_page).add(next as usize % per_page * slot), slot);
                }
                let tid = bytes.cast::<pg_sys::ItemPointerData>().read_unaligned();
                let code = std::slice::from_raw_parts(bytes.add(TID), code_bytes);
                if !is_removed(&tid) {
                    visit(code, &tid);
                }
            }
            self.pages.release();
        }
    }

    /// Probes the segments of `query` with `radii` into `meetings` (`Meetings::probe`: the
    /// segments new to it, or all afresh; `None` when more than `limit` rows were met). The index
    /// holds rows in its code store.
    pub unsafe fn meet(
        &mut self,
        meetings: &mut code_index::Meetings,
        query: &[u8],
        radii: &[Option<u32>],
        limit: usize,
    ) -> Option<bool> {
        let interrupt = crate::fingerprint::text::INTERRUPTS;
        let layout = self.layout;
        let kept = meetings.probe(&layout, radii, query, &mut SegmentPages::new(self), limit, interrupt);
        self.pages.release();
        kept
    }

    /// The rows of the code store within `k` of `query` found through the segments with `radii`
    /// (complete for `k`; none when the build had no rows) and then the tail's (`super::tail`), as (distance, TID order) in no particular order, or
    /// `None` when more than `limit` candidates were met (nothing read then but the segments; a
    /// candidate takes 8 bytes while they are collected, in a vector that grows by doubling, and 8
    /// more while they are sorted: at most about `limit * 24` bytes) or memory for the candidates
    /// or the rows found was refused (the callers then read the code store whole, which needs none).
    pub unsafe fn probe(
        &mut self,
        query: &[u8],
        k: u32,
        radii: &[Option<u32>],
        limit: usize,
        keep: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Option<Vec<(u32, u64)>> {
        unsafe {
            let interrupt = crate::fingerprint::text::INTERRUPTS;
            let layout = self.layout;
            let ordinals = if self.meta.rows == 0 {
                Some(Vec::new())
            } else {
                let mut segments = SegmentPages::new(self);
                code_index::candidates(&layout, radii, k, query, &mut segments, limit, interrupt)
            };
            self.pages.release();
            let ordinals = ordinals?;
            let mut found = Vec::new();
            // (memory refused for a row found: the rest is skipped, and the lookup is `None`)
            let mut refused = false;
            self.for_each_store_row_at(&ordinals, &mut |code, tid| {
                if let Some(d) = hamming_bytes(code, query).filter(|&d| d <= k) {
                    if !refused && keep(code) {
                        refused = crate::memory::push(&mut found, (d, tid_order(tid))).is_none();
                    }
                }
            });
            if refused {
                return None;
            }
            super::tail::for_each_within(self, query, k, &mut |d, key, code| {
                if !refused && keep(code) {
                    refused = crate::memory::push(&mut found, (d, key)).is_none();
                }
            });
            (!refused).then_some(found)
        }
    }
}
