//! INSERT: the row's fingerprint appended to the last page of its bucket in each segment, or to a
//! new page linked at the end of the chain. Each is one GenericXLog record over the directory page
//! (exclusively locked, which serializes the writers of its buckets), the last page and the new one.

use pgrx::pg_sys;
use pgrx::prelude::*;
use simhash_core::buckets::bucket_of;

use super::page::{self, Entry, Kind, INVALID_BLOCK};
use super::{fingerprint_of, SEGMENTS};

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
        let Some(fp) = fingerprint_of(*values, *isnull) else {
            return false; // NULL fingerprints are not indexed (no radius test is true for them)
        };
        let meta = page::load_meta(index);
        let entry = Entry { fp, tid: *heap_tid };
        for segment in 0..SEGMENTS {
            insert_into_bucket(index, &meta, segment, bucket_of(fp, segment, meta.bits), entry);
        }
        false
    }
}

unsafe fn insert_into_bucket(index: pg_sys::Relation, meta: &page::Meta, segment: u32, bucket: u32, entry: Entry) {
    unsafe {
        let (directory_block, slot) = page::directory_position(meta, segment, bucket);
        let directory = page::read_locked(index, directory_block, pg_sys::BUFFER_LOCK_EXCLUSIVE);
        page::expect_kind(pg_sys::BufferGetPage(directory), Kind::Directory, index, directory_block);
        let tail = (*page::directory_entry(pg_sys::BufferGetPage(directory), slot)).tail;

        if tail != INVALID_BLOCK {
            let tail_buffer = page::read_locked(index, tail, pg_sys::BUFFER_LOCK_EXCLUSIVE);
            page::expect_kind(pg_sys::BufferGetPage(tail_buffer), Kind::Bucket, index, tail);
            let mut change = page::Change::start(index);
            let tail_page = change.page(tail_buffer, false);
            if page::push_entry(tail_page, entry) {
                change.finish();
                pg_sys::UnlockReleaseBuffer(tail_buffer);
                pg_sys::UnlockReleaseBuffer(directory);
                return;
            }
            // Full: a new page at the end of the chain.
            let new_buffer = page::new_buffer(index, pg_sys::ForkNumber::MAIN_FORKNUM);
            let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
            let new_page = change.page(new_buffer, true);
            page::init_page(new_page, Kind::Bucket, segment as u16);
            page::push_entry(new_page, entry);
            (*page::special(tail_page)).next = new_block;
            let directory_page = change.page(directory, false);
            (*page::directory_entry(directory_page, slot)).tail = new_block;
            change.finish();
            pg_sys::UnlockReleaseBuffer(new_buffer);
            pg_sys::UnlockReleaseBuffer(tail_buffer);
            pg_sys::UnlockReleaseBuffer(directory);
            return;
        }

        // An empty bucket: its first page.
        let new_buffer = page::new_buffer(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        let new_block = pg_sys::BufferGetBlockNumber(new_buffer);
        let mut change = page::Change::start(index);
        let new_page = change.page(new_buffer, true);
        page::init_page(new_page, Kind::Bucket, segment as u16);
        page::push_entry(new_page, entry);
        let directory_page = change.page(directory, false);
        *page::directory_entry(directory_page, slot) = page::DirectoryEntry { head: new_block, tail: new_block };
        change.finish();
        pg_sys::UnlockReleaseBuffer(new_buffer);
        pg_sys::UnlockReleaseBuffer(directory);
    }
}
