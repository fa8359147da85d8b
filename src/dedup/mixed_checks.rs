//! The refusal of a near-duplicate check that would take rows in an order it cannot keep, where
//! one of a table's checks in a transaction is deferred (see [`refuse_mixed_checks`]).

use pgrx::pg_sys::Oid;

use super::pending::PENDING;

/// Refuses a row that the check of trigger `trigger_oid` with settings `config` would take in an
/// order it cannot keep (`deferred`: `Some(skip)` for the deferred check, `None` for the check at
/// each row):
/// - 55000 when this transaction already wrote rows into `relid` under that trigger with other
///   settings, where one of them is the deferred check: the two would judge each other's rows in
///   no defined order. (Settings of the check at each row may change: each row is rechecked under
///   those that let it through.)
/// - 0A000 when another trigger's deferred check already took rows of `relid` in this transaction
///   and one of the two skips rows: each deferred check judges its rows on its own at commit, so
///   one would count rows that the other deletes.
///
/// Deferred rows all written by rolled-back subtransactions are forgotten first.
pub(super) fn refuse_mixed_checks(relid: Oid, trigger_oid: Oid, config: &str, deferred: Option<bool>) {
    let refusal = PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        if pending.contains_key(&(relid, trigger_oid, config.to_string())) {
            return None;
        }
        // (Only when a trigger takes its first row under new settings: not for every row.)
        pending.retain(|(r, _, _), entry| *r != relid || !entry.deferred() || entry.any_current());
        pending.iter().find_map(|((r, t, c), entry)| {
            if *r != relid {
                None
            } else if *t == trigger_oid && c != config && (deferred.is_some() || entry.deferred()) {
                Some((pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, entry.trigger_name()))
            } else if *t != trigger_oid && entry.deferred() && deferred.is_some_and(|skip| skip || entry.skip()) {
                Some((pgrx::PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, entry.trigger_name()))
            } else {
                None
            }
        })
    });
    match refusal {
        None => {}
        Some((code @ pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, trigger)) => {
            crate::pg::errors::raise(
                code,
                format!(
                    "the near-duplicate check of trigger \"{trigger}\" changed in this transaction after it checked \
                     rows under other settings, one of them deferred"
                ),
                None,
                Some("Change the check (simhash_add_dedup) in a transaction of its own.".into()),
            );
        }
        Some((code, trigger)) => crate::pg::errors::raise(
            code,
            format!(
                "a table can have no second deferred near-duplicate check where one of them skips rows: trigger \
                 \"{trigger}\" already checks rows of this table at commit"
            ),
            Some(
                "Each deferred check judges its rows on its own at commit, so one would count rows that the other \
                 deletes."
                    .into(),
            ),
            Some(
                "Check the other columns at each row (simhash_add_dedup(..., deferred => false)), or use action \
                 'error'."
                    .into(),
            ),
        ),
    }
}
