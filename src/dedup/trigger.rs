//! The two trigger functions: `simhash_dedup_trigger`, the BEFORE ROW trigger that looks a new
//! row's fingerprint up and refuses, drops or reports it, and `simhash_dedup_notice`, the AFTER
//! STATEMENT trigger that says how many rows `skip` dropped; plus `simhash_indexed()`, which
//! `simhash_add_dedup` uses to warn about missing indexes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::CStr;

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

use super::config::{read_config, Action, Config};
use super::lookup::{connect, find_near_duplicate, finish, Found};
use super::messages::{column_datum, key_readable, raise_near_duplicate, row_key};
use super::pending::{remember, updates_older_row, Pendable, Pending};
use super::report::report;
use super::texts::same_text;
use super::value::{Code, Fingerprint, Kind};
use crate::pg::errors::{raise, warn};
use crate::pg::names::{
    namespace_name, qualified_name, quote_identifier, relation_name, require_relation, trigger_name,
};

/// Rows of one table dropped by `skip`.
struct Skipped {
    relation: String,
    trigger: String,
    count: u64,
}

/// What one transaction has done so far; cleared when it ends.
#[derive(Default)]
struct TransactionState {
    /// Rows dropped by `skip`, per table (its name, taken while it was open: the table may be
    /// dropped before the notice), not yet reported by `simhash_dedup_notice()`.
    skipped: HashMap<Oid, Skipped>,
}

/// Forgets what this transaction did (it ended).
pub(super) fn forget_transaction() {
    TRANSACTION.with(|t| *t.borrow_mut() = TransactionState::default());
}

/// Forgets the rows dropped so far (the statement that dropped them failed; they are not reported).
pub(super) fn forget_skipped() {
    TRANSACTION.with(|t| t.borrow_mut().skipped.clear());
}

thread_local! {
    static TRANSACTION: RefCell<TransactionState> = RefCell::new(TransactionState::default());
    /// Triggers whose missing indexes were already reported in this backend.
    static WARNED: RefCell<HashSet<Oid>> = RefCell::new(HashSet::new());
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_dedup_trigger() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_dedup_notice() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The row trigger. Returns the row to store, or a NULL pointer to drop it (`skip`).
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_dedup_trigger(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let data = trigger_data(fcinfo, "simhash_dedup_trigger");
        let event = (*data).tg_event;
        if event & pg_sys::TRIGGER_EVENT_ROW == 0 {
            protocol_violation("simhash_dedup_trigger: must be fired for each row");
        }
        let deferred = match event & pg_sys::TRIGGER_EVENT_TIMINGMASK {
            pg_sys::TRIGGER_EVENT_BEFORE => false,
            pg_sys::TRIGGER_EVENT_AFTER => true,
            _ => protocol_violation("simhash_dedup_trigger: must be fired BEFORE or AFTER the row is written"),
        };
        let op = event & pg_sys::TRIGGER_EVENT_OPMASK;
        let (row, old_row) = match op {
            pg_sys::TRIGGER_EVENT_INSERT => ((*data).tg_trigtuple, None),
            pg_sys::TRIGGER_EVENT_UPDATE => ((*data).tg_newtuple, Some((*data).tg_trigtuple)),
            _ => protocol_violation("simhash_dedup_trigger: must be fired for INSERT or UPDATE"),
        };
        let rel = (*data).tg_relation;
        let trigger = (*data).tg_trigger;
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let config = read_config(rel, trigger, schema);
        if deferred {
            // It must see every UPDATE of the rows it remembers, or it would take a row's old
            // version for a row of its own and the new one for a stored row.
            let every_update = (*trigger).tgtype as u32 & pg_sys::TRIGGER_TYPE_UPDATE != 0
                && (*trigger).tgnattr == 0
                && (*trigger).tgqual.is_null();
            if !every_update {
                raise(
                    PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                    format!(
                        "the deferred near-duplicate check of trigger \"{}\" must fire on every UPDATE (AFTER INSERT \
                         OR UPDATE, with no column list and no WHEN condition)",
                        trigger_name(trigger)
                    ),
                    None,
                    Some("Create it AFTER INSERT OR UPDATE, or use simhash_add_dedup(..., deferred => true).".into()),
                );
            }
            match config.kind {
                Kind::Simhash64 => {
                    super::deferred::remember_written_row::<u64>(rel, trigger, schema, &config, row, old_row)
                }
                Kind::Code => {
                    super::deferred::remember_written_row::<Code>(rel, trigger, schema, &config, row, old_row)
                }
            }
            return Datum::from(0usize); // (an AFTER trigger's result is ignored)
        }
        match config.kind {
            Kind::Simhash64 => check_row::<u64>(rel, trigger, schema, &config, row, old_row),
            Kind::Code => check_row::<Code>(rel, trigger, schema, &config, row, old_row),
        }
    }
}

