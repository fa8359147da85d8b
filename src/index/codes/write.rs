//! Writes to an index of codes after its build: INSERT appends the row to the tail (its code and
//! TID) or to the NULL rows' chain, under the metapage's exclusive lock (inserts into one index
//! take turns); VACUUM marks the TIDs of removed rows in the code store and both chains (a slot
//! with an invalid TID is skipped by every reader; a REINDEX compacts). One GenericXLog record per
//! change.

use pgrx::pg_sys::{self, BlockNumber, Page};

use super::super::buffers::{self, read_locked, Change};
use super::super::page::{self, corrupt, Kind, INVALID_BLOCK, TID};
use super::meta::{self, CodesMeta};
use super::read::is_removed;

/// `aminsert` of an index of codes.
///
/// # Safety
///
/// As `aminsert`.
pub(in crate::index) unsafe fn insert(
    index: pg_sys::Relation,
    value: pg_sys::Datum,
    isnull: bool,
    tid: pg_sys::ItemPointerData,
) -> bool {
    unsafe {
        let code = (!isnull).then(|| super::code_bytes(value));
        let meta_buffer = read_locked(index, 0, pg_sys::BUFFER_LOCK_EXCLUSIVE);
        let mut meta = meta::read_meta(index, pg_sys::BufferGetPage(meta_buffer));
        let mut meta_changed = false;
        if let Some((bits, _)) = code {
            super::build::check_not_empty(bits);
            if meta.code_bits == 0 {
                super::build::check_bits(bits);
                meta.code_bits = bits;
                meta_changed = true;
            } else if bits != meta.code_bits {
                super::wrong_length(bits, meta.code_bits);
            }
        }
        let mut slot = Vec::with_capacity(TID + meta.code_bytes());
        slot.extend_from_slice(std::slice::from_raw_parts((&tid as *const pg_sys::ItemPointerData).cast::<u8>(), TID));
        let (tail, kind, per_page) = match code {
            Some((_, bytes)) => {
                slot.extend_from_slice(bytes);
                (meta.tail_tail, Kind::CodeTail, meta::store_per_page(meta.code_bytes()))
            }
            None => (meta.nulls_tail, Kind::CodeNulls, meta::nulls_per_page()),
        };
        let room = per_page * slot.len();
        let tail_buffer = (tail != INVALID_BLOCK).then(|| read_locked(index, tail, pg_sys::BUFFER_LOCK_EXCLUSIVE));
        if let Some(buffer) = tail_buffer {
            page::expect_kind(pg_sys::BufferGetPage(buffer), kind, index, tail);
        }
        let fits = tail_buffer.is_some_and(|buffer| page::used(pg_sys::BufferGetPage(buffer)) + slot.len() <= room);
        let mut change = Change::start(index);
        if fits {
            let tail_page = change.page(tail_buffer.expect("fits"), false);
            append(tail_page, &slot);
        } else {
            let new = buffers::new_buffer(index, pg_sys::ForkNumber::MAIN_FORKNUM);
            let new_block = pg_sys::BufferGetBlockNumber(new);
            let new_page = change.page(new, true);
            page::init_page(new_page, kind, 0);
            append(new_page, &slot);
            if let Some(buffer) = tail_buffer {
                (*page::special(change.page(buffer, false))).next = new_block;
            }
            let (head, last) = if code.is_some() {
                meta.tail_pages += 1;
                (&mut meta.tail_head, &mut meta.tail_tail)
            } else {
                (&mut meta.nulls_head, &mut meta.nulls_tail)
            };
            if *head == INVALID_BLOCK {
                *head = new_block;
            }
            *last = new_block;
            meta_changed = true;
            finish(change, meta_buffer, &meta, meta_changed);
            pg_sys::UnlockReleaseBuffer(new);
            if let Some(buffer) = tail_buffer {
                pg_sys::UnlockReleaseBuffer(buffer);
            }
            pg_sys::UnlockReleaseBuffer(meta_buffer);
            return false;
        }
        finish(change, meta_buffer, &meta, meta_changed);
        if let Some(buffer) = tail_buffer {
            pg_sys::UnlockReleaseBuffer(buffer);
        }
        pg_sys::UnlockReleaseBuffer(meta_buffer);
        false
    }
}

unsafe fn finish(mut change: Change, meta_buffer: pg_sys::Buffer, meta: &CodesMeta, changed: bool) {
    unsafe {
        if changed {
            meta::write_meta(change.page(meta_buffer, false), meta, false);
        }
        change.finish();
    }
}

unsafe fn append(chain_page: Page, slot: &[u8]) {
    unsafe {
        let used = page::used(chain_page);
        std::ptr::copy_nonoverlapping(slot.as_ptr(), page::contents(chain_page).add(used), slot.len());
        page::set_used(chain_page, used + slot.len());
    }
}

