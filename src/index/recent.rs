//! The buffers that last held the pages of the simhash indexes this backend read, so that reading
//! a page again can skip PostgreSQL's shared buffer mapping table.
//!
//! A lookup at k = 11 reads about 550 index pages. With gigabytes of shared buffers each
//! `ReadBuffer` first finds the page in the buffer mapping table, a hash table as large as the
//! buffer pool's descriptors, which costs a few misses of the CPU's caches: a quarter of a lookup's
//! time at ten million rows. `ReadRecentBuffer` (PostgreSQL 14 and later) instead checks that a
//! given buffer still holds the page, under the buffer header's lock, and pins it; it is exact,
//! so a stale guess only costs the usual lookup. This module keeps those guesses: for each of the
//! last few index files read, the buffer of each block (0: none yet).
//!
//! Only permanent and unlogged indexes: the pages of temporary ones live in local buffers.

use std::cell::RefCell;

use pgrx::pg_sys::{self, BlockNumber, Buffer};

/// The index files remembered (the oldest is forgotten).
const FILES: usize = 8;
/// The blocks remembered of each: 4 bytes each, so at most 8 MB for an index of 16 GB (8 kB blocks).
const BLOCKS: BlockNumber = 1 << 21;

struct File {
    file: [u32; 3],
    buffers: Vec<Buffer>,
}

thread_local! {
    static RECENT: RefCell<Vec<File>> = const { RefCell::new(Vec::new()) };
}

/// `ReadBuffer(index, block)`, skipping the buffer mapping table when the buffer that held the
/// block the last time still holds it.
///
/// # Safety
///
/// `index` is an open index relation with that block.
pub(super) unsafe fn read_buffer(index: pg_sys::Relation, block: BlockNumber) -> Buffer {
    unsafe {
        let temporary = (*(*index).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as core::ffi::c_char;
        if temporary || block >= BLOCKS {
            return pg_sys::ReadBuffer(index, block);
        }
        let file = crate::pg::compat::relation_file(index);
        let recent = RECENT.with_borrow(|files| {
            files.iter().find(|f| f.file == file).and_then(|f| f.buffers.get(block as usize).copied()).unwrap_or(0)
        });
        if recent > 0 && crate::pg::compat::read_recent_buffer(index, block, recent) {
            return recent;
        }
        let buffer = pg_sys::ReadBuffer(index, block);
        if buffer > 0 {
            remember(file, block, buffer);
        }
        buffer
    }
}

fn remember(file: [u32; 3], block: BlockNumber, buffer: Buffer) {
    RECENT.with_borrow_mut(|files| {
        let at = match files.iter().position(|f| f.file == file) {
            Some(at) => at,
            None => {
                if files.len() == FILES {
                    files.remove(0);
                }
                files.push(File { file, buffers: Vec::new() });
                files.len() - 1
            }
        };
        let buffers = &mut files[at].buffers;
        let block = block as usize;
        // (Out of memory only forgets.)
        if buffers.len() <= block {
            let grown = (block + 1).next_power_of_two().min(BLOCKS as usize);
            if buffers.try_reserve_exact(grown - buffers.len()).is_err() {
                return;
            }
            buffers.resize(grown, 0);
        }
        buffers[block] = buffer;
    });
}
