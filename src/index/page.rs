//! The pages of a `simhash` index: block 0 is the metapage; then the directory, four runs of
//! pages (one per segment) of [`DirectoryEntry`]s, one per bucket, giving the first and last page of
//! the bucket's chain; then the bucket pages, each holding [`Entry`]s (fingerprint and heap TID)
//! and a link to the next page of its bucket. Since version 3 of the format, a bucket page counts
//! the entries at its start that are in ascending order of their segment value
//! ([`Special::sorted`]): all of them as built, a page once it is full or VACUUM rewrites it, and
//! none of those an INSERT appends; a probe reads only the runs of the values it asks for there.
//! (Not in an index of an older format, whose pages keep a count of 0: [`Meta::sorts_pages`].) The
//! rows whose fingerprint is NULL are one more chain, of [`Kind::Nulls`] pages, whose first and
//! last page the metapage holds (since version 2 of the format, for `ORDER BY`, which returns every
//! row). Every page has the standard layout, so GenericXLog can log it: the special space holds
//! [`Special`], and the entries are
//! - packed (fingerprint and TID together, 14 bytes each) from the start of the page up to
//!   `pd_lower`, in the pages of an index of format 1 to 3;
//! - apart since format 4 ([`Meta::keeps_apart`]): the fingerprints from the start up to
//!   `pd_lower`, the TIDs from the special space down to `pd_upper` (the free space between), so
//!   that a probe, which checks many fingerprints for few matches, reads 8 bytes per entry, not
//!   14: the entries a lookup checks are most of its time, and mostly not in the CPU's caches.
//!
//! A page says which it is (a page with entries apart has `pd_upper` below its special space), so
//! readers take each page as it is; a writer keeps a page's layout, and starts an empty page in
//! the layout of the index's format (a session still running an older library reads an index of
//! format 3 or older).
//!
//! Since format 5 ([`Meta::has_dense`]), an index keeps the rows it was built with apart from the
//! buckets, in its *built part* (`super::dense`: per segment, a directory of segment values and
//! the entries densely, [`Kind::DenseDirectory`] and [`Kind::Dense`] pages, after the directory),
//! and its buckets hold the rows inserted since, with a quarter to an eighth of the buckets of
//! format 4. The built part takes 30 bytes per row, where the buckets take 56 and leave pages
//! half empty: an index of ten million uniform fingerprints is 289 MB in format 5, 1,025 MB in
//! format 4.
//!
//! Pages are never freed: VACUUM compacts bucket pages in place, and a chain only grows. So a scan
//! that follows a chain one page at a time, with a share lock on each, never lands on a page that
//! became something else.
//!
//! This file has the layout of a page (its kind, special space, header and contents), the metapage's
//! and the directory's fields; `super::meta` reads the metapage, `super::entries` the entries of a
//! bucket page, `super::chain` walks the chains, `super::buffers` reads, extends and WAL-logs pages.
//! A damaged page is an ERROR XX002 ([`corrupt`]), never a read outside the page (`super::chain`
//! says how).

use std::mem::size_of;

use pgrx::pg_sys::{self, BlockNumber, Page};
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

pub(super) const INVALID_BLOCK: BlockNumber = pg_sys::InvalidBlockNumber;

/// What a page is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u16)]
pub(super) enum Kind {
    Meta = 1,
    Directory = 2,
    Bucket = 3,
    /// A page of the chain of rows whose fingerprint is NULL (entries with `fp` 0).
    Nulls = 4,
    /// A page of the directory of a segment of the built part (format 5, `super::dense`).
    DenseDirectory = 5,
    /// A page of the entries of a segment of the built part (format 5, `super::dense`).
    Dense = 6,
    /// The pages of an index of `bit(n)` codes (`super::codes`): its code store, each indexed
    /// segment's directory and entries, the chain of codes inserted since the build, the chain
    /// of rows whose code is NULL.
    CodeStore = 7,
    CodeDirectory = 8,
    CodeEntries = 9,
    CodeTail = 10,
    CodeNulls = 11,
}

/// The special space of every page.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Special {
    pub kind: u16,
    /// The segment (0..=4) of a directory or chain page in the low 4 bits; in a bucket page, the
    /// number of entries at its start sorted by that segment's value in the upper 12 bits (0 in
    /// the pages of format 1 and 2, whose field was the segment alone).
    segment_and_sorted: u16,
    /// The next page of a bucket's chain.
    pub next: BlockNumber,
}

impl Special {
    const SEGMENT_MASK: u16 = 0xF;
    /// The most entries the sorted count can say (above what a page of 32 kB holds).
    const MAX_SORTED: usize = (u16::MAX >> 4) as usize;

    /// The segment (0..4) of a directory or bucket page, 4 for the chain of NULL rows.
    pub fn segment(&self) -> u16 {
        self.segment_and_sorted & Self::SEGMENT_MASK
    }

