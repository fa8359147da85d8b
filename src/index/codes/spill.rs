//! The rows of a build of codes beyond `maintenance_work_mem` ([`Spilled`]): in PostgreSQL's
//! sorts, which spill to temporary files, and written from them as the rows held in memory are
//! (`super::build`): the same pages in the same order.
//!
//! Two sorts take the rows: one of the codes, each with its TID (as `bytea`: the code's bytes,
//! then the TID's order key big-endian, so sorted by code, then TID), one of the NULL rows' TIDs.
//! The sorted codes are the code store, a row's ordinal its place there. Then the indexed segments
//! are made from the code store read back from the index's own pages (written first, in order).
//! In memory where the budget holds a segment's entries (8 bytes a row, against the code's bytes
//! and more for a row held whole): the values of up to 16 segments from each read of the code
//! store, each segment's entries sorted as a build in memory sorts them (`code_build`). Else one
//! segment at a time: each row's (segment value, ordinal) put into a sort of its own and the
//! prefixes counted for the segment's directory, one sort open at a time besides that of the NULL
//! rows.

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use simhash_core::code_build;
use simhash_core::code_index::{self, Layout};

use super::super::buffers::read_locked;
use super::build_pages::{write_slot, Writer};
use super::meta;
use super::read::slots;
use crate::pg::errors::raise;
use crate::pg::tid::{tid_of_order, tid_order};
use crate::pg::tuplesort::{Bytes, Sort};

/// A build's rows in sorts that keep to `maintenance_work_mem` together.
pub(super) struct Spilled {
    /// (taken when the code store is written)
    codes: Option<Sort<Bytes>>,
    nulls: Sort<u64>,
    /// The rows with a code.
    pub rows: u64,
    /// The budget of a segment's sort (`maintenance_work_mem` but the NULL rows' share), in kB.
    segment_kb: usize,
}

impl Spilled {
    /// Empty sorts within `budget_kb` kilobytes: a sixteenth for the NULL rows, the rest for the
    /// codes (and later each segment's entries).
    pub fn new(budget_kb: usize) -> Spilled {
        let nulls_kb = (budget_kb / 16).max(64);
        let segment_kb = budget_kb.saturating_sub(nulls_kb);
        Spilled { codes: Some(Sort::new(segment_kb)), nulls: Sort::new(nulls_kb), rows: 0, segment_kb }
    }

    /// Adds a row: `code` (`None`: NULL) at `tid`.
    pub fn put(&mut self, code: Option<&[u8]>, tid: pg_sys::ItemPointerData) {
        match code {
            Some(code) => {
                let sort = self.codes.as_mut().expect("codes not written yet");
                sort.put(Bytes::new(&[code, &tid_order(&tid).to_be_bytes()]));
                self.rows += 1;
                if self.rows > u64::from(u32::MAX) {
                    raise(
                        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                        format!("a simhash index of codes takes up to {} rows", u32::MAX),
                        None,
                        None,
                    );
                }
            }
            None => self.nulls.put(tid_order(&tid)),
        }
    }

    /// The NULL rows added.
    pub fn nulls(&self) -> u64 {
        self.nulls.len()
    }

    /// Writes the code store of the `rows` rows of `code_bytes`-byte codes from its sort, then
    /// each indexed segment of `layout` (its directory and its entries) from the code store read
    /// back: in memory where the budget holds a segment's entries, else through sorts.
    ///
    /// # Safety
    ///
    /// `out` writes the main fork of the index being built, the metapage written.
    pub unsafe fn write_built(&mut self, out: &mut Writer, layout: &Layout, code_bytes: usize, rows: usize) {
        unsafe {
            let store_start = out.block;
            let per_page = meta::store_per_page(code_bytes);
            {
                let mut codes = self.codes.take().expect("codes not written yet");
                codes.sort();
                for first in (0..rows).step_by(per_page) {
                    out.store_page(code_bytes, per_page.min(rows - first), |slot: &mut [u8]| {
                        let row = codes.next().expect("a row per slot");
                        let (code, tid) = row.bytes().split_at(code_bytes);
                        write_slot(slot, tid_of_order(u64::from_be_bytes(tid.try_into().expect("8 bytes"))), code);
                    });
                }
            }
            let store_pages = rows.div_ceil(per_page) as u32;
            let store = store_start..store_start + store_pages;
            // The segments in memory when one buffer of entries fits in the sorts' budget (the
            // sort of the codes is gone) and the system grants the buffers, else each through a
            // sort of its own.
            let at_once = segments_in_memory(self.segment_kb * 1024, layout, rows);
            let buffers = (at_once > 0)
                .then(|| Some((crate::memory::vec_with_room(rows * at_once)?, crate::memory::vec_with_room(rows)?)))
                .flatten();
            let how = match buffers {
                None => {
                    self.segments_through_sorts(out, layout, code_bytes, rows, store);
                    "through sorts on disk (beyond maintenance_work_mem)".to_string()
                }
                Some((values, entries)) => {
                    segments_in_memory_from_store(out, layout, rows, store, at_once, values, entries);
                    format!(
                        "the code store through a sort on disk (beyond maintenance_work_mem), the segments in \
                         memory, {at_once} at a time"
                    )
                }
            };
            super::build::report_path(out, rows, layout, &how);
        }
    }

