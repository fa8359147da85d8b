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
//! A damaged page must not take a reader outside the page or the index, have it wait for a lock it
//! holds, or walk a chain forever (issue 35). So every read of a page's contents first checks its
//! kind and that its header keeps its parts inside the page ([`expect_kind`]; [`entries`] gives
//! none of a page whose header does not, and [`special`] is read where every page has it, not
//! where `pd_special` says); each link of a chain is checked before the block it names is read,
//! pinned or locked ([`Links`]: not the metapage, a directory page or the built part, and below
//! the index's number of blocks), and a walk along a chain counts its pages (no more than the
//! index has blocks); the metapage's directory and built part must fit the index
//! ([`load_meta`]). Each fault is an ERROR XX002 (index corrupted) naming the index and the block.
//! Every loop over pages checks for interrupts between pages (not under a page's lock, which holds
//! them off).

use std::mem::size_of;

use pgrx::pg_sys::{self, BlockNumber, Buffer, Page};

use crate::pg::errors::raise;
use pgrx::PgSqlErrorCode;

pub(super) const INVALID_BLOCK: BlockNumber = pg_sys::InvalidBlockNumber;
const MAGIC: u32 = 0x5348_4958; // "SHIX"
/// The page format: 5 since release 0.8.0 (the rows of the build in a built part of their own,
/// `super::dense`; the buckets' entries apart as in 4); 4 (development builds of 0.8.0: the entries
/// of a bucket page apart, fingerprints, then TIDs) is read and written too; 3 (0.4.1: bucket pages count their sorted entries, 8 bucket bits at least) and 2 (0.4.0,
/// the chain of NULL rows; its pages neither sorted nor read as sorted, [`Meta::sorts_pages`]) are
/// read and written too, their pages packed, until a REINDEX; 1 (0.3.0) is read too, its indexes
/// hold no NULL rows and serve no `ORDER BY` (the update to 0.4.0 rebuilds them).
const VERSION: u32 = 5;

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

/// The bytes of a TID.
const TID: usize = size_of::<pg_sys::ItemPointerData>();

/// The entries of a bucket page, as the page holds them.
#[derive(Clone, Copy)]
pub(super) enum Entries<'a> {
    /// Fingerprint and TID together (format 1 to 3).
    Packed(&'a [Entry]),
    /// The fingerprints, and the TIDs apart (format 4).
    Apart(Apart<'a>),
}

/// The entries of a page that keeps them apart: `fps[i]`, and TID `i` the `i + 1`-th down from the
/// special space.
#[derive(Clone, Copy)]
pub(super) struct Apart<'a> {
    pub fps: &'a [u64],
    /// The end of the TIDs (the special space).
    tids_end: *const u8,
}

impl Apart<'_> {
    /// The TID of entry `i` (below `fps.len()`, else a panic).
    pub fn tid(&self, i: usize) -> pg_sys::ItemPointerData {
        assert!(i < self.fps.len(), "entry {i} of {}", self.fps.len());
        // SAFETY: the page holds `fps.len()` TIDs below `tids_end` (`entries`).
        unsafe { self.tids_end.sub((i + 1) * TID).cast::<pg_sys::ItemPointerData>().read_unaligned() }
    }

    /// Asks the CPU for the TID of entry `i` (x86-64; elsewhere nothing), ahead of reading it.
    pub fn prefetch_tid(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads nothing; the address is in the page for `i` below `fps.len()`.
        unsafe {
            let at = self.tids_end.wrapping_sub((i + 1) * TID);
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at as *const i8);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// The position of `fp`, an element of `fps` (the loops of `simhash_core::buckets` hand out
    /// references into the slice they are given). Checked: a reference from elsewhere panics.
    pub fn position(&self, fp: &u64) -> usize {
        let offset = (fp as *const u64 as usize).wrapping_sub(self.fps.as_ptr() as usize);
        let i = offset / size_of::<u64>();
        assert!(offset.is_multiple_of(size_of::<u64>()) && i < self.fps.len(), "not an entry of the page");
        i
    }

    /// The TID of the entry whose fingerprint `fp` is (an element of `fps`).
    pub fn tid_of(&self, fp: &u64) -> pg_sys::ItemPointerData {
        self.tid(self.position(fp))
    }
}

