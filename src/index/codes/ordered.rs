//! Rows of an index of codes in order of distance to a query, nearest first, ties in table order,
//! then the rows whose code is NULL ([`Nearest`]): for `ORDER BY code <-> simhash_code_ball(q, _)`,
//! and for a radius scan whose matches do not fit in `work_mem` (then stopping beyond the radius).
//!
//! Exact in two phases. First, rounds through the segments: the rows within `r` bits of the query
//! (a radius lookup, `super::read::Reader::probe`), those beyond the previous round's radius
//! handed out sorted, with `r` growing (0, 1, 2, 3, 4, 6, 9, ...) while the rounds together cost
//! less than reading the code store and its candidates fit in `work_mem`. Then passes over the code store
//! and the tail (this backend's copy of it where it keeps one, `super::tail`; an index built empty
//! then goes through rounds of lookups in that copy while they probe its segments), each keeping
//! the next rows in (distance, TID) order after the last one handed out
//! (`simhash_core::code_index::Smallest`): for `ORDER BY`, 64 rows in the first pass (a scan
//! under `LIMIT 10` reads the codes once, keeping few), eight times more in each next one, up to
//! what `work_mem` holds; for a radius scan, as many as `work_mem` holds from the first. The rows
//! whose code is NULL come last, in TID order, read from their chain in passes too, each keeping
//! the next TIDs after the last one handed out, as many as `work_mem` holds.

use pgrx::pg_sys;
use simhash_core::code_index::Smallest;
use simhash_core::multi_index::hamming_bytes;

use super::read::Reader;
use super::CodeBall;
use crate::pg::tid::{tid_of_order, tid_order};

/// The bytes of memory a scan's rows may take: `work_mem`.
pub(super) fn work_mem_bytes() -> usize {
    unsafe { pg_sys::work_mem.max(64) as usize * 1024 }
}

pub(super) struct Nearest {
    /// The query (`None`: no order; every row at distance 0, in table order).
    query: Option<Vec<u8>>,
    /// Every row handed out is within each of these balls.
    filter: Vec<CodeBall>,
    /// Rows beyond this distance are not handed out (`u32::MAX`: none).
    bound: u32,
    /// The next round's radius, while rounds through the segments go on.
    round: Option<u32>,
    /// The expected units (probes and candidates) of the rounds so far: they stop when the next
    /// one would take all of them beyond what a read of the code store costs.
    spent: f64,
    /// The rows the next pass keeps: 64 at first (most scans want a few rows: `LIMIT 10`), eight
    /// times more each pass, up to what `work_mem` holds.
    pass_rows: usize,
    /// Every row at or before this key was handed out.
    done: Option<(u32, u64)>,
    batch: Vec<(u32, u64)>,
    at: usize,
    codes_done: bool,
    /// Whether the rows whose code is NULL are handed out after the others.
    nulls: bool,
    /// The rows in `batch` are rows whose code is NULL (a pass over their chain).
    in_nulls: bool,
    /// Every row whose code is NULL at or before this TID order key was handed out.
    nulls_after: Option<u64>,
    nulls_all: bool,
}

impl Nearest {
    /// Rows around `query` within `bound` that are in each ball of `filter`; `nulls`: then the
    /// rows whose code is NULL; `few`: the scan may want few of them (`ORDER BY`: its first pass
    /// keeps 64 rows, else as many as `work_mem` holds).
    pub fn new(
        query: Option<Vec<u8>>,
        filter: Vec<CodeBall>,
        bound: u32,
        rounds: bool,
        nulls: bool,
        few: bool,
    ) -> Nearest {
        Nearest {
            round: (rounds && query.is_some()).then_some(0),
            spent: 0.0,
            pass_rows: if few { 64 } else { usize::MAX },
            query,
            filter,
            bound,
            done: None,
            batch: Vec::new(),
            at: 0,
            codes_done: false,
            nulls,
            in_nulls: false,
            nulls_after: None,
            nulls_all: false,
        }
    }

    pub(super) fn keeps_all(filter: &[CodeBall], code: &[u8]) -> bool {
        filter.iter().all(|ball| hamming_bytes(code, &ball.bytes).is_some_and(|d| d as i64 <= i64::from(ball.radius)))
    }

