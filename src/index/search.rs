//! Radius search: `fp <@ simhash_ball(q, k)` reads the buckets `simhash_core::buckets` names (and
//! in the built part the runs of the segment values within each segment's radius), checks the
//! distance of every entry there and reports each row once ([`search`], [`collect`]); a radius
//! beyond what the segments answer reads every bucket of segment 0. [`search_many`] answers many
//! queries at once, each page read once for all of them (the near-duplicate constraint's recheck).

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use simhash_core::buckets::{
    for_each_asked, for_each_near, probes_by_bucket, reported_in, segment_value, Askers, MAX_PROBED_RADIUS,
};
use simhash_core::SEGMENTS;

use super::dense::{self, Dense};
use super::dense_read;
use super::entries::Entries;
use super::{chain, meta, page};
use crate::pg::errors::raise;

/// A scan key's ball: the query fingerprint and the radius (`None`: a NULL, which nothing is in).
pub(super) type Ball = Option<(u64, i32)>;

/// The center and radius of a `simhash_ball` composite value.
///
/// # Safety
///
/// `datum` is a non-NULL `simhash_ball` value.
pub(super) unsafe fn ball_of(datum: Datum) -> Ball {
    unsafe {
        let center = crate::pg::nodes::composite_field(datum, 1)?;
        let radius = crate::pg::nodes::composite_field(datum, 2)?;
        Some((center.value() as u64, radius.value() as i32))
    }
}

/// Whether `fp` is in `ball` (`None` when the ball is NULL).
pub(super) fn within(fp: u64, ball: (u64, i32)) -> bool {
    i64::from(simhash_core::hamming(fp, ball.0)) <= i64::from(ball.1)
}

/// The TIDs of the rows in every ball, ascending, or an ERROR when they take more than `work_mem`
/// (54000) or memory for them is refused (53200).
pub(super) unsafe fn search(index: pg_sys::Relation, balls: &[Ball]) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        let found = match collect(index, balls) {
            Ok(found) => found,
            Err(Unfit::OverBudget) => too_many(index),
            Err(Unfit::Refused { held }) => {
                crate::memory::index_out_of_memory::<(u64, pg_sys::ItemPointerData)>(held, held)
            }
        };
        let mut tids = crate::memory::entries_with_room(found.len());
        tids.extend(found.into_iter().map(|(_, tid)| tid));
        tids
    }
}

/// Why [`collect`] has no rows.
pub(super) enum Unfit {
    /// More than `work_mem` of them.
    OverBudget,
    /// Memory refused for more than the `held` rows found so far.
    Refused { held: usize },
}

/// The ERROR (54000) of a lookup whose matches do not fit in `work_mem`.
pub(super) unsafe fn too_many(index: pg_sys::Relation) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        format!(
            "more than {} rows of simhash index \"{}\" are within the radius: more than work_mem holds",
            match_budget(),
            unsafe { crate::pg::names::relation_name(index) }
        ),
        None,
        Some("Use a smaller radius, or raise work_mem.".into()),
    )
}

/// The matches a scan holds at most: `work_mem` of them (16 bytes each).
pub(super) fn match_budget() -> usize {
    (unsafe { pg_sys::work_mem } as usize * 1024 / 16).max(1024)
}

/// The rows in every ball: fingerprint and TID, by TID; none when they take more than `work_mem`
/// or memory for them is refused (a scan then reads in passes, which need less).
pub(super) unsafe fn collect(
    index: pg_sys::Relation,
    balls: &[Ball],
) -> Result<Vec<(u64, pg_sys::ItemPointerData)>, Unfit> {
    unsafe {
        let budget = match_budget();
        let mut found = Vec::new();
        let mut unfit = None;
        search_fingerprints(index, balls, &mut |fp, tid| {
            if unfit.is_some() {
            } else if found.len() >= budget {
                unfit = Some(Unfit::OverBudget);
                found = Vec::new();
            } else if crate::memory::push(&mut found, (fp, tid)).is_none() {
                unfit = Some(Unfit::Refused { held: found.len() });
                found = Vec::new();
            }
        });
        if let Some(unfit) = unfit {
            return Err(unfit);
        }
        crate::memory::sort_interruptibly(&mut found, |(_, tid)| crate::pg::tid::tid_order(tid));
        found.dedup_by_key(|(_, tid)| crate::pg::tid::tid_order(tid));
        Ok(found)
    }
}

/// Fingerprints of the built part met in segments 1 to 3 whose TIDs are looked up in segment 0
/// together (`dense_read::rows_of`), at most.
const UNRESOLVED_AT_ONCE: usize = 1 << 16;

