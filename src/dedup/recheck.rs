//! The commit-time recheck of the near-duplicate constraint (the protocol is told in the module
//! documentation, `crate::dedup`), run once per kept row when its transaction commits.
//!
//! The row trigger looks with an MVCC snapshot, so it cannot see a near-duplicate that a concurrent
//! transaction has written but not committed. So it remembers each fingerprint it let through, and
//! when the transaction commits (or prepares) every one is looked up again, now that the row is
//! stored, with a *dirty* snapshot, which also sees rows of transactions still in progress:
//!
//! - a near-duplicate committed by another transaction: the row violates the constraint after all
//!   (`error` raises 23505; `skip` deletes the row and says so in a NOTICE);
//! - a near-duplicate of a transaction still in progress: if that transaction is younger, wait for
//!   it to end and look again (it may commit, abort, or itself be skipped); if it is older, fail at
//!   once with 40001. Waits thus only go from older to younger transactions, so the check cannot
//!   deadlock with itself, and the oldest writer never fails.
//!
//! Why this is enough: of two concurrent writers of near-duplicates, the one that rechecks second
//! finds the other's row (each stores its row before it rechecks), either committed or in progress,
//! so they cannot both commit their rows. Only true conflicts wait or fail: a big COPY beside other
//! loaders holds up only those with a near-duplicate of one of its rows.
//!
//! The lookups read the column's simhash index, or else its four segment B-trees, directly (an MVCC
//! plan cannot use a dirty snapshot).
//! A transaction that wrote many rows (a big COPY) instead compares the whole table with its
//! fingerprints in one pass, in memory, and looks up only those that have a near-duplicate; so does
//! one on a table without either. With a simhash index the fingerprints are first looked up all
//! together (each bucket read once for many of them), and only those with a near-duplicate of
//! another transaction are rechecked one by one.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;
use simhash_core::cost::RecheckRoute;
use simhash_core::shingles::{Overlap, ShingleSet};

use super::config::Verify;
use super::dirty::{
    dirty_snapshot, for_each_row, for_each_within, own_row, stored_row, suspects_through_index, RecheckIndex,
};
use super::messages::{column_datum, key_if_visible, raise_near_duplicate};
use super::pending::{Ours, Pending, PENDING};
use crate::pg::errors::raise;
use crate::pg::names::relation_name;

