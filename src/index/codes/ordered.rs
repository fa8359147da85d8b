//! Rows of an index of codes in order of distance to a query, nearest first, ties in table order,
//! then the rows whose code is NULL ([`Nearest`]): for `ORDER BY code <-> simhash_code_ball(q, _)`,
//! and for a radius scan whose matches do not fit in `work_mem` (then stopping beyond the radius).
//!
//! Exact in two phases. First, rounds through the segments: the rows within `r` bits of the query
//! (a radius lookup), those beyond the previous round's radius handed out sorted, with `r` growing
//! (0, 1, 2, 3, 4, 6, 9, ...) while the rounds together cost less than reading the code store and
//! its candidates fit in `work_mem`. A round keeps what the earlier ones found
//! (`simhash_core::code_index::Meetings`): the rows met in segments probed before at the same
//! radius, and the rows read, those beyond its radius carried to the next rounds. Then passes over the code store
//! and the tail (this backend's copy of it where it keeps one, `super::tail`; an index built empty
//! then goes through rounds of lookups in that copy while they probe its segments), each keeping
//! the next rows in (distance, TID) order after the last one handed out
//! (`simhash_core::code_index::Smallest`): for `ORDER BY`, 64 rows in the first pass (a scan
//! under `LIMIT 10` reads the codes once, keeping few), eight times more in each next one, up to
//! what `work_mem` holds; for a radius scan, as many as `work_mem` holds from the first. The rows
//! whose code is NULL come last, in TID order, read from their chain in passes too, each keeping
//! the next TIDs after the last one handed out, as many as `work_mem` holds.