/// Calls `found(fp, tid)` for each row in every ball, once, in no particular order.
pub(super) unsafe fn search_fingerprints(
    index: pg_sys::Relation,
    balls: &[Ball],
    found: &mut dyn FnMut(u64, pg_sys::ItemPointerData),
) {
    unsafe {
        // A NULL ball, or none at all (the operator class has no other strategy), matches nothing.
        let Some(balls) = balls.iter().copied().collect::<Option<Vec<(u64, i32)>>>() else {
            return;
        };
        // Probe with the smallest ball; check all.
        let Some(&(query, radius)) = balls.iter().min_by_key(|ball| ball.1) else {
            return;
        };
        if radius < 0 {
            return;
        }
        let k = radius.min(64) as u32;
        let meta = meta::load_meta(index);

        let in_all = |fp: u64| balls.iter().all(|&ball| within(fp, ball));
        let built = Dense::of(&meta);
        if k <= MAX_PROBED_RADIUS {
            // The built part: the matches of segment 0 with their TIDs, those of the others'
            // (reported there) by their fingerprints, whose rows segment 0 gives after.
            if let Some(built) = built {
                // (a fingerprint's entries come one after the other: a batch holds all of them)
                let mut unresolved = Vec::new();
                for segment in 0..SEGMENTS {
                    dense_near(index, &built, segment, query, k, |fp, tid| {
                        if in_all(fp) && reported_in(fp, query, segment, k) {
                            match tid {
                                Some(tid) if dense::is_live(&tid) => found(fp, tid),
                                Some(_) => {}
                                None => {
                                    if unresolved.len() >= UNRESOLVED_AT_ONCE && unresolved.last() != Some(&fp) {
                                        dense_read::rows_of(index, &built, &mut unresolved, &mut *found);
                                        unresolved.clear();
                                    }
                                    crate::memory::push_entry(&mut unresolved, fp);
                                }
                            }
                        }
                    });
                }
                dense_read::rows_of(index, &built, &mut unresolved, &mut *found);
            }
            for segment in 0..SEGMENTS {
                let probes = probes_by_bucket(query, segment, k, meta.bits).unwrap_or_default();
                let (buckets, values): (Vec<u32>, Vec<Vec<u16>>) = probes.into_iter().unzip();
                chain::read_buckets(index, &meta, segment, &buckets, Some(&values), |i, entries, sorted| {
                    // Of a page's sorted entries only those with a probed segment value, within k.
                    let mut found = |fp: u64, tid: pg_sys::ItemPointerData| {
                        if in_all(fp) && reported_in(fp, query, segment, k) {
                            found(fp, tid);
                        }
                    };
                    let (bits, values) = (meta.bits, &values[i]);
                    match entries {
                        Entries::Packed(packed) => for_each_near(
                            packed,
                            sorted,
                            values,
                            bits,
                            segment,
                            query,
                            k,
                            |e| e.fp,
                            |e| found(e.fp, e.tid),
                        ),
                        Entries::Apart(apart) => for_each_near(
                            apart.fps,
                            sorted,
                            values,
                            bits,
                            segment,
                            query,
                            k,
                            |&fp| fp,
                            |fp| found(*fp, apart.tid_of(fp)),
                        ),
                    }
                });
            }
        } else {
            if let Some(built) = built {
                dense_read::read_values(index, &built, 0, 0, simhash_core::dense::VALUES, |fp, tid| {
                    if let Some(tid) = tid.filter(|tid| dense::is_live(tid) && in_all(fp)) {
                        found(fp, tid);
                    }
                });
            }
            let buckets: Vec<u32> = (0..1u32 << meta.bits).collect();
            chain::read_buckets(index, &meta, 0, &buckets, None, |_, entries, _| {
                for (fp, tid) in entries.iter() {
                    if in_all(fp) {
                        found(fp, tid);
                    }
                }
            });
        }
    }
}

/// Calls `found(fp, tid)` for each entry of the built part, in the runs of segment `n` that a
/// lookup of `query` within `k` (at most `MAX_PROBED_RADIUS`) reads, that is within `k` of
/// `query`; `tid` is the entry's TID in segment 0 (perhaps of a removed row: `dense::is_live`),
/// `None` in the others.
unsafe fn dense_near(
    index: pg_sys::Relation,
    built: &Dense,
    n: u32,
    query: u64,
    k: u32,
    mut found: impl FnMut(u64, Option<pg_sys::ItemPointerData>),
) {
    unsafe {
        let Some(radii) = simhash_core::probes::segment_radii(k) else { return };
        let values = simhash_core::probes::segment_probes(segment_value(query, n), radii[n as usize]);
        let runs = dense_read::runs(index, built, n, &values);
        dense_read::read_runs(index, built, n, &runs, |part| {
            part.near(values[part.run], n, query, k, |i, fp| found(fp, part.tids.map(|tids| tids.get(i))));
        });
    }
}

