//! The near-duplicate constraint: `simhash_dedup_trigger(column, k, action [, report_table])`, a
//! BEFORE ROW trigger that refuses (`error`), drops (`skip`) or records (`report`) a row whose
//! fingerprint is within `k` bits of a row already in the table, and `simhash_dedup_notice()`, the
//! AFTER STATEMENT trigger that reports how many rows `skip` dropped.
//!
//! Concurrency: the lookup uses the statement's snapshot, which cannot see rows of concurrent
//! transactions; the fingerprints of the rows let through are rechecked when the transaction commits,
//! with the protocol of exclusion constraints (`dedup_recheck`).
//!
//! The lookup runs as the table's owner (like foreign-key checks: the inserting role needs no SELECT
//! right, and row-level security does not hide rows from it) with sequential scans and JIT disabled,
//! so it always takes the segment indexes when they exist, even while a long COPY grows the table
//! past what the cached plan assumed.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_void, CStr, CString};

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;
use pgrx::IntoDatum;

use crate::errors::raise;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Error,
    Skip,
    Report,
}

/// A trigger's arguments, checked against its table.
struct Config {
    column: String,
    attnum: i32,
    k: u32,
    action: Action,
    report_table: Option<Oid>,
    verify: Option<Verify>,
}

/// `verify=<column>`, `min_similarity=<x>`, `n=<shingle length>`: a row within k is a
/// near-duplicate only if its text is at least that similar (`simhash_similarity`).
#[derive(Clone, Debug)]
pub(crate) struct Verify {
    pub column: String,
    pub attnum: i32,
    pub min_similarity: f64,
    pub n: usize,
}

impl Verify {
    /// The default threshold and shingle length of `simhash_add_dedup`.
    pub const DEFAULT_MIN_SIMILARITY: f64 = 0.7;
    pub const DEFAULT_N: usize = 3;

    /// Whether an overlap of two texts' shingle sets passes the threshold (as the SQL test
    /// `simhash_similarity(a, b, n) >= min_similarity` decides: NULL never passes).
    pub fn passes(&self, overlap: simhash_core::shingles::Overlap) -> Option<f64> {
        overlap.jaccard().filter(|&j| j >= self.min_similarity)
    }
}

/// Plans kept for the life of the backend, per trigger. The statement text is rebuilt on each call
/// (cheap) and a new plan is prepared only when it changes (a new primary key, a renamed table).
struct TriggerPlans {
    lookup_text: String,
    lookup: pg_sys::SPIPlanPtr,
    report: Option<(String, pg_sys::SPIPlanPtr)>,
}

/// What one transaction has done so far; cleared when it ends.
#[derive(Default)]
struct TransactionState {
    /// Rows dropped by `skip`, per table, not yet reported by `simhash_dedup_notice()`.
    skipped: HashMap<Oid, (String, u64)>,
}

thread_local! {
    static PLANS: RefCell<HashMap<Oid, TriggerPlans>> = RefCell::new(HashMap::new());
    static TRANSACTION: RefCell<TransactionState> = RefCell::new(TransactionState::default());
    /// Triggers whose missing indexes were already reported in this backend.
    static WARNED: RefCell<HashSet<Oid>> = RefCell::new(HashSet::new());
}