impl Entries<'_> {
    pub fn len(&self) -> usize {
        match self {
            Entries::Packed(entries) => entries.len(),
            Entries::Apart(apart) => apart.fps.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fingerprint of entry `i`.
    pub fn fp(&self, i: usize) -> u64 {
        match self {
            Entries::Packed(entries) => entries[i].fp,
            Entries::Apart(apart) => apart.fps[i],
        }
    }

    /// A copy of every entry, in order.
    pub fn to_vec(self) -> Vec<Entry> {
        self.iter().map(|(fp, tid)| Entry { fp, tid }).collect()
    }

    /// Every entry, in order: (fingerprint, TID).
    pub fn iter(&self) -> impl Iterator<Item = (u64, pg_sys::ItemPointerData)> + '_ {
        (0..self.len()).map(|i| match self {
            Entries::Packed(entries) => (entries[i].fp, entries[i].tid),
            Entries::Apart(apart) => (apart.fps[i], apart.tid(i)),
        })
    }
}

pub(super) fn usable() -> usize {
    pg_sys::BLCKSZ as usize - header_contents_offset() - maxalign(size_of::<Special>())
}

/// Where the contents start: right after the page header (`PageGetContents`).
fn header_contents_offset() -> usize {
    maxalign(size_of::<pg_sys::PageHeaderData>())
}

