//! The metapage of an index of codes (format 6, [`CodesMeta`]), where each part of the index is
//! ([`Places`]), and the slots of its pages.
//!
//! Block 0 is a `Kind::Meta` page whose contents start with a magic number of their own, so that
//! the `simhash64` kind's reader, should it meet one, says the index is corrupt instead of reading
//! it (`super::super::meta::read_meta`). Built part, in block order: the code store
//! (`Kind::CodeStore`: slots of TID and code, [`store_slot`] bytes), then for each indexed segment
//! its directory (`Kind::CodeDirectory`: `u32` positions) and its entries (`Kind::CodeEntries`: the
//! ordinals as `u32`, then the low bits in one or two bytes, [`entries_per_page`] of each), then the chain of
//! NULL rows (`Kind::CodeNulls`: TIDs). The tail (`Kind::CodeTail`, slots as the store's) and the
//! pages inserts add to the NULL chain follow, linked through the special space's `next`.

use pgrx::pg_sys::{self, BlockNumber, Page};
use simhash_core::code_index::Layout;
use simhash_core::multi_index::SegmentPlan;

use super::super::buffers::{number_of_blocks, read_locked};
use super::super::page::{self, corrupt, Kind, INVALID_BLOCK, TID};

pub(super) const MAGIC: u32 = 0x5348_4243; // "SHBC"
pub(super) const VERSION: u32 = 6;

/// The metapage's contents.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(in crate::index) struct CodesMeta {
    pub magic: u32,
    pub version: u32,
    /// The length of every code (0: not known yet, an index built empty on `bit varying`).
    pub code_bits: u32,
    /// The layout (`simhash_core::code_index::Layout`), when `rows > 0`.
    pub width: u32,
    pub count: u32,
    pub last_width: u32,
    pub indexed: u32,
    pub prefix_bits: u32,
    /// The rows of the build, in the code store (dead ones too).
    pub rows: u32,
    /// The first block of the code store (1).
    pub store_start: BlockNumber,
    /// The first block after the built part (the NULL rows' pages of the build follow it).
    pub built_end: BlockNumber,
    pub nulls_head: BlockNumber,
    pub nulls_tail: BlockNumber,
    pub tail_head: BlockNumber,
    pub tail_tail: BlockNumber,
    /// The pages of the tail (for the cost estimate).
    pub tail_pages: u32,
    /// Bumped by each VACUUM that marks rows of the tail removed (a backend's copy of the tail,
    /// `super::tail`, is then read again).
    pub tail_marks: u32,
    /// Set at the build, to tell this index's tail from another's.
    pub stamp: u64,
}

impl CodesMeta {
    pub fn new(code_bits: u32) -> CodesMeta {
        CodesMeta {
            magic: MAGIC,
            version: VERSION,
            code_bits,
            width: 0,
            count: 0,
            last_width: 0,
            indexed: 0,
            prefix_bits: 0,
            rows: 0,
            store_start: 1,
            built_end: 1,
            nulls_head: INVALID_BLOCK,
            nulls_tail: INVALID_BLOCK,
            tail_head: INVALID_BLOCK,
            tail_tail: INVALID_BLOCK,
            tail_pages: 0,
            tail_marks: 0,
            stamp: 0,
        }
    }

    pub fn layout(&self) -> Layout {
        Layout {
            plan: SegmentPlan {
                code_bits: self.code_bits,
                width: self.width,
                count: self.count,
                last_width: self.last_width,
            },
            indexed: self.indexed,
            prefix_bits: self.prefix_bits,
        }
    }

    pub fn set_layout(&mut self, layout: &Layout) {
        self.width = layout.plan.width;
        self.count = layout.plan.count;
        self.last_width = layout.plan.last_width;
        self.indexed = layout.indexed;
        self.prefix_bits = layout.prefix_bits;
    }

    pub fn code_bytes(&self) -> usize {
        self.code_bits.div_ceil(8) as usize
    }
}

/// The bytes of a slot of the code store or the tail: the TID, then the code.
pub(super) fn store_slot(code_bytes: usize) -> usize {
    TID + code_bytes
}

/// The slots of a page of the code store or the tail.
pub(super) fn store_per_page(code_bytes: usize) -> usize {
    page::usable() / store_slot(code_bytes)
}

/// The TIDs of a page of the NULL rows' chain.
pub(super) fn nulls_per_page() -> usize {
    page::usable() / TID
}

/// The entries of a page of a segment's entries (4 bytes of ordinal, `low_bytes` of low bits
/// each).
pub(in crate::index) fn entries_per_page(low_bytes: usize) -> usize {
    page::usable() / (4 + low_bytes)
}

/// The entries on a page of a segment's entries whose low bits take `low_bytes`: its ordinals
/// fill `entries_per_page(low_bytes)` slots of 4 bytes, its low bits follow them, and `pd_lower`
/// ends after the last low bits (so that the page's free space, which WAL leaves out of full-page
/// images, holds none of them); 0 when `pd_lower` says no such thing.
///
/// # Safety
///
/// `entries_page` is a locked page.
pub(in crate::index) unsafe fn entries_on(entries_page: Page, low_bytes: usize) -> usize {
    let per_page = entries_per_page(low_bytes);
    let lows = unsafe { page::used(entries_page) }.saturating_sub(per_page * 4);
    (lows / low_bytes).min(per_page)
}