/// Rechecks every remembered fingerprint; called just before the transaction commits or prepares.
///
/// # Safety
///
/// At pre-commit or pre-prepare of the current transaction (the transaction callback), where errors
/// are still allowed.
pub(super) unsafe fn recheck_all() {
    let mut pending: Vec<((Oid, Oid, String), Pending)> = PENDING.with(|p| p.borrow_mut().drain().collect());
    // In a fixed order (by table, then trigger): the same rows are refused from run to run.
    pending.sort_unstable_by_key(|((relid, trigger, _), _)| (relid.to_u32(), trigger.to_u32()));
    for ((relid, _, _), mut pending) in pending {
        unsafe {
            // The transaction may have dropped the table since; then there is nothing to check.
            let rel = pg_sys::try_relation_open(relid, pg_sys::RowExclusiveLock as i32);
            if rel.is_null() {
                continue;
            }
            let index = RecheckIndex::of(pending.schema, relid, pending.attnum);
            if pending.deferred {
                check_written_rows(rel, index, &mut pending);
                pg_sys::relation_close(rel, pg_sys::NoLock as i32);
                continue;
            }
            pending.fingerprints.sort_unstable();
            pending.fingerprints.dedup();
            // (taken: not needed after the suspects are chosen, and a big COPY's are large)
            let fingerprints = std::mem::take(&mut pending.fingerprints);
            let suspects = suspects(rel, index, &pending, fingerprints, &Ours::Written);
            let mut skipped = 0u64;
            // Texts may be TOASTed: reading them needs a snapshot (any will do for TOAST).
            if pending.verify.is_some() {
                pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
            }
            for &fp in &suspects {
                pg_sys::check_for_interrupts!();
                for conflict in recheck(rel, index, &pending, fp, &Ours::Written) {
                    // `skip` drops an inserted row; an updated older one would be lost (deleting
                    // its new version deletes the row), so it fails instead.
                    let skip = pending.skip && !pending.updated_older_rows.contains(&fp);
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
                                simhash_core::format_hex(fp),
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
            if pending.verify.is_some() {
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
            pg_sys::relation_close(rel, pg_sys::NoLock as i32);
        }
    }
}

/// Of `fingerprints` (sorted, without copies), those that may have a row within k (committed or
/// not) that is not one of `ours`: found in one pass over the table or through the simhash index,
/// whichever costs less, else all of them.
unsafe fn suspects(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    pending: &Pending,
    fingerprints: Vec<u64>,
    ours: &Ours,
) -> Vec<u64> {
    unsafe {
        let route = match index {
            Some(RecheckIndex::Own(_)) => RecheckRoute::SimhashIndex,
            Some(RecheckIndex::SegmentBtrees(_)) => RecheckRoute::SegmentBtrees,
            None => RecheckRoute::NoIndex,
        };
        if one_pass_is_cheaper(rel, route, fingerprints.len(), pending.k) {
            suspects_in_one_pass(rel, pending, fingerprints, ours)
        } else if let Some(RecheckIndex::Own(oid)) = index {
            suspects_through_index(rel, oid, pending.attnum, &fingerprints, pending.k, ours)
        } else {
            fingerprints
        }
    }
}

/// The deferred check, at commit, of the rows a transaction wrote (in the order it wrote them):
/// each is judged as the row trigger would have judged it then, against the rows of other
/// transactions (committed, or waited for as in [`recheck`]) and the rows this transaction kept
/// before it (`simhash_core::dedup::first_come`). A refused row raises 23505 (`error`, and `skip`
/// for an updated older row) or is deleted (`skip`).
///
/// # Safety
///
/// At pre-commit (from [`recheck_all`]); `rel` is open with at least RowExclusiveLock and `index`
/// is an index of its column.
unsafe fn check_written_rows(rel: pg_sys::Relation, index: Option<RecheckIndex>, pending: &mut Pending) {
    use simhash_core::dedup::{first_come, NearSetError, Verdict};
    unsafe {
        let written = std::mem::take(&mut pending.rows);
        let mut rows = written.list;
        // Rows of rolled-back subtransactions are gone (and were perhaps written to a file
        // a rollback discarded).
        rows.retain(|r| pg_sys::TransactionIdIsCurrentTransactionId(r.xmin));
        let file = (*(*rel).rd_rel).relfilenode;
        if rows.iter().any(|r| r.relfilenode != file) {
            // The rows were moved (and a rewrite by ALTER TABLE marks every row of the table as
            // written by this transaction): their TIDs no longer say where they are.
            raise(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "relation \"{}\" was rewritten or truncated after this transaction wrote rows that trigger \"{}\" \
                     checks at commit",
                    relation_name(rel),
                    pending.trigger_name
                ),
                None,
                Some(
                    "Run ALTER TABLE, CLUSTER or TRUNCATE of the table before writing its rows, or in another transaction."
                        .into(),
                ),
            );
        }
        let n = rows.len();
        let out_of_memory = || -> ! {
            raise(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!(
                    "out of memory for the deferred near-duplicate check of {n} rows of relation \"{}\"",
                    relation_name(rel)
                ),
                None,
                None,
            )
        };
        // A row version pruned away (written by a rolled-back subtransaction) can leave its TID to
        // a later row, and a TRUNCATE of a table created in this transaction empties it in place:
        // only the last row remembered at a TID (in the order remembered) can still be there.
        let mut reused = fallible_vec(n).unwrap_or_else(|| out_of_memory());
        reused.resize(n, false);
        {
            let mut order: Vec<usize> = fallible_vec(n).unwrap_or_else(|| out_of_memory());
            order.extend(0..n);
            order.sort_unstable_by_key(|&i| (pgrx::itemptr::item_pointer_get_both(rows[i].tid), i));
            for pair in order.windows(2) {
                let tid = |i: usize| pgrx::itemptr::item_pointer_get_both(rows[i].tid);
                reused[pair[0]] = tid(pair[0]) == tid(pair[1]);
            }
        }
        if written.reordered {
            // Into the order the check at each row would have judged the rows in (a version that
            // an UPDATE keeping the fingerprint wrote takes the place of the one it replaced).
            let mut order: Vec<usize> = fallible_vec(n).unwrap_or_else(|| out_of_memory());
            order.extend(0..n);
            order.sort_by_key(|&i| rows[i].seq);
            let mut sorted = fallible_vec(n).unwrap_or_else(|| out_of_memory());
            sorted.extend(order.iter().map(|&i| rows[i]));
            let mut sorted_reused = fallible_vec(n).unwrap_or_else(|| out_of_memory());
            sorted_reused.extend(order.iter().map(|&i| reused[i]));
            (rows, reused) = (sorted, sorted_reused);
        }
        let mut fps = fallible_vec(n).unwrap_or_else(|| out_of_memory());
        fps.extend(rows.iter().map(|r| r.fp));
        let mut fingerprints = fallible_vec(n).unwrap_or_else(|| out_of_memory());
        fingerprints.extend_from_slice(&fps);
        fingerprints.sort_unstable();
        fingerprints.dedup();
        // The fingerprints within k of a committed row of another transaction (after waiting for
        // the writers in progress), with that row. Rows of this transaction that the trigger did
        // not remember (an UPDATE of an older row that kept its fingerprint, rows written while
        // the trigger was disabled) count as such rows too.
        let ours = Ours::remembered(&rows).unwrap_or_else(|| out_of_memory());
        // (The other row's TID and distance only, not a copy of it: a big load may meet many.)
        let mut near_others: HashMap<u64, (pg_sys::ItemPointerData, u32)> = HashMap::new();
        for fp in suspects(rel, index, pending, fingerprints, &ours) {
            pg_sys::check_for_interrupts!();
            for conflict in recheck(rel, index, pending, fp, &ours) {
                near_others.entry(fp).or_insert(((*conflict.existing).t_self, conflict.distance));
                pg_sys::heap_freetuple(conflict.existing);
            }
        }
        drop(ours);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        let alive = &mut |i: usize| -> bool {
            !reused[i] && own_row(rel, pending.attnum, &rows[i], blocks).map(|t| pg_sys::heap_freetuple(t)).is_some()
        };
        let near_other = &mut |i: usize| {
            if i % 4096 == 4095 {
                pg_sys::check_for_interrupts!();
            }
            near_others.contains_key(&fps[i])
        };
        let verdicts = match first_come(&fps, pending.k, near_other, alive) {
            Ok(verdicts) => verdicts,
            Err(NearSetError::OutOfMemory) => out_of_memory(),
            Err(NearSetError::RadiusOutOfRange) => unreachable!("the trigger checked k"),
        };
        drop(fps);
        let mut skipped = 0u64;
        for (row, verdict) in rows.iter().zip(verdicts) {
            let earlier = match verdict {
                Verdict::Kept | Verdict::Gone => continue,
                Verdict::NearOther => None,
                Verdict::NearEarlier(j) => Some(&rows[j]),
            };
            if pending.skip && !row.updates_older_row {
                if !quiet_delete_allowed(rel) {
                    raise(
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        format!(
                            "cannot skip a near-duplicate row of relation \"{}\" at commit (trigger \"{}\")",
                            relation_name(rel),
                            pending.trigger_name
                        ),
                        Some(
                            "The deferred check deletes skipped rows at commit, after the table's DELETE triggers \
                             (among them those of foreign keys that reference it) and rules could run."
                                .into(),
                        ),
                        Some("Use the check at each row (simhash_add_dedup(..., deferred => false)).".into()),
                    );
                }
                if skipped == 0 {
                    // The rows were stored by earlier commands: make them visible to the delete.
                    pg_sys::CommandCounterIncrement();
                }
                delete_at_commit(rel, row.tid);
                skipped += 1;
                continue;
            }
            let (existing, distance, note) = match earlier {
                None => {
                    let (tid, distance) = near_others[&row.fp];
                    // (The committed row may have been deleted since: then it goes unnamed.)
                    let existing = stored_row(rel, pending.attnum, tid, (row.fp, distance), blocks);
                    (existing, distance, "The check ran at commit (deferred).")
                }
                Some(earlier) => (
                    // (`first_come` found the earlier row alive just now.)
                    own_row(rel, pending.attnum, earlier, blocks),
                    simhash_core::hamming(row.fp, earlier.fp),
                    "Both rows were written by this transaction; the check ran at commit (deferred).",
                ),
            };
            let existing_key = existing.and_then(|t| key_if_visible(rel, t));
            raise_near_duplicate(
                rel,
                &pending.trigger_name,
                &pending.column,
                pending.k,
                row.fp,
                distance,
                existing_key.as_deref(),
                None,
                note,
            );
        }
        if skipped > 0 {
            let rows = if skipped == 1 { "row" } else { "rows" };
            notice!(
                "simhash: skipped {skipped} near-duplicate {rows} of relation \"{}\" at commit (trigger \"{}\")",
                relation_name(rel),
                pending.trigger_name
            );
        }
    }
}

/// An empty vector with room for `n` items, or `None` when memory runs out.
fn fallible_vec<T>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

/// Whether one pass over the table costs less than looking up each pending fingerprint
/// (`simhash_core::cost::one_pass_is_cheaper`), with the table's size as the planner knows it (at
/// least 60 rows per block).
unsafe fn one_pass_is_cheaper(rel: pg_sys::Relation, route: RecheckRoute, pending: usize, k: u32) -> bool {
    unsafe {
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM) as f64;
        let rows = f64::max((*(*rel).rd_rel).reltuples as f64, blocks * 60.0);
        simhash_core::cost::one_pass_is_cheaper(rows, route, pending, k).expect("k was checked")
    }
}

/// The pending fingerprints that have a row of another transaction within k (committed or not),
/// found in one pass over the table with a dirty snapshot. Rows of others written after the pass
/// started may be missed: their writers recheck after writing them, and then see ours.
unsafe fn suspects_in_one_pass(
    rel: pg_sys::Relation,
    pending: &Pending,
    fingerprints: Vec<u64>,
    ours: &Ours,
) -> Vec<u64> {
    unsafe {
        use simhash_core::dedup::{NearSet, NearSetError};
        let count = fingerprints.len();
        let set = match NearSet::new(fingerprints, pending.k) {
            Ok(set) => set,
            Err(NearSetError::OutOfMemory) => raise(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!(
                    "out of memory for the near-duplicate recheck of {} rows of relation \"{}\"",
                    count,
                    relation_name(rel)
                ),
                None,
                None,
            ),
            Err(NearSetError::RadiusOutOfRange) => unreachable!("the trigger checked k"),
        };
        let mut suspect = vec![false; count];
        let mut dirty = dirty_snapshot();
        for_each_row(rel, pending.attnum, &mut dirty, &mut |tuple, value| {
            if let Some(value) = value.filter(|_| !ours.contains(tuple)) {
                set.for_each_near(value, &mut |i| suspect[i] = true);
            }
            ControlFlow::Continue(())
        });
        set.fingerprints().iter().zip(suspect).filter_map(|(&fp, s)| s.then_some(fp)).collect()
    }
}

/// A stored row of this transaction with a committed near-duplicate of another transaction.
pub(super) struct Conflict {
    own_row: pg_sys::ItemPointerData,
    distance: u32,
    /// A copy of the other row.
    existing: pg_sys::HeapTuple,
    /// The similarity of the two texts, with verification.
    similarity: Option<f64>,
}

/// A row of this transaction with the fingerprint being rechecked, and its text's shingle set
/// (with verification).
struct OwnRow {
    tid: pg_sys::ItemPointerData,
    text: Option<ShingleSet>,
}

/// Looks up `fp` with a dirty snapshot until no transaction that wrote a near-duplicate is in
/// progress; returns the rows of this transaction with `fp` that have a committed near-duplicate
/// (none when this transaction no longer stores a row with `fp` or nothing conflicts).
///
/// Without verification there is at most one such row (the row trigger refused or skipped a second
/// row at distance 0); with it, rows with the same fingerprint but dissimilar texts are each
/// checked, and only writers of rows whose text is similar to one of them are waited for.
///
/// # Safety
///
/// At pre-commit (from [`recheck_all`]); `rel` is open with at least RowExclusiveLock and `index`
/// is an index of its column.
pub(super) unsafe fn recheck(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    pending: &Pending,
    fp: u64,
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
        loop {
            let mut dirty = dirty_snapshot();
            let dirty_ptr: pg_sys::Snapshot = &mut dirty;
            let mut own: Vec<OwnRow> = Vec::new();
            let mut others: Vec<(u32, pg_sys::HeapTuple, Option<ShingleSet>)> = Vec::new();
            let mut writers: Vec<(pg_sys::TransactionId, pg_sys::ItemPointerData, Option<ShingleSet>)> = Vec::new();
            // With verification, a row can be reached through several segment indexes: each is
            // taken once (without it, only the first or nearest row of each kind is kept anyway).
            let mut seen: HashSet<(pg_sys::BlockNumber, pg_sys::OffsetNumber)> = HashSet::new();
            for_each_within(rel, index, pending.attnum, fp, pending.k, dirty_ptr, &mut |tuple, value, distance| {
                let xmin = (*dirty_ptr).xmin;
                let xwait = if xmin != pg_sys::InvalidTransactionId { xmin } else { (*dirty_ptr).xmax };
                let tid = (*tuple).t_self;
                if verify.is_some() {
                    pg_sys::check_for_interrupts!();
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
                        writers.push((xwait, tid, text));
                    } else if writers.is_empty() {
                        writers.push((xwait, tid, None));
                    }
                } else if ours.contains(tuple) {
                    // Our own rows were checked against each other by the row trigger (deferred: by
                    // `first_come`).
                    if value == fp && (verify.is_some() || own.is_empty()) {
                        own.push(OwnRow { tid, text: text() });
                    }
                } else if verify.is_some() {
                    others.push((distance, pg_sys::heap_copytuple(tuple), text()));
                } else if others.first().is_none_or(|&(d, _, _)| distance < d) {
                    if let Some((_, previous, _)) = others.pop() {
                        pg_sys::heap_freetuple(previous);
                    }
                    others.push((distance, pg_sys::heap_copytuple(tuple), None));
                }
                ControlFlow::Continue(())
            });
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
                            simhash_core::format_hex(fp),
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
            let mut conflicts = Vec::new();
            let mut kept = vec![false; others.len()];
            for o in &own {
                let best = others
                    .iter()
                    .enumerate()
                    .filter_map(|(i, (d, _, text))| similar(o, text).map(|s| (i, *d, s)))
                    .min_by(|a, b| b.2.unwrap_or(0.0).total_cmp(&a.2.unwrap_or(0.0)).then(a.1.cmp(&b.1)));
                if let Some((i, distance, similarity)) = best {
                    kept[i] = true;
                    conflicts.push(Conflict { own_row: o.tid, distance, existing: others[i].1, similarity });
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

/// Whether the row's text column is stored out of line (in the TOAST table).
unsafe fn text_is_out_of_line(rel: pg_sys::Relation, tuple: pg_sys::HeapTuple, verify: Option<&Verify>) -> bool {
    unsafe {
        let Some(verify) = verify else { return false };
        column_datum(tuple, (*rel).rd_att, verify.attnum)
            .is_some_and(|datum| pgrx::varlena::varatt_is_1b_e(datum.cast_mut_ptr()))
    }
}

/// The shingle set of the row's text column (empty when NULL: never similar).
unsafe fn text_set(rel: pg_sys::Relation, tuple: pg_sys::HeapTuple, verify: &Verify) -> ShingleSet {
    unsafe {
        let Some(datum) = column_datum(tuple, (*rel).rd_att, verify.attnum) else {
            return ShingleSet::default();
        };
        let text = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        // (as for the pair of this text with itself: one set of two at a time)
        let bytes = pgrx::varlena::varlena_to_byte_slice(text).len();
        crate::fingerprint::memory::check(
            "simhash_similarity",
            bytes.saturating_mul(2),
            crate::fingerprint::memory::Need::Sets,
        );
        let set = ShingleSet::of_interruptible(
            &crate::fingerprint::text::text_as_utf8(pgrx::varlena::varlena_to_byte_slice(text)),
            verify.n,
            crate::fingerprint::text::INTERRUPTS,
        );
        if text != datum.cast_mut_ptr() {
            pg_sys::pfree(text.cast());
        }
        set
    }
}

/// Whether the row `skip` would delete at commit can be deleted quietly: the table has no DELETE
/// triggers (foreign keys that reference it are such triggers) and no rules, which a delete at
/// commit, after the deferred triggers ran, would bypass.
unsafe fn quiet_delete_allowed(rel: pg_sys::Relation) -> bool {
    unsafe {
        let triggers = (*rel).trigdesc;
        let delete_triggers = !triggers.is_null()
            && ((*triggers).trig_delete_before_row
                || (*triggers).trig_delete_after_row
                || (*triggers).trig_delete_instead_row
                || (*triggers).trig_delete_before_statement
                || (*triggers).trig_delete_after_statement);
        !delete_triggers && (*rel).rd_rules.is_null()
    }
}

/// Deletes the row at `tid`, which `skip` refused at commit (stored by an earlier command, made
/// visible with `CommandCounterIncrement`). As a DELETE would, it fails (55000) on a table that
/// publishes deletes without a replica identity, whose subscribers could not apply it.
unsafe fn delete_at_commit(rel: pg_sys::Relation, mut tid: pg_sys::ItemPointerData) {
    unsafe {
        pg_sys::CheckCmdReplicaIdentity(rel, pg_sys::CmdType::CMD_DELETE);
        pg_sys::simple_heap_delete(rel, &mut tid);
    }
}

/// The commit-time violation of `error`: like the row trigger's, naming the concurrent row.
unsafe fn raise_violation(rel: pg_sys::Relation, pending: &Pending, fp: u64, conflict: &Conflict, note: &str) -> ! {
    unsafe {
        let existing_key = key_if_visible(rel, conflict.existing);
        raise_near_duplicate(
            rel,
            &pending.trigger_name,
            &pending.column,
            pending.k,
            fp,
            conflict.distance,
            existing_key.as_deref(),
            pending.verify.as_ref().zip(conflict.similarity),
            note,
        )
    }
}
