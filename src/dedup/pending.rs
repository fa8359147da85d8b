//! What the row trigger let through in this transaction, per (table, trigger, settings): the
//! fingerprints the commit-time recheck looks up again, or with the deferred check every row
//! written, in order. Emptied when the transaction ends.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use super::config::Verify;
use pgrx::pg_sys::{self, Oid};

/// The fingerprints one trigger let through in the current transaction.
pub(super) struct Pending {
    pub schema: Oid,
    pub attnum: i32,
    pub column: String,
    pub k: u32,
    /// `skip` (delete the row) rather than `error`.
    pub skip: bool,
    pub trigger_name: String,
    /// With verification, a row within k is a conflict only if its text is similar enough.
    pub verify: Option<Verify>,
    pub fingerprints: Vec<u64>,
    /// The fingerprints written by an UPDATE of a row that may be older than this transaction:
    /// `skip` must not delete such a row at commit (deleting its new version deletes the row), so
    /// a conflict there fails as with `error`.
    pub updated_older_rows: HashSet<u64>,
    /// The deferred check (`simhash_add_dedup(..., deferred => true)`): every row version written,
    /// in the order written, all checked at commit (`fingerprints` is then empty).
    pub deferred: bool,
    pub rows: Vec<WrittenRow>,
}

/// A row version written by this transaction under the deferred check.
#[derive(Clone, Copy)]
pub(super) struct WrittenRow {
    pub tid: pg_sys::ItemPointerData,
    pub fp: u64,
    /// Written by an UPDATE of a row that may be older than this transaction (see
    /// `Pending::updated_older_rows`).
    pub updates_older_row: bool,
    /// The (sub)transaction that wrote it: with the TID, which row version it is (a TID freed by a
    /// rolled-back subtransaction can be reused, by another one).
    pub xmin: pg_sys::TransactionId,
    /// The table's file it was written to: a rewrite since (ALTER TABLE, CLUSTER, TRUNCATE) moved
    /// the rows, so their TIDs no longer say where they are.
    pub relfilenode: Oid,
}

/// A row version: its TID and the (sub)transaction that wrote it.
pub(super) type Identity = (pg_sys::BlockNumber, pg_sys::OffsetNumber, pg_sys::TransactionId);

/// Which stored rows the recheck counts as the transaction's own: those it wrote, or (the deferred
/// check) only the row versions the trigger remembered; any other row is checked against like a
/// row of another transaction.
pub(super) enum Ours {
    Written,
    /// Sorted.
    Remembered(Vec<Identity>),
}

impl Ours {
    /// The row versions of `rows`; `None` when memory runs out.
    pub(super) fn remembered(rows: &[WrittenRow]) -> Option<Ours> {
        let mut identities = Vec::new();
        identities.try_reserve_exact(rows.len()).ok()?;
        identities.extend(rows.iter().map(|r| identity(r.tid, r.xmin)));
        identities.sort_unstable();
        Some(Ours::Remembered(identities))
    }

    /// # Safety
    ///
    /// `tuple` is a valid heap tuple.
    pub(super) unsafe fn contains(&self, tuple: pg_sys::HeapTuple) -> bool {
        unsafe {
            written_by_this_transaction(tuple)
                && match self {
                    Ours::Written => true,
                    Ours::Remembered(rows) => rows
                        .binary_search(&identity((*tuple).t_self, (*(*tuple).t_data).t_choice.t_heap.t_xmin))
                        .is_ok(),
                }
        }
    }
}

pub(super) fn identity(tid: pg_sys::ItemPointerData, xmin: pg_sys::TransactionId) -> Identity {
    let (block, offset) = pgrx::itemptr::item_pointer_get_both(tid);
    (block, offset, xmin)
}

thread_local! {
    /// Per (table, trigger); emptied when the transaction ends.
    pub(super) static PENDING: RefCell<HashMap<(Oid, Oid, String), Pending>> = RefCell::new(HashMap::new());
}

