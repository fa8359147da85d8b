//! The commit-time recheck of the near-duplicate constraint, run once per kept row when its
//! transaction commits: each fingerprint the row trigger let through is looked up again with a
//! dirty snapshot, waiting for younger writers of near-duplicates that are checking and failing
//! (40001) against older ones, and passing over writers that have not begun their check. The
//! protocol, and why it is enough, is told once, in the module documentation (`crate::dedup`).
//! [`suspects`] and [`recheck`] also serve the deferred check (`super::deferred`).

use std::collections::HashSet;
use std::ops::ControlFlow;

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use simhash_core::cost::RecheckRoute;
use simhash_core::shingles::{Overlap, ShingleSet};

use super::checking;
use super::dirty::{dirty_snapshot, for_each_row, for_each_within, RecheckIndex};
use super::messages::{key_if_visible, raise_near_duplicate};
use super::pending::{AnyPending, Ours, Pending, PENDING};
pub(super) use super::skip_at_commit::{delete_at_commit, quiet_delete_allowed};
use super::texts::{text_is_out_of_line, text_set};
use super::value::{Fingerprint, NearLookup};
use crate::memory::{push, vec_with_room};
use crate::pg::errors::raise;
use crate::pg::names::relation_name;

/// Rechecks every remembered fingerprint; called just before the transaction commits or prepares.
///
/// # Safety
///
/// At pre-commit or pre-prepare of the current transaction (the transaction callback), where errors
/// are still allowed.
pub(super) unsafe fn recheck_all() {
    let mut pending: Vec<((Oid, Oid, String), AnyPending)> = PENDING.with(|p| p.borrow_mut().drain().collect());
    if pending.is_empty() {
        return;
    }
    // Before the first lookup: from now on, others that find our rows in progress wait or fail.
    unsafe { checking::begin() };
    // In a fixed order (by table, then trigger): the same rows are refused from run to run.
    pending.sort_unstable_by_key(|((relid, trigger, _), _)| (relid.to_u32(), trigger.to_u32()));
    for ((relid, _, _), pending) in pending {
        unsafe {
            // The transaction may have dropped the table since; then there is nothing to check.
            let rel = pg_sys::try_relation_open(relid, pg_sys::RowExclusiveLock as i32);
            if rel.is_null() {
                continue;
            }
            // Nor when the column no longer holds values of the kind remembered (dropped, or its
            // type changed since, ALTER TABLE ... TYPE): its values would be read as the old type
            // (an int8 read as a bit string's pointer crashed the backend), and the constraint no
            // longer applies to it (its trigger refuses the next row, 42804).
            if !column_still_holds(rel, &pending) {
                pg_sys::relation_close(rel, pg_sys::NoLock as i32);
                continue;
            }
            match pending {
                AnyPending::Simhash(pending) => check_pending(rel, relid, pending),
                AnyPending::Code(pending) => check_pending(rel, relid, pending),
            }
            pg_sys::relation_close(rel, pg_sys::NoLock as i32);
        }
    }
}

/// The check at commit of what one trigger remembered of table `rel` (`relid`): its deferred check,
/// or the recheck of the values its check at each row let through.
unsafe fn check_pending<F: super::pending::Pendable>(rel: pg_sys::Relation, relid: Oid, mut pending: Pending<F>) {
    unsafe {
        let index = RecheckIndex::of(pending.schema, relid, pending.attnum);
        if pending.deferred {
            super::deferred::check_written_rows(rel, index, &mut pending);
        } else {
            recheck_pending(rel, index, pending);
        }
    }
}

/// Whether the column `pending` was remembered for still exists with values of its kind.
///
/// # Safety
///
/// `rel` is an open relation.
unsafe fn column_still_holds(rel: pg_sys::Relation, pending: &AnyPending) -> bool {
    use super::value::{column_kind, Kind};
    unsafe {
        let (schema, attnum, kind) = match pending {
            AnyPending::Simhash(p) => (p.schema, p.attnum, Kind::Simhash64),
            AnyPending::Code(p) => (p.schema, p.attnum, Kind::Code),
        };
        let tupdesc = (*rel).rd_att;
        if attnum < 1 || attnum > (*tupdesc).natts {
            return false;
        }
        let attr = crate::pg::compat::tuple_desc_attr(tupdesc, attnum as usize - 1);
        !attr.attisdropped && column_kind(rel, attnum, schema) == Some(kind)
    }
}

