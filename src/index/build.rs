//! CREATE INDEX: every row's fingerprint read from the table, then the pages written in block
//! order and WAL-logged whole at the end, as pgvector's builds do. In format 5 (every build but
//! the tests of format 4): the metapage, the buckets' directory (for the rows inserted later, no
//! bucket page yet), the built part with every row (`super::dense`), the chain of NULL rows. An
//! unlogged table's empty index (the init fork) is written the same way and always logged.

use pgrx::pg_sys::{self, Page};
use pgrx::prelude::*;
use simhash_core::buckets::{bucket_bits, bucket_of};

use super::page::{self, DirectoryEntry, Entry, Kind};
use super::{fingerprint_of, SEGMENTS};
use simhash_core::SEGMENT_BITS;

struct BuildState {
    entries: Vec<Entry>,
    /// The rows whose fingerprint is NULL.
    nulls: Vec<Entry>,
}

#[pg_guard]
unsafe extern "C-unwind" fn build_callback(
    _index: pg_sys::Relation,
    tid: pg_sys::ItemPointer,
    values: *mut pg_sys::Datum,
    isnull: *mut bool,
    _alive: bool,
    state: *mut core::ffi::c_void,
) {
    unsafe {
        let state = &mut *(state as *mut BuildState);
        match fingerprint_of(*values, *isnull) {
            Some(fp) => super::push(&mut state.entries, Entry { fp, tid: *tid }),
            None => super::push(&mut state.nulls, Entry { fp: 0, tid: *tid }),
        }
        pgrx::check_for_interrupts!();
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuild(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    unsafe {
        if pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) != 0 {
            error!("simhash index \"{}\" already contains data", crate::pg::names::relation_name(index));
        }
        let mut state = BuildState { entries: Vec::new(), nulls: Vec::new() };
        let heap_tuples = pg_sys::table_index_build_scan(
            heap,
            index,
            index_info,
            true,
            true,
            Some(build_callback),
            (&mut state as *mut BuildState).cast(),
            std::ptr::null_mut(),
        );
        write_index(index, pg_sys::ForkNumber::MAIN_FORKNUM, &state.entries, &state.nulls);
        let result = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*result).heap_tuples = heap_tuples;
        (*result).index_tuples = (state.entries.len() + state.nulls.len()) as f64;
        result
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    unsafe { write_index(index, pg_sys::ForkNumber::INIT_FORKNUM, &[], &[]) };
}

/// Writes the whole index for `entries` and the rows with NULL fingerprints `nulls` into `fork`
/// (empty), then logs its pages.
unsafe fn write_index(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, entries: &[Entry], nulls: &[Entry]) {
    unsafe {
        // Format 5: the rows in the built part, the buckets left for the rows inserted later
        // (format 4 beyond the rows a built part can count, 2^32 - 1).
        let dense = builds_dense() && u32::try_from(entries.len()).is_ok();
        let rows = entries.len() as u64;
        let bits = if dense { insert_bits(rows) } else { bucket_bits(rows, page::entries_per_page() as u64) };
        let (entries, built) = if dense { (&[][..], entries) } else { (entries, &[][..]) };
        let directory_pages = page::directory_pages(bits);
        let buckets = 1usize << bits;
        let per_page = page::entries_per_page();

        // Each bucket's pages, in block order: segment by segment, bucket by bucket.
        let first_bucket_page = 1 + SEGMENTS * directory_pages;
        let mut next_block = first_bucket_page;
        let mut directory = vec![DirectoryEntry::EMPTY; SEGMENTS as usize * buckets];
        let mut counts = vec![0usize; SEGMENTS as usize * buckets];
        for (i, entry) in entries.iter().enumerate() {
            for segment in 0..SEGMENTS {
                counts[segment as usize * buckets + bucket_of(entry.fp, segment, bits) as usize] += 1;
            }
            interrupt_point(i);
        }
        for (slot, &count) in counts.iter().enumerate() {
            if count > 0 {
                let pages = count.div_ceil(per_page) as u32;
                directory[slot] = DirectoryEntry { head: next_block, tail: next_block + pages - 1 };
                next_block += pages;
            }
        }
        let mut meta = page::new_meta(bits, directory_pages);
        if !dense {
            meta.version = 4;
        }
        // The built part, after the buckets.
        let dense_start = next_block;
        if !built.is_empty() {
            meta.dense_start = dense_start;
            meta.dense_rows = built.len() as u32; // (`dense`: it fits)
            next_block += super::dense::Dense { start: dense_start, rows: meta.dense_rows }.blocks();
        }
        // The chain of NULL rows, after them.
        let null_pages = nulls.len().div_ceil(per_page) as u32;
        if null_pages > 0 {
            meta.nulls = DirectoryEntry { head: next_block, tail: next_block + null_pages - 1 };
        }
        // The metapage.
        write_page(index, fork, 0, |page| {
            page::init_page(page, Kind::Meta, 0);
            *page::meta(page) = meta;
            page::set_used(page, std::mem::size_of::<page::Meta>());
        });
        // The directory.
        let per_directory_page = page::directory_entries_per_page();
        for segment in 0..SEGMENTS {
            for d in 0..directory_pages {
                let block = 1 + segment * directory_pages + d;
                write_page(index, fork, block, |page| {
                    page::init_page(page, Kind::Directory, segment as u16);
                    let first = d as usize * per_directory_page;
                    let last = (first + per_directory_page).min(buckets);
                    for bucket in first..last {
                        *page::directory_entry(page, bucket - first) = directory[segment as usize * buckets + bucket];
                    }
                    page::set_used(page, (last - first) * std::mem::size_of::<DirectoryEntry>());
                });
            }
        }
        // The buckets, one segment at a time (its entries sorted by segment value, and so by
        // bucket, with a counting sort): each chain's pages are consecutive blocks, each page sorted.
        let mut block = first_bucket_page;
        // Writes `chunk` as page `block` of a chain, linked to the next block unless `last`.
        let write_chain_page = |block: u32, kind: Kind, segment: u16, chunk: &[Entry], last: bool| {
            write_page(index, fork, block, |page| {
                page::init_page(page, kind, segment);
                for entry in chunk {
                    page::push_entry(page, *entry, meta.keeps_apart());
                }
                if kind == Kind::Bucket {
                    (*page::special(page)).set_sorted(chunk.len()); // (in order: the counting sort)
                }
                (*page::special(page)).next = if last { page::INVALID_BLOCK } else { block + 1 };
            });
        };
        let values = 1usize << SEGMENT_BITS;
        let mut sorted = Vec::new();
        super::reserve(&mut sorted, entries.len());
        sorted.resize(entries.len(), Entry { fp: 0, tid: pg_sys::ItemPointerData::default() });
        for segment in 0..SEGMENTS {
            let mut starts = vec![0usize; values + 1];
            for (i, entry) in entries.iter().enumerate() {
                starts[usize::from(simhash_core::buckets::segment_value(entry.fp, segment)) + 1] += 1;
                interrupt_point(i);
            }
            for value in 0..values {
                starts[value + 1] += starts[value];
            }
            // The ends of the buckets (a bucket's values are consecutive).
            let ends: Vec<usize> = (1..=buckets).map(|bucket| starts[bucket << (SEGMENT_BITS - bits)]).collect();
            for (i, entry) in entries.iter().enumerate() {
                let slot = &mut starts[usize::from(simhash_core::buckets::segment_value(entry.fp, segment))];
                sorted[*slot] = *entry;
                *slot += 1;
                interrupt_point(i);
            }
            let mut start = 0;
            for &end in &ends {
                let chunks: Vec<&[Entry]> = sorted[start..end].chunks(per_page).collect();
                for (i, chunk) in chunks.iter().enumerate() {
                    write_chain_page(block, Kind::Bucket, segment as u16, chunk, i + 1 == chunks.len());
                    block += 1;
                    if block.is_multiple_of(64) {
                        pgrx::check_for_interrupts!();
                    }
                }
                start = end;
            }
            pgrx::check_for_interrupts!();
        }
        if !built.is_empty() {
            let part = super::dense::write(built, block, |at, fill| write_page(index, fork, at, fill));
            block += part.blocks();
        }
        debug_assert_eq!(block, next_block);
        for (i, chunk) in nulls.chunks(per_page).enumerate() {
            write_chain_page(block, Kind::Nulls, page::NULLS_SEGMENT, chunk, i as u32 + 1 == null_pages);
            block += 1;
            if block.is_multiple_of(64) {
                pgrx::check_for_interrupts!();
            }
        }

        // WAL: every page whole (the init fork of an unlogged index too, which GenericXLog would
        // not log), unless the relation must not be logged (wal_level minimal, storage new in this
        // transaction: fsynced at commit instead).
        if fork == pg_sys::ForkNumber::INIT_FORKNUM || crate::pg::compat::relation_needs_wal(index) {
            pg_sys::log_newpage_range(index, fork, 0, block, true);
        }
    }
}

/// Checks for interrupts at every 65,536th `i` (of a loop over rows).
fn interrupt_point(i: usize) {
    if i.is_multiple_of(1 << 16) {
        pgrx::check_for_interrupts!();
    }
}

/// The bucket bits of an index of format 5 built on `rows` rows, for the rows inserted after the
/// build: an eighth of those of format 4 (three bits fewer), which a table that grows by a tenth
/// fills to a fraction of a page per bucket, and at least `MIN_BUCKET_BITS`.
fn insert_bits(rows: u64) -> u32 {
    bucket_bits(rows, page::entries_per_page() as u64).saturating_sub(3).max(simhash_core::buckets::MIN_BUCKET_BITS)
}

#[cfg(any(test, feature = "pg_test"))]
thread_local! {
    /// Tests build indexes of format 4 (every row in the buckets) with this set.
    pub(super) static BUILD_FORMAT_4: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a build writes format 5 (the rows in the built part): always, but in tests of format 4.
fn builds_dense() -> bool {
    #[cfg(any(test, feature = "pg_test"))]
    if BUILD_FORMAT_4.with(|f| f.get()) {
        return false;
    }
    true
}

/// Appends block `block` (the next one) to `fork`, filled by `fill`.
unsafe fn write_page(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, block: u32, fill: impl FnOnce(Page)) {
    unsafe {
        let buffer = page::new_buffer(index, fork);
        if pg_sys::BufferGetBlockNumber(buffer) != block {
            error!("simhash index build expected block {block}, got {}", pg_sys::BufferGetBlockNumber(buffer));
        }
        fill(pg_sys::BufferGetPage(buffer));
        pg_sys::MarkBufferDirty(buffer);
        pg_sys::UnlockReleaseBuffer(buffer);
    }
}
