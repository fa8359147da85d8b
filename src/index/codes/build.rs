//! CREATE INDEX of codes: every row's code and TID read from the table into memory (the codes in
//! one flat array) while they fit in `maintenance_work_mem`, beyond it into PostgreSQL's sorts,
//! which spill to temporary files (`super::spill`); then the pages written in block order
//! (metapage, code store sorted by code then TID, each indexed segment's directory and entries,
//! the NULL rows in TID order: the same pages either way, `super::build_pages`), WAL-logged whole
//! a few at a time as they are written. The segments' entries are made on a second thread
//! meanwhile when the build is big enough (`code_build::segments_on_thread`). All codes have one length: the
//! column's (`bit(n)`), else the first row's; another is an ERROR 22026.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::bit_deal::{self, BitCounts};
use simhash_core::code_build::{self, OnThread, ThreadError};
use simhash_core::code_index::Layout;
use simhash_core::multi_index::MAX_CODE_BITS;

use super::super::buffers;
use super::super::page::TID;
use super::build_pages::{write_slot, Writer};
use super::meta::{self, CodesMeta, Places};
use super::spill::Spilled;
use crate::memory;
use crate::pg::errors::raise;
use crate::pg::tid::tid_order;

/// The rows of a build until they are written: in memory while they fit in
/// `maintenance_work_mem` (every code in one flat array), beyond it in sorts that spill to disk
/// ([`Spilled`]).
struct BuildState {
    /// The length of every code (0 until the first).
    bits: u32,
    codes: Vec<u8>,
    tids: Vec<pg_sys::ItemPointerData>,
    nulls: Vec<pg_sys::ItemPointerData>,
    /// The bytes the rows may take in memory: `maintenance_work_mem`.
    budget: usize,
    spilled: Option<Box<Spilled>>,
    /// The ones at each bit of the rows counted so far (`bit_deal::counted`), and the rows seen.
    bit_counts: Option<BitCounts>,
    seen: usize,
}

impl BuildState {
    fn new(bits: u32) -> BuildState {
        let budget = unsafe { pg_sys::maintenance_work_mem } as usize * 1024;
        BuildState {
            bits,
            codes: Vec::new(),
            tids: Vec::new(),
            nulls: Vec::new(),
            budget,
            spilled: None,
            bit_counts: None,
            seen: 0,
        }
    }

    fn code_bytes(&self) -> usize {
        self.bits.div_ceil(8) as usize
    }

    /// Adds a row: `code` (`None`: NULL) at `tid`.
    fn add(&mut self, code: Option<&[u8]>, tid: pg_sys::ItemPointerData) {
        if let Some(code) = code {
            if bit_deal::counted(self.seen) {
                self.bit_counts.get_or_insert_with(|| BitCounts::new(self.bits)).add(code);
            }
            self.seen += 1;
        }
        if let Some(spilled) = &mut self.spilled {
            return spilled.put(code, tid);
        }
        let code_bytes = self.code_bytes();
        let per_row = code_bytes + BUILD_BYTES_PER_ROW;
        let (len, capacity, row_bytes) = match code {
            Some(_) => (self.tids.len(), self.tids.capacity(), per_row),
            None => (self.nulls.len(), self.nulls.capacity(), TID),
        };
        if len == capacity {
            // Room for as many again, or for what fits; the sorts when that is too little.
            let held = self.tids.capacity() * per_row + self.nulls.capacity() * TID;
            let more = len.max(1024).min(self.budget.saturating_sub(held) / row_bytes);
            if more < 1024 {
                self.spill();
                return self.add(code, tid);
            }
            match code {
                Some(_) => {
                    memory::reserve_entries_exact(&mut self.tids, more);
                    memory::reserve_entries_exact(&mut self.codes, more * code_bytes);
                }
                None => memory::reserve_entries_exact(&mut self.nulls, more),
            }
        }
        match code {
            Some(code) => {
                self.codes.extend_from_slice(code);
                self.tids.push(tid);
            }
            None => self.nulls.push(tid),
        }
    }