/// Registers the end-of-transaction callbacks; called from `_PG_init`.
pub fn init() {
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
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => unsafe { crate::dedup_recheck::recheck_all() },
        XACT_EVENT_COMMIT
        | XACT_EVENT_ABORT
        | XACT_EVENT_PREPARE
        | XACT_EVENT_PARALLEL_COMMIT
        | XACT_EVENT_PARALLEL_ABORT => {
            TRANSACTION.with(|t| *t.borrow_mut() = TransactionState::default());
            crate::dedup_recheck::forget_all();
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
        TRANSACTION.with(|t| t.borrow_mut().skipped.clear());
    }
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
        if event & pg_sys::TRIGGER_EVENT_TIMINGMASK != pg_sys::TRIGGER_EVENT_BEFORE {
            protocol_violation("simhash_dedup_trigger: must be fired BEFORE the row is written");
        }
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
        let tupdesc = (*rel).rd_att;

        let Some(fp) = new_value(rel, row, config.attnum) else {
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
            if column_value(old_row, tupdesc, config.attnum) == Some(fp) && same_text {
                return Datum::from(row);
            }
        }
        let relid = (*rel).rd_id;
        let trigger_oid = (*trigger).tgoid;
        warn_once_without_indexes(trigger_oid, rel, &config, schema);

        connect();
        let exclude = old_row.map(|t| (*t).t_self).unwrap_or_default();
        let found = find_near_duplicate(trigger_oid, rel, &config, schema, fp, exclude, text);
        let Some((existing_key, distance, similarity)) = found else {
            finish();
            if config.action != Action::Report {
                // Keyed by the configuration too: a trigger replaced in the transaction (same OID)
                // rechecks each row under the settings that let it through.
                let key = format!("{}/{}/{:?}/{:?}", config.attnum, config.k, config.action, config.verify);
                crate::dedup_recheck::remember(relid, trigger_oid, key, fp, || crate::dedup_recheck::Pending {
                    schema,
                    attnum: config.attnum,
                    column: config.column.clone(),
                    k: config.k,
                    skip: config.action == Action::Skip,
                    trigger_name: trigger_name(trigger),
                    verify: config.verify.clone(),
                    fingerprints: Vec::new(),
                });
            }
            return Datum::from(row);
        };
        let existing_key = key_readable(relid).then_some(existing_key);
        let result = match config.action {
            Action::Error => None,
            Action::Skip => {
                TRANSACTION.with(|t| {
                    let mut t = t.borrow_mut();
                    let entry = t.skipped.entry(relid).or_insert_with(|| (trigger_name(trigger), 0));
                    entry.1 += 1;
                });
                Some(Datum::from(0usize))
            }
            Action::Report => {
                let new_key = row_key(rel, row);
                let found = Found { existing_key: existing_key.as_deref(), distance, similarity };
                report(trigger_oid, trigger, relid, &config, schema, fp, new_key, found);
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
                fp,
                distance as u32,
                existing_key.as_deref(),
                config.verify.as_ref().zip(similarity),
                "",
            ),
        }
    }
}

/// The violation of `error` (23505), named like a constraint's: the stored row's key (when the role
/// may see it), the distance and the radius; `note` ends the DETAIL (empty, or a sentence).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn raise_near_duplicate(
    rel: pg_sys::Relation,
    trigger_name: &str,
    column: &str,
    k: u32,
    fp: u64,
    distance: u32,
    existing_key: Option<&str>,
    verified: Option<(&Verify, f64)>,
    note: &str,
) -> ! {
    unsafe {
        let existing = match existing_key {
            Some(key) => format!("Existing row {}", key_columns(rel).describe(key)),
            None => "A stored row".into(),
        };
        let mut note = if note.is_empty() { String::new() } else { format!(" {note}") };
        if let Some((verify, similarity)) = verified {
            note = format!(
                " Their {} texts have similarity {} (n = {}); the threshold is {}.{note}",
                verify.column,
                format_similarity(similarity, verify.min_similarity),
                verify.n,
                verify.min_similarity
            );
        }
        raise(
            PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
            format!(
                "new row for relation \"{}\" is a near-duplicate and violates trigger \"{trigger_name}\"",
                relation_name(rel)
            ),
            Some(format!(
                "{existing} is at distance {distance} from the new row's {column} = {}; the radius is {k}.{note}",
                simhash_core::format_hex(fp)
            )),
        )
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
        let skipped: Vec<(Oid, (String, u64))> = TRANSACTION.with(|t| t.borrow_mut().skipped.drain().collect());
        for (relid, (trigger, count)) in skipped {
            let rows = if count == 1 { "row" } else { "rows" };
            let name = CStr::from_ptr(pg_sys::get_rel_name(relid)).to_string_lossy().into_owned();
            notice!("simhash: skipped {count} near-duplicate {rows} of relation \"{name}\" (trigger \"{trigger}\")");
        }
        Datum::from(0usize)
    }
}

unsafe fn trigger_data(fcinfo: pg_sys::FunctionCallInfo, function: &str) -> *mut pg_sys::TriggerData {
    unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            protocol_violation(&format!("{function}: must be called as trigger"));
        }
        context as *mut pg_sys::TriggerData
    }
}

fn protocol_violation(message: &str) -> ! {
    raise(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, message.into(), None)
}

fn bad_argument(message: String, hint: &str) -> ! {
    raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message, Some(hint.into()))
}