/// Marks the removed rows of a page of slots of `slot` bytes (a TID first): (rows left, rows
/// marked).
unsafe fn mark_page(
    index: pg_sys::Relation,
    buffer: pg_sys::Buffer,
    block: BlockNumber,
    slot: usize,
    removed: &mut dyn FnMut(&mut pg_sys::ItemPointerData) -> bool,
) -> (usize, usize) {
    unsafe {
        let original = pg_sys::BufferGetPage(buffer);
        let used = page::used(original);
        if !used.is_multiple_of(slot) || used > page::usable() {
            corrupt(index, format!("block {block} holds {used} bytes, not slots of {slot}"));
        }
        let mut change = Change::start(index);
        let changed = change.page(buffer, false);
        let (mut left, mut marked) = (0, 0);
        for i in 0..used / slot {
            let at = page::contents(changed).add(i * slot).cast::<pg_sys::ItemPointerData>();
            let mut tid = at.read_unaligned();
            if is_removed(&tid) {
                continue;
            }
            if removed(&mut tid) {
                let mut gone = pg_sys::ItemPointerData::default();
                pgrx::itemptr::item_pointer_set_all(&mut gone, INVALID_BLOCK, 0);
                at.write_unaligned(gone);
                marked += 1;
            } else {
                left += 1;
            }
        }
        if marked > 0 {
            change.finish();
        } else {
            change.abort();
        }
        (left, marked)
    }
}

/// Every page of the code store and of both chains, exclusively locked in turn (or share-locked
/// when nothing is removed), its removed rows marked: (rows left, rows marked, blocks). With
/// `bump`, then, when the index has a tail, `tail_marks` is bumped.
unsafe fn each_row_page(
    info: *mut pg_sys::IndexVacuumInfo,
    removed: &mut dyn FnMut(&mut pg_sys::ItemPointerData) -> bool,
    bump: bool,
) -> (f64, f64, u32) {
    unsafe {
        let index = (*info).index;
        let meta = meta::load_meta(index);
        let blocks = buffers::number_of_blocks(index);
        let places = meta::Places::of(&meta);
        let store_slot = meta::store_slot(meta.code_bytes());
        let (mut left, mut marked) = (0.0, 0.0);
        let mut visit = |block: BlockNumber, kind: Kind, slot: usize| -> BlockNumber {
            pgrx::check_for_interrupts!();
            let buffer = pg_sys::ReadBufferExtended(
                index,
                pg_sys::ForkNumber::MAIN_FORKNUM,
                block,
                pg_sys::ReadBufferMode::RBM_NORMAL,
                (*info).strategy,
            );
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_EXCLUSIVE as i32);
            page::expect_kind(pg_sys::BufferGetPage(buffer), kind, index, block);
            let (l, m) = mark_page(index, buffer, block, slot, removed);
            left += l as f64;
            marked += m as f64;
            let next = (*page::special(pg_sys::BufferGetPage(buffer))).next;
            pg_sys::UnlockReleaseBuffer(buffer);
            next
        };
        for block in meta.store_start..meta.store_start + places.store_pages {
            visit(block, Kind::CodeStore, store_slot);
        }
        for (head, kind, slot) in
            [(meta.tail_head, Kind::CodeTail, store_slot), (meta.nulls_head, Kind::CodeNulls, TID)]
        {
            let mut block = head;
            let mut steps = 0;
            while block != INVALID_BLOCK {
                steps += 1;
                // (inserts meanwhile append pages to the chains: the index's blocks now)
                if (block >= blocks || steps > blocks) && {
                    let now = buffers::number_of_blocks(index);
                    block >= now || steps > now
                } {
                    corrupt(index, format!("a chain of {kind:?} pages leads to block {block}"));
                }
                block = visit(block, kind, slot);
            }
        }
        if bump && meta.tail_head != INVALID_BLOCK {
            // (before the VACUUM's heap pass can reuse the rows' TIDs: a copy of the tail kept by
            // a backend is read again). Whether or not this pass marked rows of the tail: a VACUUM
            // cancelled after marking some, before this bump, leaves them marked, and the next
            // one, which frees their TIDs, marks none of them again.
            let meta_buffer = read_locked(index, 0, pg_sys::BUFFER_LOCK_EXCLUSIVE);
            let mut meta = meta::read_meta(index, pg_sys::BufferGetPage(meta_buffer));
            meta.tail_marks = meta.tail_marks.wrapping_add(1);
            finish(Change::start(index), meta_buffer, &meta, true);
            pg_sys::UnlockReleaseBuffer(meta_buffer);
        }
        (left, marked, blocks)
    }
}

fn stats_or_new(stats: *mut pg_sys::IndexBulkDeleteResult) -> *mut pg_sys::IndexBulkDeleteResult {
    if stats.is_null() {
        unsafe { pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBulkDeleteResult>()).cast() }
    } else {
        stats
    }
}

/// `ambulkdelete` of an index of codes.
///
/// # Safety
///
/// As `ambulkdelete`.
pub(in crate::index) unsafe fn bulk_delete(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
    callback: pg_sys::IndexBulkDeleteCallback,
    callback_state: *mut core::ffi::c_void,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        let stats = stats_or_new(stats);
        let Some(callback) = callback else { return stats };
        let (left, marked, blocks) = each_row_page(info, &mut |tid| callback(tid, callback_state), true);
        (*stats).num_pages = blocks;
        (*stats).num_index_tuples = left;
        (*stats).tuples_removed += marked;
        stats
    }
}

/// `amvacuumcleanup` of an index of codes.
///
/// # Safety
///
/// As `amvacuumcleanup`.
pub(in crate::index) unsafe fn vacuum_cleanup(
    info: *mut pg_sys::IndexVacuumInfo,
    stats: *mut pg_sys::IndexBulkDeleteResult,
) -> *mut pg_sys::IndexBulkDeleteResult {
    unsafe {
        if (*info).analyze_only || !stats.is_null() {
            return stats;
        }
        let stats = stats_or_new(stats);
        let (left, _, blocks) = each_row_page(info, &mut |_| false, false);
        (*stats).num_pages = blocks;
        (*stats).num_index_tuples = left;
        stats
    }
}