    /// The entries at the start of a bucket page in ascending order of their segment value.
    pub fn sorted(&self) -> usize {
        usize::from(self.segment_and_sorted >> 4)
    }

    pub fn set_sorted(&mut self, n: usize) {
        self.segment_and_sorted = self.segment() | (n.min(Self::MAX_SORTED) as u16) << 4;
    }
}

/// The metapage's contents.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Meta {
    pub magic: u32,
    pub version: u32,
    /// Each segment's buckets are its top `bits` bits (`simhash_core::buckets`).
    pub bits: u32,
    /// Directory pages per segment; segment n's start at block 1 + n * directory_pages.
    pub directory_pages: u32,
    /// The chain of the rows whose fingerprint is NULL (version 2).
    pub nulls: DirectoryEntry,
    /// The first block of the built part, and the rows in it (version 5; `super::dense`).
    pub dense_start: BlockNumber,
    pub dense_rows: u32,
}

impl Meta {
    /// Whether the index holds the rows whose fingerprint is NULL (not one built by 0.3.0).
    pub fn indexes_nulls(&self) -> bool {
        self.version >= 2
    }

    /// Whether its bucket pages count their sorted entries (format 3, built since 0.4.1). Those
    /// of an older index are neither sorted nor read as sorted: the 0.4.0 library, which a session
    /// may still run after an update, would compact a page without keeping its count right.
    pub fn sorts_pages(&self) -> bool {
        self.version >= 3
    }

    /// Whether its empty bucket pages are started with the entries apart (format 4, built since
    /// 0.8.0); those of an older index are packed, as its library reads them.
    pub fn keeps_apart(&self) -> bool {
        self.version >= 4
    }

    /// Whether it has a built part (format 5, built since 0.8.0, on a table with rows): the rows
    /// at build time, densely, `super::dense`; the buckets hold the rows inserted since.
    pub fn has_dense(&self) -> bool {
        self.version >= 5 && self.dense_rows > 0
    }
}

/// A bucket's chain: its first and last page (both invalid while it is empty).
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DirectoryEntry {
    pub head: BlockNumber,
    pub tail: BlockNumber,
}

impl DirectoryEntry {
    pub const EMPTY: DirectoryEntry = DirectoryEntry { head: INVALID_BLOCK, tail: INVALID_BLOCK };
}

/// One fingerprint of a heap row, as a packed page holds it (14 bytes, unaligned).
#[repr(C, packed)]
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub fp: u64,
    pub tid: pg_sys::ItemPointerData,
}

/// The fingerprint of an index value (`None` for NULL).
pub(super) fn fingerprint_of(value: pg_sys::Datum, isnull: bool) -> Option<u64> {
    (!isnull).then(|| value.value() as u64)
}

/// The bytes of a TID.
pub(super) const TID: usize = size_of::<pg_sys::ItemPointerData>();

pub(super) fn usable() -> usize {
    pg_sys::BLCKSZ as usize - header_contents_offset() - maxalign(size_of::<Special>())
}

/// Where the contents start: right after the page header (`PageGetContents`).
pub(super) fn header_contents_offset() -> usize {
    maxalign(size_of::<pg_sys::PageHeaderData>())
}

pub(super) fn maxalign(len: usize) -> usize {
    (len + 7) & !7
}

/// Entries of a bucket page.
pub(super) fn entries_per_page() -> usize {
    usable() / size_of::<Entry>()
}

/// Directory entries of a directory page.
pub(super) fn directory_entries_per_page() -> usize {
    usable() / size_of::<DirectoryEntry>()
}

/// Initializes `page` as an empty page of `kind` for `segment`.
///
/// # Safety
///
/// `page` is a page-sized buffer (a locked buffer's page or a GenericXLog copy).
pub(super) unsafe fn init_page(page: Page, kind: Kind, segment: u16) {
    unsafe {
        pg_sys::PageInit(page, pg_sys::BLCKSZ as usize, size_of::<Special>());
        *special(page) = Special { kind: kind as u16, segment_and_sorted: segment, next: INVALID_BLOCK };
        set_used(page, 0);
    }
}

/// Where the special space of every page of the index starts (`pd_special`).
pub(super) fn special_offset() -> usize {
    pg_sys::BLCKSZ as usize - maxalign(size_of::<Special>())
}

/// The special space of a page of the index, where [`init_page`] puts it (not where the page's
/// `pd_special` says, which a damaged page may set outside the page: [`is_kind`] checks it).
///
/// # Safety
///
/// `page` is a page-sized buffer.
pub(super) unsafe fn special(page: Page) -> *mut Special {
    unsafe { (page as *mut u8).add(special_offset()).cast() }
}