/// Parses and checks `(column [, k [, action [, report_table]]])` against the table.
unsafe fn read_config(rel: pg_sys::Relation, trigger: *const pg_sys::Trigger, schema: Oid) -> Config {
    unsafe {
        let all: Vec<String> = (0..(*trigger).tgnargs as usize)
            .map(|i| CStr::from_ptr(*(*trigger).tgargs.add(i)).to_string_lossy().into_owned())
            .collect();
        let usage = "Use simhash_dedup_trigger(column [, k [, action [, report_table]]] [, 'verify=text_column' \
                     [, 'min_similarity=0.7' [, 'n=3']]]), for example simhash_dedup_trigger('fp', '3', 'error').";
        // Options are `name=value` arguments after the column; the rest are positional.
        let is_option =
            |(i, a): &(usize, &String)| *i > 0 && ["verify=", "min_similarity=", "n="].iter().any(|p| a.starts_with(p));
        let options: Vec<&String> = all.iter().enumerate().filter(is_option).map(|(_, a)| a).collect();
        let args: Vec<String> = all.iter().enumerate().filter(|x| !is_option(x)).map(|(_, a)| a.clone()).collect();
        if args.is_empty() || args.len() > 4 {
            bad_argument(format!("simhash_dedup_trigger takes 1 to 4 arguments, not {}", args.len()), usage);
        }
        let column = args[0].clone();
        let tupdesc = (*rel).rd_att;
        let attnum = column_number(rel, &column);
        let simhash64 = crate::planner_support::simhash64_type(schema);
        let column_type = pg_sys::SPI_gettypeid(tupdesc, attnum);
        if pg_sys::getBaseType(column_type) != simhash64 {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{column}\" of relation \"{}\" is of type {}, not simhash64",
                    relation_name(rel),
                    type_name(column_type)
                ),
                None,
            );
        }
        let max = simhash_core::dedup::MAX_DEDUP_RADIUS;
        let k = match args.get(1).map(|k| k.trim().parse::<u32>()) {
            None => 3,
            Some(Ok(k)) if k <= max => k,
            Some(_) => bad_argument(
                format!("invalid radius \"{}\" for simhash_dedup_trigger", args[1]),
                &format!("The radius is an integer from 0 to {max}."),
            ),
        };
        let action = match args.get(2).map(|a| a.as_str()) {
            None | Some("error") => Action::Error,
            Some("skip") => Action::Skip,
            Some("report") => Action::Report,
            Some(other) => bad_argument(
                format!("invalid action \"{other}\" for simhash_dedup_trigger"),
                "The action is 'error', 'skip' or 'report'.",
            ),
        };
        let report_table = match (action, args.get(3)) {
            (Action::Report, Some(name)) => Some(report_table_oid(name)),
            (Action::Report, None) => bad_argument(
                "action \"report\" needs a report table as the fourth trigger argument".into(),
                "simhash_add_dedup(..., action => 'report') creates one.",
            ),
            (_, Some(_)) => bad_argument(
                "only action \"report\" takes a report table".into(),
                "Leave out the fourth argument, or use action 'report'.",
            ),
            (_, None) => None,
        };
        let verify = read_verify(rel, &options, usage);
        Config { column, attnum, k, action, report_table, verify }
    }
}

/// The verification options of a trigger (`verify=`, `min_similarity=`, `n=`), checked against
/// the table; `None` without `verify=`.
unsafe fn read_verify(rel: pg_sys::Relation, options: &[&String], usage: &str) -> Option<Verify> {
    unsafe {
        let mut column = None;
        let mut min_similarity = Verify::DEFAULT_MIN_SIMILARITY;
        let mut n = Verify::DEFAULT_N;
        for option in options {
            let (name, value) = option.split_once('=').expect("options have a =");
            match name {
                "verify" => column = Some(value.to_string()),
                "min_similarity" => match value.trim().parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => min_similarity = x,
                    _ => bad_argument(
                        format!("invalid min_similarity \"{value}\" for simhash_dedup_trigger"),
                        "The threshold is a number from 0 to 1.",
                    ),
                },
                _ => {
                    let max = simhash_core::shingles::MAX_SHINGLE;
                    match value.trim().parse::<usize>() {
                        Ok(x) if (1..=max).contains(&x) => n = x,
                        _ => bad_argument(
                            format!("invalid shingle length \"{value}\" for simhash_dedup_trigger"),
                            &format!("The shingle length n is an integer from 1 to {max}."),
                        ),
                    }
                }
            }
        }
        let Some(column) = column else {
            if options.is_empty() {
                return None;
            }
            bad_argument("min_similarity and n need verify=<text column>".into(), usage);
        };
        let tupdesc = (*rel).rd_att;
        let attnum = column_number(rel, &column);
        let column_type = pg_sys::getBaseType(pg_sys::SPI_gettypeid(tupdesc, attnum));
        if column_type != pg_sys::TEXTOID && column_type != pg_sys::VARCHAROID {
            raise(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "column \"{column}\" of relation \"{}\" is of type {}, not text",
                    relation_name(rel),
                    type_name(pg_sys::SPI_gettypeid(tupdesc, attnum))
                ),
                Some("verify names the text the fingerprint was computed from (text or varchar).".into()),
            );
        }
        Some(Verify { column, attnum, min_similarity, n })
    }
}

