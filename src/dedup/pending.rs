//! What the row trigger let through in this transaction, per (table, trigger, settings): the
//! fingerprints the commit-time recheck looks up again, or with the deferred check every row
//! written, in order. Emptied when the transaction ends.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use super::config::Verify;
use super::mixed_checks::refuse_mixed_checks;
use super::value::{Code, Fingerprint};
use pgrx::pg_sys::{self, Oid};

/// The fingerprints (or codes) one trigger let through in the current transaction.
pub(super) struct Pending<F = u64> {
    pub schema: Oid,
    pub attnum: i32,
    pub column: String,
    pub k: u32,
    /// `skip` (delete the row) rather than `error`.
    pub skip: bool,
    pub trigger_name: String,
    /// With verification, a row within k is a conflict only if its text is similar enough.
    pub verify: Option<Verify>,
    pub fingerprints: Vec<F>,
    /// The fingerprints written by an UPDATE of a row that may be older than this transaction:
    /// `skip` must not delete such a row at commit (deleting its new version deletes the row), so
    /// a conflict there fails as with `error`.
    pub updated_older_rows: HashSet<F>,
    /// The deferred check (`simhash_add_dedup(..., deferred => true)`): every row
    /// version written, all checked at commit (`fingerprints` is then empty).
    pub deferred: bool,
    pub rows: WrittenRows<F>,
}

/// The row versions the deferred check remembered, in the order written.
pub(super) struct WrittenRows<F = u64> {
    pub list: Vec<WrittenRow<F>>,
    /// Where each remembered version is in `list`: made at the first UPDATE of a remembered row
    /// (a load that only inserts never needs it), then kept up to date.
    positions: Option<HashMap<Identity, usize>>,
    /// Whether some version took the place of the one it updated ([`WrittenRow::seq`]), so that
    /// `list` is no longer in order of `seq`.
    pub reordered: bool,
    /// The versions not remembered (a NULL value, or with verification a NULL text) that an UPDATE
    /// of a row this transaction wrote made, and whether that row's line may begin before the
    /// transaction ([`WrittenRow::updates_older_row`]), for the next version of the line.
    unchecked: HashMap<Identity, bool>,
}

impl<F> Default for WrittenRows<F> {
    fn default() -> Self {
        WrittenRows { list: Vec::new(), positions: None, reordered: false, unchecked: HashMap::new() }
    }
}