    /// Moves the rows held in memory to sorts that spill to disk, giving their memory back as it
    /// goes, for the rows to come too.
    fn spill(&mut self) {
        super::super::spill::notice_sorting_on_disk(
            self.tids.len() + self.nulls.len(),
            self.code_bytes() + BUILD_BYTES_PER_ROW,
        );
        let code_bytes = self.code_bytes();
        let mut spilled = Box::new(Spilled::new(self.budget / 1024));
        while !self.tids.is_empty() {
            let from = self.tids.len().saturating_sub(SPILLED_AT_ONCE);
            for (n, tid) in (from..).zip(&self.tids[from..]) {
                spilled.put(Some(&self.codes[n * code_bytes..(n + 1) * code_bytes]), *tid);
            }
            self.tids.truncate(from);
            self.codes.truncate(from * code_bytes);
            self.tids.shrink_to_fit();
            self.codes.shrink_to_fit();
            pgrx::check_for_interrupts!();
        }
        for (n, tid) in std::mem::take(&mut self.nulls).into_iter().enumerate() {
            spilled.put(None, tid);
            if n % SPILLED_AT_ONCE == SPILLED_AT_ONCE - 1 {
                pgrx::check_for_interrupts!();
            }
        }
        (self.codes, self.tids) = (Vec::new(), Vec::new());
        self.spilled = Some(spilled);
    }
}

/// Rows moved to the sorts at a time when the build spills, after which their memory is given
/// back.
const SPILLED_AT_ONCE: usize = 1 << 18;

/// The code length a column's type fixes (`bit(n)`; not `bit varying(n)`, whose `n` is a
/// maximum), if any, checked.
///
/// # Safety
///
/// `index` is an open index relation.
pub(in crate::index) unsafe fn declared_bits(index: pg_sys::Relation) -> u32 {
    unsafe {
        let attribute = crate::pg::compat::tuple_desc_attr((*index).rd_att, 0);
        let fixed = attribute.atttypid == pg_sys::BITOID;
        let bits = if fixed { u32::try_from(attribute.atttypmod).unwrap_or(0) } else { 0 };
        check_bits(bits.max(1));
        bits
    }
}

/// ERROR 22026 for an empty code (`B''` in a `bit varying` column), which an index does not take:
/// its codes have 1 to 4,096 bits.
pub(super) fn check_not_empty(bits: u32) {
    if bits == 0 {
        raise(
            PgSqlErrorCode::ERRCODE_STRING_DATA_LENGTH_MISMATCH,
            format!("a simhash index takes codes of 1 to {MAX_CODE_BITS} bits, not an empty one"),
            None,
            Some("Store NULL for a row without a code.".into()),
        );
    }
}

/// ERROR 54000 for codes longer than an index takes.
pub(super) fn check_bits(bits: u32) {
    if bits > MAX_CODE_BITS {
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("a simhash index takes codes of up to {MAX_CODE_BITS} bits, not {bits}"),
            None,
            None,
        );
    }
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
        if *isnull {
            state.add(None, *tid);
        } else {
            // Detoasted in place where it can be (a short header, as the table stores small
            // codes), else into a copy freed after the row: the memory context lives as long as
            // the build, and a copy a row would grow it by the table's size whatever
            // maintenance_work_mem says.
            let raw = (*values).cast_mut_ptr::<pg_sys::varlena>();
            let value = pg_sys::pg_detoast_datum_packed(raw);
            let code = crate::codes::code_of_payload(std::slice::from_raw_parts(
                pgrx::vardata_any(value).cast::<u8>(),
                pgrx::varsize_any_exhdr(value),
            ));
            check_not_empty(code.bits);
            if state.bits == 0 {
                check_bits(code.bits);
                state.bits = code.bits;
            }
            if code.bits != state.bits {
                super::wrong_length(code.bits, state.bits);
            }
            state.add(Some(code.bytes), *tid);
            if value != raw {
                pg_sys::pfree(value.cast());
            }
        }
        pgrx::check_for_interrupts!();
    }
}

/// Bytes a built row takes in memory at the build's peak besides its code: its TID, its sort key
/// (`u64`) and its place in the code store's order (`u32`) while that order is found; later fewer
/// (the order, then the value (`u32`) of the segment being written and the TID, then the order,
/// the value and the entry (`u64`); `code_build`; the values of more segments at once only in
/// what `maintenance_work_mem` has left).
const BUILD_BYTES_PER_ROW: usize = 6 + 8 + 4;