/// Rechecks the values one trigger let through (see [`recheck_all`]).
unsafe fn recheck_pending<F: Fingerprint>(rel: pg_sys::Relation, index: Option<RecheckIndex>, mut pending: Pending<F>) {
    unsafe {
        super::value::sort_distinct(&mut pending.fingerprints);
        // (taken: not needed after the suspects are chosen, and a big COPY's are large)
        let fingerprints = std::mem::take(&mut pending.fingerprints);
        // Texts, and codes, may be TOASTed: reading them needs a snapshot (any will do for TOAST;
        // without one, a code stored out of line failed the commit with XX000).
        let snapshot = pending.verify.is_some() || F::VARLENA;
        if snapshot {
            pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        }
        let suspects = suspects(rel, index, &pending, fingerprints, &Ours::Written);
        let mut skipped = 0u64;
        for fp in &suspects {
            pg_sys::check_for_interrupts!();
            for conflict in recheck(rel, index, &pending, fp, &Ours::Written) {
                // `skip` drops an inserted row; an updated older one would be lost (deleting
                // its new version deletes the row), so it fails instead.
                let skip = pending.skip && !pending.updated_older_rows.contains(fp);
                if skip && !quiet_delete_allowed(rel) {
                    raise(
                        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                        "could not serialize the near-duplicate check with a concurrent transaction".into(),
                        Some(format!(
                            "A concurrent transaction committed a row within {} bits of {} = {} in relation \"{}\" \
                                 after this transaction checked its row, and the row cannot be skipped at commit \
                                 (the table has DELETE triggers, foreign keys that reference it, or rules). \
                                 Retry the transaction: the row will then be skipped.",
                            pending.k,
                            pending.column,
                            fp.text(),
                            relation_name(rel)
                        )),
                        None,
                    );
                }
                if skip {
                    // The row was stored by an earlier command: make it visible to the delete.
                    pg_sys::CommandCounterIncrement();
                    delete_at_commit(rel, conflict.own_row);
                    pg_sys::heap_freetuple(conflict.existing);
                    skipped += 1;
                } else {
                    raise_violation(
                        rel,
                        &pending,
                        fp,
                        &conflict,
                        "A concurrent transaction committed it after this row was checked.",
                    );
                }
            }
        }
        if snapshot {
            pg_sys::PopActiveSnapshot();
        }
        if skipped > 0 {
            let rows = if skipped == 1 { "row" } else { "rows" };
            notice!(
                "simhash: skipped {skipped} near-duplicate {rows} of relation \"{}\" at commit (trigger \"{}\"): \
                     concurrent transactions stored near-duplicates of them first",
                relation_name(rel),
                pending.trigger_name
            );
        }
    }
}

/// Of `fingerprints` (sorted, without copies), those that may have a row within k (committed or
/// not) that is not one of `ours`: found in one pass over the table or through the simhash index,
/// whichever costs less, else all of them.
pub(super) unsafe fn suspects<F: Fingerprint>(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    pending: &Pending<F>,
    fingerprints: Vec<F>,
    ours: &Ours,
) -> Vec<F> {
    unsafe {
        let route = match index {
            Some(RecheckIndex::Own(_)) => RecheckRoute::SimhashIndex,
            Some(RecheckIndex::SegmentBtrees(_)) => RecheckRoute::SegmentBtrees,
            None => RecheckRoute::NoIndex,
        };
        if one_pass_is_cheaper::<F>(rel, route, fingerprints.len(), pending.k) {
            suspects_in_one_pass(rel, pending, fingerprints, ours)
        } else if let Some(RecheckIndex::Own(oid)) = index {
            F::suspects_through_index(rel, oid, pending.attnum, fingerprints, pending.k, ours)
        } else {
            fingerprints
        }
    }
}