/// The check at each row of `row` (and `old_row`, the row it updates), with values of type `F`:
/// the row to store, or a NULL pointer to drop it.
unsafe fn check_row<F: Pendable>(
    rel: pg_sys::Relation,
    trigger: *mut pg_sys::Trigger,
    schema: Oid,
    config: &Config,
    row: pg_sys::HeapTuple,
    old_row: Option<pg_sys::HeapTuple>,
) -> Datum {
    unsafe {
        let tupdesc = (*rel).rd_att;

        let Some(fp) = new_value::<F>(rel, row, config.attnum) else {
            return Datum::from(row); // a NULL fingerprint is never a near-duplicate
        };
        // With verification, the text decides; a row without text is never a near-duplicate.
        let text = match &config.verify {
            None => None,
            Some(verify) => match new_datum(rel, row, verify.attnum) {
                None => return Datum::from(row),
                text => text,
            },
        };
        if let Some(old_row) = old_row {
            // Neither the fingerprint nor (with verification) the text changed: nothing to check.
            let same_text = match (&config.verify, text) {
                (Some(verify), Some(new)) => same_text(old_row, tupdesc, verify.attnum, new),
                _ => true,
            };
            let old = column_datum(old_row, tupdesc, config.attnum).map(|d| F::of_datum(d));
            if old.as_ref() == Some(&fp) && same_text {
                return Datum::from(row);
            }
        }
        let relid = (*rel).rd_id;
        let trigger_oid = (*trigger).tgoid;
        warn_once_without_indexes(trigger_oid, rel, config, schema);

        connect();
        let exclude = old_row.map(|t| (*t).t_self).unwrap_or_default();
        let found = find_near_duplicate(trigger_oid, rel, config, schema, &fp, exclude, text);
        let Some((existing_key, distance, similarity)) = found else {
            finish();
            if config.action != Action::Report {
                // Keyed by the configuration too: a trigger replaced in the transaction (same OID)
                // rechecks each row under the settings that let it through.
                let key =
                    format!("{}/{:?}/{}/{:?}/{:?}", config.attnum, config.kind, config.k, config.action, config.verify);
                let older = old_row.is_some_and(|t| updates_older_row(t));
                remember(relid, trigger_oid, key, fp, older, || Pending {
                    schema,
                    attnum: config.attnum,
                    column: config.column.clone(),
                    k: config.k,
                    skip: config.action == Action::Skip,
                    trigger_name: trigger_name(trigger),
                    verify: config.verify.clone(),
                    fingerprints: Vec::new(),
                    updated_older_rows: Default::default(),
                    deferred: false,
                    rows: Default::default(),
                });
            }
            return Datum::from(row);
        };
        // The report (the owner's table, written as the owner) keeps the key; the error shows it
        // only to a role that may read the table.
        let reported_key = existing_key.clone();
        let existing_key = existing_key.filter(|_| key_readable(relid));
        let result = match config.action {
            Action::Error => None,
            Action::Skip => {
                TRANSACTION.with(|t| {
                    let mut t = t.borrow_mut();
                    let entry = t.skipped.entry(relid).or_insert_with(|| Skipped {
                        relation: relation_name(rel),
                        trigger: trigger_name(trigger),
                        count: 0,
                    });
                    entry.count += 1;
                });
                Some(Datum::from(0usize))
            }
            Action::Report => {
                let new_key = row_key(rel, row);
                let found = Found { existing_key: reported_key.as_deref(), distance, similarity };
                report(trigger_oid, trigger, relid, config, schema, fp.to_datum(), new_key, found);
                Some(Datum::from(row))
            }
        };
        finish();
        match result {
            Some(datum) => datum,
            None => raise_near_duplicate(
                rel,
                &trigger_name(trigger),
                &config.column,
                config.k,
                &fp.text(),
                distance as u32,
                existing_key.as_deref(),
                config.verify.as_ref().zip(similarity),
                "",
            ),
        }
    }
}

/// The statement trigger that reports, once per statement, how many rows `skip` dropped.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_dedup_notice(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let data = trigger_data(fcinfo, "simhash_dedup_notice");
        let event = (*data).tg_event;
        if event & pg_sys::TRIGGER_EVENT_ROW != 0
            || event & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_AFTER
        {
            protocol_violation("simhash_dedup_notice: must be fired AFTER each statement");
        }
        // All counts, not only this table's: rows routed to partitions are counted per partition.
        let skipped: Vec<Skipped> = TRANSACTION.with(|t| t.borrow_mut().skipped.drain().map(|(_, s)| s).collect());
        for Skipped { relation, trigger, count } in skipped {
            let rows = if count == 1 { "row" } else { "rows" };
            notice!(
                "simhash: skipped {count} near-duplicate {rows} of relation \"{relation}\" (trigger \"{trigger}\")"
            );
        }
        Datum::from(0usize)
    }
}

/// # Safety
///
/// `fcinfo` is the call's function call info.
pub(super) unsafe fn trigger_data(fcinfo: pg_sys::FunctionCallInfo, function: &str) -> *mut pg_sys::TriggerData {
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            protocol_violation(&format!("{function}: must be called as trigger"));
        }
        context as *mut pg_sys::TriggerData
    }
}

pub(super) fn protocol_violation(message: &str) -> ! {
    raise(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, message.into(), None, None)
}

