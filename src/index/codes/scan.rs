//! The scan callbacks of an index of codes. `code <@ simhash_code_ball(q, k)` (strategy 1): the
//! rows within `k` found through the segments at the first call and returned in table order (the
//! tightest ball probed, every ball checked), or, when probing would cost more than reading the
//! code store or its candidates take more than `work_mem`, rows read from the code store in passes
//! (`super::ordered`). `ORDER BY code <-> simhash_code_ball(q, _)` (strategy 2, `amgettuple`):
//! nearest first, ties in table order, the rows whose code is NULL last. Both exact: no recheck.
//! As the `simhash64` kind's, only MVCC snapshots are accepted.

use pgrx::pg_sys::{self, Datum};

use super::ordered::{work_mem_bytes, Nearest};
use super::read::Reader;
use super::CodeBall;
use crate::memory;
use crate::pg::tid::tid_of_order;

#[derive(Default)]
pub(in crate::index) struct CodesScan {
    /// The radius tests (`None`: a NULL ball, no row).
    balls: Vec<Option<CodeBall>>,
    /// `ORDER BY`: `Some(q)`, `Some(None)` for a NULL query (any order).
    order: Option<Option<Vec<u8>>>,
    order_key: usize,
    /// Whether the ordering key is `<~>` (strategy 3, a float8 distance).
    order_float: bool,
    results: Vec<(u32, u64)>,
    next: usize,
    nearest: Option<Box<Nearest>>,
    searched: bool,
}

impl CodesScan {
    /// The balls, or `None` when one is NULL (no row); each centre checked against the index's
    /// code length (22026).
    fn balls(&self, code_bits: u32) -> Option<Vec<CodeBall>> {
        let balls: Option<Vec<CodeBall>> = self.balls.iter().cloned().collect();
        for ball in balls.iter().flatten() {
            if code_bits != 0 && ball.bits != code_bits {
                super::wrong_length(ball.bits, code_bits);
            }
        }
        balls
    }
}

/// `amrescan`: the keys and order-by keys of the scan.
///
/// # Safety
///
/// As `amrescan`; `state` is the scan's.
pub(in crate::index) unsafe fn rescan(scan: pg_sys::IndexScanDesc, state: &mut CodesScan) {
    unsafe {
        let orderbys = (0..(*scan).numberOfOrderBys as usize).map(|i| &*(*scan).orderByData.add(i));
        let mut effective = None;
        for (i, key) in orderbys.enumerate() {
            if key.sk_flags & pg_sys::SK_ISNULL as i32 == 0 {
                // (the ordering operators read the center alone: a NULL radius still orders)
                if let Some(ball) = crate::codes::center_of(key.sk_argument) {
                    effective = Some((i, ball.bytes, ball.bits, key.sk_strategy == 3));
                    break;
                }
            }
        }
        *state = CodesScan::default();
        let index = (*scan).indexRelation;
        let code_bits = super::meta::load_meta(index).code_bits;
        if let Some((_, _, bits, _)) = &effective {
            if code_bits != 0 && *bits != code_bits {
                super::wrong_length(*bits, code_bits);
            }
        }
        state.order = ((*scan).numberOfOrderBys > 0).then(|| effective.as_ref().map(|(_, q, _, _)| q.clone()));
        state.order_float = effective.as_ref().is_some_and(|e| e.3);
        state.order_key = effective.map_or(usize::MAX, |(i, _, _, _)| i);
        state.balls = (0..(*scan).numberOfKeys as usize)
            .map(|i| {
                let key = &*(*scan).keyData.add(i);
                if key.sk_flags & pg_sys::SK_ISNULL as i32 != 0 {
                    None
                } else {
                    super::ball_of(key.sk_argument)
                }
            })
            .collect();
        state.balls(code_bits);
    }
}

/// The tightest ball of `balls` (the one probed).
fn tightest(balls: &[CodeBall]) -> Option<&CodeBall> {
    balls.iter().min_by_key(|ball| ball.radius)
}

