//! VACUUM: every bucket page compacted in place without the entries of removed rows (each row has
//! one entry per segment, each removed), one GenericXLog record per changed page. Pages are kept,
//! even when empty (see `page`). In the built part (format 5, `super::dense`), the TIDs of removed
//! rows are marked in segment 0, the only one that keeps TIDs; their fingerprints stay until a
//! REINDEX.

use pgrx::pg_sys;
use pgrx::prelude::*;
use simhash_core::SEGMENTS;

use super::dense::{self, Dense};
use super::page::{self, Kind};
use super::{buffers, entries, meta};

/// The bucket pages of the index (and those of the chain of NULL rows), each exclusively locked in
/// turn, with `visit`.
unsafe fn each_bucket_page(info: *mut pg_sys::IndexVacuumInfo, mut visit: impl FnMut(pg_sys::Buffer)) -> u32 {
    unsafe {
        let index = (*info).index;
        let meta = meta::load_meta(index);
        let first = 1 + SEGMENTS * meta.directory_pages;
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        // (the built part has pages of its own: `vacuum_built`)
        let built = dense::blocks(&meta);
        for block in first..blocks {
            if built.contains(&block) {
                continue;
            }
            let buffer = read_for_vacuum(info, block, pg_sys::BUFFER_LOCK_EXCLUSIVE);
            let bucket_page = pg_sys::BufferGetPage(buffer);
            // (a page added by an insert that failed before writing it is new: nothing in it)
            if !pg_sys::PageIsNew(bucket_page) {
                let kind = if page::is_kind(bucket_page, Kind::Nulls) { Kind::Nulls } else { Kind::Bucket };
                page::expect_kind(bucket_page, kind, index, block);
                visit(buffer);
            }
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        blocks
    }
}

/// Block `block` of the index VACUUM works on, through its buffer access strategy, locked in
/// `lock` mode (after a check for interrupts).
unsafe fn read_for_vacuum(info: *mut pg_sys::IndexVacuumInfo, block: pg_sys::BlockNumber, lock: u32) -> pg_sys::Buffer {
    unsafe {
        pgrx::check_for_interrupts!();
        let buffer = pg_sys::ReadBufferExtended(
            (*info).index,
            pg_sys::ForkNumber::MAIN_FORKNUM,
            block,
            pg_sys::ReadBufferMode::RBM_NORMAL,
            (*info).strategy,
        );
        pg_sys::LockBuffer(buffer, lock as i32);
        buffer
    }
}

/// The pages of segment 0 of the built part (format 5), each locked in `lock` mode in turn, with
/// `visit(built, block, buffer)`.
unsafe fn vacuum_built(
    info: *mut pg_sys::IndexVacuumInfo,
    meta: &page::Meta,
    lock: u32,
    mut visit: impl FnMut(&Dense, pg_sys::BlockNumber, pg_sys::Buffer),
) {
    unsafe {
        let Some(built) = Dense::of(meta) else { return };
        let index = (*info).index;
        for block in dense::segment_0_blocks(meta) {
            let buffer = read_for_vacuum(info, block, lock);
            let dense_page = pg_sys::BufferGetPage(buffer);
            dense::expect_page(index, dense_page, block, Kind::Dense, 0);
            visit(&built, block, buffer);
            pg_sys::UnlockReleaseBuffer(buffer);
        }
    }
}

/// Whether the entries of a page count the rows: those of segment 0 and of the NULL rows' chain.
unsafe fn counts_rows(chain_page: pg_sys::Page) -> bool {
    unsafe {
        let special = *page::special(chain_page);
        special.segment() == 0 || special.kind == Kind::Nulls as u16
    }
}

fn stats_or_new(stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    if stats.is_null() {
        unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBulkDeleteResult>()).cast() }
    } else {
        stats
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambulkdelete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut core::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        if super::codes::is_codes((*info).index) {
            return super::codes::write::bulk_delete(info, stats, callback, callback_state);
        }
        let stats = stats_or_new(stats);
        let Some(callback) = callback else { return stats };
        let index = (*info).index;
        let meta = meta::load_meta(index);
        let sorts_pages = meta.sorts_pages();
        let mut rows = 0.0;
        let mut removed = 0.0;
        // The built part: the TIDs of removed rows marked in segment 0.
        vacuum_built(info, &meta, pg_sys::BUFFER_LOCK_EXCLUSIVE, |built, block, buffer| {
            let mut change = buffers::Change::start(index);
            let changed = change.page(buffer, false);
            let (left, marked) = dense::mark_removed(built, block, changed, |tid| callback(tid, callback_state));
            rows += left as f64;
            removed += marked as f64;
            if marked > 0 {
                change.finish();
            } else {
                change.abort();
            }
        });
        let blocks = each_bucket_page(info, |buffer| {
            let counted = counts_rows(pg_sys::BufferGetPage(buffer));
            let mut change = buffers::Change::start(index);
            let changed = change.page(buffer, false);
            let gone = entries::retain_entries(changed, |entry| {
                let mut tid = entry.tid;
                !callback(&mut tid, callback_state)
            });
            if counted {
                rows += entries::entries(changed).len() as f64;
                removed += gone as f64;
            }
            if gone > 0 {
                // Rewritten anyway: sorted whole, for the probes.
                if sorts_pages && page::is_kind(changed, Kind::Bucket) {
                    entries::sort_entries(changed);
                }
                change.finish();
            } else {
                change.abort();
            }
        });
        (*stats).num_pages = blocks;
        (*stats).num_index_tuples = rows;
        (*stats).tuples_removed += removed;
        stats
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn amvacuumcleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        if super::codes::is_codes((*info).index) {
            return super::codes::write::vacuum_cleanup(info, stats);
        }
        if (*info).analyze_only {
            return stats;
        }
        if !stats.is_null() {
            return stats; // counted by ambulkdelete
        }
        // No bulk delete ran: count the rows (segment 0's entries and the NULL rows) and pages.
        let stats = stats_or_new(stats);
        let mut rows = 0.0;
        let meta = meta::load_meta((*info).index);
        vacuum_built(info, &meta, pg_sys::BUFFER_LOCK_SHARE, |built, block, buffer| {
            rows += dense::mark_removed(built, block, pg_sys::BufferGetPage(buffer), |_| false).0 as f64;
        });
        let blocks = each_bucket_page(info, |buffer| {
            let bucket_page = pg_sys::BufferGetPage(buffer);
            if counts_rows(bucket_page) {
                rows += entries::entries(bucket_page).len() as f64;
            }
        });
        (*stats).num_pages = blocks;
        (*stats).num_index_tuples = rows;
        stats
    }
}