/// Remembers that `fp` was written into `relid` under `trigger_oid`, to be rechecked at commit.
/// `config` names the trigger's settings: one entry per (table, trigger, settings).
/// `updates_older_row`: written by an UPDATE of a row that may be older than this transaction.
pub(super) fn remember(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    fp: u64,
    updates_older_row: bool,
    make: impl FnOnce() -> Pending,
) {
    refuse_mixed_checks(relid, trigger_oid, &config, false);
    PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        let entry = pending.entry((relid, trigger_oid, config)).or_insert_with(make);
        entry.fingerprints.push(fp);
        if updates_older_row {
            entry.updated_older_rows.insert(fp);
        }
    });
}

/// Remembers, for the deferred check, the row version `row` written into `relid` under
/// `trigger_oid` (see [`remember`]).
pub(super) fn remember_row(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    row: WrittenRow,
    make: impl FnOnce() -> Pending,
) {
    refuse_mixed_checks(relid, trigger_oid, &config, true);
    let grown = PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        let rows = &mut pending.entry((relid, trigger_oid, config)).or_insert_with(make).rows;
        let grown = rows.try_reserve(1).is_ok();
        if grown {
            rows.push(row);
        }
        grown
    });
    if !grown {
        crate::pg::errors::raise(
            pgrx::PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            "out of memory for the rows the deferred near-duplicate check remembers".into(),
            None,
            None,
        );
    }
}

/// An ERROR (55000) when this transaction already wrote rows into `relid` under `trigger_oid`
/// with other settings, where one of them is the deferred check (`deferred`: the new settings
/// are): the two would judge each other's rows in no defined order. (Settings of the check at each
/// row may change: each row is rechecked under those that let it through.)
fn refuse_mixed_checks(relid: Oid, trigger_oid: Oid, config: &str, deferred: bool) {
    let mixed = PENDING.with(|p| {
        let pending = p.borrow();
        if pending.contains_key(&(relid, trigger_oid, config.to_string())) {
            return None;
        }
        pending
            .iter()
            .find(|((r, t, c), entry)| *r == relid && *t == trigger_oid && c != config && (deferred || entry.deferred))
            .map(|(_, entry)| entry.trigger_name.clone())
    });
    if let Some(trigger) = mixed {
        crate::pg::errors::raise(
            pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the near-duplicate check of trigger \"{trigger}\" changed in this transaction after it checked rows \
                 under other settings, one of them deferred"
            ),
            None,
            Some("Change the check (simhash_add_dedup) in a transaction of its own.".into()),
        );
    }
}

/// Whether this transaction wrote `tuple`. A frozen tuple keeps its (old) raw xmin, which after
/// xid wraparound could equal one of ours: only a tuple whose inserter is not known committed can be.
///
/// # Safety
///
/// `tuple` is a valid heap tuple.
pub(super) unsafe fn written_by_this_transaction(tuple: pg_sys::HeapTuple) -> bool {
    unsafe {
        let header = (*tuple).t_data;
        (*header).t_infomask as u32 & pg_sys::HEAP_XMIN_COMMITTED == 0
            && pg_sys::TransactionIdIsCurrentTransactionId((*header).t_choice.t_heap.t_xmin)
    }
}

/// Whether an UPDATE of `old_row` updates a row that may be older than this transaction: one this
/// transaction did not insert, or a version this transaction wrote by updating another (whose
/// first version may be older; counted as older, so that `skip` never deletes it).
///
/// # Safety
///
/// `old_row` is a valid heap tuple.
pub(super) unsafe fn updates_older_row(old_row: pg_sys::HeapTuple) -> bool {
    unsafe {
        !written_by_this_transaction(old_row) || u32::from((*(*old_row).t_data).t_infomask) & pg_sys::HEAP_UPDATED != 0
    }
}

pub(super) fn forget_all() {
    PENDING.with(|p| p.borrow_mut().clear());
}
