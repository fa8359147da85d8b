//! The ordered scan (`ORDER BY fp <~> q`, `ORDER BY fp <-> q`): the rows nearest first, the
//! buckets read ring by ring around the query (`simhash_core::nearest`), one segment's ring at a
//! time as rows are asked for, so that `LIMIT n` reads only the rings that hold the nearest rows;
//! in the built part the runs of whole segment values. The rows whose fingerprint is NULL come
//! last (as `NULLS LAST`, the order of the sort the index replaces).

use pgrx::pg_sys;
use pgrx::PgSqlErrorCode;
use simhash_core::buckets::for_each_within;
use simhash_core::nearest::{ring_buckets, Nearest, Step};

use super::chain::{self, ChainSlot};
use super::dense::{self, Dense, UNRESOLVED};
use super::dense_read;
use super::entries::Entries;
use super::{meta, page};
use crate::pg::errors::raise;

/// An ordered scan over the whole index, one segment's ring of buckets at a time (TIDs as
/// `tid_order` keys).
pub(super) struct Ordered {
    meta: page::Meta,
    /// The built part (format 5), read value by value: the rings are those of whole segment
    /// values; the buckets of the rows inserted since are read by theirs (`Nearest::offer_in`).
    built: Option<Dense>,
    query: u64,
    /// The rows met: (`tid_order` key, fingerprint); the key [`UNRESOLVED`] for a row of the
    /// built part met in segment 1 to 3, whose TID (with those of the other rows of that
    /// fingerprint) is looked up in segment 0 only when its distance comes out.
    nearest: Nearest<(u64, u64)>,
    ready: Vec<(u64, u64)>,
    /// The distance of the rows in `ready` (`None`: the rows whose fingerprint is NULL).
    ready_distance: Option<u32>,
    next: usize,
    nulls_done: bool,
}

fn out_of_memory() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        "out of memory for the rows of an ordered simhash index scan".into(),
        None,
        None,
    )
}