/// The column's value in the row being written. BEFORE triggers run before stored generated columns
/// are computed (the row holds NULL there), so a generated fingerprint column
/// (`GENERATED ALWAYS AS (simhash(body)) STORED`) is computed here from its expression; `simhash()`
/// keeps its last result, so PostgreSQL's own computation right after costs nothing more.
unsafe fn new_value<F: Fingerprint>(rel: pg_sys::Relation, row: pg_sys::HeapTuple, attnum: i32) -> Option<F> {
    unsafe { new_datum(rel, row, attnum).map(|d| F::of_datum(d)) }
}

/// The column's datum in the row being written (computed from its expression for a stored
/// generated column, see `new_value`); `None` if NULL.
unsafe fn new_datum(rel: pg_sys::Relation, row: pg_sys::HeapTuple, attnum: i32) -> Option<Datum> {
    unsafe {
        let tupdesc = (*rel).rd_att;
        let attr = crate::pg::compat::tuple_desc_attr(tupdesc, attnum as usize - 1);
        if attr.attgenerated as u8 != pg_sys::ATTRIBUTE_GENERATED_STORED {
            return column_datum(row, tupdesc, attnum);
        }
        let expression = pg_sys::build_column_default(rel, attnum);
        if expression.is_null() {
            return None;
        }
        let estate = pg_sys::CreateExecutorState();
        let state = pg_sys::ExecPrepareExpr(expression.cast(), estate);
        let econtext = pg_sys::CreateExprContext(estate);
        let slot = pg_sys::MakeSingleTupleTableSlot(tupdesc, &pg_sys::TTSOpsHeapTuple);
        pg_sys::ExecStoreHeapTuple(row, slot, false);
        (*econtext).ecxt_scantuple = slot;
        let mut is_null = false;
        let mut value = pg_sys::ExecEvalExpr(state, econtext, &mut is_null);
        if !is_null && !attr.attbyval {
            // The value lives in the executor state's memory: copy it out before that is freed.
            value = if attr.attlen == -1 {
                Datum::from(pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr()))
            } else {
                let len = attr.attlen as usize;
                let copy = pg_sys::palloc(len);
                std::ptr::copy_nonoverlapping(value.cast_mut_ptr::<u8>(), copy.cast::<u8>(), len);
                Datum::from(copy)
            };
        }
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::FreeExecutorState(estate);
        (!is_null).then_some(value)
    }
}

/// Once per trigger and backend: a WARNING when the column has no index the lookup can use.
pub(super) unsafe fn warn_once_without_indexes(trigger_oid: Oid, rel: pg_sys::Relation, config: &Config, schema: Oid) {
    unsafe {
        if WARNED.with(|w| w.borrow().contains(&trigger_oid)) {
            return;
        }
        WARNED.with(|w| w.borrow_mut().insert(trigger_oid));
        if crate::lookup::catalog::has_lookup_indexes(schema, (*rel).rd_id, config.attnum as i16) {
            if super::dirty::RecheckIndex::of(schema, (*rel).rd_id, config.attnum).is_none() {
                warning!(
                    "the near-duplicate check of column \"{}\" of relation \"{}\" scans the table at every commit: \
                     its concurrency recheck needs a simhash index or the four segment B-trees, not the bands GIN index",
                    config.column,
                    relation_name(rel)
                );
            }
            return;
        }
        // (a column of codes takes one simhash index on the column itself)
        let statements = if config.kind == Kind::Code {
            let table = qualified_name((*rel).rd_id);
            Some(format!("CREATE INDEX ON {table} USING simhash ({});", quote_identifier(&config.column)))
        } else {
            None
        };
        let statements = statements
            .or_else(|| {
                Spi::get_one_with_args::<String>(
                    &format!(
                        "SELECT pg_catalog.string_agg(s, E';\\n') OPERATOR(pg_catalog.||) ';' \
                 FROM {}.simhash_index_statements($1, $2) s",
                        quote_identifier(&namespace_name(schema))
                    ),
                    &[(*rel).rd_id.into(), config.column.as_str().into()],
                )
                .ok()
                .flatten()
            })
            .unwrap_or_default();
        warn(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "column \"{}\" of relation \"{}\" has no simhash index: every row is checked with a sequential scan",
                config.column,
                relation_name(rel)
            ),
            None,
            Some(format!("Create the indexes:\n{statements}")),
        );
    }
}

/// `simhash_indexed(tbl, col)`: whether radius lookups on the column can use an index.
#[pg_extern(sql = false)]
fn simhash_indexed(tbl: Oid, col: &CStr, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // `col` is a `name`: a NUL-terminated NameData, read as a C string.
    unsafe {
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        require_relation(tbl);
        let attnum = pg_sys::get_attnum(tbl, col.as_ptr());
        let col = col.to_string_lossy();
        if attnum <= 0 {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{col}\" of relation \"{}\" does not exist", qualified_name(tbl)),
                None,
                None,
            );
        }
        crate::lookup::catalog::has_lookup_indexes_defined(schema, tbl, attnum)
    }
}
