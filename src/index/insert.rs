//! INSERT: the row's fingerprint appended to the last page of its bucket in each segment, or to a
//! new page linked at the end of the chain (the full page is then sorted by segment value, for the
//! probes: `entries::sort_entries`). Each is one GenericXLog record over the directory page
//! (exclusively locked, which serializes the writers of its buckets), the last page and the new one.
//! A row whose fingerprint is NULL goes to the chain of NULL rows the same way, under the metapage.
//! The last page of a chain is checked before it is locked (`chain::Links`: a damaged directory entry
//! naming the directory page the insert holds would have it wait for itself) and after (its kind,
//! segment, and no next page).

use pgrx::pg_sys;
use pgrx::prelude::*;
use simhash_core::buckets::bucket_of;
use simhash_core::SEGMENTS;

use super::chain::{self, ChainSlot, Links};
use super::page::{self, fingerprint_of, Entry, INVALID_BLOCK};
use super::{buffers, entries, meta};

#[pg_guard]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C-unwind" fn aminsert(
    index: pg_sys::Relation,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    heap_tid: pg_sys::ItemPointer,
    _heap: pg_sys::Relation,
    _check_unique: pg_sys::IndexUniqueCheck::Type,
    _index_unchanged: bool,
    _index_info: *mut pg_sys::IndexInfo,
) -> bool {
    unsafe {
        if super::codes::is_codes(index) {
            return super::codes::write::insert(index, *values, *isnull, *heap_tid);
        }
        let meta = meta::load_meta(index);
        let mut links = Links::of(index, &meta);
        let Some(fp) = fingerprint_of(*values, *isnull) else {
            // For ORDER BY, which returns every row (no radius test is true for them). An index
            // built by 0.3.0 has no such chain: the update to 0.4.0 rebuilds it.
            if meta.indexes_nulls() {
                insert_into_chain(
                    index,
                    &mut links,
                    ChainSlot::Nulls,
                    Entry { fp: 0, tid: *heap_tid },
                    false,
                    meta.keeps_apart(),
                );
            }
            return false;
        };
        let entry = Entry { fp, tid: *heap_tid };
        for segment in 0..SEGMENTS {
            let slot = ChainSlot::bucket(&meta, segment, bucket_of(fp, segment, meta.bits));
            insert_into_chain(index, &mut links, slot, entry, meta.sorts_pages(), meta.keeps_apart());
        }
        false
    }
}

/// Appends `entry` to the chain of `slot`; with `sort`, a full last page is sorted before a new
/// one is linked; a new page keeps its entries apart with `apart` (`page::Meta::keeps_apart`).
unsafe fn insert_into_chain(
    index: pg_sys::Relation,
    links: &mut Links,
    slot: ChainSlot,
    entry: Entry,
    sort: bool,
    apart: bool,
) {
    unsafe {
        let (kind, segment) = slot.page_kind();
        let directory_block = slot.block();
        let directory = buffers::read_locked(index, directory_block, pg_sys::BUFFER_LOCK_EXCLUSIVE);
        page::expect_kind(pg_sys::BufferGetPage(directory), slot.holder_kind(), index, directory_block);
        let ends = *slot.ends(pg_sys::BufferGetPage(directory));
        chain::expect_both_ends(index, &ends, &slot);
        let tail = ends.tail;

        if tail != INVALID_BLOCK {
            // The tail checked before it is locked (a damaged link to the page held here, the
            // directory's or the metapage, would have the backend wait for itself), and after.
            links.check(tail, &slot);
            let tail_buffer = buffers::read_locked(index, tail, pg_sys::BUFFER_LOCK_EXCLUSIVE);
            let tail_page = pg_sys::BufferGetPage(tail_buffer);
            chain::expect_chain_page(tail_page, (kind, segment), index, tail, &slot);
            let next = (*page::special(tail_page)).next;
            if next != INVALID_BLOCK {
                page::corrupt(index, format!("block {tail}, the last page of {slot}, links to block {next}"));
            }
            let mut change = buffers::Change::start(index);
            let tail_page = change.page(tail_buffer, false);
            if entries::push_entry(tail_page, entry, apart) {
                change.finish();
                pg_sys::UnlockReleaseBuffer(tail_buffer);
                pg_sys::UnlockReleaseBuffer(directory);
                return;
            }
            // Full: sorted, and a new page at the end of the chain.
            if sort && kind == page::Kind::Bucket {
                entries::sort_entries(tail_page);
            }
            let new_buffer = buffers::new_buffer(index, pg_sys::ForkNumber::MAIN_FORKNUM);
            let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
            let new_page = change.page(new_buffer, true);
            page::init_page(new_page, kind, segment);
            entries::push_entry(new_page, entry, apart);
            (*page::special(tail_page)).next = new_block;
            let directory_page = change.page(directory, false);
            (*slot.ends(directory_page)).tail = new_block;
            change.finish();
            pg_sys::UnlockReleaseBuffer(new_buffer);
            pg_sys::UnlockReleaseBuffer(tail_buffer);
            pg_sys::UnlockReleaseBuffer(directory);
            return;
        }

        // An empty bucket: its first page.
        let new_buffer = buffers::new_buffer(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
        let mut change = buffers::Change::start(index);
        let new_page = change.page(new_buffer, true);
        page::init_page(new_page, kind, segment);
        entries::push_entry(new_page, entry, apart);
        let directory_page = change.page(directory, false);
        *slot.ends(directory_page) = page::DirectoryEntry { head: new_block, tail: new_block };
        change.finish();
        pg_sys::UnlockReleaseBuffer(new_buffer);
        pg_sys::UnlockReleaseBuffer(directory);
    }
}
