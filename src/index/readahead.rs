//! Read-ahead: how a scan asks for memory before it needs it. A lookup reads hundreds of pages
//! that are mostly not in the CPU's caches, so the reads are pipelined, with the requests to
//! memory made ahead of the reads that need them, to overlap instead of waiting one after the
//! other: the descriptors of the buffers that held the pages ([`DESCRIPTORS_AHEAD`] pages ahead;
//! `super::recent`), the pins and the pages' first and last bytes (header and special space;
//! [`PINNED_AHEAD`] pages ahead), and the entries that will be checked ([`ENTRIES_AHEAD`] pages
//! ahead; what those are, the reader says). Both readers of many pages go through [`ReadAhead`]:
//! the bucket chains' (`super::chain::read_buckets`) and the built part's
//! (`super::dense_read::read_runs`).
//!
//! The CPU's prefetch instruction is asked for here and nowhere else ([`prefetch`]; x86-64,
//! elsewhere nothing): a prefetch reads nothing, so any address is safe to ask for.

use std::collections::VecDeque;

use pgrx::pg_sys::{self, BlockNumber, Buffer, Page};

use super::recent;

/// How many pages ahead of the one it reads [`ReadAhead`] keeps pinned.
pub(super) const PINNED_AHEAD: usize = 16;
/// How many pages ahead of the one it reads [`ReadAhead`] requests the entries of.
pub(super) const ENTRIES_AHEAD: usize = 2;
/// How many pages ahead of the one it pins [`ReadAhead`] requests the buffer descriptor of.
pub(super) const DESCRIPTORS_AHEAD: usize = 8;

/// Asks the CPU to bring the cache line of `address` into its caches (x86-64; elsewhere nothing).
pub(super) fn prefetch(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Asks the CPU for the cache lines from `from` (one every 64 bytes) while below `to`.
pub(super) fn prefetch_lines(from: *const u8, to: *const u8) {
    let mut line = from;
    while line < to {
        prefetch(line);
        line = line.wrapping_add(64);
    }
}

/// Asks the CPU for the `len` bytes at `start`.
pub(super) fn prefetch_bytes(start: *const u8, len: usize) {
    let end = start.wrapping_add(len);
    prefetch_lines(start, end);
    // (the last line, when `start` is not at a line's start)
    if len > 0 {
        prefetch(end.wrapping_sub(1));
    }
}

/// Asks the CPU to bring a page's header and special space into its caches, ahead of reading them.
pub(super) fn prefetch_ends(page: Page) {
    let page = page as *const u8;
    prefetch(page);
    prefetch(page.wrapping_add(pg_sys::BLCKSZ as usize - 64));
}

/// Asks the CPU for the descriptor of shared buffer `guess` (a guess of `recent::guesses`; 0:
/// none), which `recent::read_buffer` reads first, so that the misses of pages read one after the
/// other overlap.
pub(super) fn prefetch_descriptor(guess: Buffer) {
    // SAFETY: the address is within the buffer descriptors (checked).
    unsafe {
        if guess > 0 && guess <= pg_sys::NBuffers {
            prefetch(pg_sys::BufferDescriptors.add(guess as usize - 1) as *const u8);
        }
    }
}

/// The pages of a list of blocks, in its order, each pinned ahead of its read: [`ReadAhead::next`]
/// gives the next one pinned (not locked: the reader locks, reads and releases it).
pub(super) struct ReadAhead<'a> {
    index: pg_sys::Relation,
    blocks: &'a [BlockNumber],
    /// The buffers that last held `blocks` (`recent::guesses`).
    guesses: Vec<Buffer>,
    /// (position in `blocks`, buffer) of the pages pinned and not yet given out.
    pinned: VecDeque<(usize, Buffer)>,
    /// The next of `blocks` to pin.
    next: usize,
    started: bool,
}

impl<'a> ReadAhead<'a> {
    /// The pages of `blocks` of `index`, their first buffer descriptors requested.
    ///
    /// # Safety
    ///
    /// `index` is an open index relation with those blocks.
    pub unsafe fn new(index: pg_sys::Relation, blocks: &'a [BlockNumber]) -> ReadAhead<'a> {
        let guesses = unsafe { recent::guesses(index, blocks.iter().copied()) };
        for &guess in guesses.iter().take(DESCRIPTORS_AHEAD) {
            prefetch_descriptor(guess);
        }
        ReadAhead { index, blocks, guesses, pinned: VecDeque::with_capacity(PINNED_AHEAD + 1), next: 0, started: false }
    }

    /// Pins the next of `blocks` (if any), and requests the descriptor of the one
    /// [`DESCRIPTORS_AHEAD`] after it.
    unsafe fn pin(&mut self) {
        if let Some(&guess) = self.guesses.get(self.next + DESCRIPTORS_AHEAD) {
            prefetch_descriptor(guess);
        }
        if let Some(&block) = self.blocks.get(self.next) {
            let buffer = unsafe { recent::read_buffer(self.index, block, self.guesses[self.next]) };
            prefetch_ends(unsafe { pg_sys::BufferGetPage(buffer) });
            self.pinned.push_back((self.next, buffer));
            self.next += 1;
        }
    }

    /// The next page: its position in `blocks` and its buffer, pinned; the caller locks it and
    /// releases it. `request(j, page)` asks the CPU for the entries to be read of the page of
    /// `blocks[j]`, pinned and not locked (so only a hint), [`ENTRIES_AHEAD`] pages ahead.
    ///
    /// # Safety
    ///
    /// As for [`ReadAhead::new`].
    pub unsafe fn next(&mut self, mut request: impl FnMut(usize, Page)) -> Option<(usize, Buffer)> {
        unsafe {
            if !self.started {
                self.started = true;
                for _ in 0..PINNED_AHEAD.min(self.blocks.len()) {
                    self.pin();
                }
                for &(j, buffer) in self.pinned.iter().take(ENTRIES_AHEAD) {
                    request(j, pg_sys::BufferGetPage(buffer));
                }
            }
            let (i, buffer) = self.pinned.pop_front()?;
            self.pin();
            if let Some(&(j, ahead)) = self.pinned.get(ENTRIES_AHEAD - 1) {
                request(j, pg_sys::BufferGetPage(ahead));
            }
            Some((i, buffer))
        }
    }
}