/// The bytes used by a page of `n` entries ([`entries_on`]).
pub(super) fn entries_used(n: usize, low_bytes: usize) -> usize {
    entries_per_page(low_bytes) * 4 + n * low_bytes
}

/// The low bits of entry `at` of a page of entries.
///
/// # Safety
///
/// `entries_page` is a locked page of entries with more than `at`.
pub(super) unsafe fn low_at(entries_page: Page, low_bytes: usize, at: usize) -> u16 {
    unsafe {
        let lows = page::contents(entries_page).add(entries_per_page(low_bytes) * 4);
        if low_bytes == 1 {
            u16::from(*lows.add(at))
        } else {
            (lows as *const u16).add(at).read_unaligned()
        }
    }
}

/// The positions of a directory page.
pub(super) fn directory_per_page() -> usize {
    page::usable() / 4
}

/// Where the parts of the built part are.
#[derive(Clone, Debug)]
pub(super) struct Places {
    pub store_pages: u32,
    /// Per indexed segment: the first block of its directory, and of its entries.
    pub segments: Vec<(BlockNumber, BlockNumber)>,
    pub end: BlockNumber,
}

impl Places {
    pub fn of(meta: &CodesMeta) -> Places {
        if meta.rows == 0 {
            return Places { store_pages: 0, segments: Vec::new(), end: meta.store_start };
        }
        let layout = meta.layout();
        let store_pages = (meta.rows as usize).div_ceil(store_per_page(meta.code_bytes())) as u32;
        let mut block = meta.store_start + store_pages;
        let mut segments = Vec::new();
        for i in 0..layout.indexed {
            let entry_pages = (meta.rows as usize).div_ceil(entries_per_page(layout.low_bytes_of(i))) as u32;
            let directory_pages = layout.directory_len(i).div_ceil(directory_per_page()) as u32;
            segments.push((block, block + directory_pages));
            block += directory_pages + entry_pages;
        }
        Places { store_pages, segments, end: block }
    }
}

/// Checks the metapage's fields (ERROR XX002 when they are not those of an index of codes).
pub(super) fn check_meta(index: pg_sys::Relation, meta: &CodesMeta) {
    if meta.magic != MAGIC || meta.version != VERSION {
        corrupt(index, format!("its metapage is not one of an index of bit codes (format {})", meta.version));
    }
    let fits = meta.code_bits <= simhash_core::multi_index::MAX_CODE_BITS
        && meta.store_start == 1
        && (meta.rows == 0
            || (meta.code_bits > 0 && meta.layout().is_valid() && meta.layout().plan.code_bits == meta.code_bits))
        && Places::of(meta).end == meta.built_end;
    if !fits {
        corrupt(index, format!("bad metapage ({meta:?})"));
    }
}

/// The metapage of `index` (an index of codes), read under a share lock and checked, with its
/// built part inside the index.
///
/// # Safety
///
/// `index` is an open simhash index of codes.
pub(super) unsafe fn load_meta(index: pg_sys::Relation) -> CodesMeta {
    unsafe {
        let blocks = number_of_blocks(index);
        if blocks == 0 {
            corrupt(index, "it has no metapage".into());
        }
        let buffer = read_locked(index, 0, pg_sys::BUFFER_LOCK_SHARE);
        let meta = read_meta(index, pg_sys::BufferGetPage(buffer));
        pg_sys::UnlockReleaseBuffer(buffer);
        if meta.built_end > blocks {
            corrupt(index, format!("its {blocks} blocks cannot hold its built part (to block {})", meta.built_end));
        }
        meta
    }
}

/// The metapage's contents, checked.
///
/// # Safety
///
/// `page` is block 0 of `index`, locked.
pub(super) unsafe fn read_meta(index: pg_sys::Relation, meta_page: Page) -> CodesMeta {
    unsafe {
        page::expect_kind(meta_page, Kind::Meta, index, 0);
        if page::used(meta_page) < std::mem::size_of::<CodesMeta>() {
            corrupt(index, "its metapage is too short".into());
        }
        let meta = codes_meta(meta_page).read_unaligned();
        check_meta(index, &meta);
        meta
    }
}

/// The metapage's contents in `page`.
///
/// # Safety
///
/// `page` is a metapage.
pub(in crate::index) unsafe fn codes_meta(meta_page: Page) -> *mut CodesMeta {
    unsafe { page::contents(meta_page).cast() }
}

/// Writes `meta` into the metapage `meta_page` (initialized or not).
///
/// # Safety
///
/// `meta_page` is a page-sized buffer, exclusively locked or a copy to log.
pub(super) unsafe fn write_meta(meta_page: Page, meta: &CodesMeta, init: bool) {
    unsafe {
        if init {
            page::init_page(meta_page, Kind::Meta, 0);
        }
        codes_meta(meta_page).write_unaligned(*meta);
        page::set_used(meta_page, std::mem::size_of::<CodesMeta>());
    }
}