/// Whether one pass over the table costs less than looking up each pending fingerprint
/// (`simhash_core::cost::one_pass_is_cheaper`), with the table's size as the planner knows it (at
/// least 60 rows per block).
unsafe fn one_pass_is_cheaper<F: Fingerprint>(
    rel: pg_sys::Relation,
    route: RecheckRoute,
    pending: usize,
    k: u32,
) -> bool {
    unsafe {
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
        let rows = f64::max((*(*rel).rd_rel).reltuples as f64, blocks * 60.0);
        F::one_pass_is_cheaper(rows, route, pending, k)
    }
}

/// The pending fingerprints that have a row of another transaction within k (committed or not),
/// found in one pass over the table with a dirty snapshot. Rows of others written after the pass
/// started may be missed: their writers recheck after writing them, and then see ours.
unsafe fn suspects_in_one_pass<F: Fingerprint>(
    rel: pg_sys::Relation,
    pending: &Pending<F>,
    fingerprints: Vec<F>,
    ours: &Ours,
) -> Vec<F> {
    unsafe {
        use simhash_core::dedup::NearSetError;
        let count = fingerprints.len();
        let out_of_memory = || -> ! {
            crate::memory::constraint_out_of_memory(&format!(
                "the near-duplicate recheck of {count} rows of relation \"{}\"",
                relation_name(rel)
            ))
        };
        let set = match F::near_set(fingerprints, pending.k) {
            Ok(set) => set,
            Err(NearSetError::OutOfMemory) => out_of_memory(),
            Err(NearSetError::RadiusOutOfRange) => unreachable!("the trigger checked k"),
        };
        let mut suspect = crate::memory::vec_with_room(count).unwrap_or_else(|| out_of_memory());
        suspect.resize(count, false);
        let mut dirty = dirty_snapshot();
        for_each_row(rel, pending.attnum, &mut dirty, &mut |tuple, value: Option<F>| {
            if let Some(value) = value.filter(|_| !ours.contains(tuple)) {
                set.for_each_near(&value, &mut |i| suspect[i] = true);
            }
            ControlFlow::Continue(())
        });
        set.members_chosen(&suspect)
    }
}

/// A stored row of this transaction with a committed near-duplicate of another transaction.
pub(super) struct Conflict {
    pub own_row: pg_sys::ItemPointerData,
    pub distance: u32,
    /// A copy of the other row, this conflict's own (its taker frees it).
    pub existing: pg_sys::HeapTuple,
    /// The similarity of the two texts, with verification.
    pub similarity: Option<f64>,
}

/// A row of this transaction with the fingerprint being rechecked, and its text's shingle set
/// (with verification).
struct OwnRow {
    tid: pg_sys::ItemPointerData,
    text: Option<ShingleSet>,
}

