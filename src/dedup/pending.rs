//! What the row trigger let through in this transaction, per (table, trigger, settings): the
//! fingerprints the commit-time recheck looks up again. Emptied when the transaction ends.

use std::cell::RefCell;
use std::collections::HashMap;

use super::config::Verify;
use pgrx::pg_sys::Oid;

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
}

thread_local! {
    /// Per (table, trigger); emptied when the transaction ends.
    pub(super) static PENDING: RefCell<HashMap<(Oid, Oid, String), Pending>> = RefCell::new(HashMap::new());
}

/// Remembers that `fp` was written into `relid` under `trigger_oid`, to be rechecked at commit.
/// `config` names the trigger's settings: one entry per (table, trigger, settings).
pub(super) fn remember(relid: Oid, trigger_oid: Oid, config: String, fp: u64, make: impl FnOnce() -> Pending) {
    PENDING.with(|p| p.borrow_mut().entry((relid, trigger_oid, config)).or_insert_with(make).fingerprints.push(fp));
}

pub(super) fn forget_all() {
    PENDING.with(|p| p.borrow_mut().clear());
}