/// The number of the table's column `column`, or an ERROR (42703).
unsafe fn column_number(rel: pg_sys::Relation, column: &str) -> i32 {
    unsafe {
        let name = CString::new(column).unwrap_or_default();
        let attnum = pg_sys::SPI_fnumber((*rel).rd_att, name.as_ptr());
        if attnum <= 0 {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{column}\" of relation \"{}\" does not exist", relation_name(rel)),
                None,
            );
        }
        attnum
    }
}

unsafe fn report_table_oid(name: &str) -> Oid {
    unsafe {
        let text = name.into_datum().expect("a text datum");
        let names = pg_sys::textToQualifiedNameList(text.cast_mut_ptr());
        pg_sys::RangeVarGetRelidExtended(
            pg_sys::makeRangeVarFromNameList(names),
            pg_sys::NoLock as i32,
            0,
            None,
            std::ptr::null_mut(),
        )
    }
}

unsafe fn type_name(type_oid: Oid) -> String {
    unsafe { CStr::from_ptr(pg_sys::format_type_be(type_oid)).to_string_lossy().into_owned() }
}

pub(crate) unsafe fn relation_name(rel: pg_sys::Relation) -> String {
    unsafe { CStr::from_ptr((*(*rel).rd_rel).relname.data.as_ptr()).to_string_lossy().into_owned() }
}

unsafe fn trigger_name(trigger: *const pg_sys::Trigger) -> String {
    unsafe { CStr::from_ptr((*trigger).tgname).to_string_lossy().into_owned() }
}

/// `schema.name`, each part quoted where needed.
unsafe fn qualified_name(relid: Oid) -> String {
    unsafe {
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        let name = pg_sys::get_rel_name(relid);
        CStr::from_ptr(pg_sys::quote_qualified_identifier(schema, name)).to_string_lossy().into_owned()
    }
}

fn quote_identifier(name: &str) -> String {
    let name = CString::new(name).unwrap_or_default();
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(name.as_ptr())).to_string_lossy().into_owned() }
}

unsafe fn column_value(tuple: pg_sys::HeapTuple, tupdesc: pg_sys::TupleDesc, attnum: i32) -> Option<u64> {
    unsafe { column_datum(tuple, tupdesc, attnum).map(|d| d.value() as u64) }
}

/// The datum of column `attnum` of a stored row; `None` if NULL.
pub(crate) unsafe fn column_datum(tuple: pg_sys::HeapTuple, tupdesc: pg_sys::TupleDesc, attnum: i32) -> Option<Datum> {
    unsafe {
        let mut is_null = false;
        let datum = pg_sys::heap_getattr(tuple, attnum as _, tupdesc, &mut is_null);
        (!is_null).then_some(datum)
    }
}

/// The column's value in the row being written. BEFORE triggers run before stored generated columns
/// are computed (the row holds NULL there), so a generated fingerprint column
/// (`GENERATED ALWAYS AS (simhash(body)) STORED`) is computed here from its expression; `simhash()`
/// keeps its last result, so PostgreSQL's own computation right after costs nothing more.
unsafe fn new_value(rel: pg_sys::Relation, row: pg_sys::HeapTuple, attnum: i32) -> Option<u64> {
    unsafe { new_datum(rel, row, attnum).map(|d| d.value() as u64) }
}