/// A row version written by this transaction under the deferred check.
#[derive(Clone)]
pub(super) struct WrittenRow<F = u64> {
    pub tid: pg_sys::ItemPointerData,
    pub fp: F,
    /// Written by an UPDATE of a row that may be older than this transaction (see
    /// `Pending::updated_older_rows`).
    pub updates_older_row: bool,
    /// The (sub)transaction that wrote it: with the TID, which row version it is (a TID freed by a
    /// rolled-back subtransaction can be reused, by another one).
    pub xmin: pg_sys::TransactionId,
    /// The table's file it was written to: a rewrite since (ALTER TABLE, CLUSTER, TRUNCATE) moved
    /// the rows, so their TIDs no longer say where they are.
    pub relfilenode: Oid,
    /// Where the row comes in the order the check at each row would have judged it: the place
    /// of the version it updated when the UPDATE kept the fingerprint (and with verification the
    /// text: that check would not have looked at it again), else the next place (set by [`remember_row`]). The old and the new
    /// version then share a place; at most one of them is stored at commit.
    pub seq: u32,
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
    pub(super) fn remembered<F>(rows: &[WrittenRow<F>]) -> Option<Ours> {
        let mut identities = Vec::new();
        identities.try_reserve_exact(rows.len()).ok()?;
        identities.extend(rows.iter().map(|r| identity(r.tid, r.xmin)));
        // (interruptible: a transaction of ten million rows takes about a second to sort)
        crate::memory::sort_interruptibly_by(&mut identities, 1 << 20, &<Identity as Ord>::cmp);
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

/// The pending values of one trigger, of either kind.
pub(super) enum AnyPending {
    Simhash(Pending<u64>),
    Code(Pending<Code>),
}

impl AnyPending {
    pub(super) fn deferred(&self) -> bool {
        match self {
            AnyPending::Simhash(p) => p.deferred,
            AnyPending::Code(p) => p.deferred,
        }
    }

    pub(super) fn skip(&self) -> bool {
        match self {
            AnyPending::Simhash(p) => p.skip,
            AnyPending::Code(p) => p.skip,
        }
    }

    pub(super) fn trigger_name(&self) -> String {
        match self {
            AnyPending::Simhash(p) => p.trigger_name.clone(),
            AnyPending::Code(p) => p.trigger_name.clone(),
        }
    }

    pub(super) fn any_current(&self) -> bool {
        match self {
            AnyPending::Simhash(p) => p.rows.any_current(),
            AnyPending::Code(p) => p.rows.any_current(),
        }
    }
}

/// The kinds of value a [`Pending`] holds, each in its variant of [`AnyPending`].
pub(super) trait Pendable: Fingerprint + Sized {
    fn wrap(pending: Pending<Self>) -> AnyPending;
    fn unwrap_mut(pending: &mut AnyPending) -> &mut Pending<Self>;
}

impl Pendable for u64 {
    fn wrap(pending: Pending<u64>) -> AnyPending {
        AnyPending::Simhash(pending)
    }

    fn unwrap_mut(pending: &mut AnyPending) -> &mut Pending<u64> {
        match pending {
            AnyPending::Simhash(p) => p,
            AnyPending::Code(_) => unreachable!("the settings key names the column, whose kind is fixed"),
        }
    }
}

impl Pendable for Code {
    fn wrap(pending: Pending<Code>) -> AnyPending {
        AnyPending::Code(pending)
    }

    fn unwrap_mut(pending: &mut AnyPending) -> &mut Pending<Code> {
        match pending {
            AnyPending::Code(p) => p,
            AnyPending::Simhash(_) => unreachable!("the settings key names the column, whose kind is fixed"),
        }
    }
}

thread_local! {
    /// Per (table, trigger, settings); emptied when the transaction ends.
    pub(super) static PENDING: RefCell<HashMap<(Oid, Oid, String), AnyPending>> = RefCell::new(HashMap::new());
}

/// Runs `add` on the entry of `trigger_oid` of `relid` for the settings `config` (made by `make`
/// at its first row), after refusing a mix of checks on the table (`skip`: the deferred check's
/// action, `None` for the check at each row; see `refuse_mixed_checks`). `add` returns `None` when
/// memory runs out: then an ERROR 53200.
fn with_entry<F: Pendable>(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    skip: Option<bool>,
    make: impl FnOnce() -> Pending<F>,
    add: impl FnOnce(&mut Pending<F>) -> Option<()>,
) {
    refuse_mixed_checks(relid, trigger_oid, &config, skip);
    let added = PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        pending.try_reserve(1).ok()?;
        add(F::unwrap_mut(pending.entry((relid, trigger_oid, config)).or_insert_with(|| F::wrap(make()))))
    });
    if added.is_none() {
        let check = if skip.is_some() { "deferred near-duplicate check" } else { "near-duplicate recheck at commit" };
        crate::memory::constraint_out_of_memory(&format!("the rows the {check} remembers"));
    }
}

/// Remembers that `fp` was written into `relid` under `trigger_oid`, to be rechecked at commit.
/// `config` names the trigger's settings: one entry per (table, trigger, settings).
/// `updates_older_row`: written by an UPDATE of a row that may be older than this transaction.
pub(super) fn remember<F: Pendable>(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    fp: F,
    updates_older_row: bool,
    make: impl FnOnce() -> Pending<F>,
) {
    with_entry(relid, trigger_oid, config, None, make, |entry| {
        if updates_older_row {
            entry.updated_older_rows.try_reserve(1).ok()?;
            entry.updated_older_rows.insert(fp.clone());
        }
        crate::memory::push(&mut entry.fingerprints, fp)
    });
}

