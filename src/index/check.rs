//! `simhash_index_check(index)`: the structure of a simhash index, checked as amcheck checks a
//! B-tree: the metapage, the built part (format 5: each segment's directory and order, and the
//! same fingerprints in every segment), each bucket's chain (pages of the right kind and segment, no cycle, each
//! page in one chain), each entry in the bucket of its fingerprint, and as many entries in every
//! segment (a row has one in each; a WARNING otherwise, which an interrupted insert explains until
//! VACUUM), and the chain of NULL rows. Returns the number of rows indexed (entries in segment 0
//! plus NULL rows, dead ones until VACUUM); a
//! fault is an ERROR with SQLSTATE XX002 (index corrupted). It holds a ShareLock on the index, so writers wait.
//! Its memory stays within `maintenance_work_mem`: the rows' TIDs are sorted (for "each row once")
//! by a sort that spills to disk beyond it, and the segments' fingerprints compared by a hash of
//! each segment's multiset ([`FingerprintSet`]).

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::buckets::bucket_of;
use simhash_core::SEGMENTS;

use super::chain::{self, ChainSlot};
use super::dense::{self, Dense};
use super::dense_read;
use super::page::{self, corrupt, Kind, INVALID_BLOCK};
use super::{buffers, entries, meta};
use crate::pg::errors::raise;
use crate::pg::tuplesort::Sort;

/// A multiset of fingerprints in 24 bytes, for "the same fingerprints in every segment" without
/// holding them: their number and two sums of independent 64-bit mixes of each (wrapping), which
/// two different multisets share by chance with a probability of about 2^-128.
#[derive(Default, PartialEq, Eq, Clone, Copy)]
struct FingerprintSet {
    count: u64,
    sums: [u64; 2],
}

impl FingerprintSet {
    fn add(&mut self, fp: u64) {
        self.count += 1;
        self.sums[0] = self.sums[0].wrapping_add(mix(fp));
        self.sums[1] = self.sums[1].wrapping_add(mix(fp ^ 0x9e37_79b9_7f4a_7c15).rotate_left(17));
    }
}