fn maxalign(len: usize) -> usize {
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
fn special_offset() -> usize {
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
unsafe fn header_fits(page: Page) -> bool {
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
unsafe fn header_fault(page: Page) -> Option<String> {
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

/// [`expect_kind`] for a page of a chain (a bucket's or that of the NULL rows), which must also
/// be of the chain's segment (`Special::segment`); `chain` names the chain.
///
/// # Safety
///
/// `page` is block `block` of `index`, locked.
pub(super) unsafe fn expect_chain_page(
    page: Page,
    (kind, segment): (Kind, u16),
    index: pg_sys::Relation,
    block: BlockNumber,
    chain: &dyn std::fmt::Display,
) {
    unsafe {
        expect_kind(page, kind, index, block);
        let found = (*special(page)).segment();
        if found != segment {
            corrupt(index, format!("block {block} of {chain} is a page of segment {found}, not {segment}"));
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

pub(super) fn new_meta(bits: u32, directory_pages: u32) -> Meta {
    Meta {
        magic: MAGIC,
        version: VERSION,
        bits,
        directory_pages,
        nulls: DirectoryEntry::EMPTY,
        dense_start: INVALID_BLOCK,
        dense_rows: 0,
    }
}

/// Checks the metapage and returns its contents.
///
/// # Safety
///
/// `page` is block 0 of `index`, share-locked.
unsafe fn read_meta(index: pg_sys::Relation, page: Page) -> Meta {
    unsafe {
        expect_kind(page, Kind::Meta, index, 0);
        let mut meta = *meta(page);
        if meta.magic == MAGIC && meta.version == 1 {
            meta.nulls = DirectoryEntry::EMPTY; // (not in a version 1 metapage)
        } else if meta.magic != MAGIC || !(2..=VERSION).contains(&meta.version) {
            corrupt(index, format!("its metapage has version {} of the page format, not {VERSION}", meta.version));
        }
        if meta.version < 5 {
            // (not in the metapage of an older format)
            (meta.dense_start, meta.dense_rows) = (INVALID_BLOCK, 0);
        }
        if meta.bits > simhash_core::buckets::MAX_BUCKET_BITS || meta.directory_pages != directory_pages(meta.bits) {
            corrupt(index, format!("bad metapage (bits {}, directory pages {})", meta.bits, meta.directory_pages));
        }
        // The built part follows the directory (where the build writes it).
        if meta.dense_rows > 0 && meta.dense_start != 1 + simhash_core::SEGMENTS * meta.directory_pages {
            corrupt(
                index,
                format!("bad metapage (built part at block {} of {} rows)", meta.dense_start, meta.dense_rows),
            );
        }
        meta
    }
}

/// The metapage of `index`, read under a share lock and checked, with the blocks it names (the
/// directory, the built part) inside the index.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(super) unsafe fn load_meta(index: pg_sys::Relation) -> Meta {
    unsafe {
        // (Read before the metapage: the blocks it names were there at the build, and an index
        // only grows.)
        let blocks = number_of_blocks(index);
        if blocks == 0 {
            corrupt(index, "it has no metapage".into());
        }
        let buffer = read_locked(index, 0, pg_sys::BUFFER_LOCK_SHARE);
        let meta = read_meta(index, pg_sys::BufferGetPage(buffer));
        pg_sys::UnlockReleaseBuffer(buffer);
        let directory_end = 1 + simhash_core::SEGMENTS * meta.directory_pages;
        if directory_end > blocks {
            corrupt(
                index,
                format!("its {blocks} blocks cannot hold its directory (blocks 1 to {})", directory_end - 1),
            );
        }
        let built = super::dense::blocks(&meta);
        if built.end > blocks {
            corrupt(
                index,
                format!(
                    "its {blocks} blocks cannot hold its built part of {} rows (blocks {} to {})",
                    meta.dense_rows,
                    built.start,
                    built.end - 1
                ),
            );
        }
        meta
    }
}

/// The number of blocks of the main fork of `index` now.
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn number_of_blocks(index: pg_sys::Relation) -> BlockNumber {
    unsafe { pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) }
}

/// The blocks that a link of a chain (a directory entry, the metapage's ends of the chain of NULL
/// rows, a page's `next`) may name: after the directory, outside the built part, and below the
/// index's number of blocks. Each link is checked before its block is read, pinned or locked, so
/// that a damaged link never has a reader lock the metapage or a directory page that it holds
/// already (an insert holds the page of the chain's ends), or read past the index's end; and a
/// walk along a chain counts its pages, so that a chain that loops ends in an ERROR.
pub(super) struct Links {
    index: pg_sys::Relation,
    first: BlockNumber,
    built: std::ops::Range<BlockNumber>,
    /// The index's blocks as last read (0: not yet): read again when a link names a block beyond,
    /// which an insert may have added since (it extends the index before it links the new page).
    blocks: BlockNumber,
}

impl Links {
    /// The links of the chains of `index`, whose metapage is `meta`.
    pub fn of(index: pg_sys::Relation, meta: &Meta) -> Links {
        Links {
            index,
            first: 1 + simhash_core::SEGMENTS * meta.directory_pages,
            built: super::dense::blocks(meta),
            blocks: 0,
        }
    }

    /// The index's blocks, read again if `at_least` is not below the count read last.
    unsafe fn blocks(&mut self, at_least: BlockNumber) -> BlockNumber {
        if at_least >= self.blocks {
            self.blocks = unsafe { number_of_blocks(self.index) };
        }
        self.blocks
    }

    /// Checks `block`, which `from` (a chain's ends or one of its pages) links to as a page of the
    /// chain, before it is read (else an ERROR XX002: the index is corrupt).
    ///
    /// # Safety
    ///
    /// The link was read from a page of the index (so that a block it names is below the index's
    /// number of blocks read after that).
    pub unsafe fn check(&mut self, block: BlockNumber, from: &dyn std::fmt::Display) {
        unsafe {
            let fault = if block < self.first {
                Some("the metapage or a directory page".to_string())
            } else if self.built.contains(&block) {
                Some("a page of the built part".to_string())
            } else {
                let blocks = self.blocks(block);
                (block >= blocks).then(|| format!("beyond its {blocks} blocks"))
            };
            if let Some(fault) = fault {
                corrupt(self.index, format!("{from} links to block {block}, {fault}"));
            }
        }
    }

    /// Checks that a chain (named `chain`) whose walk has met `pages` pages, the last one
    /// `block`, has not looped: it has no more pages than the index has blocks.
    ///
    /// # Safety
    ///
    /// As for [`Links::check`].
    pub unsafe fn check_length(&mut self, pages: u32, block: BlockNumber, chain: &dyn std::fmt::Display) {
        unsafe {
            if pages > self.blocks(pages) {
                corrupt(
                    self.index,
                    format!("{chain} loops: at block {block} it has {pages} pages, more than the index's blocks"),
                );
            }
        }
    }
}

/// Where a chain's first and last page are kept: a bucket's directory entry, or the metapage for
/// the chain of NULL rows.
#[derive(Clone, Copy, Debug)]
pub(super) enum ChainSlot {
    Bucket { segment: u32, bucket: u32, block: BlockNumber, slot: usize },
    Nulls,
}

impl std::fmt::Display for ChainSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ChainSlot::Bucket { segment, bucket, .. } => write!(f, "the chain of segment {segment} bucket {bucket}"),
            ChainSlot::Nulls => write!(f, "the chain of NULL rows"),
        }
    }
}

/// `Special::segment` of the pages of the chain of NULL rows.
pub(super) const NULLS_SEGMENT: u16 = simhash_core::SEGMENTS as u16;

impl ChainSlot {
    pub(super) fn bucket(meta: &Meta, segment: u32, bucket: u32) -> ChainSlot {
        let (block, slot) = directory_position(meta, segment, bucket);
        ChainSlot::Bucket { segment, bucket, block, slot }
    }

    /// The page that holds the chain's ends.
    pub(super) fn block(&self) -> BlockNumber {
        match *self {
            ChainSlot::Bucket { block, .. } => block,
            ChainSlot::Nulls => 0,
        }
    }

    /// The kind of the page that holds the chain's ends.
    pub(super) fn holder_kind(&self) -> Kind {
        match self {
            ChainSlot::Bucket { .. } => Kind::Directory,
            ChainSlot::Nulls => Kind::Meta,
        }
    }

    /// The kind and `Special::segment` of the chain's pages.
    pub(super) fn page_kind(&self) -> (Kind, u16) {
        match *self {
            ChainSlot::Bucket { segment, .. } => (Kind::Bucket, segment as u16),
            ChainSlot::Nulls => (Kind::Nulls, NULLS_SEGMENT),
        }
    }

    /// The chain's ends on the holding page.
    ///
    /// # Safety
    ///
    /// `page` is the locked holding page (or its GenericXLog copy).
    pub(super) unsafe fn ends(&self, page: Page) -> *mut DirectoryEntry {
        unsafe {
            match *self {
                ChainSlot::Bucket { slot, .. } => directory_entry(page, slot),
                ChainSlot::Nulls => &mut (*meta(page)).nulls,
            }
        }
    }
}

/// The chain (first and last page) of `slot`, read under a share lock; an ERROR (XX002) if it has
/// a first page and no last one or the other way round.
///
/// # Safety
///
/// `index` is an open simhash index, and `slot` one of its chains.
pub(super) unsafe fn chain_of(index: pg_sys::Relation, slot: ChainSlot) -> DirectoryEntry {
    unsafe {
        let ends = if let ChainSlot::Nulls = slot {
            load_meta(index).nulls // (empty in a version 1 metapage, which has no such field)
        } else {
            let block = slot.block();
            let buffer = read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
            expect_kind(pg_sys::BufferGetPage(buffer), slot.holder_kind(), index, block);
            let ends = *slot.ends(pg_sys::BufferGetPage(buffer));
            pg_sys::UnlockReleaseBuffer(buffer);
            ends
        };
        expect_both_ends(index, &ends, &slot);
        ends
    }
}

/// Checks that a chain's ends are both there or both not (else an ERROR XX002).
pub(super) fn expect_both_ends(index: pg_sys::Relation, ends: &DirectoryEntry, chain: &dyn std::fmt::Display) {
    if (ends.head == INVALID_BLOCK) != (ends.tail == INVALID_BLOCK) {
        corrupt(index, format!("{chain} has a first page ({}) or a last one ({}), not both", ends.head, ends.tail));
    }
}

/// Calls `each` with every entry of the chain of `slot`, one page at a time under a share lock.
///
/// # Safety
///
/// `index` is an open simhash index with that `meta`, and `slot` one of its chains.
pub(super) unsafe fn read_chain(
    index: pg_sys::Relation,
    meta: &Meta,
    slot: ChainSlot,
    mut each: impl FnMut(Entries<'_>),
) {
    unsafe {
        let mut links = Links::of(index, meta);
        let head = chain_of(index, slot).head;
        walk_chain(&mut links, head, None, slot, |entries, _| each(entries));
    }
}

/// Calls `each(i, entries, sorted)` with the entries of every page of the chain of `buckets[i]`
/// (`buckets` ascending) of `segment`, the first `sorted` of them in ascending order of their
/// segment value: the heads of the chains, from the directory pages under a share lock each, then
/// each chain.
///
/// A lookup reads hundreds of pages that are mostly not in the CPU's caches, so the reads are
/// pipelined, with the requests to memory made ahead of the reads that need them, to overlap
/// instead of waiting one after the other: the descriptors of the buffers that held the first
/// pages of the chains ([`DESCRIPTORS_AHEAD`] pages ahead), the pins and the pages' first and
/// last bytes (header and special space; [`PINNED_AHEAD`] pages ahead), and the entries that
/// will be checked ([`ENTRIES_AHEAD`] pages ahead; [`prefetch_entries`]: the runs of `values[i]`,
/// the probed segment values, if given; else all).
///
/// # Safety
///
/// `index` is an open simhash index with that `meta`.
pub(super) unsafe fn read_buckets(
    index: pg_sys::Relation,
    meta: &Meta,
    segment: u32,
    buckets: &[u32],
    values: Option<&[Vec<u16>]>,
    mut each: impl FnMut(usize, Entries<'_>, usize),
) {
    unsafe {
        let per_page = directory_entries_per_page() as u32;
        // (position in `buckets`, first page) of each bucket that has one.
        let mut heads: Vec<(usize, BlockNumber)> = Vec::new();
        super::reserve(&mut heads, buckets.len());
        let mut first = 0;
        for run in buckets.chunk_by(|a, b| a / per_page == b / per_page) {
            let (block, _) = directory_position(meta, segment, run[0]);
            let buffer = read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
            let directory = pg_sys::BufferGetPage(buffer);
            expect_kind(directory, Kind::Directory, index, block);
            for (j, &bucket) in run.iter().enumerate() {
                let ends = *directory_entry(directory, (bucket % per_page) as usize);
                if ends.head != INVALID_BLOCK {
                    heads.push((first + j, ends.head));
                }
                expect_both_ends(index, &ends, &ChainSlot::bucket(meta, segment, bucket));
            }
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
            first += run.len();
        }
        // Every first page checked before any is pinned.
        let mut links = Links::of(index, meta);
        for &(i, head) in &heads {
            links.check(head, &ChainSlot::bucket(meta, segment, buckets[i]));
        }
        let guesses = super::recent::guesses(index, heads.iter().map(|&(_, head)| head));
        let runs = values.filter(|_| meta.sorts_pages());
        let prefetch = |(i, _, buffer): (usize, BlockNumber, Buffer)| {
            prefetch_entries(pg_sys::BufferGetPage(buffer), runs.map(|v| v[i].as_slice()), meta.bits)
        };
        let mut pinned: std::collections::VecDeque<(usize, BlockNumber, Buffer)> =
            std::collections::VecDeque::with_capacity(PINNED_AHEAD + 1);
        let mut next = 0; // the next of `heads` to pin
        let mut pin = |pinned: &mut std::collections::VecDeque<(usize, BlockNumber, Buffer)>| {
            if let Some(&guess) = guesses.get(next + DESCRIPTORS_AHEAD) {
                super::recent::prefetch_descriptor(guess);
            }
            if let Some(&(i, head)) = heads.get(next) {
                let buffer = super::recent::read_buffer(index, head, guesses[next]);
                prefetch_ends(pg_sys::BufferGetPage(buffer));
                pinned.push_back((i, head, buffer));
                next += 1;
            }
        };
        for &guess in guesses.iter().take(DESCRIPTORS_AHEAD) {
            super::recent::prefetch_descriptor(guess);
        }
        for _ in 0..PINNED_AHEAD.min(heads.len()) {
            pin(&mut pinned);
        }
        for &ahead in pinned.iter().take(ENTRIES_AHEAD) {
            prefetch(ahead);
        }
        while let Some((i, head, buffer)) = pinned.pop_front() {
            pin(&mut pinned);
            if let Some(&ahead) = pinned.get(ENTRIES_AHEAD - 1) {
                prefetch(ahead);
            }
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32);
            let chain_page = pg_sys::BufferGetPage(buffer);
            let slot = ChainSlot::bucket(meta, segment, buckets[i]);
            expect_chain_page(chain_page, slot.page_kind(), index, head, &slot);
            let sorted = if meta.sorts_pages() { (*special(chain_page)).sorted() } else { 0 };
            each(i, entries(chain_page), sorted);
            let next_page = (*special(chain_page)).next;
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
            walk_chain(&mut links, next_page, Some(head), slot, |entries, sorted| {
                each(i, entries, if meta.sorts_pages() { sorted } else { 0 })
            });
        }
    }
}

/// Asks the CPU for the entries of a bucket page that a read will check, as the page's header says
/// now (read without a lock: only a hint): with `values` (a page counted as sorted), the runs of
/// those values, each from where it should start (`simhash_core::buckets::run_guess`) for as many
/// entries as a value holds on average, and the unsorted entries after them; without, every entry.
unsafe fn prefetch_entries(page: Page, values: Option<&[u16]>, bits: u32) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let lines = |from: *const u8, to: *const u8| {
            let mut line = from;
            while line < to {
                _mm_prefetch::<_MM_HINT_T0>(line as *const i8);
                line = line.wrapping_add(64);
            }
        };
        let header = page as *const pg_sys::PageHeaderData;
        let lower = std::ptr::read_volatile(std::ptr::addr_of!((*header).pd_lower)) as usize;
        let upper = std::ptr::read_volatile(std::ptr::addr_of!((*header).pd_upper)) as usize;
        let special_offset = std::ptr::read_volatile(std::ptr::addr_of!((*header).pd_special)) as usize;
        // (not a bucket page's layout: a new or damaged page, which the locked read will report)
        if special_offset != pg_sys::BLCKSZ as usize - maxalign(size_of::<Special>()) {
            return;
        }
        let special = std::ptr::read_volatile((page as *const u8).add(special_offset).cast::<Special>());
        // (Only the fingerprints of a page that keeps them apart: the TIDs of the few matches
        // are read as they are found.)
        let stride = if upper < special_offset { size_of::<u64>() } else { size_of::<Entry>() };
        let n = (lower.saturating_sub(header_contents_offset()) / stride).min(entries_per_page());
        let entry = |i: usize| contents(page).add(i * stride) as *const u8;
        let Some(values) = values else {
            lines(entry(0), entry(n));
            return;
        };
        let sorted = special.sorted().min(n);
        let low_bits = simhash_core::SEGMENT_BITS - bits.min(simhash_core::SEGMENT_BITS);
        let run = (sorted >> low_bits) + 1;
        for &value in values {
            let guess = simhash_core::buckets::run_guess(value, sorted, bits).min(sorted.saturating_sub(1));
            lines(entry(guess), entry((guess + run).min(sorted)));
        }
        lines(entry(sorted), entry(n));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (page, values, bits);
}

/// How many pages ahead of the one it reads [`read_buckets`] keeps pinned.
const PINNED_AHEAD: usize = 16;
/// How many pages ahead of the one it reads [`read_buckets`] requests the entries of.
const ENTRIES_AHEAD: usize = 2;
/// How many pages ahead of the one it pins [`read_buckets`] requests the buffer descriptor of.
const DESCRIPTORS_AHEAD: usize = 8;

/// Asks the CPU to bring a page's header and special space into its caches (x86-64; elsewhere
/// nothing), ahead of reading them.
pub(super) unsafe fn prefetch_ends(page: Page) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let page = page as *const i8;
        _mm_prefetch::<_MM_HINT_T0>(page);
        _mm_prefetch::<_MM_HINT_T0>(page.add(pg_sys::BLCKSZ as usize - 64));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = page;
}

/// Calls `each(entries, sorted)` for every page of the chain of `slot` from `from`, the first
/// page or the one after `previous` (each link checked before it is followed, and the pages
/// counted: a chain that loops is an ERROR XX002).
unsafe fn walk_chain(
    links: &mut Links,
    from: BlockNumber,
    previous: Option<BlockNumber>,
    slot: ChainSlot,
    mut each: impl FnMut(Entries<'_>, usize),
) {
    unsafe {
        let index = links.index;
        let mut block = from;
        let mut pages = u32::from(previous.is_some());
        let mut linked_from = previous;
        while block != INVALID_BLOCK {
            match linked_from {
                Some(previous) => links.check(block, &format_args!("block {previous} of {slot}")),
                None => links.check(block, &slot),
            }
            pages += 1;
            links.check_length(pages, block, &slot);
            let buffer = read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
            let chain_page = pg_sys::BufferGetPage(buffer);
            expect_chain_page(chain_page, slot.page_kind(), index, block, &slot);
            each(entries(chain_page), (*special(chain_page)).sorted());
            linked_from = Some(block);
            block = (*special(chain_page)).next;
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
        }
    }
}

/// Whether a bucket page (or a page of the chain of NULL rows) keeps its entries apart: it holds
/// TIDs below its special space.
///
/// # Safety
///
/// `page` is a locked bucket page.
unsafe fn is_apart(page: Page) -> bool {
    unsafe {
        let header = page as *const pg_sys::PageHeaderData;
        (*header).pd_upper < (*header).pd_special
    }
}

/// The entries of a bucket page; none when its header does not fit the page (which
/// [`expect_kind`] reports, as every reader checks first): never a byte outside the page.
///
/// # Safety
///
/// `page` is a locked bucket page.
pub(super) unsafe fn entries<'a>(page: Page) -> Entries<'a> {
    unsafe {
        if !header_fits(page) {
            return Entries::Packed(&[]);
        }
        if is_apart(page) {
            let header = page as *const pg_sys::PageHeaderData;
            let tids = usize::from((*header).pd_special - (*header).pd_upper) / TID;
            let n = (used(page) / size_of::<u64>()).min(tids);
            Entries::Apart(Apart {
                fps: std::slice::from_raw_parts(contents(page).cast::<u64>(), n),
                tids_end: (page as *const u8).add(usize::from((*header).pd_special)),
            })
        } else {
            let n = used(page) / size_of::<Entry>();
            Entries::Packed(std::slice::from_raw_parts(contents(page).cast::<Entry>(), n))
        }
    }
}

/// What is wrong with the layout of the entries of a bucket page (or a page of the chain of NULL
/// rows) of an index whose empty pages are started apart or not (`keeps_apart`), if anything: for
/// `simhash_index_check`. (Readers take only as many entries as both parts hold.)
///
/// # Safety
///
/// `page` is a locked bucket page.
pub(super) unsafe fn layout_fault(page: Page, keeps_apart: bool) -> Option<String> {
    unsafe {
        if let Some(fault) = header_fault(page) {
            return Some(fault);
        }
        let header = page as *const pg_sys::PageHeaderData;
        let (lower, upper, special) =
            (usize::from((*header).pd_lower), usize::from((*header).pd_upper), usize::from((*header).pd_special));
        let start = header_contents_offset();
        if upper < special {
            let (fps, tids) = (lower - start, special - upper);
            if !keeps_apart {
                return Some("its entries are apart in an index of format 3 or older".into());
            }
            if !fps.is_multiple_of(size_of::<u64>())
                || !tids.is_multiple_of(TID)
                || fps / size_of::<u64>() != tids / TID
            {
                return Some(format!("{fps} bytes of fingerprints and {tids} bytes of TIDs do not match"));
            }
        } else if !(lower - start).is_multiple_of(size_of::<Entry>()) {
            return Some(format!("{} bytes of entries are not whole entries", lower - start));
        }
        None
    }
}

/// Appends `entry` to a bucket page (apart if the page is empty and `apart`, else in the page's
/// layout); `false` when it is full.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn push_entry(page: Page, entry: Entry, apart: bool) -> bool {
    unsafe {
        let header = page as *mut pg_sys::PageHeaderData;
        let empty = used(page) == 0 && (*header).pd_upper == (*header).pd_special;
        if (empty && apart) || is_apart(page) {
            let (lower, upper) = (usize::from((*header).pd_lower), usize::from((*header).pd_upper));
            if upper < lower + size_of::<u64>() + TID {
                return false;
            }
            (page as *mut u8).add(lower).cast::<u64>().write_unaligned(entry.fp);
            (page as *mut u8).add(upper - TID).cast::<pg_sys::ItemPointerData>().write_unaligned(entry.tid);
            (*header).pd_lower = (lower + size_of::<u64>()) as u16;
            (*header).pd_upper = (upper - TID) as u16;
            return true;
        }
        let n = used(page) / size_of::<Entry>();
        if n >= entries_per_page() {
            return false;
        }
        contents(page).cast::<Entry>().add(n).write_unaligned(entry);
        set_used(page, (n + 1) * size_of::<Entry>());
        true
    }
}

/// Writes `entries` over those of a bucket page, apart or packed.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy), and `entries` fit.
pub(super) unsafe fn rewrite_entries(page: Page, entries: &[Entry], apart: bool) {
    unsafe {
        let header = page as *mut pg_sys::PageHeaderData;
        set_used(page, 0);
        (*header).pd_upper = (*header).pd_special;
        for &entry in entries {
            push_entry(page, entry, apart);
        }
    }
}

/// Sorts the entries of a bucket page by their segment value (stable: equal values keep their
/// order) and counts them all as sorted.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn sort_entries(page: Page) {
    unsafe {
        let segment = u32::from((*special(page)).segment());
        let mut sorted = entries(page).to_vec();
        sorted.sort_by_key(|entry| simhash_core::buckets::segment_value(entry.fp, segment));
        rewrite_entries(page, &sorted, is_apart(page));
        (*special(page)).set_sorted(sorted.len());
    }
}