/// The rows within every ball through the segments (distance to the tightest's centre, TID
/// order), or `None` when that does not pay or does not fit in memory.
unsafe fn probe(index: pg_sys::Relation, balls: &[CodeBall]) -> Option<Vec<(u32, u64)>> {
    unsafe {
        let ball = tightest(balls)?;
        if ball.radius < 0 {
            return Some(Vec::new());
        }
        let mut reader = Reader::new(index);
        let k = ball.radius.min(i32::try_from(reader.meta.code_bits).unwrap_or(i32::MAX)) as u32;
        let lookup = reader.probes_pay(k)?;
        let found = reader
            .probe(&ball.bytes, k, &lookup.radii, work_mem_bytes() / 16, &mut |code| Nearest::keeps_all(balls, code))?;
        (found.len() <= work_mem_bytes() / 16).then_some(found)
    }
}

/// `amgettuple`.
///
/// # Safety
///
/// As `amgettuple`; `state` is the scan's.
pub(in crate::index) unsafe fn gettuple(scan: pg_sys::IndexScanDesc, state: &mut CodesScan) -> bool {
    unsafe {
        let index = (*scan).indexRelation;
        if !state.searched {
            state.searched = true;
            let code_bits = super::meta::load_meta(index).code_bits;
            match state.balls(code_bits) {
                None => {} // a NULL ball: no row
                Some(balls) => {
                    let order = state.order.clone();
                    let found = if balls.is_empty() { None } else { probe(index, &balls) };
                    match (found, order) {
                        (Some(mut found), None) => {
                            found.iter_mut().for_each(|f| f.0 = 0);
                            memory::sort_interruptibly(&mut found, |f| f.1);
                            state.results = found;
                        }
                        (Some(mut found), Some(Some(query))) if tightest(&balls).is_some_and(|b| b.bytes == query) => {
                            memory::sort_interruptibly(&mut found, |&f| f);
                            state.results = found;
                        }
                        (_, order) => {
                            // Passes (rows around the order's query, or the tightest ball's centre).
                            let query = match &order {
                                Some(query) => query.clone(),
                                None => tightest(&balls).map(|ball| ball.bytes.clone()),
                            };
                            let bound = tightest(&balls)
                                .filter(|ball| Some(&ball.bytes) == query.as_ref())
                                .map_or(u32::MAX, |ball| ball.radius.max(0) as u32);
                            let rounds = order.is_some() && balls.is_empty();
                            let nulls = balls.is_empty();
                            let few = order.is_some();
                            state.nearest = Some(Box::new(Nearest::new(query, balls, bound, rounds, nulls, few)));
                        }
                    }
                }
            }
        }
        let found = if let Some(nearest) = state.nearest.as_mut() {
            nearest.next(index)
        } else {
            let found = state.results.get(state.next).map(|&(d, key)| (tid_of_order(key), Some(d)));
            state.next += 1;
            found
        };
        let Some((tid, distance)) = found else { return false };
        (*scan).xs_heaptid = tid;
        (*scan).xs_recheck = false;
        let norderbys = (*scan).numberOfOrderBys as usize;
        (*scan).xs_recheckorderby = norderbys > 1;
        if norderbys > 1 {
            // (as the simhash64 kind: the ordering key's distance, NULL before it, 0 after it)
            let values = std::slice::from_raw_parts_mut((*scan).xs_orderbyvals, norderbys);
            let nulls = std::slice::from_raw_parts_mut((*scan).xs_orderbynulls, norderbys);
            for i in 0..norderbys {
                values[i] = Datum::from(0i32);
                nulls[i] = i < state.order_key;
            }
            if state.order_key < norderbys {
                match distance {
                    Some(d) if state.order_float => values[state.order_key] = Datum::from((d as f64).to_bits()),
                    Some(d) => values[state.order_key] = Datum::from(d as i32),
                    None => nulls[state.order_key] = true,
                }
            }
        }
        true
    }
}