use pgrx::pg_sys;
use simhash_core::code_index::{Meetings, Smallest};
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
    /// The rows the rounds met in the segments, and which of them they read.
    meetings: Meetings,
    /// Rows the rounds read beyond their radius, for the next rounds: (distance, TID order).
    carry: Vec<(u32, u64)>,
    /// The rows the next pass keeps: 64 at first (most scans want a few rows: `LIMIT 10`), eight
    /// times more each pass, up to what `work_mem` holds.
    pass_rows: usize,
    /// The rows the next round is to hand out at least, when those carried are enough: 16 at
    /// first for a scan that wants few (`LIMIT 10`), eight times more each round it holds them
    /// (no limit for the others).
    round_rows: usize,
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
            meetings: Meetings::default(),
            carry: Vec::new(),
            pass_rows: if few { 64 } else { usize::MAX },
            round_rows: if few { 16 } else { usize::MAX },
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
            Reader::new(index).for_each_null_row(&mut |key| offer_or_raise(&mut pass, (0, key)));
            let (batch, all) = pass.finish(crate::fingerprint::text::INTERRUPTS);
            self.nulls_after = batch.last().map(|&(_, key)| key).or(self.nulls_after);
            self.nulls_all = all;
            self.in_nulls = true;
            self.batch = batch;
            self.at = 0;
        }
    }

    /// A round through the segments of the code store within `r` bits or more (while the rounds
    /// so far and this one cost less than a read of the code store: `None` else, or when the rows
    /// met do not fit in `work_mem` or memory for them is refused): its radius and the rows within
    /// it read by this round or carried from earlier ones (with those of the tail), as (distance,
    /// TID order) in no particular order. The rows it reads beyond its radius are carried to the
    /// next rounds, and the rows met in the segments an earlier round probed at the same radii are
    /// kept ([`Meetings`]): a round reads only the rows no earlier one read.
    ///
    /// The radius: `r`, or the distance of the nearest row carried when it is beyond (no round in
    /// between would find a row among those read). Unless the radii of that radius would probe a
    /// segment again at a new radius, or do not pay, and those of a smaller one keep the rows met:
    /// then the smaller one, the nearest row carried or one more than the last radius, else `r`
    /// (a round that probes only new segments costs little, one that probes afresh costs all its
    /// probes again).
    unsafe fn round_of_store(&mut self, reader: &mut Reader, r: u32) -> Option<(u32, Vec<(u32, u64)>)> {
        unsafe {
            let query = self.query.as_deref().expect("rounds have a query");
            let rows = u64::from(reader.meta.rows);
            let last = self.done.map(|(d, _)| d);
            let nearest = self.carry.iter().map(|&(d, _)| d).min();
            let mut far = r.max(nearest.unwrap_or(0)).min(self.bound);
            // No farther than the distance within which the rows carried already number the rows
            // this round is to hand out: a round to it hands them out with fewer probes (every row
            // carried is beyond the last radius, so that distance is beyond it too).
            if let Some(d) = nth_distance(&self.carry, self.round_rows).filter(|&d| d < far) {
                far = d;
                self.round_rows = self.round_rows.saturating_mul(8);
            }
            let near = last.map_or(0, |last| last + 1).max(nearest.unwrap_or(0)).min(far);
            // The first of these radii whose probing keeps the rows met and pays, else the first
            // that pays (their lookups remembered: `Layout::lookup`).
            let fresh = self.meetings.units() == 0;
            let mut chosen = None;
            'choice: for keeps in [true, false] {
                for k in [far, near, r.min(far)] {
                    let Some(lookup) = reader.layout.lookup(k, rows) else { continue };
                    if keeps && !fresh && !self.meetings.extended_by(&lookup.radii) {
                        continue;
                    }
                    if let Some(units) = reader.pays_after(&lookup, self.spent) {
                        chosen = Some((k, lookup, units));
                        break 'choice;
                    }
                }
            }
            let (r, lookup, units) = chosen?;
            let radii = &lookup.radii;
            self.spent += units;
            if !reader.meet(&mut self.meetings, query, radii, work_mem_bytes() / 16)? {
                // (probed afresh: the rows carried may be read again)
                self.carry.clear();
            }
            let filter = &self.filter;
            let carry = &mut self.carry;
            let mut found = Vec::new();
            let ordinals = self.meetings.unread_within(r)?;
            // (memory refused for a row: the round is `None`, and passes follow, as when it does
            // not fit in work_mem)
            let mut refused = false;
            reader.for_each_store_row_at(&ordinals, &mut |code, tid| {
                if let Some(d) = hamming_bytes(code, query) {
                    if !refused && Self::keeps_all(filter, code) {
                        let into = if d <= r { &mut found } else { &mut *carry };
                        refused = crate::memory::push(into, (d, tid_order(tid))).is_none();
                    }
                }
            });
            let carried = carry.iter().filter(|&&(d, _)| d <= r).count();
            if refused || crate::memory::reserve(&mut found, carried).is_none() {
                return None;
            }
            found.extend(carry.iter().filter(|&&(d, _)| d <= r));
            carry.retain(|&(d, _)| d > r);
            super::tail::for_each_within(reader, query, r, &mut |d, key, code| {
                if !refused && Self::keeps_all(filter, code) {
                    refused = crate::memory::push(&mut found, (d, key)).is_none();
                }
            });
            (!refused).then_some((r, found))
        }
    }

    unsafe fn refill(&mut self, index: pg_sys::Relation) {
        unsafe {
            let mut reader = Reader::new(index);
            let filter = &self.filter;
            let capacity = work_mem_bytes() / 24;
            self.at = 0;
            // (freed, not cleared: the next pass may need that memory)
            self.batch = Vec::new();
            if let (Some(r), Some(query)) = (self.round, self.query.as_ref()) {
                let r = r.min(self.bound);
                let found = if reader.meta.rows == 0 {
                    // (the tail alone: rounds through this backend's copy of it while its lookup at
                    // `r` probes segments, else passes)
                    super::tail::copy_probes(&reader, r)
                        .then(|| reader.probe(query, r, &[], usize::MAX, &mut |code| Self::keeps_all(filter, code)))
                        .flatten()
                        .map(|found| (r, found))
                } else {
                    self.round_of_store(&mut reader, r)
                };
                match found {
                    Some((r, mut found)) if found.len() + self.carry.len() <= capacity => {
                        let after = self.done;
                        found.retain(|&key| after.is_none_or(|after| key > after));
                        crate::memory::sort_interruptibly(&mut found, |&key| key);
                        self.batch = found;
                        self.done = Some((r, u64::MAX));
                        self.codes_done = r >= self.bound;
                        self.round = Some(if r < 4 { r + 1 } else { r + r / 2 });
                    }
                    _ => {
                        self.round = None;
                        self.meetings = Meetings::default();
                        self.carry = Vec::new();
                    }
                }
                return;
            }
            // A pass over every row.
            let mut pass = Smallest::new(self.pass_rows.min(capacity), self.done);
            self.pass_rows = self.pass_rows.saturating_mul(8);
            let (query, bound) = (self.query.as_deref(), self.bound);
            let mut offer = |d: u32, key: u64, code: &[u8]| {
                if d <= bound && pass.bound().is_none_or(|top| (d, 0) <= top) && Self::keeps_all(filter, code) {
                    offer_or_raise(&mut pass, (d, key));
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
            let (batch, all) = pass.finish(crate::fingerprint::text::INTERRUPTS);
            self.done = batch.last().copied().or(self.done);
            self.batch = batch;
            self.codes_done = all;
        }
    }
}

/// The `n`-th smallest distance among `rows` (`n` from 1), if there are that many.
fn nth_distance(rows: &[(u32, u64)], n: usize) -> Option<u32> {
    if n == 0 || rows.len() < n {
        return None;
    }
    // (distances are at most the code's bits, up to 4,096: counted, on the stack)
    let mut counts = [0usize; simhash_core::multi_index::MAX_CODE_BITS as usize + 1];
    for &(d, _) in rows {
        counts[(d as usize).min(counts.len() - 1)] += 1;
    }
    let mut seen = 0;
    counts
        .iter()
        .position(|&c| {
            seen += c;
            seen >= n
        })
        .map(|d| d as u32)
}

/// `pass.offer(key)`, or an ERROR 53200 when memory for the first key is refused (beyond that, a
/// refusal makes the pass keep fewer rows).
fn offer_or_raise(pass: &mut Smallest, key: (u32, u64)) {
    if pass.offer(key).is_err() {
        crate::memory::out_of_memory(
            "out of memory for the nearest rows of a simhash index".into(),
            "A scan by distance keeps up to work_mem of rows at a time: give the server more memory, \
             or use a smaller work_mem.",
        );
    }
}