/// For each of `queries`, the rows within `k` (at most `MAX_PROBED_RADIUS`): (position in
/// `queries`, TID) pairs, each once, in no particular order. Each page of a probed bucket is read
/// once for all the queries, each of its entries checked against the queries that probe its value
/// (`simhash_core::buckets::for_each_asked`).
pub(super) unsafe fn search_many(
    index: pg_sys::Relation,
    queries: &[u64],
    k: u32,
) -> Vec<(usize, pg_sys::ItemPointerData)> {
    unsafe {
        let meta = meta::load_meta(index);
        let mut results = Vec::new();
        // (at most about work_mem of matches, 16 bytes each)
        let budget = match_budget();
        let mut askers = Askers::default();
        let built = Dense::of(&meta);
        // The matches of the built part's segments 1 to 3, by fingerprint: (fingerprint, query).
        let mut unresolved: Vec<(u64, u32)> = Vec::new();
        for segment in 0..SEGMENTS {
            if askers.fill(queries, segment, k).is_none() {
                error!("simhash index: a batched lookup takes radii up to {MAX_PROBED_RADIUS}, not {k}");
            }
            if let Some(built) = built {
                // Each run read once for the queries that ask for its value.
                let (values, askers_of): (Vec<u16>, Vec<Vec<u32>>) =
                    askers.values().map(|(value, qs)| (value, qs.collect())).unzip();
                let runs = dense_read::runs(index, &built, segment, &values);
                dense_read::read_runs(index, &built, segment, &runs, |part| {
                    let value = values[part.run];
                    for &q in &askers_of[part.run] {
                        let query = queries[q as usize];
                        part.near(value, segment, query, k, |i, fp| {
                            if !reported_in(fp, query, segment, k) {
                                return;
                            }
                            match part.tids.map(|tids| tids.get(i)) {
                                Some(tid) if dense::is_live(&tid) => {
                                    crate::memory::push_entry(&mut results, (q as usize, tid))
                                }
                                Some(_) => {}
                                None => crate::memory::push_entry(&mut unresolved, (fp, q)),
                            }
                            if results.len() + unresolved.len() > budget {
                                too_many(index);
                            }
                        });
                    }
                });
            }
            let buckets = askers.buckets(meta.bits);
            chain::read_buckets(index, &meta, segment, &buckets, None, |i, entries, sorted| {
                let mut found = |fp: u64, q: u32, tid: &dyn Fn() -> pg_sys::ItemPointerData| {
                    let query = queries[q as usize];
                    if simhash_core::hamming(fp, query) <= k && reported_in(fp, query, segment, k) {
                        crate::memory::push_entry(&mut results, (q as usize, tid()));
                        if results.len() + unresolved.len() > budget {
                            too_many(index);
                        }
                    }
                };
                let (bucket, bits) = (buckets[i], meta.bits);
                match entries {
                    Entries::Packed(packed) => {
                        let value = |e: &page::Entry| segment_value(e.fp, segment);
                        for_each_asked(packed, sorted, &askers, bucket, bits, value, |e, q| found(e.fp, q, &|| e.tid))
                    }
                    Entries::Apart(apart) => {
                        let value = |fp: &u64| segment_value(*fp, segment);
                        for_each_asked(apart.fps, sorted, &askers, bucket, bits, value, |fp, q| {
                            found(*fp, q, &|| apart.tid_of(fp))
                        })
                    }
                }
            });
        }
        if let (Some(built), false) = (built, unresolved.is_empty()) {
            crate::memory::sort_interruptibly(&mut unresolved, |&pair| pair);
            unresolved.dedup();
            let mut fps: Vec<u64> = crate::memory::entries_with_room(unresolved.len());
            fps.extend(unresolved.iter().map(|&(fp, _)| fp));
            dense_read::rows_of(index, &built, &mut fps, |fp, tid| {
                let from = unresolved.partition_point(|&(f, _)| f < fp);
                for &(_, q) in unresolved[from..].iter().take_while(|&&(f, _)| f == fp) {
                    crate::memory::push_entry(&mut results, (q as usize, tid));
                }
                if results.len() > budget {
                    too_many(index);
                }
            });
        }
        results
    }
}
