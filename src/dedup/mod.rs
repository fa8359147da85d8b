//! The near-duplicate constraint: `simhash_dedup_trigger(column, k, action [, options])`, a
//! BEFORE ROW trigger that refuses (`error`), drops (`skip`) or records (`report`) a row whose
//! fingerprint is within `k` bits of a row already in the table (and, with `verify=<column>`, whose
//! text is similar enough), and `simhash_dedup_notice()`, the AFTER STATEMENT trigger that reports
//! how many rows `skip` dropped. `simhash_add_dedup()` in `sql/simhash.sql` creates both.
//!
//! A row, in order:
//!
//! 1. `trigger` reads the trigger's arguments (`config`) and the new row's fingerprint (and text).
//! 2. `lookup` looks for a stored row within k with one prepared SPI statement per trigger, which
//!    the planner rewrite turns into an index lookup (`crate::lookup`). It runs as the table's owner
//!    (like foreign-key checks: the inserting role needs no SELECT right, and row-level security
//!    does not hide rows from it) with sequential scans and JIT disabled, so it always takes the
//!    segment indexes when they exist, even while a long COPY grows the table past what the cached
//!    plan assumed.
//! 3. A match raises 23505 (`messages` names the rows), drops the row, or stores it and writes a
//!    line to the report table (`report`). A row let through is remembered (`pending`).
//!
//! How the constraint stays right under concurrency: the lookup uses the statement's snapshot,
//! which cannot see rows of concurrent transactions, so every fingerprint let through is looked
//! up again when the transaction commits (`recheck`, reading through `dirty`), with the protocol of
//! PostgreSQL's exclusion constraints (execIndexing.c):
//!
//! The row trigger looks with an MVCC snapshot, so it cannot see a near-duplicate that a concurrent
//! transaction has written but not committed. So it remembers each fingerprint it let through, and
//! when the transaction commits (or prepares) every one is looked up again, now that the row is
//! stored, with a *dirty* snapshot, which also sees rows of transactions still in progress:
//!
//! - a near-duplicate committed by another transaction: the row violates the constraint after all
//!   (`error` raises 23505; `skip` deletes the row and says so in a NOTICE, but an updated row
//!   fails with 23505, since deleting it would lose the row);
//! - a near-duplicate inserted by a transaction still in progress that has not begun its own check
//!   (it has not marked itself, `checking`): no conflict yet, that transaction's check will find
//!   ours (except with `skip` checked at each row, where it counts as in the next point: see
//!   `recheck::recheck`);
//! - a near-duplicate of a transaction that is checking (or PREPAREd), or a row being deleted or
//!   updated by a transaction in progress: if that transaction is younger, wait for it to end and
//!   look again (it may commit, abort, or itself be skipped); if it is older, fail at once with
//!   40001. Waits thus only go from older to younger transactions, so the check cannot deadlock
//!   with itself.
//!
//! Why this is enough: of two concurrent writers of near-duplicates, the one that begins its check
//! second finds the other's row (each stores its row and marks itself before it looks), either
//! committed or in progress and marked, so they cannot both commit their rows. Only true conflicts
//! wait or fail, and only against a writer that is checking: a big COPY beside other loaders holds
//! up only those with a near-duplicate of one of its rows, while it commits, and the loaders that
//! commit while it loads never make it fail.
//!
//! The lookups read the column's simhash index, or else its four segment B-trees, directly (an MVCC
//! plan cannot use a dirty snapshot).
//! A transaction that wrote many rows (a big COPY) instead compares the whole table with its
//! fingerprints in one pass, in memory, and looks up only those that have a near-duplicate; so does
//! one on a table without either. With a simhash index the fingerprints are first looked up all
//! together (each bucket read once for many of them), and only those with a near-duplicate of
//! another transaction are rechecked one by one.
//!
//! The deferred check (`simhash_add_dedup(..., deferred => true)`, `deferred`): the trigger is
//! fired AFTER the row is written and only remembers the row version (`pending::WrittenRow`); at
//! commit `deferred::check_written_rows` looks all of the transaction's rows up together against
//! the rows of others (the batched lookups above, with the same waits), then judges them in the
//! order written against the rows the transaction kept before each
//! (`simhash_core::dedup::first_come`). With verification, the texts of the rows within k decide,
//! as at each row (`texts` for pairs of the transaction's own rows).
//!
//! Columns of binary codes (`bit(n)`, `bit varying`): the same protocol, generic over the value
//! compared (`value::Fingerprint`: `u64` for `simhash64`, `value::Code` for codes, whose distance
//! raises 22026 for codes of unequal lengths). The row lookup is `simhash_hamming(col, $1) <= k`
//! (`col::"bit"` on `bit varying` or a domain, so that nothing declared for the column's own type
//! in the extension's schema is chosen instead), which the planner sends to the column's `simhash`
//! index of codes; the recheck reads that index directly (`crate::index::code_rows_within`), else
//! compares the whole table with the transaction's codes in one pass
//! (`simhash_core::code_dedup::CodeNearSet`). The deferred check judges a transaction's codes with
//! `simhash_core::code_dedup::first_come_codes`; the verified check compares texts alike.
//!
//! The transaction callbacks below run the recheck before commit and forget this transaction's
//! state after it ends.

use std::ffi::c_void;

use pgrx::pg_sys;
use pgrx::prelude::*;

mod checking;
mod code;
mod code_value;
mod config;
mod deferred;
mod dirty;
mod lookup;
mod messages;
mod mixed_checks;
mod near_others;
mod pending;
mod recheck;
mod report;
mod skip_at_commit;
mod texts;
mod trigger;
mod value;

/// Registers the end-of-transaction callbacks; called from `_PG_init`.
pub(crate) fn init() {
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_transaction_end), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subtransaction_end), std::ptr::null_mut());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut c_void) {
    use pg_sys::XactEvent::*;
    match event {
        // Errors are still allowed here: a violation found now aborts the transaction.
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => unsafe { recheck::recheck_all() },
        XACT_EVENT_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PREPARE
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_PARALLEL_ABORT => {
            trigger::forget_transaction();
            pending::forget_all();
            checking::forget();
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subtransaction_end(
    event: pg_sys::SubXactEvent::Type,
    _sub: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut c_void,
) {
    // The statement that was skipping rows failed; its count is not reported. (Fingerprints to
    // recheck are kept: the recheck ignores those whose rows are gone.)
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        trigger::forget_skipped();
    }
}
