//! `simhash_index_check` of an index of codes: the metapage, the code store (every page full but
//! the last, codes in ascending order), each indexed segment (its directory starting at 0, never
//! decreasing, ending at the row count; its entries a permutation of the ordinals, each run of a
//! prefix sorted by (low bits, ordinal), each entry's value that of its row's code), the tail and
//! the NULL rows' chains (kinds, slot sizes, no cycle). A fault is an ERROR XX002. Returns the rows
//! indexed (removed ones excluded).

use pgrx::pg_sys::{self, BlockNumber};

use super::super::buffers;
use super::super::page::{self, corrupt, Kind, INVALID_BLOCK};
use super::meta;
use super::read::{is_removed, null_slots, slots, Reader};

/// Checks the index of codes `index` (open, ShareLocked): the rows indexed.
///
/// # Safety
///
/// `index` is an open simhash index of codes.
pub(in crate::index) unsafe fn check(index: pg_sys::Relation) -> i64 {
    unsafe {
        let mut reader = Reader::new(index);
        let meta = reader.meta;
        let layout = reader.layout;
        let code_bytes = meta.code_bytes();
        let per_page = meta::store_per_page(code_bytes);
        let blocks = buffers::number_of_blocks(index);
        let mut rows = 0i64;
        // The code store.
        let mut previous: Option<Vec<u8>> = None;
        for p in 0..reader.places.store_pages {
            reader.pages.release(); // (a held lock holds interrupts off)
            pgrx::check_for_interrupts!();
            let block = meta.store_start + p;
            let store_page = reader.pages.page(0, block, Kind::CodeStore);
            let expected = (meta.rows as usize - p as usize * per_page).min(per_page);
            let mut n = 0;
            for (tid, code) in slots(index, store_page, block, code_bytes) {
                n += 1;
                if previous.as_deref().is_some_and(|previous| previous > code) {
                    corrupt(index, format!("its code store is not in order at block {block}"));
                }
                previous = Some(code.to_vec());
                rows += i64::from(!is_removed(&tid));
            }
            if n != expected {
                corrupt(index, format!("code store block {block} has {n} rows, not {expected}"));
            }
        }
        reader.pages.release();
        // The segments.
        for (i, &(directory_start, entries_start)) in reader.places.segments.clone().iter().enumerate() {
            let i = i as u32;
            let low_bytes = layout.low_bytes_of(i);
            let entries_per_page = meta::entries_per_page(low_bytes);
            let len = layout.directory_len(i);
            let mut directory: Vec<u32> = crate::memory::entries_with_room(len);
            for d in 0..len.div_ceil(meta::directory_per_page()) {
                let block = directory_start + d as BlockNumber;
                let directory_page = reader.pages.page(0, block, Kind::CodeDirectory);
                let n = page::used(directory_page) / 4;
                let positions = page::contents(directory_page) as *const u32;
                directory.extend((0..n).map(|j| positions.add(j).read_unaligned()));
            }
            reader.pages.release();
            if directory.len() != len
                || directory[0] != 0
                || directory[len - 1] != meta.rows
                || directory.windows(2).any(|w| w[0] > w[1])
            {
                corrupt(index, format!("the directory of segment {i} is not monotone from 0 to {}", meta.rows));
            }
            let mut seen = crate::memory::entries_with_room(meta.rows as usize);
            seen.resize(meta.rows as usize, false);
            // Each entry's value against its row's code: the values of a window of ordinals read
            // from the code store in order (4 bytes a row, within maintenance_work_mem), then the
            // entries read once per window (the other checks in the first pass).
            let window = (pg_sys::maintenance_work_mem.max(1024) as usize * 256).div_ceil(per_page).max(1) * per_page;
            for start in (0..meta.rows as usize).step_by(window) {
                let end = (start + window).min(meta.rows as usize);
                let mut values = crate::memory::entries_with_room(end - start);
                for p in start / per_page..end.div_ceil(per_page) {
                    reader.pages.release();
                    pgrx::check_for_interrupts!();
                    let block = meta.store_start + p as BlockNumber;
                    let store_page = reader.pages.page(0, block, Kind::CodeStore);
                    values.extend(
                        slots(index, store_page, block, code_bytes).map(|(_, code)| layout.plan.segment(code, i)),
                    );
                }
                reader.pages.release();
                if values.len() != end - start {
                    corrupt(
                        index,
                        format!("its code store holds {} rows from row {start}, not {}", values.len(), end - start),
                    );
                }
                let first = start == 0;
                let mut prefix = 0usize;
                let mut last: Option<(u16, u32)> = None;
                for position in 0..meta.rows {
                    if position % entries_per_page as u32 == 0 {
                        reader.pages.release();
                        pgrx::check_for_interrupts!();
                    }
                    while directory[prefix + 1] <= position {
                        prefix += 1;
                        last = None;
                    }
                    let block = entries_start + position / entries_per_page as u32;
                    let entries_page = reader.pages.page(1, block, Kind::CodeEntries);
                    let at = position as usize % entries_per_page;
                    if at >= meta::entries_on(entries_page, low_bytes) {
                        corrupt(index, format!("entries block {block} has no entry {at}"));
                    }
                    let ordinal = (page::contents(entries_page) as *const u32).add(at).read_unaligned();
                    let low = meta::low_at(entries_page, low_bytes, at);
                    if ordinal >= meta.rows || (first && std::mem::replace(&mut seen[ordinal as usize], true)) {
                        corrupt(
                            index,
                            format!("segment {i} names row {ordinal} twice or out of range at entry {position}"),
                        );
                    }
                    if first && last.is_some_and(|last| last >= (low, ordinal)) {
                        corrupt(index, format!("segment {i} is not in order at entry {position}"));
                    }
                    last = Some((low, ordinal));
                    // The row's own value.
                    let ordinal = ordinal as usize;
                    if (start..end).contains(&ordinal)
                        && layout.split(i, values[ordinal - start]) != (prefix as u32, low)
                    {
                        corrupt(index, format!("segment {i} files row {ordinal} under another value"));
                    }
                }
            }
            reader.pages.release();
        }
        // The chains.
        let mut seen_blocks = crate::memory::entries_with_room(blocks as usize);
        seen_blocks.resize(blocks as usize, false);
        for (head, kind) in [(meta.tail_head, Kind::CodeTail), (meta.nulls_head, Kind::CodeNulls)] {
            let mut block = head;
            let mut last = INVALID_BLOCK;
            while block != INVALID_BLOCK {
                pgrx::check_for_interrupts!();
                if block >= blocks
                    || block < meta.built_end
                    || std::mem::replace(&mut seen_blocks[block as usize], true)
                {
                    corrupt(index, format!("a chain of {kind:?} pages leads to block {block} again or outside"));
                }
                let buffer = buffers::read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
                let chain_page = pg_sys::BufferGetPage(buffer);
                page::expect_kind(chain_page, kind, index, block);
                rows += if kind == Kind::CodeTail {
                    slots(index, chain_page, block, code_bytes).filter(|(tid, _)| !is_removed(tid)).count() as i64
                } else {
                    null_slots(index, chain_page, block).iter().filter(|tid| !is_removed(tid)).count() as i64
                };
                last = block;
                block = (*page::special(chain_page)).next;
                pg_sys::UnlockReleaseBuffer(buffer);
            }
            let tail = if kind == Kind::CodeTail { meta.tail_tail } else { meta.nulls_tail };
            if last != tail {
                corrupt(index, format!("the chain of {kind:?} pages ends at block {last}, its metapage says {tail}"));
            }
        }
        rows
    }
}