/// `amgetbitmap`: the matches, through the segments or read from the code store.
///
/// # Safety
///
/// As `amgetbitmap`; `state` is the scan's.
pub(in crate::index) unsafe fn getbitmap(
    scan: pg_sys::IndexScanDesc,
    state: &mut CodesScan,
    tbm: *mut pg_sys::TIDBitmap,
) -> i64 {
    unsafe {
        let index = (*scan).indexRelation;
        let mut reader = Reader::new(index);
        let Some(balls) = state.balls(reader.meta.code_bits) else { return 0 };
        let mut batch: Vec<pg_sys::ItemPointerData> = Vec::with_capacity(4096);
        let mut n = 0i64;
        let mut add = |batch: &mut Vec<pg_sys::ItemPointerData>| {
            pg_sys::tbm_add_tuples(tbm, batch.as_mut_ptr(), batch.len() as i32, false);
            n += batch.len() as i64;
            batch.clear();
        };
        if let Some(found) = probe(index, &balls) {
            for (_, key) in found {
                batch.push(tid_of_order(key));
                if batch.len() == 4096 {
                    add(&mut batch);
                }
            }
        } else {
            reader.for_each_row(&mut |code, tid| {
                if Nearest::keeps_all(&balls, code) {
                    batch.push(*tid);
                    if batch.len() == 4096 {
                        add(&mut batch);
                    }
                }
            });
            if balls.is_empty() {
                reader.for_each_null_row(&mut |key| {
                    batch.push(tid_of_order(key));
                    if batch.len() == 4096 {
                        add(&mut batch);
                    }
                });
            }
        }
        add(&mut batch);
        n
    }
}

/// The TIDs of the rows whose code is within `k` bits of `code` (`bits` long), each once, in table
/// order, read directly (through the segments when that pays, else the code store whole), for the
/// near-duplicate constraint's recheck, which fetches them with a dirty snapshot; none when the
/// index holds codes of another length.
///
/// # Safety
///
/// `index` is an open simhash index of codes.
pub(in crate::index) unsafe fn rows_within(
    index: pg_sys::Relation,
    bits: u32,
    code: &[u8],
    k: u32,
) -> Vec<pg_sys::ItemPointerData> {
    unsafe {
        let mut reader = Reader::new(index);
        let code_bits = reader.meta.code_bits;
        if code_bits != 0 && bits != code_bits {
            // (no code of another length is a near-duplicate at commit: see dedup::value::Code)
            return Vec::new();
        }
        // (None too when memory for the candidates or the rows found is refused: the code store is
        // then read whole, which needs memory only for the rows found)
        let probed =
            reader.probes_pay(k).and_then(|lookup| reader.probe(code, k, &lookup.radii, usize::MAX, &mut |_| true));
        // (sorted and made distinct where they were collected, then the TIDs made: no copy of
        // them all in between)
        match probed {
            Some(mut found) => {
                memory::sort_interruptibly(&mut found, |&(_, key)| key);
                found.dedup_by_key(|&mut (_, key)| key);
                let mut tids = memory::entries_with_room(found.len());
                tids.extend(found.iter().map(|&(_, key)| tid_of_order(key)));
                tids
            }
            None => {
                let mut keys = Vec::new();
                reader.for_each_row(&mut |c, tid| {
                    if simhash_core::multi_index::hamming_bytes(c, code).is_some_and(|d| d <= k) {
                        memory::push_entry(&mut keys, crate::pg::tid::tid_order(tid));
                    }
                });
                memory::sort_interruptibly(&mut keys, |&key| key);
                keys.dedup();
                let mut tids = memory::entries_with_room(keys.len());
                tids.extend(keys.iter().map(|&key| tid_of_order(key)));
                tids
            }
        }
    }
}