    /// The next row: its TID and distance (`None` for a NULL code).
    ///
    /// # Safety
    ///
    /// `index` is the open index of codes scanned.
    pub unsafe fn next(&mut self, index: pg_sys::Relation) -> Option<(pg_sys::ItemPointerData, Option<u32>)> {
        unsafe {
            loop {
                if let Some(&(d, key)) = self.batch.get(self.at) {
                    self.at += 1;
                    return Some((tid_of_order(key), (!self.in_nulls).then_some(d)));
                }
                if !self.codes_done {
                    self.refill(index);
                } else if self.nulls && !self.nulls_all {
                    self.null_pass(index);
                } else {
                    return None;
                }
            }
        }
    }

    /// A pass over the chain of the rows whose code is NULL, keeping the next ones in TID order
    /// after the last handed out, as many as `work_mem` holds.
    unsafe fn null_pass(&mut self, index: pg_sys::Relation) {
        unsafe {
            let mut pass = Smallest::new(work_mem_bytes() / 24, self.nulls_after.map(|key| (0, key)));
            Reader::new(index).for_each_null_row(&mut |key| pass.offer((0, key)));
            let (batch, all) = pass.finish();
            self.nulls_after = batch.last().map(|&(_, key)| key).or(self.nulls_after);
            self.nulls_all = all;
            self.in_nulls = true;
            self.batch = batch;
            self.at = 0;
        }
    }

    unsafe fn refill(&mut self, index: pg_sys::Relation) {
        unsafe {
            let mut reader = Reader::new(index);
            let filter = &self.filter;
            let capacity = work_mem_bytes() / 24;
            self.at = 0;
            self.batch.clear();
            if let (Some(r), Some(query)) = (self.round, self.query.as_ref()) {
                let r = r.min(self.bound);
                let found = if reader.meta.rows == 0 {
                    // (the tail alone: rounds through this backend's copy of it while its lookup at
                    // `r` probes segments, else passes)
                    super::tail::copy_probes(&reader, r)
                        .then(|| reader.probe(query, r, &[], usize::MAX, &mut |code| Self::keeps_all(filter, code)))
                        .flatten()
                } else {
                    let spent = &mut self.spent;
                    reader.probes_pay_after(r, *spent).and_then(|(radii, units)| {
                        *spent += units;
                        reader.probe(query, r, &radii, work_mem_bytes() / 16, &mut |code| Self::keeps_all(filter, code))
                    })
                };
                match found {
                    Some(mut found) if found.len() <= capacity => {
                        let after = self.done;
                        found.retain(|&key| after.is_none_or(|after| key > after));
                        super::super::memory::sort_interruptibly(&mut found, |&key| key);
                        self.batch = found;
                        self.done = Some((r, u64::MAX));
                        self.codes_done = r >= self.bound;
                        self.round = Some(if r < 4 { r + 1 } else { r + r / 2 });
                    }
                    _ => self.round = None,
                }
                return;
            }
            // A pass over every row.
            let mut pass = Smallest::new(self.pass_rows.min(capacity), self.done);
            self.pass_rows = self.pass_rows.saturating_mul(8);
            let (query, bound) = (self.query.as_deref(), self.bound);
            let mut offer = |d: u32, key: u64, code: &[u8]| {
                if d <= bound && pass.bound().is_none_or(|top| (d, 0) <= top) && Self::keeps_all(filter, code) {
                    pass.offer((d, key));
                }
            };
            match query {
                // The tail through this backend's copy of it where it keeps one (compared in
                // memory), else read whole (which counts towards keeping one).
                Some(query) => {
                    reader.for_each_store_row(&mut |code, tid| {
                        offer(hamming_bytes(code, query).unwrap_or(u32::MAX), tid_order(tid), code)
                    });
                    let k = bound.min(reader.meta.code_bits);
                    super::tail::for_each_within(&mut reader, query, k, &mut |d, key, code| offer(d, key, code));
                }
                None => reader.for_each_row(&mut |code, tid| offer(0, tid_order(tid), code)),
            }
            let (batch, all) = pass.finish();
            self.done = batch.last().copied().or(self.done);
            self.batch = batch;
            self.codes_done = all;
        }
    }
}