/// Remembers, for the deferred check, the row version `row` written into `relid` under
/// `trigger_oid` (see [`remember`]), for a check that skips rows (`skip`) or not. `replaces`: the
/// version this transaction wrote that an UPDATE replaced with `row`, and whether the UPDATE kept
/// what the check compares (the fingerprint, and with verification the text); if that version was
/// remembered, `row` is judged in its place when the UPDATE kept it, and updates a row older than
/// the transaction if that one did.
pub(super) fn remember_row<F: Pendable>(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    skip: bool,
    row: WrittenRow<F>,
    replaces: Option<(Identity, bool)>,
    make: impl FnOnce() -> Pending<F>,
) {
    with_entry(relid, trigger_oid, config, Some(skip), make, |entry| entry.rows.push(row, replaces));
}

/// Notes, for the deferred check, the version `version` that the check does not remember (see
/// `WrittenRows::unchecked`), written into `relid` under `trigger_oid` (see [`remember_row`]) by
/// an UPDATE of the version `replaces.0` this transaction wrote, whose line may begin before the
/// transaction (`replaces.1`) unless the versions before it say otherwise.
pub(super) fn remember_unchecked_version<F: Pendable>(
    relid: Oid,
    trigger_oid: Oid,
    config: String,
    skip: bool,
    version: Identity,
    replaces: (Identity, bool),
    make: impl FnOnce() -> Pending<F>,
) {
    with_entry(relid, trigger_oid, config, Some(skip), make, |entry| {
        let rows = &mut entry.rows;
        let older = rows.line_begins_before(replaces.0)?.unwrap_or(replaces.1);
        rows.unchecked.try_reserve(1).ok()?;
        rows.unchecked.insert(version, older);
        Some(())
    });
}

impl<F> WrittenRows<F> {
    /// Whether the line of the version `old` (remembered, or noted unchecked) may begin before the
    /// transaction: `Some(None)` when neither; `None` when memory runs out.
    fn line_begins_before(&mut self, old: Identity) -> Option<Option<bool>> {
        if self.positions.is_none() {
            let mut positions = HashMap::new();
            positions.try_reserve(self.list.len() + 1).ok()?;
            positions.extend(self.list.iter().enumerate().map(|(i, r)| (identity(r.tid, r.xmin), i)));
            self.positions = Some(positions);
        }
        let remembered = self.positions.as_ref().and_then(|p| p.get(&old)).map(|&i| self.list[i].updates_older_row);
        Some(remembered.or_else(|| self.unchecked.get(&old).copied()))
    }

    /// Appends `row`, placed as [`remember_row`] says; `None` when memory runs out.
    fn push(&mut self, mut row: WrittenRow<F>, replaces: Option<(Identity, bool)>) -> Option<()> {
        // (Past u32::MAX rows, ties: the stable sort then keeps them in the order written.)
        row.seq = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        if let Some((old, unchanged)) = replaces {
            if let Some(older) = self.line_begins_before(old)? {
                row.updates_older_row = older;
            }
            if let Some(&i) = self.positions.as_ref().and_then(|p| p.get(&old)) {
                if unchanged {
                    row.seq = self.list[i].seq;
                    self.reordered = true;
                }
            }
        }
        self.list.try_reserve(1).ok()?;
        if let Some(positions) = &mut self.positions {
            positions.try_reserve(1).ok()?;
            positions.insert(identity(row.tid, row.xmin), self.list.len());
        }
        self.list.push(row);
        Some(())
    }

    /// Whether a version written by a (sub)transaction that is still part of this one is here.
    fn any_current(&self) -> bool {
        self.list.iter().any(|r| unsafe { pg_sys::TransactionIdIsCurrentTransactionId(r.xmin) })
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
