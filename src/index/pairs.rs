//! All pairs of rows within `k` of each other, read from a simhash index a bucket or two at a
//! time (`simhash_core::bucket_pairs`): for `simhash_pairs` and `simhash_clusters` of a table
//! whose fingerprint column has such an index. The entries are those the index holds now, live
//! or not: the caller fetches the rows to see which are visible.

use std::time::{Duration, Instant};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::page;

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
        let meta = page::load_meta(index);
        let mut load = |segment: u32, bucket: u32, entries: &mut Vec<(u64, u64)>| {
            page::read_buckets(index, &meta, segment, &[bucket], None, |_, page_entries, _| {
                super::reserve(entries, page_entries.len());
                entries.extend(page_entries.iter().map(|(fp, tid)| (fp, crate::pg::tid::tid_order(&tid))));
            });
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
        simhash_core::bucket_pairs::for_each_pair(k, meta.bits, &mut load, on_pairs, &mut progress);
    }
}
