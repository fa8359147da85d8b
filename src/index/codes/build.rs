//! CREATE INDEX of codes: every row's code and TID read from the table into memory (the codes in
//! one flat array), sorted by code, then the pages written in block order (metapage, code store,
//! each indexed segment's directory and entries, the NULL rows) and WAL-logged whole at the end,
//! as the `simhash64` kind's build does. All codes have one length: the column's (`bit(n)`), else
//! the first row's; another is an ERROR 22026.

use pgrx::pg_sys::{self, BlockNumber, Page};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::code_index::{self, Layout};
use simhash_core::multi_index::MAX_CODE_BITS;

use super::super::page::{self, Kind, INVALID_BLOCK, TID};
use super::super::{buffers, memory};
use super::meta::{self, CodesMeta, Places};
use crate::pg::errors::raise;

struct BuildState {
    /// The length of every code (0 until the first).
    bits: u32,
    codes: Vec<u8>,
    tids: Vec<pg_sys::ItemPointerData>,
    nulls: Vec<pg_sys::ItemPointerData>,
}

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
            memory::push(&mut state.nulls, *tid);
        } else {
            let (bits, bytes) = super::code_bytes(*values);
            if state.bits == 0 {
                check_bits(bits);
                state.bits = bits;
            }
            if bits != state.bits || bits == 0 {
                super::wrong_length(bits, state.bits);
            }
            memory::reserve(&mut state.codes, bytes.len());
            state.codes.extend_from_slice(bytes);
            memory::push(&mut state.tids, *tid);
        }
        if (state.tids.len() + state.nulls.len()).is_multiple_of(4096) {
            pgrx::check_for_interrupts!();
            within_maintenance_work_mem(state);
        }
    }
}

/// Bytes a built row takes in memory at the build's peak besides its code: its TID, its place in
/// the order by code (`u32`) and its entry of the segment being written (`u64`).
const BUILD_BYTES_PER_ROW: usize = 6 + 4 + 8;

/// An ERROR (54000) when the rows read so far will need more than `maintenance_work_mem` at the
/// build's peak: the build holds every code in memory (it does not spill to disk yet).
fn within_maintenance_work_mem(state: &BuildState) {
    let rows = state.tids.len();
    let code_bytes = state.codes.len().checked_div(rows).unwrap_or(0);
    let needed = rows * (code_bytes + BUILD_BYTES_PER_ROW) + state.nulls.len() * 6;
    let budget = unsafe { pg_sys::maintenance_work_mem } as usize * 1024;
    if needed > budget {
        let per_row = code_bytes + BUILD_BYTES_PER_ROW;
        raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!(
                "building a simhash index of {}-bit codes needs more than maintenance_work_mem ({} kB)",
                state.bits,
                budget / 1024
            ),
            Some(format!(
                "The build holds every code in memory: about {per_row} bytes a row, {rows} rows read so far."
            )),
            Some(format!(
                "Raise maintenance_work_mem for the build to about {per_row} bytes per row of the table: \
                 SET maintenance_work_mem = '1GB' holds {} million rows.",
                (1usize << 30) / per_row / 1_000_000
            )),
        );
    }
}

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
        let mut state =
            BuildState { bits: declared_bits(index), codes: Vec::new(), tids: Vec::new(), nulls: Vec::new() };
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
        if u32::try_from(state.tids.len()).is_err() {
            raise(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("a simhash index of codes takes up to {} rows, not {}", u32::MAX, state.tids.len()),
                None,
                None,
            );
        }
        let index_tuples = (state.tids.len() + state.nulls.len()) as f64;
        write_index(index, pg_sys::ForkNumber::MAIN_FORKNUM, &state);
        let result = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexBuildResult>()) as *mut pg_sys::IndexBuildResult;
        (*result).heap_tuples = heap_tuples;
        (*result).index_tuples = index_tuples;
        result
    }
}

/// `ambuildempty` of an index of codes: the metapage alone, in the init fork.
///
/// # Safety
///
/// As `ambuildempty`.
pub(in crate::index) unsafe fn build_empty(index: pg_sys::Relation) {
    unsafe {
        let state = BuildState { bits: declared_bits(index), codes: Vec::new(), tids: Vec::new(), nulls: Vec::new() };
        write_index(index, pg_sys::ForkNumber::INIT_FORKNUM, &state);
    }
}

