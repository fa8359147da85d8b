//! The buffers that last held the pages of the simhash indexes this backend read, so that reading
//! a page again can skip PostgreSQL's shared buffer mapping table.
//!
//! A lookup at k = 11 reads about 550 index pages. With gigabytes of shared buffers each
//! `ReadBuffer` first finds the page in the buffer mapping table, a hash table as large as the
//! buffer pool's descriptors, which costs a few misses of the CPU's caches: a fifth of a lookup's
//! time at ten million rows. `ReadRecentBuffer` (PostgreSQL 14 and later) instead checks that a
//! given buffer still holds the page, under the buffer header's lock, and pins it; it is exact,
//! so a stale guess only costs the usual lookup. This module keeps those guesses: for each of the
//! last few index files read, the buffer of each block (0: none yet).
//!
//! Two things `ReadBuffer` does that `ReadRecentBuffer` does not, and how they are kept:
//! - **The page's usage count**, which protects it from eviction by the clock sweep, is raised by
//!   `ReadBuffer` up to its maximum (5) and never by `ReadRecentBuffer`. So the guess is taken only
//!   while the buffer's usage count is at the maximum, where `ReadBuffer` would leave it as it is;
//!   below, the page is read through `ReadBuffer`, which raises it. A hot page thus keeps the same
//!   protection as before.
//! - **The statistics**: a page found through a guess is counted as a block read and hit of the
//!   index (`pg_statio_all_indexes`), and as a page hit of VACUUM on PostgreSQL 15 or a hit in
//!   `pg_stat_io` on 18.
//!   `ReadRecentBuffer` itself counts it in the buffer usage of `EXPLAIN (BUFFERS)`. A VACUUM with
//!   cost-based delay reads through `ReadBuffer` only, which charges each page to its cost.
//!
//! Only permanent and unlogged indexes: the pages of temporary ones live in local buffers.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

use pgrx::pg_sys::{self, BlockNumber, Buffer};

/// The index files remembered (the least recently added is forgotten).
const FILES: usize = 4;
/// The blocks remembered of each: 4 bytes each, so at most 4 MB for the first 8 GB of an index (8 kB
/// blocks); the blocks beyond are read through `ReadBuffer`.
const BLOCKS: BlockNumber = 1 << 20;

struct File {
    file: [u32; 3],
    buffers: Vec<Buffer>,
}

thread_local! {
    static RECENT: RefCell<Vec<File>> = const { RefCell::new(Vec::new()) };
}

/// `ReadBuffer(index, block)`, skipping the buffer mapping table when the buffer that held the
/// block the last time still holds it and its usage count is at its maximum.
///
/// # Safety
///
/// `index` is an open index relation with that block.
pub(super) unsafe fn read_buffer(index: pg_sys::Relation, block: BlockNumber) -> Buffer {
    unsafe {
        let temporary = (*(*index).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as core::ffi::c_char;
        if temporary || block >= BLOCKS || pg_sys::VacuumCostActive {
            return pg_sys::ReadBuffer(index, block);
        }
        let file = crate::pg::compat::relation_file(index);
        let recent = RECENT.with_borrow(|files| {
            files.iter().find(|f| f.file == file).and_then(|f| f.buffers.get(block as usize).copied()).unwrap_or(0)
        });
        if recent > 0
            && recent <= pg_sys::NBuffers
            && at_max_usage(recent)
            && crate::pg::compat::read_recent_buffer(index, block, recent)
        {
            count_hit(index);
            return recent;
        }
        let buffer = pg_sys::ReadBuffer(index, block);
        if buffer > 0 {
            remember(file, block, buffer);
        }
        buffer
    }
}

/// Whether shared buffer `buffer`'s usage count is at its maximum now (read without its header's
/// lock: a hint, which the clock sweep may make stale at once; then one raise is missed).
///
/// # Safety
///
/// `buffer` is a shared buffer number (1..=NBuffers).
unsafe fn at_max_usage(buffer: Buffer) -> bool {
    unsafe {
        let descriptor = &(*pg_sys::BufferDescriptors.add(buffer as usize - 1)).bufferdesc;
        let state = &*(std::ptr::addr_of!(descriptor.state.value) as *const AtomicU32);
        let usage = (state.load(Ordering::Relaxed) & pg_sys::BUF_USAGECOUNT_MASK) >> pg_sys::BUF_USAGECOUNT_SHIFT;
        usage >= pg_sys::BM_MAX_USAGE_COUNT
    }
}

/// Counts a page found in shared buffers as `ReadBuffer` does: a block read and hit of `index`
/// (when its statistics are kept), and a page hit of VACUUM (15) or a hit in `pg_stat_io` (18).
///
/// # Safety
///
/// `index` is an open relation.
unsafe fn count_hit(index: pg_sys::Relation) {
    unsafe {
        // (As pgstat_should_count_relation: a relation whose counts were flushed is linked anew.)
        if (*index).pgstat_info.is_null() && (*index).pgstat_enabled {
            pg_sys::pgstat_assoc_relation(index);
        }
        let stats = (*index).pgstat_info;
        if !stats.is_null() {
            #[cfg(feature = "pg15")]
            {
                (*stats).t_counts.t_blocks_fetched += 1;
                (*stats).t_counts.t_blocks_hit += 1;
            }
            #[cfg(feature = "pg18")]
            {
                (*stats).counts.blocks_fetched += 1;
                (*stats).counts.blocks_hit += 1;
            }
        }
        // (VACUUM VERBOSE's page hits on 15; on 18 it reads the buffer usage, counted already.)
        #[cfg(feature = "pg15")]
        {
            pg_sys::VacuumPageHit += 1;
        }
        #[cfg(feature = "pg18")]
        pg_sys::pgstat_count_io_op(
            pg_sys::IOObject::IOOBJECT_RELATION,
            pg_sys::IOContext::IOCONTEXT_NORMAL,
            pg_sys::IOOp::IOOP_HIT,
            1,
            0,
        );
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
