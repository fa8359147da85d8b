//! The delete of a row that `skip` refuses at commit (the recheck, and the deferred check): when
//! it may be done quietly, and the delete itself.

use pgrx::pg_sys;

/// Whether the row `skip` would delete at commit can be deleted quietly: the table has no DELETE
/// triggers (foreign keys that reference it are such triggers) and no rules, which a delete at
/// commit, after the deferred triggers ran, would bypass.
pub(super) unsafe fn quiet_delete_allowed(rel: pg_sys::Relation) -> bool {
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
pub(super) unsafe fn delete_at_commit(rel: pg_sys::Relation, mut tid: pg_sys::ItemPointerData) {
    unsafe {
        pg_sys::CheckCmdReplicaIdentity(rel, pg_sys::CmdType::CMD_DELETE);
        pg_sys::simple_heap_delete(rel, &mut tid);
    }
}