unsafe fn write_index(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, state: &BuildState) {
    unsafe {
        let rows = state.tids.len();
        let code_bytes = state.bits.div_ceil(8) as usize;
        let mut meta = CodesMeta::new(state.bits);
        meta.stamp = pg_sys::GetCurrentTimestamp() as u64;
        let layout = (rows > 0).then(|| Layout::for_table(state.bits, rows as u64).expect("checked lengths"));
        if let Some(layout) = &layout {
            meta.set_layout(layout);
            meta.rows = rows as u32;
        }
        let places = Places::of(&meta);
        meta.built_end = places.end;
        let null_pages = state.nulls.len().div_ceil(meta::nulls_per_page()) as u32;
        if null_pages > 0 {
            (meta.nulls_head, meta.nulls_tail) = (places.end, places.end + null_pages - 1);
        }
        let block = std::cell::Cell::new(0 as BlockNumber);
        let write = |fill: &mut dyn FnMut(Page)| {
            write_page(index, fork, block.get(), fill);
            block.set(block.get() + 1);
            if block.get().is_multiple_of(64) {
                pgrx::check_for_interrupts!();
            }
        };
        write(&mut |meta_page| meta::write_meta(meta_page, &meta, true));

        // The code store: the rows sorted by code (then TID).
        let code = |row: u32| &state.codes[row as usize * code_bytes..(row as usize + 1) * code_bytes];
        let mut order: Vec<u32> = Vec::new();
        memory::reserve(&mut order, rows);
        order.extend(0..rows as u32);
        sort_by_code(&mut order, code_bytes, &state.codes, &state.tids);
        let per_page = meta::store_per_page(code_bytes);
        for chunk in order.chunks(per_page) {
            write(&mut |store_page| {
                page::init_page(store_page, Kind::CodeStore, 0);
                let mut at = page::contents(store_page);
                for &row in chunk {
                    at.cast::<pg_sys::ItemPointerData>().write_unaligned(state.tids[row as usize]);
                    std::ptr::copy_nonoverlapping(code(row).as_ptr(), at.add(TID), code_bytes);
                    at = at.add(meta::store_slot(code_bytes));
                }
                page::set_used(store_page, chunk.len() * meta::store_slot(code_bytes));
            });
        }

        // Each indexed segment: its entries sorted by (value, ordinal), its directory.
        if let Some(layout) = layout {
            let mut entries: Vec<u64> = Vec::new();
            memory::reserve(&mut entries, rows);
            for i in 0..layout.indexed {
                entries.clear();
                for (ordinal, &row) in order.iter().enumerate() {
                    entries.push(u64::from(layout.plan.segment(code(row), i)) << 32 | ordinal as u64);
                    if ordinal.is_multiple_of(1 << 16) {
                        pgrx::check_for_interrupts!();
                    }
                }
                memory::sort_interruptibly(&mut entries, |&e| e);
                let directory = code_index::directory(
                    entries.iter().enumerate().map(|(n, &e)| {
                        if n.is_multiple_of(1 << 16) {
                            pgrx::check_for_interrupts!();
                        }
                        layout.split(i, (e >> 32) as u32).0
                    }),
                    layout.directory_len(i),
                );
                for chunk in directory.chunks(meta::directory_per_page()) {
                    write(&mut |directory_page| {
                        page::init_page(directory_page, Kind::CodeDirectory, 0);
                        std::ptr::copy_nonoverlapping(
                            chunk.as_ptr(),
                            page::contents(directory_page).cast::<u32>(),
                            chunk.len(),
                        );
                        page::set_used(directory_page, chunk.len() * 4);
                    });
                }
                let low_bytes = layout.low_bytes_of(i);
                let per_page = meta::entries_per_page(low_bytes);
                for chunk in entries.chunks(per_page) {
                    write(&mut |entries_page| {
                        page::init_page(entries_page, Kind::CodeEntries, 0);
                        let ordinals = page::contents(entries_page).cast::<u32>();
                        let lows = page::contents(entries_page).add(per_page * 4);
                        for (n, &entry) in chunk.iter().enumerate() {
                            ordinals.add(n).write_unaligned(entry as u32);
                            let low = layout.split(i, (entry >> 32) as u32).1;
                            if low_bytes == 1 {
                                *lows.add(n) = low as u8;
                            } else {
                                lows.cast::<u16>().add(n).write_unaligned(low);
                            }
                        }
                        page::set_used(entries_page, meta::entries_used(chunk.len(), low_bytes));
                    });
                }
            }
        }
        debug_assert_eq!(block.get(), places.end);

        // The NULL rows.
        let chunks: Vec<&[pg_sys::ItemPointerData]> = state.nulls.chunks(meta::nulls_per_page()).collect();
        for (n, chunk) in chunks.iter().enumerate() {
            let next = if n + 1 == chunks.len() { INVALID_BLOCK } else { places.end + n as u32 + 1 };
            write(&mut |nulls_page| {
                page::init_page(nulls_page, Kind::CodeNulls, 0);
                let tids = page::contents(nulls_page).cast::<pg_sys::ItemPointerData>();
                for (i, tid) in chunk.iter().enumerate() {
                    tids.add(i).write_unaligned(*tid);
                }
                page::set_used(nulls_page, chunk.len() * TID);
                (*page::special(nulls_page)).next = next;
            });
        }
        if fork == pg_sys::ForkNumber::INIT_FORKNUM || crate::pg::compat::relation_needs_wal(index) {
            pg_sys::log_newpage_range(index, fork, 0, block.get(), true);
        }
    }
}

/// Sorts the rows of `order` by code, then by TID (equal codes adjacent, in table order).
fn sort_by_code(order: &mut [u32], code_bytes: usize, codes: &[u8], tids: &[pg_sys::ItemPointerData]) {
    let code = |row: u32| &codes[row as usize * code_bytes..(row as usize + 1) * code_bytes];
    // (pieces of a million with interrupt checks between: `memory::sort_interruptibly` needs a key
    // by value, and a code is a slice)
    if order.len() <= 1 << 20 {
        order.sort_unstable_by(|&a, &b| {
            code(a).cmp(code(b)).then_with(|| {
                crate::pg::tid::tid_order(&tids[a as usize]).cmp(&crate::pg::tid::tid_order(&tids[b as usize]))
            })
        });
    } else {
        let middle = order.len() / 2;
        order.select_nth_unstable_by(middle, |&a, &b| {
            code(a).cmp(code(b)).then_with(|| {
                crate::pg::tid::tid_order(&tids[a as usize]).cmp(&crate::pg::tid::tid_order(&tids[b as usize]))
            })
        });
        pgrx::check_for_interrupts!();
        let (low, high) = order.split_at_mut(middle);
        sort_by_code(low, code_bytes, codes, tids);
        sort_by_code(high, code_bytes, codes, tids);
    }
    pgrx::check_for_interrupts!();
}

/// Appends block `block` (the next one) to `fork`, filled by `fill`.
unsafe fn write_page(index: pg_sys::Relation, fork: pg_sys::ForkNumber::Type, block: u32, fill: &mut dyn FnMut(Page)) {
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
