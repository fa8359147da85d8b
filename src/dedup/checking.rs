//! Which writers in progress have begun their check at commit: a transaction that remembered
//! rows for the check takes a lock on a tag of its own, *checking*, at COMMIT (or PREPARE) before
//! the check's first lookup, and holds it until it ends (a prepared transaction keeps it until
//! COMMIT PREPARED or ROLLBACK PREPARED). The tag is of an advisory kind that SQL cannot take:
//! `pg_locks` shows it as an `advisory` lock with `classid` the top-level xid and `objsubid` 21320.
//!
//! Why: a row of a transaction still in progress that has not begun its check is no conflict yet.
//! Its check begins after now, and will find ours (stored before we looked), marked *checking*.
//! Without this, a big COPY lost to every small batch that was older than it and still in
//! progress when the COPY committed, and a COPY beside a steady flow of such batches was retried
//! for ever.
//!
//! The order that makes it right: *checking* is taken before the check's first lookup, and a
//! writer's *checking* is tested after this transaction's rows are stored and its own *checking*
//! is taken. A writer found in progress after a test that did not find its *checking* had not
//! begun its check at that test.
//!
//! What it assumes: the writer's rows are checked by it at commit. Rows written while the
//! constraint's trigger does not fire (disabled, `session_replication_role = replica`, a logical
//! replication apply worker, a hand-made trigger with `WHEN` or `UPDATE OF`) are not, nor are those
//! of a backend still running an older simhash library: a concurrent check no longer waits for such
//! rows (`docs/reference.md`). With `skip` checked at each row, writers are not passed over at all
//! (`super::recheck::recheck` says why).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::pg_sys;

/// `locktag_field4` of *checking*: advisory locks taken from SQL use 1 and 2.
const CHECKING: u16 = 0x5348;

thread_local! {
    /// Whether this transaction holds its *checking*.
    static MARKED: Cell<bool> = const { Cell::new(false) };
    /// What the tests of this transaction's check found, by writer's top-level xid: checking (or
    /// not yet checking) at a test stays so for the rest of the check.
    static FOUND: RefCell<HashMap<u32, bool>> = RefCell::new(HashMap::new());
}

fn tag(top_xid: pg_sys::TransactionId) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
        locktag_field2: top_xid.into_inner(),
        locktag_field3: 0,
        locktag_field4: CHECKING,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// Takes `tag` exclusively for the rest of the transaction. Another backend holds it at most for
/// the moment of a test: retried rather than waited for in the lock manager (so `lock_timeout`
/// does not apply).
unsafe fn hold(tag: &pg_sys::LOCKTAG) {
    unsafe {
        // The transaction's own resource owner: a subtransaction's abort must not release it.
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        while pg_sys::LockAcquire(tag, pg_sys::ExclusiveLock as i32, false, true)
            == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
        {
            pg_sys::CurrentResourceOwner = owner;
            pg_sys::check_for_interrupts!();
            pg_sys::pg_usleep(100);
            pg_sys::CurrentResourceOwner = pg_sys::TopTransactionResourceOwner;
        }
        pg_sys::CurrentResourceOwner = owner;
    }
}

/// Whether another transaction holds `tag`. Never waits.
unsafe fn held(tag: &pg_sys::LOCKTAG) -> bool {
    unsafe {
        let share = pg_sys::ShareLock as i32;
        if pg_sys::LockAcquire(tag, share, false, true) == pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL {
            return true;
        }
        pg_sys::LockRelease(tag, share, false);
        false
    }
}

/// Marks this transaction *checking* until it ends; called at COMMIT or PREPARE before the check's
/// first lookup, when there is something to check.
///
/// # Safety
///
/// At pre-commit or pre-prepare.
pub(super) unsafe fn begin() {
    FOUND.with(|f| f.borrow_mut().clear());
    if MARKED.get() {
        return;
    }
    unsafe {
        let xid = pg_sys::GetTopTransactionIdIfAny();
        if xid != pg_sys::InvalidTransactionId {
            hold(&tag(xid));
            MARKED.set(true);
        }
    }
}

/// Forgets this transaction's mark and findings; called when it ends.
pub(super) fn forget() {
    MARKED.set(false);
    // (A new map: a big check's capacity is not kept for the life of the backend.)
    FOUND.with(|f| *f.borrow_mut() = HashMap::new());
}

/// Where the transaction that wrote a row with xid `writer` (a subtransaction's xid or its
/// top-level one), in progress when the row was read, stands now. Never waits.
pub(super) enum Writer {
    /// It is checking (or PREPAREd): the rule of ages decides (`super::recheck`).
    Checking,
    /// Still in progress, and its check will begin later: its row is no conflict yet.
    NotYetChecking,
    /// It has ended since the row was read: the row is to be read again.
    Ended,
}

/// # Safety
///
/// In this transaction's check (after [`begin`]); `writer` was in progress when its row was read.
pub(super) unsafe fn writer(writer: pg_sys::TransactionId) -> Writer {
    unsafe {
        // (By top-level transaction: one test serves the rows of all its subtransactions.)
        let top = pg_sys::SubTransGetTopmostTransaction(writer);
        let found = FOUND.with(|f| f.borrow().get(&top.into_inner()).copied());
        let checking = match found {
            Some(checking) => checking,
            None => held(&tag(top)),
        };
        // In progress after the test: if the test did not find its *checking*, it had not begun
        // (a mark is held to the end). Else it may have checked, missed our rows and committed
        // since, or (found checking) have ended: the row is read again.
        if !pg_sys::TransactionIdIsInProgress(writer) {
            return Writer::Ended;
        }
        if found.is_none() {
            let remembered = FOUND.with(|f| {
                let mut f = f.borrow_mut();
                f.try_reserve(1).is_ok() && f.insert(top.into_inner(), checking).is_none()
            });
            if !remembered {
                crate::memory::constraint_out_of_memory("the writers the near-duplicate check at commit met");
            }
        }
        if checking {
            Writer::Checking
        } else {
            Writer::NotYetChecking
        }
    }
}
