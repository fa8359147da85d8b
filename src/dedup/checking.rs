//! Which transactions have begun their commit-time check: a transaction marks itself before its
//! first lookup at commit (or PREPARE) and stays marked until it ends, with a lock on a tag of its
//! own (an advisory lock tag of this database and its top-level xid, kind `MARK`; `pg_locks` shows
//! it as an `advisory` lock with `objid` the xid and `objsubid` 21320).
//!
//! Why: a row of a transaction still in progress that has not begun its check is no conflict yet.
//! That transaction will look up its rows after now, and so will find ours (written before we
//! looked). Without this, a big COPY lost to every small batch that was older than it and still
//! in progress when the COPY committed, and a COPY beside a steady flow of such batches could be
//! retried for ever (`crate::dedup`, "How the constraint stays right under concurrency").
//!
//! The order that makes it right: the mark is taken before the check's first lookup, and a
//! writer's mark is tested after this transaction's rows are stored. If the test finds no mark,
//! the writer's lookups begin after the test, so they find our rows.

use pgrx::pg_sys;

/// `locktag_field4` of the mark: advisory locks taken from SQL use 1 and 2.
const MARK: u16 = 0x5348;

fn tag(top_xid: pg_sys::TransactionId) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: top_xid.into_inner(),
        locktag_field3: 0,
        locktag_field4: MARK,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// Marks this transaction as checking, until it ends (a prepared transaction keeps the mark until
/// COMMIT PREPARED or ROLLBACK PREPARED). A transaction that wrote nothing has nothing to mark.
///
/// # Safety
///
/// In a transaction, before the check's first lookup.
pub(super) unsafe fn mark_this_transaction() {
    unsafe {
        let xid = pg_sys::GetTopTransactionIdIfAny();
        if xid != pg_sys::InvalidTransactionId {
            // (Waits only while another backend tests the mark, which it releases at once.)
            pg_sys::LockAcquire(&tag(xid), pg_sys::ExclusiveLock as i32, false, false);
        }
    }
}

/// Where the transaction that wrote a row with xid `writer` (a subtransaction's xid or its
/// top-level one), in progress when the row was read, stands now. Never waits.
pub(super) enum Writer {
    /// It has begun its check (or PREPAREd): the rule of ages decides (`super::recheck`).
    Checking,
    /// Still in progress and not yet checking: its row is no conflict yet (see above).
    NotYetChecking,
    /// It has ended since the row was read: the row is to be read again.
    Ended,
}

/// # Safety
///
/// In a transaction; `writer` was in progress when its row was read.
pub(super) unsafe fn writer(writer: pg_sys::TransactionId) -> Writer {
    unsafe {
        let tag = tag(pg_sys::SubTransGetTopmostTransaction(writer));
        let share = pg_sys::ShareLock as i32;
        if pg_sys::LockAcquire(&tag, share, false, true) == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL {
            return Writer::Checking;
        }
        pg_sys::LockRelease(&tag, share, false);
        // In progress after the test without its mark: it had not marked itself at the test (a mark
        // is held to the end). Else it may have checked, missed our rows and committed since.
        if pg_sys::TransactionIdIsInProgress(writer) {
            Writer::NotYetChecking
        } else {
            Writer::Ended
        }
    }
}
