//! The deferred check (`simhash_add_dedup(..., deferred => true)`): the row trigger, fired AFTER
//! the row is written, only remembers the row version ([`remember_written_row`], into
//! `pending::WrittenRows`); when the transaction commits, its rows are looked up together
//! against the rows of other transactions (`recheck::suspects` and `recheck::recheck`, with the
//! protocol of `crate::dedup`), then judged in the order written against the rows the transaction
//! kept before each (`simhash_core::dedup::first_come`).
//!
//! With verification (`verify=<text column>`) a row within k is a near-duplicate only if its text
//! is similar enough, as for the check at each row: `recheck` compares the texts of the rows of
//! other transactions with each own row's (so a row of another transaction is a near-duplicate of
//! some of the transaction's rows with one fingerprint and not of others), and `first_come` asks
//! [`OwnTexts`] about each pair of the transaction's own rows within k.

use pgrx::pg_sys::{self, Oid};
use pgrx::prelude::*;

use super::config::{Action, Config};
use super::dirty::{own_row, stored_row, RecheckIndex};
use super::messages::{column_datum, key_if_visible, raise_near_duplicate};
use super::near_others::{NearOther, NearOthers};
use super::pending::{
    identity, remember_row, remember_unchecked_version, updates_older_row, Ours, Pendable, Pending, WrittenRow,
};
use super::recheck::{delete_at_commit, quiet_delete_allowed, recheck, suspects};
use super::texts::same_text;
use super::texts::OwnTexts;
use super::trigger::warn_once_without_indexes;
use crate::memory::vec_with_room;
use crate::pg::errors::raise;
use crate::pg::names::{relation_name, trigger_name};

/// The deferred check's row trigger (fired AFTER the row is written): remembers the row version
/// and its fingerprint, checked with all the transaction's others at commit
/// ([`check_written_rows`]).
///
/// # Safety
///
/// In a trigger call: `rel`, `trigger`, `row` and `old_row` are the call's.
pub(super) unsafe fn remember_written_row<F: Pendable>(
    rel: pg_sys::Relation,
    trigger: *const pg_sys::Trigger,
    schema: Oid,
    config: &Config,
    row: pg_sys::HeapTuple,
    old_row: Option<pg_sys::HeapTuple>,
) {
    unsafe {
        if config.action == Action::Report {
            // (Its report would be an INSERT at commit, after PostgreSQL has fired the
            // transaction's deferred triggers and runs no user code any more: deferred triggers
            // that the INSERT queued on the report table would never fire.)
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "the deferred near-duplicate check of trigger \"{}\" supports actions 'error' and 'skip'",
                    trigger_name(trigger)
                ),
                None,
                Some("Use simhash_add_dedup(..., deferred => false) for action 'report'.".into()),
            );
        }
        if (*(*rel).rd_rel).relam != pg_sys::HEAP_TABLE_AM_OID {
            // (It reads and deletes the rows at commit by their TIDs: heap tables only.)
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "the deferred near-duplicate check of trigger \"{}\" works only on tables of the heap access method",
                    trigger_name(trigger)
                ),
                None,
                Some("Use simhash_add_dedup(..., deferred => false).".into()),
            );
        }
        let tupdesc = (*rel).rd_att;
        // (Stored generated columns are computed by now.) A NULL fingerprint, or with verification
        // a NULL text, is never a near-duplicate: such a row counts only as a stored row.
        let value = |row: pg_sys::HeapTuple| column_datum(row, tupdesc, config.attnum).map(|d| F::of_datum(d));
        let key = format!("{}/{}/{:?}/{:?}/deferred", config.attnum, config.k, config.action, config.verify);
        let skip = config.action == Action::Skip;
        let make = || Pending {
            schema,
            attnum: config.attnum,
            column: config.column.clone(),
            k: config.k,
            skip,
            trigger_name: trigger_name(trigger),
            verify: config.verify.clone(),
            fingerprints: Vec::new(),
            updated_older_rows: Default::default(),
            deferred: true,
            rows: Default::default(),
        };
        let text = config.verify.as_ref().map(|verify| column_datum(row, tupdesc, verify.attnum));
        let (Some(fp), None | Some(Some(_))) = (value(row), text) else {
            // Not checked; but a version that an UPDATE of a row this transaction wrote makes
            // unchecked carries on that row's line: a later UPDATE that moves it next to a
            // near-duplicate must still know whether the line began before the transaction.
            if let Some(old_row) = old_row.filter(|&old| super::pending::written_by_this_transaction(old)) {
                let old_header = (*old_row).t_data;
                remember_unchecked_version(
                    (*rel).rd_id,
                    (*trigger).tgoid,
                    key,
                    skip,
                    identity((*row).t_self, (*(*row).t_data).t_choice.t_heap.t_xmin),
                    (identity((*old_row).t_self, (*old_header).t_choice.t_heap.t_xmin), updates_older_row(old_row)),
                    make,
                );
            }
            return;
        };
        let text = text.flatten();
        let header = (*row).t_data;
        let frozen = pg_sys::HEAP_XMIN_FROZEN as u16;
        if (*header).t_infomask & frozen == frozen {
            // (COPY ... FREEZE: the row looks committed long ago, not written by this transaction.)
            raise(
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                format!(
                    "the deferred near-duplicate check of trigger \"{}\" cannot check rows written frozen (COPY FREEZE)",
                    trigger_name(trigger)
                ),
                None,
                Some("Load without FREEZE, or use simhash_add_dedup(..., deferred => false).".into()),
            );
        }
        let (updates_older_row, replaces) = match old_row {
            None => (false, None),
            Some(old_row) => {
                // A row this transaction did not write, whose fingerprint (and with verification
                // text) did not change: nothing to check. A new version of a row this transaction
                // wrote replaces that one (which is then gone at commit), so it is taken even then,
                // in that one's place.
                let unchanged = value(old_row).as_ref() == Some(&fp)
                    && match (&config.verify, text) {
                        (Some(verify), Some(new)) => same_text(old_row, tupdesc, verify.attnum, new),
                        _ => true,
                    };
                let ours = super::pending::written_by_this_transaction(old_row);
                if !ours && unchanged {
                    return;
                }
                let old_header = (*old_row).t_data;
                let replaces =
                    ours.then(|| (identity((*old_row).t_self, (*old_header).t_choice.t_heap.t_xmin), unchanged));
                (updates_older_row(old_row), replaces)
            }
        };
        let relid = (*rel).rd_id;
        let trigger_oid = (*trigger).tgoid;
        warn_once_without_indexes(trigger_oid, rel, config, schema);
        let written = WrittenRow {
            tid: (*row).t_self,
            fp,
            updates_older_row,
            xmin: (*header).t_choice.t_heap.t_xmin,
            relfilenode: (*(*rel).rd_rel).relfilenode,
            seq: 0,
        };
        remember_row(relid, trigger_oid, key, skip, written, replaces, make);
    }
}