    /// Each indexed segment in turn through a sort of its own (which spills to disk): the code
    /// store (`store`, its blocks) read back for each, each row's (segment value, ordinal) put into
    /// the sort and the prefixes counted for the segment's directory.
    unsafe fn segments_through_sorts(
        &self,
        out: &mut Writer,
        layout: &Layout,
        code_bytes: usize,
        rows: usize,
        store: std::ops::Range<u32>,
    ) {
        unsafe {
            for i in 0..layout.indexed {
                let mut entries = Sort::<u64>::new(self.segment_kb);
                // (one element a prefix, up to 256 kB: an allocation of its own, taken fallibly)
                let prefixes = layout.directory_len(i) - 1;
                let mut counts: Vec<u32> = crate::memory::vec_with_room(prefixes)
                    .unwrap_or_else(|| crate::memory::index_out_of_memory::<u32>(prefixes, 0));
                counts.resize(prefixes, 0);
                let mut ordinal = 0usize;
                for_each_store_code(out.index(), store.clone(), code_bytes, |code| {
                    let value = layout.plan.segment(code, i);
                    counts[layout.split(i, value).0 as usize] += 1;
                    entries.put(u64::from(value) << 32 | ordinal as u64);
                    ordinal += 1;
                });
                entries.sort();
                let directory = code_index::directory_of_counts(&counts)
                    .unwrap_or_else(|_| crate::memory::index_out_of_memory::<u32>(counts.len() + 1, 0));
                out.segment(layout, i, &directory, rows, || entries.next().expect("an entry per row"));
            }
        }
    }

    /// The NULL rows' TIDs in order.
    pub fn sorted_nulls(&mut self) -> impl Iterator<Item = pg_sys::ItemPointerData> + '_ {
        self.nulls.sort();
        std::iter::from_fn(move || self.nulls.next().map(tid_of_order))
    }
}

/// The indexed segments of `layout` whose values a build beyond `maintenance_work_mem` makes in
/// memory from one read of the code store, within `budget` bytes for `rows` rows: as many as fit
/// beside one buffer of entries (8 bytes a row; 4 more a segment, and what sorting a segment takes
/// besides, `code_build::entries_scratch_bytes`), up to `VALUES_AT_ONCE` and the indexed
/// segments; 0 when not even one fits (the segments then go through sorts on disk).
fn segments_in_memory(budget: usize, layout: &Layout, rows: usize) -> usize {
    let scratch = (0..layout.indexed).map(|i| code_build::entries_scratch_bytes(layout, i, rows)).max().unwrap_or(0);
    let room = budget.saturating_sub(rows.saturating_mul(8) + scratch) / rows.saturating_mul(4).max(1);
    room.min(super::build::VALUES_AT_ONCE).min(layout.indexed as usize)
}

/// The indexed segments made in memory from the code store written (`store`, its blocks), with
/// the values of `at_once` segments read from it in each pass (`code_build::put_values`), then
/// each segment's entries sorted (`code_build::entries_of_values`) and written in turn. `values`
/// and `entries` are empty, with room for `at_once` elements a row and one.
///
/// # Safety
///
/// `out` writes the main fork of the index being built, the code store written as `store`.
unsafe fn segments_in_memory_from_store(
    out: &mut Writer,
    layout: &Layout,
    rows: usize,
    store: std::ops::Range<u32>,
    at_once: usize,
    mut values: Vec<u32>,
    mut entries: Vec<u64>,
) {
    unsafe {
        let (index, code_bytes) = (out.index(), layout.plan.code_bits.div_ceil(8) as usize);
        values.resize(rows * at_once, 0);
        entries.resize(rows, 0);
        super::build::write_segments(out, layout, rows, &mut values, &mut entries, &mut |first, values| {
            let mut place = 0;
            for_each_store_code(index, store.clone(), code_bytes, |code| {
                code_build::put_values(layout, first, code, place, values, rows);
                place += 1;
            });
            assert_eq!(place, rows, "a row per slot of the code store");
        });
    }
}

/// Calls `f` with each code of the code store (`store`, its blocks, codes of `code_bytes` bytes)
/// in order, each page share-locked while its codes are read, checking for interrupts after each.
///
/// # Safety
///
/// `index` is the index being built, its code store written as `store`.
unsafe fn for_each_store_code(
    index: pg_sys::Relation,
    store: std::ops::Range<u32>,
    code_bytes: usize,
    mut f: impl FnMut(&[u8]),
) {
    unsafe {
        for block in store {
            let buffer = read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
            for (_, code) in slots(index, pg_sys::BufferGetPage(buffer), block, code_bytes) {
                f(code);
            }
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
        }
    }
}