/// `ambuild` of an index of codes.
///
/// # Safety
///
/// As `ambuild`.
pub(in crate::index) unsafe fn build(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    index_info: *mut pg_sys::IndexInfo,
) -> *mut pg_sys::IndexBuildResult {
    unsafe {
        if buffers::number_of_blocks(index) != 0 {
            error!("simhash index \"{}\" already contains data", crate::pg::names::relation_name(index));
        }
        let mut state = BuildState::new(declared_bits(index));
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
        let rows = state.spilled.as_ref().map_or(state.tids.len() as u64, |spilled| spilled.rows);
        if u32::try_from(rows).is_err() {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("a simhash index of codes takes up to {} rows, not {rows}", u32::MAX),
                None,
                None,
            );
        }
        let nulls = state.spilled.as_ref().map_or(state.nulls.len() as u64, |spilled| spilled.nulls());
        if let (Some(counts), Ok(layout)) =
            (&state.bit_counts, Layout::for_table(state.bits, rows, super::super::options::segments(index)))
        {
            crate::index::options::notice_lean_bits(index, state.bits, &counts.lean(), &layout.plan, layout.indexed);
        }
        write_index(index, pg_sys::ForkNumber::MAIN_FORKNUM, state);
        let result = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*result).heap_tuples = heap_tuples;
        (*result).index_tuples = (rows + nulls) as f64;
        result
    }
}

/// `ambuildempty` of an index of codes: the metapage alone, in the init fork.
///
/// # Safety
///
/// As `ambuildempty`.
pub(in crate::index) unsafe fn build_empty(index: pg_sys::Relation) {
    unsafe { write_index(index, pg_sys::ForkNumber::INIT_FORKNUM, BuildState::new(declared_bits(index))) }
}

/// Writes the index of the rows of `state` to `fork`, page after page, WAL-logged whole.
unsafe fn write_index(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, mut state: BuildState) {
    unsafe {
        let spilled = state.spilled.take();
        let rows = spilled.as_ref().map_or(state.tids.len(), |spilled| spilled.rows as usize);
        let nulls = spilled.as_ref().map_or(state.nulls.len(), |spilled| spilled.nulls() as usize);
        let code_bytes = state.code_bytes();
        let mut meta = CodesMeta::new(state.bits);
        meta.stamp = pg_sys::GetCurrentTimestamp() as u64;
        let layout = (rows > 0).then(|| {
            Layout::for_table(state.bits, rows as u64, super::super::options::segments(index)).expect("checked lengths")
        });
        if let Some(layout) = &layout {
            meta.set_layout(layout);
            meta.rows = rows as u32;
        }
        let places = Places::of(&meta);
        meta.built_end = places.end;
        let null_pages = nulls.div_ceil(meta::nulls_per_page()) as u32;
        if null_pages > 0 {
            (meta.nulls_head, meta.nulls_tail) = (places.end, places.end + null_pages - 1);
        }
        let wal = fork == pg_sys::ForkNumber::INIT_FORKNUM || crate::pg::compat::relation_needs_wal(index);
        let mut out = Writer::new(index, fork, places.end + null_pages, wal);
        out.page(&mut |meta_page| meta::write_meta(meta_page, &meta, true));
        match spilled {
            Some(mut spilled) => {
                if let Some(layout) = &layout {
                    spilled.write_built(&mut out, layout, code_bytes, rows);
                }
                debug_assert_eq!(out.block, places.end);
                let mut tids = spilled.sorted_nulls();
                out.null_pages(nulls, &mut || tids.next().expect("counted NULL rows"));
            }
            None => {
                if let Some(layout) = &layout {
                    write_built(&mut out, &mut state, layout);
                }
                debug_assert_eq!(out.block, places.end);
                memory::sort_interruptibly(&mut state.nulls, tid_order);
                let mut tids = state.nulls.iter();
                out.null_pages(nulls, &mut || *tids.next().expect("counted NULL rows"));
            }
        }
        out.finish();
    }
}

