//! All pairs of rows within `k` of each other, read from a simhash index a bucket or two at a
//! time (`simhash_core::bucket_pairs`): for `simhash_pairs` and `simhash_clusters` of a table
//! whose fingerprint column has such an index. The entries are those the index holds now, live
//! or not: the caller fetches the rows to see which are visible.

use std::time::{Duration, Instant};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::dense::{self, Dense, UNRESOLVED};
use super::dense_read;
use super::{chain, meta};

/// How many fingerprints' rows a run keeps resolved (then forgets them all).
const RESOLVED_KEPT: usize = 1 << 16;

/// How often a long run reports its progress.
const NOTICE_EVERY: Duration = Duration::from_secs(10);

/// Reports once each pair of entries of `index` within `k` (at most
/// `simhash_core::buckets::MAX_PROBED_RADIUS`) to `on_pairs`, a group of entries with one
/// fingerprint at a time, TIDs as `crate::pg::tid::tid_order` keys. No page is locked or pinned
/// during the calls.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(super) unsafe fn for_each_pair(
    index: pg_sys::Relation,
    k: u32,
    on_pairs: simhash_core::bucket_pairs::OnPairs<u64>,
) {
    unsafe {
        let meta = meta::load_meta(index);
        let built = Dense::of(&meta);
        let mut load = |segment: u32, bucket: u32, entries: &mut Vec<(u64, u64)>| {
            if let Some(built) = built {
                // The built part's entries of the bucket's values; those of segments 1 to 3
                // without TIDs, which `on_pairs` below looks up in segment 0 for the pairs found.
                let width = 1usize << (simhash_core::SEGMENT_BITS - meta.bits);
                let from = bucket as usize * width;
                dense_read::read_values(index, &built, segment, from, from + width, |fp, tid| match tid {
                    Some(tid) if dense::is_live(&tid) => {
                        crate::memory::push_entry(entries, (fp, crate::pg::tid::tid_order(&tid)))
                    }
                    Some(_) => {}
                    None => crate::memory::push_entry(entries, (fp, UNRESOLVED)),
                });
            }
            chain::read_buckets(index, &meta, segment, &[bucket], None, |_, page_entries, _| {
                crate::memory::reserve_entries(entries, page_entries.len());
                entries.extend(page_entries.iter().map(|(fp, tid)| (fp, crate::pg::tid::tid_order(&tid))));
            });
        };
        // A group of entries of one fingerprint with those of the built part's segments 1 to 3
        // replaced by the rows of segment 0 with that fingerprint.
        // (the built part's rows of the fingerprints resolved lately: a group is reported with
        // each of its partners)
        let mut resolved: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
        let mut resolve = |group: &[(u64, u64)]| -> Option<Vec<(u64, u64)>> {
            let built = built?;
            let fp = group.first()?.0;
            if !group.iter().any(|&(_, key)| key == UNRESOLVED) {
                return None;
            }
            if resolved.len() >= RESOLVED_KEPT {
                resolved.clear();
            }
            let keys = resolved.entry(fp).or_insert_with(|| {
                let mut keys = Vec::new();
                dense_read::rows_of(index, &built, &mut vec![fp], |_, tid| {
                    crate::memory::push_entry(&mut keys, crate::pg::tid::tid_order(&tid))
                });
                keys
            });
            let stored = group.iter().filter(|&&(_, key)| key != UNRESOLVED).count();
            let mut rows: Vec<(u64, u64)> = crate::memory::entries_with_room(stored + keys.len());
            rows.extend(group.iter().copied().filter(|&(_, key)| key != UNRESOLVED));
            rows.extend(keys.iter().map(|&key| (fp, key)));
            crate::memory::sort_interruptibly(&mut rows, |&row| row);
            rows.dedup();
            Some(rows)
        };
        let mut on_resolved_pairs = |a: &[(u64, u64)], b: Option<&[(u64, u64)]>, distance: u32| {
            // (a bucket may hold many pairs of large groups: a check for each, not only per bucket)
            pg_sys::check_for_interrupts!();
            let a_rows = resolve(a);
            let b_rows = b.and_then(&mut resolve);
            let a = a_rows.as_deref().unwrap_or(a);
            let b = b.map(|b| b_rows.as_deref().unwrap_or(b));
            if a.is_empty() || b.is_some_and(|b| b.is_empty()) {
                return;
            }
            on_pairs(a, b, distance);
        };
        let (started, buckets) = (Instant::now(), 4u64 << meta.bits);
        let mut last_notice = started;
        let mut progress = |done: u64| {
            pg_sys::check_for_interrupts!();
            if last_notice.elapsed() >= NOTICE_EVERY {
                last_notice = Instant::now();
                notice!(
                    "simhash: {done} of {buckets} buckets of index \"{}\" paired ({:.0} s)",
                    crate::pg::names::relation_name(index),
                    started.elapsed().as_secs_f64()
                );
            }
        };
        let paired =
            simhash_core::bucket_pairs::for_each_pair(k, meta.bits, &mut load, &mut on_resolved_pairs, &mut progress);
        if paired.is_err() {
            crate::memory::out_of_memory(
                format!(
                    "out of memory for the groups of a bucket of index \"{}\"",
                    crate::pg::names::relation_name(index)
                ),
                "Pairs through an index hold one or two of its buckets at a time: give the server more memory.",
            );
        }
    }
}
