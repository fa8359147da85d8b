//! The chains of bucket pages (and that of the NULL rows): where their ends are kept
//! ([`ChainSlot`]), the checks of their links ([`Links`]), and their reads, one chain
//! ([`read_chain`]) or the chains of many buckets with read-ahead ([`read_buckets`]).
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

use pgrx::pg_sys::{self, BlockNumber, Page};

use super::buffers::{number_of_blocks, read_locked};
use super::entries::{entries, Entries};
use super::meta::load_meta;
use super::page::{
    contents, corrupt, directory_entries_per_page, directory_entry, directory_position, entries_per_page, expect_kind,
    header_contents_offset, maxalign, meta, special, DirectoryEntry, Entry, Kind, Meta, Special, INVALID_BLOCK,
};
use super::readahead::{prefetch_lines, ReadAhead};

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
/// The first pages of the chains are read ahead (`super::readahead`), with the entries that will
/// be checked requested from memory ([`prefetch_entries`]: the runs of `values[i]`, the probed
/// segment values, if given; else all).
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
        crate::memory::reserve_entries(&mut heads, buckets.len());
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
        let runs = values.filter(|_| meta.sorts_pages());
        let mut blocks: Vec<BlockNumber> = Vec::new();
        crate::memory::reserve_entries(&mut blocks, heads.len());
        blocks.extend(heads.iter().map(|&(_, head)| head));
        let mut pages = ReadAhead::new(index, &blocks);
        let request = |j: usize, page: Page| prefetch_entries(page, runs.map(|v| v[heads[j].0].as_slice()), meta.bits);
        while let Some((j, buffer)) = pages.next(request) {
            let (i, head) = heads[j];
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
    unsafe {
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
            prefetch_lines(entry(0), entry(n));
            return;
        };
        let sorted = special.sorted().min(n);
        let low_bits = simhash_core::SEGMENT_BITS - bits.min(simhash_core::SEGMENT_BITS);
        let run = (sorted >> low_bits) + 1;
        for &value in values {
            let guess = simhash_core::buckets::run_guess(value, sorted, bits).min(sorted.saturating_sub(1));
            prefetch_lines(entry(guess), entry((guess + run).min(sorted)));
        }
        prefetch_lines(entry(sorted), entry(n));
    }
}

/// Calls `each(entries, sorted)` for every page of the chain of `slot` from `from`, the first
/// page or the one after `previous` (each link checked before it is followed, and the pages
/// counted: a chain that loops is an ERROR XX002).
pub(super) unsafe fn walk_chain(
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