/// SplitMix64's finalizer: a bijection of 64-bit values that spreads every bit over all.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[pg_extern(sql = false)]
fn simhash_index_check(index_oid: Oid) -> i64 {
    unsafe {
        // ShareLock: no row is inserted while the segments are counted (as bt_index_parent_check).
        // (a dangling OID is a valid regclass: 42P01, not index_open's internal error)
        crate::pg::names::require_relation(index_oid);
        let index = pg_sys::index_open(index_oid, pg_sys::ShareLock as i32);
        let access_method = pg_sys::get_index_am_oid(c"simhash".as_ptr(), true);
        if (*(*index).rd_rel).relam != access_method || access_method == Oid::INVALID {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{}\" is not a simhash index", crate::pg::names::relation_name(index)),
                None,
                None,
            );
        }
        // A partitioned index has no pages of its own: its partitions' indexes are checked one by one.
        if (*(*index).rd_rel).relkind as u8 == pg_sys::RELKIND_PARTITIONED_INDEX {
            raise(
                PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
                format!("\"{}\" is a partitioned index", crate::pg::names::relation_name(index)),
                None,
                Some("Check the index of each partition.".into()),
            );
        }
        if super::codes::is_codes(index) {
            let rows = super::codes::check::check(index);
            pg_sys::index_close(index, pg_sys::ShareLock as i32);
            return rows;
        }
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        if blocks == 0 {
            corrupt(index, "it has no metapage".into());
        }
        let meta = meta::load_meta(index);
        if 1 + SEGMENTS * meta.directory_pages > blocks {
            corrupt(index, format!("its {blocks} blocks cannot hold its directory"));
        }
        let mut seen = vec![false; blocks as usize];
        let first_chain_block = 1 + SEGMENTS * meta.directory_pages;
        // The built part (format 5): its blocks, each segment's directory and order, and the same
        // fingerprints in every segment.
        let mut built_rows = 0i64;
        // The rows (`tid_order` keys) of segment 0 and of the NULL rows: each once (sorted within
        // maintenance_work_mem, spilling to disk beyond it).
        let mut rows = Sort::<u64>::new(pg_sys::maintenance_work_mem as usize);
        if let Some(built) = Dense::of(&meta) {
            let range = dense::blocks(&meta);
            if range.start != first_chain_block || range.end > blocks {
                corrupt(index, format!("its built part (blocks {range:?}) does not fit its {blocks} blocks"));
            }
            for block in range {
                seen[block as usize] = true;
                let buffer = buffers::read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
                if let Some(fault) = dense::page_fault(&built, block, pg_sys::BufferGetPage(buffer)) {
                    corrupt(index, format!("block {block} of its built part: {fault}"));
                }
                pg_sys::UnlockReleaseBuffer(buffer);
                pgrx::check_for_interrupts!();
            }
            let mut segment_0 = None;
            for segment in 0..SEGMENTS {
                let mut fps = FingerprintSet::default();
                let mut last = None;
                dense_read::read_values(index, &built, segment, 0, simhash_core::dense::VALUES, |fp, tid| {
                    let key = simhash_core::dense::order_key(fp, segment);
                    if last.is_some_and(|last| last > key) {
                        corrupt(index, format!("segment {segment} of its built part is not in order at {fp:016x}"));
                    }
                    last = Some(key);
                    if let Some(tid) = tid.filter(dense::is_live) {
                        built_rows += 1;
                        rows.put(crate::pg::tid::tid_order(&tid));
                    }
                    fps.add(fp);
                });
                if fps.count != u64::from(built.rows) {
                    corrupt(
                        index,
                        format!("segment {segment} of its built part holds {} of {} rows", fps.count, built.rows),
                    );
                }
                if segment == 0 {
                    segment_0 = Some(fps);
                } else if Some(fps) != segment_0 {
                    corrupt(
                        index,
                        format!("segment {segment} of its built part holds other fingerprints than segment 0"),
                    );
                }
                pgrx::check_for_interrupts!();
            }
        }
        // Follows the chain of `slot` (called `name`), checking its pages and calling `each` with
        // every entry and its block; returns the number of entries.
        let mut walk = |slot: ChainSlot, name: &str, each: &mut dyn FnMut(u64, pg_sys::ItemPointerData, u32)| -> i64 {
            let (kind, segment) = slot.page_kind();
            let chain = chain::chain_of(index, slot);
            if (chain.head == INVALID_BLOCK) != (chain.tail == INVALID_BLOCK) {
                corrupt(index, format!("{name} has a head or a tail, not both"));
            }
            let mut count = 0;
            let mut block = chain.head;
            let mut last = INVALID_BLOCK;
            while block != INVALID_BLOCK {
                if block >= blocks || block < first_chain_block || seen[block as usize] {
                    corrupt(index, format!("{name} links to block {block} again or out of range"));
                }
                seen[block as usize] = true;
                let buffer = buffers::read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
                let chain_page = pg_sys::BufferGetPage(buffer);
                page::expect_kind(chain_page, kind, index, block);
                if let Some(fault) = entries::layout_fault(chain_page, meta.keeps_apart()) {
                    corrupt(index, format!("block {block} of {name}: {fault}"));
                }
                let special = *page::special(chain_page);
                if special.segment() != segment {
                    corrupt(index, format!("block {block} of {name} says segment {}", special.segment()));
                }
                let entries = entries::entries(chain_page);
                let value = |i: usize| simhash_core::buckets::segment_value(entries.fp(i), u32::from(segment));
                let sorted = special.sorted();
                if sorted > entries.len()
                    || (kind == Kind::Nulls && sorted > 0)
                    || (1..sorted.min(entries.len())).any(|i| value(i - 1) > value(i))
                {
                    corrupt(index, format!("block {block} of {name} counts {sorted} sorted entries, which are not"));
                }
                for (fp, tid) in entries.iter() {
                    each(fp, tid, block);
                    count += 1;
                }
                last = block;
                block = (*page::special(chain_page)).next;
                pg_sys::UnlockReleaseBuffer(buffer);
                pgrx::check_for_interrupts!();
            }
            if last != chain.tail {
                corrupt(index, format!("{name} ends at block {last}, not its tail {}", chain.tail));
            }
            pgrx::check_for_interrupts!();
            count
        };
        let mut entries = [0i64; SEGMENTS as usize];
        for segment in 0..SEGMENTS {
            for bucket in 0..1u32 << meta.bits {
                entries[segment as usize] += walk(
                    ChainSlot::bucket(&meta, segment, bucket),
                    &format!("segment {segment} bucket {bucket}"),
                    &mut |fp, tid, block| {
                        if bucket_of(fp, segment, meta.bits) != bucket {
                            corrupt(index, format!("fingerprint {fp:016x} in block {block} is not of bucket {bucket}"));
                        }
                        if segment == 0 {
                            rows.put(crate::pg::tid::tid_order(&tid));
                        }
                    },
                );
            }
        }
        let nulls = if meta.indexes_nulls() {
            walk(ChainSlot::Nulls, "the chain of NULL rows", &mut |_, tid, _| rows.put(crate::pg::tid::tid_order(&tid)))
        } else {
            0
        };
        // Pages in no chain: only new ones, left by an insert that failed after extending (an
        // initialized one must be a bucket page or a page of NULL rows, and hold nothing).
        for block in first_chain_block..blocks {
            if !seen[block as usize] {
                let buffer = buffers::read_locked(index, block, pg_sys::BUFFER_LOCK_SHARE);
                let any_page = pg_sys::BufferGetPage(buffer);
                if !pg_sys::PageIsNew(any_page) {
                    let kind = if page::is_kind(any_page, Kind::Nulls) { Kind::Nulls } else { Kind::Bucket };
                    page::expect_kind(any_page, kind, index, block);
                    if !entries::entries(any_page).is_empty() {
                        corrupt(index, format!("block {block} holds entries but is in no bucket"));
                    }
                }
                pg_sys::UnlockReleaseBuffer(buffer);
                pgrx::check_for_interrupts!();
            }
        }
        rows.sort();
        let mut previous = None;
        for i in 0u64.. {
            let Some(row) = rows.next() else { break };
            if previous == Some(row) {
                let (block, offset) = pgrx::itemptr::item_pointer_get_both(crate::pg::tid::tid_of_order(row));
                corrupt(index, format!("row ({block},{offset}) has two entries in segment 0"));
            }
            previous = Some(row);
            if i.is_multiple_of(1 << 16) {
                pgrx::check_for_interrupts!();
            }
        }
        drop(rows);
        // Each segment's entry of a row is its own WAL record: a crash or an error in the middle of
        // an insert leaves some of them, for a row that never became visible, until VACUUM.
        if entries.iter().any(|&n| n != entries[0]) {
            pgrx::warning!(
                "the segments of simhash index \"{}\" hold {entries:?} entries; after an interrupted insert they differ until VACUUM",
                crate::pg::names::relation_name(index)
            );
        }
        pg_sys::index_close(index, pg_sys::ShareLock as i32);
        entries[0] + nulls + built_rows
    }
}