/// Keeps the entries of a chain page for which `keep` holds, in order (the sorted ones stay
/// sorted); returns how many were removed.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn retain_entries(page: Page, mut keep: impl FnMut(&Entry) -> bool) -> usize {
    unsafe {
        let (all, sorted) = (entries(page), (*special(page)).sorted());
        let (mut kept, mut kept_sorted) = (Vec::with_capacity(all.len()), 0);
        for (i, (fp, tid)) in all.iter().enumerate() {
            let entry = Entry { fp, tid };
            if keep(&entry) {
                kept.push(entry);
                if i < sorted {
                    kept_sorted += 1;
                }
            }
        }
        let removed = all.len() - kept.len();
        if removed > 0 {
            rewrite_entries(page, &kept, is_apart(page));
        }
        (*special(page)).set_sorted(kept_sorted);
        removed
    }
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

/// A new page at the end of the index, exclusively locked (the relation extension lock serializes
/// growth, as PostgreSQL 15's `ReadBuffer(P_NEW)` and 18's compatibility path both expect).
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn new_buffer(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type) -> Buffer {
    unsafe {
        let local = (*(*index).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as core::ffi::c_char;
        if !local {
            pg_sys::LockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        }
        let buffer = pg_sys::ReadBufferExtended(
            index,
            fork,
            INVALID_BLOCK,
            pg_sys::ReadBufferMode::RBM_NORMAL,
            std::ptr::null_mut(),
        );
        pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
        if !local {
            pg_sys::UnlockRelationForExtension(index, pg_sys::ExclusiveLock as i32);
        }
        buffer
    }
}

/// Reads block `block` of the main fork, locked in `mode`.
///
/// # Safety
///
/// `index` is an open index relation with that block.
pub(super) unsafe fn read_locked(index: pg_sys::Relation, block: BlockNumber, mode: u32) -> Buffer {
    unsafe {
        let buffer = pg_sys::ReadBuffer(index, block);
        pg_sys::LockBuffer(buffer, mode as i32);
        buffer
    }
}

/// One WAL record of changes to up to four locked buffers (GenericXLog): register each buffer, change
/// the page it returns, then `finish`.
pub(super) struct Change {
    state: *mut pg_sys::GenericXLogState,
}

impl Change {
    /// # Safety
    ///
    /// `index` is an open index relation.
    pub(super) unsafe fn start(index: pg_sys::Relation) -> Change {
        Change { state: unsafe { pg_sys::GenericXLogStart(index) } }
    }

    /// The page of `buffer` to change (`full`: a new or rewritten page, logged whole).
    ///
    /// # Safety
    ///
    /// `buffer` is exclusively locked and stays so until `finish`.
    pub(super) unsafe fn page(&mut self, buffer: Buffer, full: bool) -> Page {
        let flags = if full { pg_sys::GENERIC_XLOG_FULL_IMAGE as i32 } else { 0 };
        unsafe { pg_sys::GenericXLogRegisterBuffer(self.state, buffer, flags) }
    }

    /// Writes the changes (and their WAL record).
    pub(super) fn finish(self) {
        unsafe { pg_sys::GenericXLogFinish(self.state) };
    }

    /// Drops the changes.
    pub(super) fn abort(self) {
        unsafe { pg_sys::GenericXLogAbort(self.state) };
    }
}
