//! CREATE INDEX: every row's fingerprint read from the table, then the pages written in block
//! order and WAL-logged whole at the end, as pgvector's builds do. In format 5 (every build but
//! the tests of format 4): the metapage, the buckets' directory (for the rows inserted later, no
//! bucket page yet), the built part with every row (`super::dense`), the chain of NULL rows. An
//! unlogged table's empty index (the init fork) is written the same way and always logged.
//!
//! The rows are held in memory while they fit in `maintenance_work_mem`, beyond it in sorts that
//! spill to temporary files (`super::spill`).

use pgrx::pg_sys::{self, Page};
use pgrx::prelude::*;
use simhash_core::buckets::{bucket_bits, bucket_of};

use super::dense_write::{self, SortedRows};
use super::page::{self, fingerprint_of, DirectoryEntry, Entry, Kind};
use super::spill::BuildState;
use super::{buffers, chain, entries, meta};
use simhash_core::SEGMENTS;
use simhash_core::SEGMENT_BITS;

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
        state.add(fingerprint_of(*values, *isnull), *tid);
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
        if super::codes::is_codes(index) {
            return super::codes::build::build(heap, index, index_info);
        }
        super::options::warn_for_fingerprints(index);
        if pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM) != 0 {
            error!("simhash index \"{}\" already contains data", crate::pg::names::relation_name(index));
        }
        let budget = pg_sys::maintenance_work_mem.max(1024) as usize * 1024;
        let mut state = BuildState {
            entries: Vec::new(),
            nulls: Vec::new(),
            budget,
            spilled: None,
            spills: builds_dense(),
            bit_counts: simhash_core::bit_deal::BitCounts::new(64),
            seen: 0,
        };
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
        let plan = simhash_core::multi_index::SegmentPlan::with_width(64, SEGMENT_BITS).expect("64 bits");
        super::options::notice_lean_bits(index, 64, &state.bit_counts.lean(), &plan, SEGMENTS);
        let index_tuples;
        let fork = pg_sys::ForkNumber::MAIN_FORKNUM;
        if let Some(mut spilled) = state.spilled.take() {
            let mut nulls = spilled.nulls.take().expect("not written yet");
            index_tuples = f64::from(spilled.rows) + nulls.len() as f64;
            let null_rows = nulls.len() as usize;
            nulls.sort();
            let mut next_null = || nulls.next().map(crate::pg::tid::tid_of_order);
            write_index(index, fork, &[], Some(&mut *spilled), null_rows, &mut next_null);
        } else {
            index_tuples = (state.entries.len() + state.nulls.len()) as f64;
            let mut nulls = state.nulls.iter().map(|entry| entry.tid);
            let mut next_null = || nulls.next();
            // Format 5: the rows in the built part (format 4 beyond the rows a built part can count,
            // 2^32 - 1, and in its tests).
            if builds_dense() && u32::try_from(state.entries.len()).is_ok() {
                let mut built = dense_write::InMemory::new(&state.entries);
                write_index(index, fork, &[], Some(&mut built), state.nulls.len(), &mut next_null);
            } else {
                write_index(index, fork, &state.entries, None, state.nulls.len(), &mut next_null);
            }
        }
        let result = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*result).heap_tuples = heap_tuples;
        (*result).index_tuples = index_tuples;
        result
    }
}

#[pg_guard]
pub(super) unsafe extern "C-unwind" fn ambuildempty(index: pg_sys::Relation) {
    unsafe {
        if super::codes::is_codes(index) {
            return super::codes::build::build_empty(index);
        }
        let mut built = dense_write::InMemory::new(&[]);
        let built = builds_dense().then_some(&mut built as &mut dyn SortedRows);
        write_index(index, pg_sys::ForkNumber::INIT_FORKNUM, &[], built, 0, &mut || None);
    }
}

/// Writes the whole index into `fork` (empty): the rows of `entries` in the buckets (format 4),
/// or those of `built` in a built part (format 5), and `null_rows` rows with NULL fingerprints,
/// whose TIDs `next_null` gives; then logs its pages.
unsafe fn write_index(
    index: pg_sys::Relation,
    fork: pg_sys::ForkNumber::Type,
    entries: &[Entry],
    built: Option<&mut dyn SortedRows>,
    null_rows: usize,
    next_null: &mut dyn FnMut() -> Option<pg_sys::ItemPointerData>,
) {
    unsafe {
        let dense = built.is_some();
        let built_rows = built.as_ref().map_or(0, |built| built.rows());
        let bits = if dense {
            insert_bits(u64::from(built_rows))
        } else {
            bucket_bits(entries.len() as u64, page::entries_per_page() as u64)
        };
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
        let mut meta = meta::new_meta(bits, directory_pages);
        if !dense {
            meta.version = 4;
        }
        // The built part, after the buckets.
        let dense_start = next_block;
        if built_rows > 0 {
            meta.dense_start = dense_start;
            meta.dense_rows = built_rows;
            next_block += super::dense::Dense { start: dense_start, rows: meta.dense_rows }.blocks();
        }
        // The chain of NULL rows, after them.
        let null_pages = null_rows.div_ceil(per_page) as u32;
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
        let write_chain_page =
            |block: u32, kind: Kind, segment: u16, chunk: &mut dyn Iterator<Item = Entry>, last: bool| {
                write_page(index, fork, block, |page| {
                    page::init_page(page, kind, segment);
                    let mut len = 0;
                    for entry in chunk {
                        entries::push_entry(page, entry, meta.keeps_apart());
                        len += 1;
                    }
                    if kind == Kind::Bucket {
                        (*page::special(page)).set_sorted(len); // (in order: the counting sort)
                    }
                    (*page::special(page)).next = if last { page::INVALID_BLOCK } else { block + 1 };
                });
            };
        let values = 1usize << SEGMENT_BITS;
        let mut sorted = Vec::new();
        crate::memory::reserve_entries(&mut sorted, entries.len());
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
                    let last = i + 1 == chunks.len();
                    write_chain_page(block, Kind::Bucket, segment as u16, &mut chunk.iter().copied(), last);
                    block += 1;
                    if block.is_multiple_of(64) {
                        pgrx::check_for_interrupts!();
                    }
                }
                start = end;
            }
            pgrx::check_for_interrupts!();
        }
        if let Some(built) = built.filter(|built| built.rows() > 0) {
            let part = super::dense_write::write(built, block, |at, fill| write_page(index, fork, at, fill));
            block += part.blocks();
        }
        debug_assert_eq!(block, next_block);
        for i in 0..null_pages {
            let mut chunk = (0..per_page).map_while(|_| next_null()).map(|tid| Entry { fp: 0, tid });
            write_chain_page(block, Kind::Nulls, chain::NULLS_SEGMENT, &mut chunk, i + 1 == null_pages);
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
        let buffer = buffers::new_buffer(index, fork);
        if pg_sys::BufferGetBlockNumber(buffer) != block {
            error!("simhash index build expected block {block}, got {}", pg_sys::BufferGetBlockNumber(buffer));
        }
        fill(pg_sys::BufferGetPage(buffer));
        pg_sys::MarkBufferDirty(buffer);
        pg_sys::UnlockReleaseBuffer(buffer);
    }
}