/// The column's datum in the row being written (computed from its expression for a stored
/// generated column, see `new_value`); `None` if NULL.
unsafe fn new_datum(rel: pg_sys::Relation, row: pg_sys::HeapTuple, attnum: i32) -> Option<Datum> {
    unsafe {
        let tupdesc = (*rel).rd_att;
        let attr = (*tupdesc).attrs.as_slice((*tupdesc).natts as usize)[attnum as usize - 1];
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

/// Whether the stored row's text column holds the same bytes as `new` (a text datum).
unsafe fn same_text(old_row: pg_sys::HeapTuple, tupdesc: pg_sys::TupleDesc, attnum: i32, new: Datum) -> bool {
    unsafe {
        let Some(old) = column_datum(old_row, tupdesc, attnum) else { return false };
        if old.value() == new.value() {
            return true;
        }
        let (a, b) =
            (pg_sys::pg_detoast_datum_packed(old.cast_mut_ptr()), pg_sys::pg_detoast_datum_packed(new.cast_mut_ptr()));
        pgrx::varlena::varlena_to_byte_slice(a) == pgrx::varlena::varlena_to_byte_slice(b)
    }
}

/// How rows of the table are named in messages: its primary key columns, or ctid without one.
pub(crate) struct KeyColumns {
    attnums: Vec<i32>,
    names: Vec<String>,
}

impl KeyColumns {
    /// `(id)=(42)`, `(a, b)=(1,x)` or `ctid=(0,7)`, like the DETAIL of a unique violation.
    pub(crate) fn describe(&self, key: &str) -> String {
        match self.names.len() {
            0 => format!("ctid={key}"),
            1 => format!("({})=({key})", self.names[0]),
            _ => format!("({})={key}", self.names.join(", ")),
        }
    }

    /// The SQL expression giving an existing row's key as text, in the format of `row_key`: the
    /// value of a one-column key, `row(...)::text` of a composite one, the ctid without a key.
    fn expression(&self) -> String {
        let columns: Vec<String> = self.names.iter().map(|n| format!("t.{}", quote_identifier(n))).collect();
        match columns.len() {
            0 => "t.ctid::pg_catalog.text".into(),
            1 => format!("{}::pg_catalog.text", columns[0]),
            _ => format!("ROW({})::pg_catalog.text", columns.join(", ")),
        }
    }
}

pub(crate) unsafe fn key_columns(rel: pg_sys::Relation) -> KeyColumns {
    unsafe {
        let index_oid = pg_sys::RelationGetPrimaryKeyIndex(rel);
        let mut key = KeyColumns { attnums: Vec::new(), names: Vec::new() };
        if index_oid == Oid::INVALID {
            return key;
        }
        let index = pg_sys::index_open(index_oid, pg_sys::AccessShareLock as i32);
        let form = (*index).rd_index;
        for &attnum in (*form).indkey.values.as_slice((*form).indnkeyatts as usize) {
            let attr = (*(*rel).rd_att).attrs.as_slice((*(*rel).rd_att).natts as usize)[attnum as usize - 1];
            key.attnums.push(attnum as i32);
            key.names.push(CStr::from_ptr(attr.attname.data.as_ptr()).to_string_lossy().into_owned());
        }
        pg_sys::index_close(index, pg_sys::AccessShareLock as i32);
        key
    }
}

/// The new row's key as text, in the format of `KeyColumns::expression`; NULL without a primary
/// key (a row has no ctid before it is stored).
unsafe fn row_key(rel: pg_sys::Relation, row: pg_sys::HeapTuple) -> Option<String> {
    unsafe {
        let key = key_columns(rel);
        if key.attnums.is_empty() {
            return None;
        }
        let values: Vec<String> = key
            .attnums
            .iter()
            .map(|&a| {
                let value = pg_sys::SPI_getvalue(row, (*rel).rd_att, a);
                if value.is_null() {
                    None
                } else {
                    Some(CStr::from_ptr(value).to_string_lossy().into_owned())
                }
            })
            .collect::<Option<Vec<String>>>()?;
        match values.as_slice() {
            [one] => Some(one.clone()),
            _ => Some(format!("({})", values.iter().map(|v| record_field(v)).collect::<Vec<_>>().join(","))),
        }
    }
}

/// Whether the current role may see keys of the table's rows in messages (like a unique
/// violation's DETAIL): it has SELECT on the table and row-level security does not apply.
pub(crate) unsafe fn key_readable(relid: Oid) -> bool {
    unsafe {
        pg_sys::pg_class_aclcheck(relid, pg_sys::GetUserId(), pg_sys::ACL_SELECT as _) == pg_sys::AclResult::ACLCHECK_OK
            && pg_sys::check_enable_rls(relid, Oid::INVALID, true) != pg_sys::CheckEnableRlsResult::RLS_ENABLED as i32
    }
}

/// A stored row's key as text (see `row_key`; its ctid without a primary key), if the current
/// role may see it.
pub(crate) unsafe fn key_if_visible(rel: pg_sys::Relation, tuple: pg_sys::HeapTuple) -> Option<String> {
    unsafe {
        if !key_readable((*rel).rd_id) {
            return None;
        }
        if key_columns(rel).attnums.is_empty() {
            let (block, offset) = pgrx::itemptr::item_pointer_get_both((*tuple).t_self);
            return Some(format!("({block},{offset})"));
        }
        row_key(rel, tuple)
    }
}

/// Quotes one field the way record output does.
fn record_field(value: &str) -> String {
    let needs_quotes =
        value.is_empty() || value.chars().any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_ascii_whitespace());
    if !needs_quotes {
        return value.into();
    }
    let mut quoted = String::from('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            quoted.push(c);
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

fn connect() {
    unsafe {
        if pg_sys::SPI_connect() < 0 {
            panic!("SPI_connect failed");
        }
    }
}

fn finish() {
    unsafe {
        pg_sys::SPI_finish();
    }
}

/// Runs `f` as `user`, like foreign-key checks do: with the table owner's rights and no forced RLS.
unsafe fn as_user<T>(user: Oid, f: impl FnOnce() -> T) -> T {
    unsafe {
        let (mut saved_user, mut saved_context) = (Oid::INVALID, 0);
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        let context = saved_context | (pg_sys::SECURITY_LOCAL_USERID_CHANGE | pg_sys::SECURITY_NOFORCE_RLS) as i32;
        pg_sys::SetUserIdAndSecContext(user, context);
        let result = f();
        pg_sys::SetUserIdAndSecContext(saved_user, saved_context);
        result
    }
}

/// Runs `f` with sequential scans and JIT disabled for the statements it plans and runs.
unsafe fn with_index_lookups<T>(f: impl FnOnce() -> T) -> T {
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        for (name, value) in [(c"enable_seqscan", c"off"), (c"jit", c"off")] {
            pg_sys::set_config_option(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
        }
        let result = f();
        pg_sys::AtEOXact_GUC(true, level);
        result
    }
}

unsafe fn prepare(text: &str, arg_types: &[Oid]) -> pg_sys::SPIPlanPtr {
    unsafe {
        let text = CString::new(text).expect("statement text has no NUL byte");
        let plan = pg_sys::SPI_prepare(text.as_ptr(), arg_types.len() as i32, arg_types.as_ptr().cast_mut());
        if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
            panic!("could not prepare a statement of simhash_dedup_trigger");
        }
        plan
    }
}

unsafe fn execute(plan: pg_sys::SPIPlanPtr, args: &[Datum], nulls: &[bool], limit: i64) -> i32 {
    unsafe {
        let nulls: Vec<c_char> = nulls.iter().map(|&n| if n { b'n' } else { b' ' } as c_char).collect();
        pg_sys::SPI_execute_plan(plan, args.as_ptr().cast_mut(), nulls.as_ptr(), false, limit)
    }
}

/// The statement that finds the nearest row within `k` of `$1` (a simhash64) other than the row at
/// `$2` (a tid), returning its key as text and its distance; with `verify`, only rows whose text
/// is at least `min_similarity` similar to `$3` (a text), the most similar first, and the similarity.
unsafe fn lookup_statement(
    rel: pg_sys::Relation,
    column: &str,
    k: u32,
    schema: Oid,
    verify: Option<&Verify>,
) -> String {
    unsafe {
        let s = quote_identifier(&CStr::from_ptr(pg_sys::get_namespace_name(schema)).to_string_lossy());
        let column = format!("t.{}", quote_identifier(column));
        let key = key_columns(rel).expression();
        let table = qualified_name((*rel).rd_id);
        let within =
            format!("{column} OPERATOR({s}.<~>) $1 OPERATOR({s}.<=) {k} AND t.ctid OPERATOR(pg_catalog.<>) $2");
        let Some(verify) = verify else {
            return format!(
                "SELECT {key}, ({column} OPERATOR({s}.<~>) $1)::pg_catalog.int4 FROM ONLY {table} t \
                 WHERE {within} ORDER BY 2, 1 LIMIT 1"
            );
        };
        let similarity = format!(
            "{s}.simhash_similarity(t.{}::pg_catalog.text, $3, {})",
            quote_identifier(&verify.column),
            verify.n
        );
        format!(
            "SELECT {key}, ({column} OPERATOR({s}.<~>) $1)::pg_catalog.int4, {similarity} FROM ONLY {table} t \
             WHERE {within} AND {similarity} OPERATOR(pg_catalog.>=) {:?}::pg_catalog.float8 \
             ORDER BY 3 DESC, 2, 1 LIMIT 1",
            verify.min_similarity
        )
    }
}

/// A similarity as the DETAIL gives it: rounded down to three decimals, or every digit where
/// that would read as below the threshold.
pub(crate) fn format_similarity(similarity: f64, threshold: f64) -> String {
    let floor = (similarity * 1000.0).floor() / 1000.0;
    if floor >= threshold || floor == similarity {
        let text = format!("{floor:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{similarity}")
    }
}

/// `simhash_dedup_lookup(tbl, col, k [, verify, min_similarity, n])`: the statement the trigger
/// runs for each row, to EXPLAIN it.
#[pg_extern(sql = false)]
fn simhash_dedup_lookup(
    tbl: Option<Oid>,
    col: Option<&CStr>,
    k: Option<i32>,
    verify: Option<&CStr>,
    min_similarity: Option<f64>,
    n: Option<i32>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> Option<String> {
    // NULL in, NULL out, but for the verification arguments, which are NULL without verification.
    let (tbl, col, k) = (tbl?, col?, k?);
    let min_similarity = min_similarity.unwrap_or(Verify::DEFAULT_MIN_SIMILARITY);
    let n = n.unwrap_or(Verify::DEFAULT_N as i32);
    unsafe {
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let max = simhash_core::dedup::MAX_DEDUP_RADIUS;
        if !(0..=max as i32).contains(&k) {
            bad_argument(
                format!("radius {k} is out of range for simhash_dedup_lookup"),
                &format!("The radius is an integer from 0 to {max}."),
            );
        }
        let rel = pg_sys::RelationIdGetRelation(tbl);
        if rel.is_null() {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {} does not exist", tbl.to_u32()),
                None,
            );
        }
        let options = verify.map(|column| {
            [
                format!("verify={}", column.to_string_lossy()),
                format!("min_similarity={min_similarity}"),
                format!("n={n}"),
            ]
        });
        let options: Vec<&String> = options.iter().flatten().collect();
        let verify = read_verify(rel, &options, "");
        let text = lookup_statement(rel, &col.to_string_lossy(), k as u32, schema, verify.as_ref());
        pg_sys::RelationClose(rel);
        Some(text)
    }
}

/// The nearest row within the radius (its key as text and its distance), other than `exclude`
/// (the old version of an updated row).
unsafe fn find_near_duplicate(
    trigger_oid: Oid,
    rel: pg_sys::Relation,
    config: &Config,
    schema: Oid,
    fp: u64,
    exclude: pg_sys::ItemPointerData,
    new_text: Option<Datum>,
) -> Option<(String, i32, Option<f64>)> {
    unsafe {
        let text = lookup_statement(rel, &config.column, config.k, schema, config.verify.as_ref());
        let mut types = vec![crate::planner_support::simhash64_type(schema), pg_sys::TIDOID];
        if config.verify.is_some() {
            types.push(pg_sys::TEXTOID);
        }
        let owner = (*(*rel).rd_rel).relowner;
        let plan = PLANS.with(|plans| {
            let mut plans = plans.borrow_mut();
            match plans.get_mut(&trigger_oid) {
                Some(p) if p.lookup_text == text => p.lookup,
                Some(p) => {
                    // The table changed under the trigger: a new plan (the old one stays allocated:
                    // it may be in use further up the stack).
                    p.lookup = as_user(owner, || prepare(&text, &types));
                    p.lookup_text = text;
                    p.lookup
                }
                None => {
                    let lookup = as_user(owner, || prepare(&text, &types));
                    plans.insert(trigger_oid, TriggerPlans { lookup_text: text, lookup, report: None });
                    lookup
                }
            }
        });
        let mut tid = exclude;
        let mut args = vec![Datum::from(fp), Datum::from(&mut tid as *mut pg_sys::ItemPointerData)];
        args.extend(new_text);
        let nulls = vec![false; args.len()];
        let status = with_index_lookups(|| as_user(owner, || execute(plan, &args, &nulls, 1)));
        if status != pg_sys::SPI_OK_SELECT as i32 || pg_sys::SPI_processed == 0 {
            return None;
        }
        let table = pg_sys::SPI_tuptable;
        let tuple = *(*table).vals;
        let key = CStr::from_ptr(pg_sys::SPI_getvalue(tuple, (*table).tupdesc, 1)).to_string_lossy().into_owned();
        let mut is_null = false;
        let distance = pg_sys::SPI_getbinval(tuple, (*table).tupdesc, 2, &mut is_null).value() as i32;
        let similarity = config
            .verify
            .as_ref()
            .map(|_| f64::from_bits(pg_sys::SPI_getbinval(tuple, (*table).tupdesc, 3, &mut is_null).value() as u64));
        Some((key, distance, similarity))
    }
}

/// The stored row the lookup found: its key (if the role may see it), distance and similarity.
struct Found<'a> {
    existing_key: Option<&'a str>,
    distance: i32,
    similarity: Option<f64>,
}

/// Records a near-duplicate in the report table, as the current user.
#[allow(clippy::too_many_arguments)]
unsafe fn report(
    trigger_oid: Oid,
    trigger: *const pg_sys::Trigger,
    relid: Oid,
    config: &Config,
    schema: Oid,
    fp: u64,
    new_key: Option<String>,
    found: Found<'_>,
) {
    unsafe {
        let table = qualified_name(config.report_table.expect("report has a table"));
        // The similarity column only with verification (report tables made before it lack it).
        let text = if config.verify.is_some() {
            format!(
                "INSERT INTO {table} (relation, trigger_name, new_key, existing_key, distance, new_fingerprint, \
                 similarity) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            )
        } else {
            format!(
                "INSERT INTO {table} (relation, trigger_name, new_key, existing_key, distance, new_fingerprint) \
                 VALUES ($1, $2, $3, $4, $5, $6)"
            )
        };
        let plan = PLANS.with(|plans| {
            let mut plans = plans.borrow_mut();
            let entry = plans.get_mut(&trigger_oid).expect("the lookup ran first");
            match &entry.report {
                Some((t, plan)) if *t == text => *plan,
                _ => {
                    let types = [
                        pg_sys::REGCLASSOID,
                        pg_sys::TEXTOID,
                        pg_sys::TEXTOID,
                        pg_sys::TEXTOID,
                        pg_sys::INT4OID,
                        crate::planner_support::simhash64_type(schema),
                        pg_sys::FLOAT8OID,
                    ];
                    let types = &types[..if config.verify.is_some() { 7 } else { 6 }];
                    let plan = prepare(&text, types);
                    entry.report = Some((text, plan));
                    plan
                }
            }
        });
        let Found { existing_key, distance, similarity } = found;
        let mut args = vec![
            Datum::from(relid.to_u32()),
            trigger_name(trigger).into_datum().expect("text"),
            new_key.clone().into_datum().unwrap_or(Datum::from(0usize)),
            existing_key.into_datum().unwrap_or(Datum::from(0usize)),
            Datum::from(distance),
            Datum::from(fp),
        ];
        let mut nulls = vec![false, false, new_key.is_none(), existing_key.is_none(), false, false];
        if config.verify.is_some() {
            args.push(Datum::from(similarity.unwrap_or_default().to_bits()));
            nulls.push(similarity.is_none());
        }
        execute(plan, &args, &nulls, 0);
    }
}

/// Once per trigger and backend: a WARNING when the column has no index the lookup can use.
unsafe fn warn_once_without_indexes(trigger_oid: Oid, rel: pg_sys::Relation, config: &Config, schema: Oid) {
    unsafe {
        if WARNED.with(|w| w.borrow().contains(&trigger_oid)) {
            return;
        }
        WARNED.with(|w| w.borrow_mut().insert(trigger_oid));
        if crate::planner_support::has_lookup_indexes(schema, (*rel).rd_id, config.attnum as i16) {
            if crate::planner_support::segment_btrees(schema, (*rel).rd_id, config.attnum as i16).is_none() {
                warning!(
                    "the near-duplicate check of column \"{}\" of relation \"{}\" scans the table at every commit: \
                     its concurrency recheck needs the four segment B-trees, not the bands GIN index",
                    config.column,
                    relation_name(rel)
                );
            }
            return;
        }
        let statements = Spi::get_one_with_args::<String>(
            &format!(
                "SELECT pg_catalog.string_agg(s, E';\\n') OPERATOR(pg_catalog.||) ';' \
                 FROM {}.simhash_index_statements($1, $2) s",
                quote_identifier(&CStr::from_ptr(pg_sys::get_namespace_name(schema)).to_string_lossy())
            ),
            &[(*rel).rd_id.into(), config.column.as_str().into()],
        )
        .ok()
        .flatten()
        .unwrap_or_default();
        pgrx::pg_sys::panic::ErrorReport::new(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!(
                "column \"{}\" of relation \"{}\" has no simhash index: every row is checked with a sequential scan",
                config.column,
                relation_name(rel)
            ),
            "",
        )
        .set_hint(format!("Create the indexes:\n{statements}"))
        .report(PgLogLevel::WARNING);
    }
}

/// `simhash_indexed(tbl, col)`: whether radius lookups on the column can use an index.
#[pg_extern(sql = false)]
fn simhash_indexed(tbl: Oid, col: &CStr, fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // `col` is a `name`: a NUL-terminated NameData, read as a C string.
    unsafe {
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let attnum = pg_sys::get_attnum(tbl, col.as_ptr());
        let col = col.to_string_lossy();
        if attnum <= 0 {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{col}\" of relation \"{}\" does not exist", qualified_name(tbl)),
                None,
            );
        }
        crate::planner_support::has_lookup_indexes(schema, tbl, attnum)
    }
}