/// Writes the built part of the rows held in memory (code store, segments), reading the rows of
/// `state` in the code store's order (the TIDs are freed once the code store is written).
unsafe fn write_built(out: &mut Writer, state: &mut BuildState, layout: &Layout) {
    unsafe {
        let rows = state.tids.len();
        let code_bytes = state.code_bytes();
        let interrupt = crate::fingerprint::text::INTERRUPTS;
        // The order of the code store: the rows by code (then TID), left where they are.
        let mut order: Vec<u32> = Vec::new();
        memory::reserve_entries(&mut order, rows);
        order.resize(rows, 0);
        {
            let mut keys: Vec<u64> = Vec::new();
            memory::reserve_entries(&mut keys, rows);
            keys.resize(rows, 0);
            code_build::store_order(&state.codes, code_bytes, &state.tids, tid_order, &mut keys, &mut order, interrupt);
        }

        // A second thread makes the segments' entries while this one writes pages, when
        // maintenance_work_mem has room for a second buffer of entries and the values of one
        // segment besides the codes, the order and the TIDs, and parallel maintenance workers are
        // allowed at all (the thread takes a second CPU, as a worker would).
        let held = state.codes.capacity() + state.tids.capacity() * TID + rows * (4 + 8 * 2);
        let room = state.budget.saturating_sub(held) / (rows * 4).max(1);
        let thread_allowed = pg_sys::max_parallel_maintenance_workers > 0 && pg_sys::max_parallel_workers > 0;
        let mut how = "in memory on one thread";
        if rows >= THREAD_ROWS && room >= 1 && thread_allowed {
            let at_once = room.min(VALUES_AT_ONCE.min(layout.indexed as usize));
            let mut values: Vec<u32> = Vec::new();
            let mut entries = [Vec::new(), Vec::new()];
            memory::reserve_entries(&mut values, rows * at_once);
            values.resize(rows * at_once, 0);
            for entries in &mut entries {
                memory::reserve_entries(entries, rows);
                entries.resize(rows, 0);
            }
            let codes = std::mem::take(&mut state.codes);
            let tids = std::mem::take(&mut state.tids);
            let written = code_build::segments_on_thread(
                layout,
                &codes,
                code_bytes,
                &order,
                values,
                entries,
                interrupt,
                SignalsBlocked::new,
                out,
                |out| {
                    write_store(out, &codes, code_bytes, &order, &mut |row| {
                        (tids[row], &codes[row * code_bytes..(row + 1) * code_bytes])
                    });
                },
                |out, i, directory, entries| {
                    let mut next = entries.iter();
                    out.segment(layout, i, directory, rows, || *next.next().expect("an entry per row"));
                },
            );
            match written {
                Ok(OnThread::Written) => {
                    report_path(out, rows, layout, "in memory, the segments' entries made on a second thread");
                    return;
                }
                // (the system refused the thread: the build goes on here, nothing written yet)
                Ok(OnThread::NotStarted) => {
                    how = "in memory on one thread (the system refused a second one)";
                    (state.codes, state.tids) = (codes, tids)
                }
                Err(ThreadError::OutOfMemory) => segment_out_of_memory(layout),
                Err(ThreadError::Failed) => raise(
                    PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                    "simhash index build: the thread making the segments' entries failed".into(),
                    Some("The server log has its message.".into()),
                    Some("SET max_parallel_maintenance_workers = 0 builds on one thread.".into()),
                ),
            }
        }

        // Else on this thread: the values of up to VALUES_AT_ONCE segments read from the codes in
        // one pass, as many as maintenance_work_mem has room for besides the codes, the order and
        // the TIDs or the entries (one at least; the TIDs are gone when the entries come).
        let held = state.codes.capacity() + rows * 4 + (state.tids.capacity() * TID).max(rows * 8);
        let room = state.budget.saturating_sub(held) / (rows * 4).max(1);
        let at_once = room.clamp(1, VALUES_AT_ONCE.min(layout.indexed as usize));
        let mut values: Vec<u32> = Vec::new();
        memory::reserve_entries(&mut values, rows * at_once);
        values.resize(rows * at_once, 0);

        // The code store, and the values of the first segments from the same reads of the codes.
        {
            let (codes, tids) = (&state.codes, &state.tids);
            let values = &mut values[..];
            let mut place = 0;
            write_store(out, codes, code_bytes, &order, &mut |row| {
                let code = &codes[row * code_bytes..(row + 1) * code_bytes];
                code_build::put_values(layout, 0, code, place, values, rows);
                place += 1;
                (tids[row], code)
            });
        }
        state.tids = Vec::new();

        // Each indexed segment: its entries sorted by (value, ordinal), its directory.
        let mut entries: Vec<u64> = Vec::new();
        memory::reserve_entries(&mut entries, rows);
        entries.resize(rows, 0);
        write_segments(out, layout, rows, &mut values, &mut entries, &mut |first, values| {
            // (the first ones' came with the code store)
            if first > 0 {
                code_build::segment_values(layout, first, &state.codes, code_bytes, Some(&order), values, interrupt);
            }
        });
        report_path(out, rows, layout, how);
    }
}

