//! The built part of an index of format 5 (`simhash_core::dense` has the layout and why a lookup
//! is exact): the rows the table held when the index was built, written once by the build, in
//! four runs of blocks, one per segment, each a directory (where each segment value's run of
//! entries starts, 4 bytes per value) and then the entries, densely:
//! - segment 0: residual and TID (12 bytes), [`per_page`] to a page, the residuals from the start
//!   of the page's contents, the TIDs after all of them;
//! - segments 1 to 3: the residual alone (6 bytes).
//!
//! Its pages never change but for VACUUM, which marks the TIDs of removed rows in segment 0 as
//! invalid (offset 0): their fingerprints stay in every segment, and a match with such a row finds
//! no TID. The rows inserted since the build are in the buckets (`super::page`), as in an index of
//! format 4; a REINDEX moves them here.
//!
//! This file has the layout of the built part ([`Dense`], its pages and their checks) and its
//! marks by VACUUM; `super::dense_read` reads it (the runs of segment values, with read-ahead),
//! `super::dense_write` writes it at a build.

use pgrx::pg_sys::{self, BlockNumber, Page};
use simhash_core::dense::{RESIDUAL_BYTES, VALUES};
use simhash_core::SEGMENTS;

use super::page::{self, Kind, Meta, TID};

/// The `tid_order` key of a row of the built part met in segments 1 to 3, which keep no TIDs (no
/// TID's key): its TID is looked up in segment 0 ([`super::dense_read::rows_of`]) when it is needed.
pub(super) const UNRESOLVED: u64 = u64::MAX;

/// Entries of a page of segment `n`.
pub(super) fn per_page(n: u32) -> usize {
    if n == 0 {
        page::usable() / (RESIDUAL_BYTES + TID)
    } else {
        page::usable() / RESIDUAL_BYTES
    }
}

/// The bytes of a page of segment `n` that its entries may take.
pub(super) fn used_bytes(n: u32) -> usize {
    if n == 0 {
        per_page(0) * (RESIDUAL_BYTES + TID)
    } else {
        per_page(n) * RESIDUAL_BYTES
    }
}

/// Directory positions on a directory page.
pub(super) fn directory_per_page() -> usize {
    page::usable() / std::mem::size_of::<u32>()
}

/// Directory pages of a segment: `VALUES + 1` positions.
pub(super) fn directory_pages() -> u32 {
    (VALUES + 1).div_ceil(directory_per_page()) as u32
}

/// Whether a TID of segment 0 is a row's (not one VACUUM removed).
pub(super) fn is_live(tid: &pg_sys::ItemPointerData) -> bool {
    tid.ip_posid != 0
}

/// The built part of an index: where it starts and how many rows it holds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dense {
    pub start: BlockNumber,
    pub rows: u32,
}

impl Dense {
    /// The built part of the index of `meta`, if it has one.
    pub fn of(meta: &Meta) -> Option<Dense> {
        meta.has_dense().then_some(Dense { start: meta.dense_start, rows: meta.dense_rows })
    }

    /// The pages of the entries of segment `n`.
    pub fn data_pages(&self, n: u32) -> u32 {
        (self.rows as usize).div_ceil(per_page(n)) as u32
    }

    /// The first block of segment `n` (its directory, then its entries).
    pub fn segment_start(&self, n: u32) -> BlockNumber {
        self.start + (0..n).map(|m| directory_pages() + self.data_pages(m)).sum::<u32>()
    }

    /// The blocks of the built part.
    pub fn blocks(&self) -> u32 {
        self.segment_start(SEGMENTS) - self.start
    }

    /// The block of the directory of segment `n` that holds position `value` of it, and where.
    pub fn directory_position(&self, n: u32, value: usize) -> (BlockNumber, usize) {
        let per = directory_per_page();
        (self.segment_start(n) + (value / per) as u32, value % per)
    }

    /// The first block of the entries of segment `n` (after its directory).
    pub fn data_start(&self, n: u32) -> BlockNumber {
        self.segment_start(n) + directory_pages()
    }

    /// The block of entry `position` of segment `n`, and the entry's place on it.
    pub fn position(&self, n: u32, position: u32) -> (BlockNumber, usize) {
        let per = per_page(n);
        (self.data_start(n) + (position as usize / per) as u32, position as usize % per)
    }

    /// The position in segment `n` of the first entry of its page `block`, and the entries on
    /// that page.
    pub fn entries_of(&self, n: u32, block: BlockNumber) -> (u32, usize) {
        let base = (block - self.data_start(n)) * per_page(n) as u32;
        (base, (self.rows.saturating_sub(base) as usize).min(per_page(n)))
    }
}

