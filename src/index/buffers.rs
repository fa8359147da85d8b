//! Pages of an index in shared buffers: the blocks it has, a page read and locked, a new page at
//! its end, and a change of up to four pages as one WAL record (GenericXLog).

use pgrx::pg_sys::{self, BlockNumber, Buffer, Page};

use super::page::INVALID_BLOCK;

/// The number of blocks of the main fork of `index` now.
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn number_of_blocks(index: pg_sys::Relation) -> BlockNumber {
    unsafe { pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) }
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

/// Up to `count` (at least 1) new pages at the end of the index, pinned, not locked, appended to
/// `buffers` in block order: on PostgreSQL 18 as many as its pin limit allows, in one extension
/// of the file (`ExtendBufferedRelBy`, which zeroes them with one call, not a write a page); on
/// 15 one ([`new_buffer`]). For a build, which alone writes the index.
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn new_buffers(
    index: pg_sys::Relation,
    fork: pg_sys::ForkNumber::Type,
    count: u32,
    buffers: &mut Vec<Buffer>,
) {
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let _ = count;
            let buffer = new_buffer(index, fork);
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_UNLOCK as i32);
            buffers.push(buffer);
        }
        #[cfg(feature = "pg18")]
        {
            let mut added = [0 as Buffer; 64];
            let mut extended_by = 0u32;
            let relation = pg_sys::BufferManagerRelation { rel: index, smgr: std::ptr::null_mut(), relpersistence: 0 };
            let count = count.clamp(1, added.len() as u32);
            pg_sys::ExtendBufferedRelBy(
                relation,
                fork,
                std::ptr::null_mut(),
                0,
                count,
                added.as_mut_ptr(),
                &mut extended_by,
            );
            buffers.extend_from_slice(&added[..extended_by as usize]);
        }
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