/// Whether `page` is of `kind` (a page of this index with the special space of one).
///
/// # Safety
///
/// `page` is a locked page of this index.
pub(super) unsafe fn is_kind(page: Page, kind: Kind) -> bool {
    unsafe {
        let header = page as *const pg_sys::PageHeaderData;
        !pg_sys::PageIsNew(page)
            && usize::from((*header).pd_special) == special_offset()
            && (*special(page)).kind == kind as u16
    }
}

/// Whether the header of `page` keeps its parts inside the page, in order: the header, the
/// contents up to `pd_lower`, the free space up to `pd_upper`, the TIDs of a page whose entries
/// are apart up to `pd_special`, the special space (as every page the index writes has them).
///
/// # Safety
///
/// `page` is a page-sized buffer.
pub(super) unsafe fn header_fits(page: Page) -> bool {
    unsafe {
        let header = page as *const pg_sys::PageHeaderData;
        let (lower, upper, special) =
            (usize::from((*header).pd_lower), usize::from((*header).pd_upper), usize::from((*header).pd_special));
        header_contents_offset() <= lower && lower <= upper && upper <= special && special <= pg_sys::BLCKSZ as usize
    }
}

/// What is wrong with the header of `page`, if anything ([`header_fits`]).
///
/// # Safety
///
/// `page` is a page-sized buffer.
pub(super) unsafe fn header_fault(page: Page) -> Option<String> {
    unsafe {
        if header_fits(page) {
            return None;
        }
        let header = page as *const pg_sys::PageHeaderData;
        Some(format!(
            "pd_lower {}, pd_upper {} and pd_special {} do not fit",
            (*header).pd_lower,
            (*header).pd_upper,
            (*header).pd_special
        ))
    }
}

/// Checks that `page`, block `block` of `index`, is a page of `kind` whose header keeps its
/// contents inside the page (else an ERROR XX002: the index is corrupt), as every read of a page's
/// contents does first.
///
/// # Safety
///
/// `page` is that page, locked.
pub(super) unsafe fn expect_kind(page: Page, kind: Kind, index: pg_sys::Relation, block: BlockNumber) {
    unsafe {
        if !is_kind(page, kind) {
            corrupt(index, format!("block {block} is not a {kind:?} page"));
        }
        if let Some(fault) = header_fault(page) {
            corrupt(index, format!("block {block} ({kind:?} page): {fault}"));
        }
    }
}

/// The bytes used after the header.
///
/// # Safety
///
/// `page` is an initialized page.
pub(super) unsafe fn used(page: Page) -> usize {
    // (saturating: 0 for a damaged header, which `layout_fault` reports)
    unsafe { ((*(page as *mut pg_sys::PageHeaderData)).pd_lower as usize).saturating_sub(header_contents_offset()) }
}

/// # Safety
///
/// `page` is an initialized page and `bytes` fits.
pub(super) unsafe fn set_used(page: Page, bytes: usize) {
    unsafe { (*(page as *mut pg_sys::PageHeaderData)).pd_lower = (header_contents_offset() + bytes) as u16 };
}

/// # Safety
///
/// `page` is an initialized page.
pub(super) unsafe fn contents(page: Page) -> *mut u8 {
    unsafe { (page as *mut u8).add(header_contents_offset()) }
}

/// ERROR XX002: the index is corrupt (`what` says how).
pub(super) fn corrupt(index: pg_sys::Relation, what: String) -> ! {
    let name = unsafe { crate::pg::names::relation_name(index) };
    raise(
        PgSqlErrorCode::ERRCODE_INDEX_CORRUPTED,
        format!("simhash index \"{name}\" is corrupt: {what}"),
        None,
        Some("REINDEX the index.".into()),
    )
}

/// The metapage's contents.
///
/// # Safety
///
/// `page` is the metapage.
pub(super) unsafe fn meta(page: Page) -> *mut Meta {
    unsafe { contents(page).cast() }
}

/// The directory entry of `bucket` on a directory page (the slot within the page).
///
/// # Safety
///
/// `page` is a locked directory page and `slot` within it.
pub(super) unsafe fn directory_entry(page: Page, slot: usize) -> *mut DirectoryEntry {
    unsafe { contents(page).cast::<DirectoryEntry>().add(slot) }
}

/// Where the directory entry of `bucket` of segment `segment` is: block and slot.
pub(super) fn directory_position(meta: &Meta, segment: u32, bucket: u32) -> (BlockNumber, usize) {
    let per_page = directory_entries_per_page();
    (1 + segment * meta.directory_pages + bucket / per_page as u32, bucket as usize % per_page)
}

/// Directory pages per segment for `bits`.
pub(super) fn directory_pages(bits: u32) -> u32 {
    (1usize << bits).div_ceil(directory_entries_per_page()) as u32
}
