//! The buffers that last held the pages of the simhash indexes this backend read, so that reading
//! a page again can skip PostgreSQL's shared buffer mapping table.
//!
//! A lookup at k = 11 reads about 550 bucket pages. With gigabytes of shared buffers each
//! `ReadBuffer` first finds the page in the buffer mapping table, a hash table as large as the
//! buffer pool's descriptors, which costs a few misses of the CPU's caches: a fifth of a lookup's
//! time at ten million rows. `ReadRecentBuffer` (PostgreSQL 14 and later) instead checks that a
//! given buffer still holds the page, under the buffer header's lock, and pins it; it is exact,
//! so a stale guess only costs the usual lookup. This module keeps those guesses: for each of the
//! last few index files read, the buffer of each block (0: none yet). Only the bucket pages of
//! scans read through it (`super::readahead`); the metapage, the directory and the pages that
//! INSERT and VACUUM change are read through `ReadBuffer` (`ReadRecentBuffer` pins under the
//! buffer header's spinlock, which many backends pinning one hot page would contend for more than
//! for `ReadBuffer`'s compare-and-swap; the directory gave no measurable gain).
//!
//! A backend gains only once it has read a page before and the page's usage count has reached the
//! maximum: after a few thousand lookups into an index of ten million rows, not in its first ones.
//!
//! Two things `ReadBuffer` does that `ReadRecentBuffer` does not, and how they are kept:
//! - **The page's usage count**, which protects it from eviction by the clock sweep, is raised by
//!   `ReadBuffer` up to its maximum (5) and never by `ReadRecentBuffer`. So the guess is taken only
//!   while the buffer's usage count is at the maximum, where `ReadBuffer` would leave it as it is;
//!   below, the page is read through `ReadBuffer`, which raises it. A hot page thus keeps the same
//!   protection as before.
//! - **The statistics**: a page found through a guess is counted as a block read and hit of the
//!   index (`pg_statio_all_indexes`), and as a page hit of VACUUM on PostgreSQL 15 or a hit in
//!   `pg_stat_io` on 18; `ReadRecentBuffer` itself counts it in the buffer usage of
//!   `EXPLAIN (BUFFERS)`. A VACUUM with cost-based delay reads through `ReadBuffer` only, which
//!   charges each page to its cost. (Not the buffer read trace points of DTrace builds.)
//!
//! Only permanent and unlogged indexes: the pages of temporary ones live in local buffers.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

use pgrx::pg_sys::{self, BlockNumber, Buffer};

/// The index files remembered at most (the least recently used is forgotten first).
const FILES: usize = 8;
/// The blocks remembered of one file: its first 8 GB (8 kB blocks); the blocks beyond are read
/// through `ReadBuffer`.
const BLOCKS: BlockNumber = 1 << 20;
/// The blocks remembered of all files together, 4 bytes each: 8 MB per backend at most (the least
/// recently used files are forgotten to stay below). A file's memory grows with the highest block
/// read (to the next power of two).
const TOTAL_BLOCKS: usize = 1 << 21;

struct File {
    file: [u32; 3],
    buffers: Vec<Buffer>,
}

thread_local! {
    /// Least recently used first.
    static RECENT: RefCell<Vec<File>> = const { RefCell::new(Vec::new()) };
}

/// The buffers that last held `blocks` of `index` as far as this backend knows (0: none), for
/// [`read_buffer`]; all 0 where guesses are not used (a temporary index, a VACUUM with cost-based
/// delay).
///
/// # Safety
///
/// `index` is an open index relation.
pub(super) unsafe fn guesses(
    index: pg_sys::Relation,
    blocks: impl ExactSizeIterator<Item = BlockNumber>,
) -> Vec<Buffer> {
    unsafe {
        let mut guesses = Vec::new();
        crate::memory::reserve_entries(&mut guesses, blocks.len());
        let temporary = (*(*index).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as core::ffi::c_char;
        if temporary || pg_sys::VacuumCostActive {
            guesses.extend(blocks.map(|_| 0));
            return guesses;
        }
        let file = crate::pg::compat::relation_file(index);
        RECENT.with_borrow_mut(|files| {
            let Some(at) = files.iter().rposition(|f| f.file == file) else {
                guesses.extend(blocks.map(|_| 0));
                return;
            };
            if at + 1 < files.len() {
                let used = files.remove(at);
                files.push(used);
            }
            let buffers = files.last().map_or(&[][..], |f| &f.buffers[..]);
            guesses.extend(blocks.map(|block| buffers.get(block as usize).copied().unwrap_or(0)));
        });
        guesses
    }
}

/// `ReadBuffer(index, block)`, skipping the buffer mapping table when `guess` (of [`guesses`]),
/// the buffer that held the block the last time, still holds it and its usage count is at its
/// maximum.
///
/// # Safety
///
/// `index` is an open index relation with that block.
pub(super) unsafe fn read_buffer(index: pg_sys::Relation, block: BlockNumber, guess: Buffer) -> Buffer {
    unsafe {
        let temporary = (*(*index).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_TEMP as core::ffi::c_char;
        if temporary || block >= BLOCKS || pg_sys::VacuumCostActive {
            return pg_sys::ReadBuffer(index, block);
        }
        if guess > 0
            && guess <= pg_sys::NBuffers
            && at_max_usage(guess)
            && crate::pg::compat::read_recent_buffer(index, block, guess)
        {
            count_hit(index);
            return guess;
        }
        let buffer = pg_sys::ReadBuffer(index, block);
        if buffer > 0 {
            remember(crate::pg::compat::relation_file(index), block, buffer);
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
        // (Raw pointers up to the atomic: other backends write the descriptor.)
        let descriptor = pg_sys::BufferDescriptors.add(buffer as usize - 1);
        let state = AtomicU32::from_ptr(std::ptr::addr_of_mut!((*descriptor).bufferdesc.state.value));
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
        // The file goes last (most recently used); a new one pushes out the least recently used.
        match files.iter().rposition(|f| f.file == file) {
            Some(at) => {
                let used = files.remove(at);
                files.push(used);
            }
            None => {
                if files.len() == FILES {
                    files.remove(0);
                }
                files.push(File { file, buffers: Vec::new() });
            }
        }
        let block = block as usize;
        let have = files.last().map_or(0, |f| f.buffers.len());
        if have <= block {
            let grown = (block + 1).next_power_of_two().min(BLOCKS as usize);
            // Forget the least recently used other files until the total fits.
            while files.len() > 1 && files.iter().map(|f| f.buffers.len()).sum::<usize>() - have + grown > TOTAL_BLOCKS
            {
                files.remove(0);
            }
            let Some(last) = files.last_mut() else { return };
            // (Out of memory only forgets.)
            if last.buffers.try_reserve_exact(grown - last.buffers.len()).is_err() {
                return;
            }
            last.buffers.resize(grown, 0);
        }
        if let Some(last) = files.last_mut() {
            last.buffers[block] = buffer;
        }
    });
}