/// Checks that `any_page`, block `block` of `index`, is a page of `kind` of segment `n` (else an
/// ERROR: the index is corrupt).
///
/// # Safety
///
/// `any_page` is that page, locked.
pub(super) unsafe fn expect_page(index: pg_sys::Relation, any_page: Page, block: BlockNumber, kind: Kind, n: u32) {
    unsafe {
        page::expect_kind(any_page, kind, index, block);
        if u32::from((*page::special(any_page)).segment()) != n {
            page::corrupt(index, format!("block {block} is not a page of segment {n}"));
        }
    }
}

/// The TIDs of a page of segment 0.
#[derive(Clone, Copy)]
pub(super) struct Tids {
    start: *const u8,
    len: usize,
}

impl Tids {
    /// TID `i` (below the entries of the page, else a panic).
    pub fn get(&self, i: usize) -> pg_sys::ItemPointerData {
        assert!(i < self.len, "TID {i} of {}", self.len);
        // SAFETY: the page holds `len` TIDs from `start`.
        unsafe { self.start.add(i * TID).cast::<pg_sys::ItemPointerData>().read_unaligned() }
    }
}

/// The residuals of a page of segment `n`, and its TIDs in segment 0.
///
/// # Safety
///
/// `page` is a locked page of the entries of segment `n`, holding `entries`.
pub(super) unsafe fn page_entries<'a>(page: Page, n: u32, entries: usize) -> (&'a [u8], Option<Tids>) {
    unsafe {
        let contents = page::contents(page) as *const u8;
        let residuals = std::slice::from_raw_parts(contents, per_page(n) * RESIDUAL_BYTES);
        let tids = (n == 0).then(|| Tids { start: contents.add(per_page(0) * RESIDUAL_BYTES), len: entries });
        (residuals, tids)
    }
}

/// The blocks of the entries of segment 0 of the built part of the index of `meta` (empty
/// without one): those VACUUM reads.
pub(super) fn segment_0_blocks(meta: &Meta) -> std::ops::Range<BlockNumber> {
    match Dense::of(meta) {
        Some(built) => built.data_start(0)..built.data_start(0) + built.data_pages(0),
        None => 0..0,
    }
}

/// The blocks of the built part of the index of `meta` (empty without one).
pub(super) fn blocks(meta: &Meta) -> std::ops::Range<BlockNumber> {
    match Dense::of(meta) {
        Some(built) => built.start..built.start + built.blocks(),
        None => 0..0,
    }
}

/// Marks the TIDs of page `block` of segment 0 for which `removed` holds as removed; returns the
/// rows left and those marked.
///
/// # Safety
///
/// `dense_page` is that page, exclusively locked (or its GenericXLog copy; share-locked if
/// `removed` never holds).
pub(super) unsafe fn mark_removed(
    built: &Dense,
    block: BlockNumber,
    dense_page: Page,
    mut removed: impl FnMut(&mut pg_sys::ItemPointerData) -> bool,
) -> (usize, usize) {
    unsafe {
        let (_, entries) = built.entries_of(0, block);
        let tids = page::contents(dense_page).add(per_page(0) * RESIDUAL_BYTES).cast::<pg_sys::ItemPointerData>();
        let (mut left, mut marked) = (0, 0);
        for i in 0..entries {
            let mut tid = tids.add(i).read_unaligned();
            if !is_live(&tid) {
                continue;
            }
            if removed(&mut tid) {
                tids.add(i).write_unaligned(pg_sys::ItemPointerData { ip_blkid: tid.ip_blkid, ip_posid: 0 });
                marked += 1;
            } else {
                left += 1;
            }
        }
        (left, marked)
    }
}

/// What is wrong with page `block` of the built part `built`, if anything: its kind, segment and
/// the bytes its header says it uses (GenericXLog, which VACUUM's marks go through, keeps only
/// those), for `simhash_index_check`.
///
/// # Safety
///
/// `any_page` is that page, locked.
pub(super) unsafe fn page_fault(built: &Dense, block: BlockNumber, any_page: Page) -> Option<String> {
    unsafe {
        let n = (0..SEGMENTS).rev().find(|&n| built.segment_start(n) <= block)?;
        let data = block >= built.data_start(n);
        let kind = if data { Kind::Dense } else { Kind::DenseDirectory };
        if !page::is_kind(any_page, kind) {
            return Some(format!("not a {kind:?} page"));
        }
        if u32::from((*page::special(any_page)).segment()) != n {
            return Some(format!("not a page of segment {n}"));
        }
        let used = if data {
            used_bytes(n)
        } else {
            let d = (block - built.segment_start(n)) as usize;
            ((VALUES + 1) - d * directory_per_page()).min(directory_per_page()) * std::mem::size_of::<u32>()
        };
        let header = any_page as *const pg_sys::PageHeaderData;
        if page::used(any_page) != used || (*header).pd_upper < (*header).pd_lower {
            return Some(format!("it uses {} bytes, not {used}", page::used(any_page)));
        }
        None
    }
}