/// Looks up `fp` with a dirty snapshot until no transaction that wrote a near-duplicate and is
/// checking (or deleting one) is in progress; returns the rows of this transaction with `fp` that
/// have a committed near-duplicate (none when this transaction no longer stores a row with `fp` or
/// nothing conflicts).
///
/// Without verification there is at most one such row (the row trigger refused or skipped a second
/// row at distance 0); with it, rows with the same fingerprint but dissimilar texts are each
/// checked, and only writers of rows whose text is similar to one of them are waited for.
///
/// # Safety
///
/// At pre-commit (from [`recheck_all`]); `rel` is open with at least RowExclusiveLock and `index`
/// is an index of its column.
pub(super) unsafe fn recheck<F: Fingerprint>(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    pending: &Pending<F>,
    fp: &F,
    ours: &Ours,
) -> Vec<Conflict> {
    unsafe {
        let verify = pending.verify.as_ref();
        // The similarity when `other` is a near-duplicate of `own` (always, without verification).
        let similar = |own: &OwnRow, other: &Option<ShingleSet>| -> Option<Option<f64>> {
            match (verify, &own.text, other) {
                (Some(v), Some(a), Some(b)) => {
                    v.passes(Overlap::of_interruptible(a, b, crate::fingerprint::text::INTERRUPTS)).map(Some)
                }
                _ => Some(None),
            }
        };
        // (With verification, the rows of one fingerprint may be many.)
        let out_of_memory = || -> ! {
            crate::memory::constraint_out_of_memory(&format!(
                "the rows within {} bits of {} = {} in relation \"{}\"",
                pending.k,
                pending.column,
                fp.text(),
                relation_name(rel)
            ))
        };
        let grown = |room: Option<()>| {
            if room.is_none() {
                out_of_memory()
            }
        };
        // Whether a writer in progress that has not begun its check is passed over (`checking`).
        // Not with `skip` checked at each row: there the writer's row trigger has dropped rows near
        // its own earlier rows for good, and if its check at commit then deleted such a row because
        // ours was kept, the rows it stood for would be lost. It cannot happen when that check
        // fails the whole transaction (`error`) or judges every row at commit (deferred). (The
        // writers of a table share its trigger, and so its settings.)
        let passes_unchecked_writers = pending.deferred || !pending.skip;
        loop {
            pg_sys::check_for_interrupts!();
            let mut dirty = dirty_snapshot();
            let dirty_ptr: pg_sys::Snapshot = &mut dirty;
            let mut own: Vec<OwnRow> = Vec::new();
            let mut others: Vec<(u32, pg_sys::HeapTuple, Option<ShingleSet>)> = Vec::new();
            let mut writers: Vec<(pg_sys::TransactionId, pg_sys::ItemPointerData, Option<ShingleSet>)> = Vec::new();
            // With verification, a row can be reached through several segment indexes: each is
            // taken once (without it, only the first or nearest row of each kind is kept anyway).
            let mut seen: HashSet<(pg_sys::BlockNumber, pg_sys::OffsetNumber)> = HashSet::new();
            // Whether a writer in progress has ended since its row was read.
            let mut ended = false;
            for_each_within(rel, index, pending.attnum, fp, pending.k, dirty_ptr, &mut |tuple, value, distance| {
                let xmin = (*dirty_ptr).xmin;
                let xwait = if xmin != pg_sys::InvalidTransactionId { xmin } else { (*dirty_ptr).xmax };
                let tid = (*tuple).t_self;
                if xmin != pg_sys::InvalidTransactionId && passes_unchecked_writers {
                    // A row written by a transaction that has not begun its check is no conflict
                    // yet: that check will find ours (`checking`). A row being deleted is waited
                    // for as before: its deleter checks nothing.
                    match checking::writer(xmin) {
                        checking::Writer::Checking => {}
                        checking::Writer::NotYetChecking => return ControlFlow::Continue(()),
                        checking::Writer::Ended => {
                            ended = true;
                            return ControlFlow::Break(());
                        }
                    }
                }
                if verify.is_some() {
                    pg_sys::check_for_interrupts!();
                    grown(seen.try_reserve(1).ok());
                    if !seen.insert(pgrx::itemptr::item_pointer_get_both(tid)) {
                        return ControlFlow::Continue(());
                    }
                }
                let text = || verify.map(|v| text_set(rel, tuple, v));
                if xwait != pg_sys::InvalidTransactionId {
                    if verify.is_some() {
                        // A writer in progress may still abort and its TOAST rows vanish before we
                        // read them: a text stored out of line is not read, and the writer is waited
                        // for as if its text were similar (the loop looks again after the wait).
                        let text = if text_is_out_of_line(rel, tuple, verify) { None } else { text() };
                        grown(push(&mut writers, (xwait, tid, text)));
                    } else if writers.is_empty() {
                        writers.push((xwait, tid, None));
                    }
                } else if ours.contains(tuple) {
                    // Our own rows were checked against each other by the row trigger (deferred: by
                    // `first_come`).
                    if value == *fp && (verify.is_some() || own.is_empty()) {
                        grown(push(&mut own, OwnRow { tid, text: text() }));
                    }
                } else if verify.is_some() {
                    grown(others.try_reserve(1).ok());
                    others.push((distance, pg_sys::heap_copytuple(tuple), text()));
                } else if others.first().is_none_or(|&(d, _, _)| distance < d) {
                    if let Some((_, previous, _)) = others.pop() {
                        pg_sys::heap_freetuple(previous);
                    }
                    others.push((distance, pg_sys::heap_copytuple(tuple), None));
                }
                ControlFlow::Continue(())
            });
            if ended {
                for (_, tuple, _) in others.drain(..) {
                    pg_sys::heap_freetuple(tuple);
                }
                continue;
            }
            // The row may be gone (a rolled-back savepoint, a later trigger or statement): then
            // there is nothing to wait for.
            let wait = writers
                .iter()
                .find(|(_, _, text)| own.iter().any(|o| similar(o, text).is_some()))
                .map(|&(xid, tid, _)| (xid, tid));
            if own.is_empty() || wait.is_some() {
                for (_, tuple, _) in others.drain(..) {
                    pg_sys::heap_freetuple(tuple);
                }
            }
            if own.is_empty() {
                return Vec::new();
            }
            if let Some((xid, mut tid)) = wait {
                let other = pg_sys::SubTransGetTopmostTransaction(xid);
                if pg_sys::TransactionIdPrecedes(other, pg_sys::GetTopTransactionId()) {
                    raise(
                        PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE,
                        "could not serialize the near-duplicate check with an older concurrent transaction".into(),
                        Some(format!(
                            "An older transaction that is still in progress wrote a row within {} bits of {} = {} \
                             in relation \"{}\"{}. Retry the transaction.",
                            pending.k,
                            pending.column,
                            fp.text(),
                            relation_name(rel),
                            verify.map_or(String::new(), |v| format!(
                                " with a {} text at least {} similar",
                                v.column, v.min_similarity
                            )),
                        )),
                        None,
                    );
                }
                pg_sys::XactLockTableWait(xid, rel, &mut tid, pg_sys::XLTW_Oper::XLTW_RecheckExclusionConstr);
                continue;
            }
            // For each own row, the most similar other row (then the nearest).
            let mut kept = vec_with_room(others.len()).unwrap_or_else(|| out_of_memory());
            kept.resize(others.len(), false);
            let mut conflicts = vec_with_room(own.len()).unwrap_or_else(|| out_of_memory());
            for o in &own {
                let best = others
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (d, _, text))| similar(o, text).map(|s| (i, *d, s)))
                    .min_by(|a, b| b.2.unwrap_or(0.0).total_cmp(&a.2.unwrap_or(0.0)).then(a.1.cmp(&b.1)));
                if let Some((i, distance, similarity)) = best {
                    // Each conflict owns its copy (its caller frees it): several own rows with
                    // this fingerprint can pick the same other row.
                    let existing = if kept[i] { pg_sys::heap_copytuple(others[i].1) } else { others[i].1 };
                    kept[i] = true;
                    conflicts.push(Conflict { own_row: o.tid, distance, existing, similarity });
                }
            }
            for (i, (_, tuple, _)) in others.into_iter().enumerate() {
                if !kept[i] {
                    pg_sys::heap_freetuple(tuple);
                }
            }
            return conflicts;
        }
    }
}

/// The commit-time violation of `error`: like the row trigger's, naming the concurrent row.
unsafe fn raise_violation<F: Fingerprint>(
    rel: pg_sys::Relation,
    pending: &Pending<F>,
    fp: &F,
    conflict: &Conflict,
    note: &str,
) -> ! {
    unsafe {
        let existing_key = key_if_visible(rel, conflict.existing);
        raise_near_duplicate(
            rel,
            &pending.trigger_name,
            &pending.column,
            pending.k,
            &fp.text(),
            conflict.distance,
            existing_key.as_deref(),
            pending.verify.as_ref().zip(conflict.similarity),
            note,
        )
    }
}