impl Ordered {
    /// An ordered scan of `index` by distance from `query` (`None`: NULL, any order).
    pub(super) unsafe fn new(index: pg_sys::Relation, query: Option<u64>) -> Ordered {
        let meta = unsafe { meta::load_meta(index) };
        if !meta.indexes_nulls() {
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("simhash index \"{}\" was built by simhash 0.3.0 and cannot serve ORDER BY", unsafe {
                    crate::pg::names::relation_name(index)
                }),
                None,
                Some("REINDEX the index.".into()),
            );
        }
        let query = query.unwrap_or(0);
        // The rows waiting take 8 bytes each: at most about work_mem of them.
        let budget = unsafe { pg_sys::work_mem } as usize * 1024 / 16;
        let built = Dense::of(&meta);
        let bits = if built.is_some() { simhash_core::SEGMENT_BITS } else { meta.bits };
        Ordered {
            meta,
            built,
            query,
            nearest: Nearest::new(query, bits, budget),
            ready: Vec::new(),
            ready_distance: None,
            next: 0,
            nulls_done: false,
        }
    }

    /// The next row and its distance, nearest first, then the rows whose fingerprint is NULL.
    pub(super) unsafe fn next_tid(
        &mut self,
        index: pg_sys::Relation,
    ) -> Option<(pg_sys::ItemPointerData, Option<u32>)> {
        unsafe {
            loop {
                if let Some(&(key, _)) = self.ready.get(self.next) {
                    self.next += 1;
                    return Some((crate::pg::tid::tid_of_order(key), self.ready_distance));
                }
                self.next = 0;
                if let Some(distance) = self.nearest.pop_ready(&mut self.ready) {
                    self.ready_distance = Some(distance);
                    if let Some(built) = self.built.filter(|_| self.ready.iter().any(|&(key, _)| key == UNRESOLVED)) {
                        let unresolved = self.ready.iter().filter(|&&(key, _)| key == UNRESOLVED).count();
                        let mut fps: Vec<u64> = crate::memory::entries_with_room(unresolved);
                        fps.extend(self.ready.iter().filter(|&&(key, _)| key == UNRESOLVED).map(|&(_, fp)| fp));
                        self.ready.retain(|&(key, _)| key != UNRESOLVED);
                        let ready = &mut self.ready;
                        dense_read::rows_of(index, &built, &mut fps, |fp, tid| {
                            crate::memory::push_entry(ready, (crate::pg::tid::tid_order(&tid), fp))
                        });
                        crate::memory::sort_interruptibly(&mut self.ready, |&entry| entry);
                    }
                    continue;
                }
                if let Some(step) = self.nearest.begin() {
                    self.read(index, step);
                    self.nearest.end();
                } else if !self.nulls_done {
                    self.nulls_done = true;
                    self.ready.clear();
                    self.ready_distance = None;
                    chain::read_chain(index, &self.meta, ChainSlot::Nulls, |entries| {
                        for (_, tid) in entries.iter() {
                            crate::memory::push_entry(&mut self.ready, (crate::pg::tid::tid_order(&tid), 0));
                        }
                    });
                    crate::memory::sort_interruptibly(&mut self.ready, |&entry| entry);
                } else {
                    return None;
                }
            }
        }
    }

    /// Reads the buckets of `step`, offering every entry.
    unsafe fn read(&mut self, index: pg_sys::Relation, step: Step) {
        unsafe {
            let (meta, query) = (self.meta, self.query);
            let nearest = &mut self.nearest;
            let mut within = Vec::new();
            let mut read = |segment: u32, buckets: &[u32]| {
                chain::read_buckets(index, &meta, segment, buckets, None, |_, entries, _| {
                    // (The cutoff only falls within a step: the page's skips only what offer would.)
                    let cutoff = nearest.cutoff();
                    let mut offer = |fp: u64, tid: &dyn Fn() -> pg_sys::ItemPointerData| {
                        nearest
                            .offer_in(segment, fp, meta.bits, || (crate::pg::tid::tid_order(&tid()), fp))
                            .unwrap_or_else(|_| out_of_memory());
                    };
                    match entries {
                        Entries::Packed(packed) => {
                            for_each_within(packed, query, cutoff, |e| e.fp, |e| offer(e.fp, &|| e.tid))
                        }
                        Entries::Apart(apart) => {
                            // The entries within the cutoff first, their TIDs requested from
                            // memory, then offered: many are kept while the cutoff is high, and
                            // their TIDs' reads then overlap.
                            within.clear();
                            for_each_within(
                                apart.fps,
                                query,
                                cutoff,
                                |&fp| fp,
                                |fp| {
                                    let i = apart.position(fp);
                                    apart.prefetch_tid(i);
                                    within.push(i);
                                },
                            );
                            for &i in within.iter() {
                                offer(apart.fps[i], &|| apart.tid(i));
                            }
                        }
                    }
                });
            };
            match step {
                Step::Ring { ring, segment } => read(segment, &ring_buckets(query, segment, ring, meta.bits)),
                Step::Rest => read(0, &(0..1u32 << meta.bits).collect::<Vec<u32>>()),
            }
            if let Some(built) = self.built {
                self.read_built(index, &built, step);
            }
        }
    }

    /// Reads the built part for `step`: the runs of the segment values `ring` bits from the
    /// query's, or every entry of segment 0.
    unsafe fn read_built(&mut self, index: pg_sys::Relation, built: &Dense, step: Step) {
        unsafe {
            const BITS: u32 = simhash_core::SEGMENT_BITS;
            let query = self.query;
            let nearest = &mut self.nearest;
            let offer = |nearest: &mut Nearest<(u64, u64)>, n: u32, fp: u64, key: u64| {
                nearest.offer_in(n, fp, BITS, || (key, fp)).unwrap_or_else(|_| out_of_memory());
            };
            let (ring, n) = match step {
                Step::Ring { ring, segment } => (ring, segment),
                Step::Rest => {
                    dense_read::read_values(index, built, 0, 0, simhash_core::dense::VALUES, |fp, tid| {
                        if let Some(tid) = tid.filter(dense::is_live) {
                            offer(nearest, 0, fp, crate::pg::tid::tid_order(&tid));
                        }
                    });
                    return;
                }
            };
            let values: Vec<u16> = ring_buckets(query, n, ring, BITS).into_iter().map(|v| v as u16).collect();
            let runs = dense_read::runs(index, built, n, &values);
            dense_read::read_runs(index, built, n, &runs, |part| {
                // (the cutoff only falls within a step: a part skips only what offer would)
                part.near(values[part.run], n, query, nearest.cutoff(), |i, fp| {
                    match part.tids.map(|tids| tids.get(i)) {
                        Some(tid) if dense::is_live(&tid) => offer(nearest, n, fp, crate::pg::tid::tid_order(&tid)),
                        Some(_) => {}
                        None => offer(nearest, n, fp, UNRESOLVED),
                    }
                });
            });
        }
    }
}