/// Writes each indexed segment of `layout` (its directory, its entries sorted by (value,
/// ordinal)) of the `rows` rows, `values.len() / rows` segments at a time: `fill(first, values)`
/// puts the values of the segments from `first` into `values` (cut to as many arrays of `rows`
/// elements as there are segments in the pass), then each one's entries are sorted in `entries`
/// (`rows` elements) and written.
pub(super) unsafe fn write_segments(
    out: &mut Writer,
    layout: &Layout,
    rows: usize,
    values: &mut [u32],
    entries: &mut [u64],
    fill: &mut dyn FnMut(u32, &mut [u32]),
) {
    let at_once = values.len() / rows;
    let mut first = 0;
    while first < layout.indexed {
        let n = at_once.min((layout.indexed - first) as usize);
        let values = &mut values[..rows * n];
        fill(first, values);
        for (i, values) in (first..).zip(values.chunks_exact(rows)) {
            let directory =
                code_build::entries_of_values(layout, i, values, entries, crate::fingerprint::text::INTERRUPTS)
                    .unwrap_or_else(|_| segment_out_of_memory(layout));
            let mut next = entries.iter();
            unsafe { out.segment(layout, i, &directory, rows, || *next.next().expect("an entry per row")) };
        }
        first += n as u32;
    }
}

/// ERROR 53200: memory refused for a segment's counts and directory (one element a prefix) or
/// for sorting a run of its entries, beside the build's buffers.
pub(super) fn segment_out_of_memory(layout: &Layout) -> ! {
    memory::out_of_memory(
        format!(
            "out of memory for the directory of a segment of a simhash index ({} prefixes)",
            layout.directory_len(0)
        ),
        "A build of a simhash index holds every row's code and entry in memory within \
         maintenance_work_mem: give the server more memory, or lower maintenance_work_mem so that \
         the build sorts on disk.",
    )
}

/// DEBUG1: which way the built part of an index was written (`how`), so that a test or a DBA can
/// tell.
pub(super) fn report_path(out: &Writer, rows: usize, layout: &Layout, how: &str) {
    pgrx::debug1!(
        "simhash index \"{}\": {rows} codes, {} of {} segments indexed, built {how}",
        unsafe { crate::pg::names::relation_name(out.index()) },
        layout.indexed,
        layout.plan.count,
    );
}

/// Writes the code store: the rows of `order` (of `codes`, `code_bytes` bytes each) in turn, `row`
/// giving each one's TID and code.
unsafe fn write_store<'a>(
    out: &mut Writer,
    codes: &[u8],
    code_bytes: usize,
    order: &[u32],
    row: &mut dyn FnMut(usize) -> (pg_sys::ItemPointerData, &'a [u8]),
) {
    let per_page = meta::store_per_page(code_bytes);
    for (n, chunk) in order.chunks(per_page).enumerate() {
        // (the codes of the next page asked for ahead, up to 64: they are scattered in `codes`)
        for &ahead in order.iter().skip((n + 1) * per_page).take(per_page.min(64)) {
            code_build::prefetch(&codes[ahead as usize * code_bytes..(ahead as usize + 1) * code_bytes]);
        }
        let mut next = chunk.iter();
        unsafe {
            out.store_page(code_bytes, chunk.len(), |slot| {
                let (tid, code) = row(*next.next().expect("a row per slot") as usize);
                write_slot(slot, tid, code);
            });
        }
    }
}

/// The fewest rows whose build makes the segments' entries on a second thread.
const THREAD_ROWS: usize = 1 << 14;

/// Every signal blocked on this thread while it lasts: a thread started meanwhile inherits the
/// mask, so that PostgreSQL's signals (cancel, termination, latches) reach the backend's own
/// thread alone, whose next check for interrupts handles them.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let status = libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
            assert!(status == 0, "pthread_sigmask failed: {status}");
            SignalsBlocked(before)
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// The most segments whose values a build reads from the codes in one pass.
pub(super) const VALUES_AT_ONCE: usize = 16;