/// The deferred check, at commit, of the rows a transaction wrote (in the order it wrote them):
/// each is judged as the row trigger would have judged it then, against the rows of other
/// transactions (committed, or waited for as in `recheck`) and the rows this transaction kept
/// before it (`simhash_core::dedup::first_come`). A refused row raises 23505 (`error`, and `skip`
/// for an updated older row) or is deleted (`skip`).
///
/// # Safety
///
/// At pre-commit (from `recheck::recheck_all`); `rel` is open with at least RowExclusiveLock and `index`
/// is an index of its column.
pub(super) unsafe fn check_written_rows<F: Pendable>(
    rel: pg_sys::Relation,
    index: Option<RecheckIndex>,
    pending: &mut Pending<F>,
) {
    use simhash_core::dedup::{NearSetError, Verdict};
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
            crate::memory::constraint_out_of_memory(&format!(
                "the deferred near-duplicate check of {n} rows of relation \"{}\"",
                relation_name(rel)
            ))
        };
        // A row version pruned away (written by a rolled-back subtransaction) can leave its TID to
        // a later row, and a TRUNCATE of a table created in this transaction empties it in place:
        // only the last row remembered at a TID (in the order remembered) can still be there.
        let mut reused = vec_with_room(n).unwrap_or_else(|| out_of_memory());
        reused.resize(n, false);
        {
            let mut order: Vec<usize> = vec_with_room(n).unwrap_or_else(|| out_of_memory());
            order.extend(0..n);
            let place = |&i: &usize| (pgrx::itemptr::item_pointer_get_both(rows[i].tid), i);
            crate::memory::sort_interruptibly_by(&mut order, 1 << 20, &|a, b| place(a).cmp(&place(b)));
            for pair in order.windows(2) {
                let tid = |i: usize| pgrx::itemptr::item_pointer_get_both(rows[i].tid);
                reused[pair[0]] = tid(pair[0]) == tid(pair[1]);
            }
        }
        if written.reordered {
            // Into the order the check at each row would have judged the rows in (a version that
            // an UPDATE keeping the fingerprint wrote takes the place of the one it replaced).
            let mut order: Vec<usize> = vec_with_room(n).unwrap_or_else(|| out_of_memory());
            order.extend(0..n);
            // (By place, then as written: a stable sort's scratch space for millions is not free.)
            crate::memory::sort_interruptibly_by(&mut order, 1 << 20, &|&a, &b| {
                (rows[a].seq, a).cmp(&(rows[b].seq, b))
            });
            let mut sorted = vec_with_room(n).unwrap_or_else(|| out_of_memory());
            let mut taken: Vec<Option<WrittenRow<F>>> = vec_with_room(n).unwrap_or_else(|| out_of_memory());
            taken.extend(rows.into_iter().map(Some));
            sorted.extend(order.iter().map(|&i| taken[i].take().expect("a permutation")));
            let mut sorted_reused = vec_with_room(n).unwrap_or_else(|| out_of_memory());
            sorted_reused.extend(order.iter().map(|&i| reused[i]));
            (rows, reused) = (sorted, sorted_reused);
        }
        let mut fingerprints = vec_with_room(n).unwrap_or_else(|| out_of_memory());
        for (i, row) in rows.iter().enumerate() {
            if i % 4096 == 4095 {
                pg_sys::check_for_interrupts!();
            }
            fingerprints.push(row.fp.clone());
        }
        super::value::sort_distinct(&mut fingerprints);
        // Texts, and codes, may be TOASTed: reading them needs a snapshot (any will do for TOAST).
        let verify = pending.verify.as_ref();
        let snapshot = verify.is_some() || F::VARLENA;
        if snapshot {
            pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        }
        // The rows with a near-duplicate committed by another transaction (after waiting for the
        // writers in progress), with that row: by fingerprint, or with verification by the row's
        // place (rows with one fingerprint may have texts that differ). Rows of this transaction
        // that the trigger did not remember (an UPDATE of an older row that kept its fingerprint
        // and text, rows written while the trigger was disabled) count as such rows too.
        let ours = Ours::remembered(&rows).unwrap_or_else(|| out_of_memory());
        // (The other row's TID, distance and similarity only, not a copy of it: a big load may
        // meet many.)
        let mut near_others = NearOthers::new(verify.is_some());
        for fp in suspects(rel, index, pending, fingerprints, &ours) {
            pg_sys::check_for_interrupts!();
            for conflict in recheck(rel, index, pending, &fp, &ours) {
                let other = NearOther {
                    tid: (*conflict.existing).t_self,
                    distance: conflict.distance,
                    similarity: conflict.similarity,
                };
                pg_sys::heap_freetuple(conflict.existing);
                near_others.insert(&fp, conflict.own_row, other).unwrap_or_else(|| out_of_memory());
            }
        }
        drop(ours);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(rel, pg_sys::ForkNumber::MAIN_FORKNUM);
        let mut texts = verify.map(|v| OwnTexts::new(rel, pending.attnum, v, blocks));
        let alive = &mut |i: usize| -> bool {
            !reused[i] && own_row(rel, pending.attnum, &rows[i], blocks).map(|t| pg_sys::heap_freetuple(t)).is_some()
        };
        let near_other = &mut |i: usize| {
            if i % 4096 == 4095 {
                pg_sys::check_for_interrupts!();
            }
            near_others.get(&rows[i].fp, rows[i].tid).is_some()
        };
        let similar = &mut |i: usize, j: usize| match &mut texts {
            None => true,
            Some(texts) => texts.similarity((i, &rows[i]), (j, &rows[j])).is_some(),
        };
        let verdicts = match F::first_come(n, &|i| &rows[i].fp, pending.k, near_other, alive, similar) {
            Ok(verdicts) => verdicts,
            Err(NearSetError::OutOfMemory) => out_of_memory(),
            Err(NearSetError::RadiusOutOfRange) => unreachable!("the trigger checked k"),
        };
        let mut skipped = 0u64;
        for (n, (row, verdict)) in rows.iter().zip(verdicts).enumerate() {
            if n % 4096 == 4095 {
                pg_sys::check_for_interrupts!();
            }
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
            let (existing, distance, similarity, note) = match earlier {
                None => {
                    let other = near_others.get(&row.fp, row.tid).expect("a row near another's");
                    // (The committed row may have been deleted since: then it goes unnamed.)
                    let existing = stored_row(rel, pending.attnum, other.tid, (&row.fp, other.distance), blocks);
                    (existing, other.distance, other.similarity, "The check ran at commit (deferred).")
                }
                Some(earlier) => (
                    // (`first_come` found the earlier row alive just now.)
                    own_row(rel, pending.attnum, earlier, blocks),
                    row.fp.distance(&earlier.fp),
                    texts.as_mut().and_then(|texts| texts.similarity((usize::MAX, row), (usize::MAX, earlier))),
                    "Both rows were written by this transaction; the check ran at commit (deferred).",
                ),
            };
            let existing_key = existing.and_then(|t| key_if_visible(rel, t));
            raise_near_duplicate(
                rel,
                &pending.trigger_name,
                &pending.column,
                pending.k,
                &row.fp.text(),
                distance,
                existing_key.as_deref(),
                verify.zip(similarity),
                note,
            );
        }
        if snapshot {
            pg_sys::PopActiveSnapshot();
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
