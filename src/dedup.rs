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

#[derive(Clone, Copy, PartialEq, Eq)]
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
        if let Some(old_row) = old_row {
            if column_value(old_row, tupdesc, config.attnum) == Some(fp) {
                return Datum::from(row); // the fingerprint did not change
            }
        }
        let relid = (*rel).rd_id;
        let trigger_oid = (*trigger).tgoid;
        warn_once_without_indexes(trigger_oid, rel, &config, schema);

        connect();
        let exclude = old_row.map(|t| (*t).t_self).unwrap_or_default();
        let found = find_near_duplicate(trigger_oid, rel, &config, schema, fp, exclude);
        let Some((existing_key, distance)) = found else {
            finish();
            if config.action != Action::Report {
                crate::dedup_recheck::remember(relid, trigger_oid, fp, || crate::dedup_recheck::Pending {
                    schema,
                    attnum: config.attnum,
                    column: config.column.clone(),
                    k: config.k,
                    skip: config.action == Action::Skip,
                    trigger_name: trigger_name(trigger),
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
                report(trigger_oid, trigger, relid, &config, schema, fp, new_key, existing_key.as_deref(), distance);
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
    note: &str,
) -> ! {
    unsafe {
        let existing = match existing_key {
            Some(key) => format!("Existing row {}", key_columns(rel).describe(key)),
            None => "A stored row".into(),
        };
        let note = if note.is_empty() { String::new() } else { format!(" {note}") };
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
        let args: Vec<String> = (0..(*trigger).tgnargs as usize)
            .map(|i| CStr::from_ptr(*(*trigger).tgargs.add(i)).to_string_lossy().into_owned())
            .collect();
        let usage = "Use simhash_dedup_trigger(column [, k [, action [, report_table]]]), for example \
                     simhash_dedup_trigger('fp', '3', 'error').";
        if args.is_empty() || args.len() > 4 {
            bad_argument(format!("simhash_dedup_trigger takes 1 to 4 arguments, not {}", args.len()), usage);
        }
        let column = args[0].clone();
        let name = CString::new(column.as_str()).unwrap_or_default();
        let tupdesc = (*rel).rd_att;
        let attnum = pg_sys::SPI_fnumber(tupdesc, name.as_ptr());
        if attnum <= 0 {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{column}\" of relation \"{}\" does not exist", relation_name(rel)),
                None,
            );
        }
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
        Config { column, attnum, k, action, report_table }
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
    unsafe {
        let mut is_null = false;
        let datum = pgrx::pg_sys::heap_getattr(tuple, attnum as _, tupdesc, &mut is_null);
        (!is_null).then(|| datum.value() as u64)
    }
}

/// The column's value in the row being written. BEFORE triggers run before stored generated columns
/// are computed (the row holds NULL there), so a generated fingerprint column
/// (`GENERATED ALWAYS AS (simhash(body)) STORED`) is computed here from its expression; `simhash()`
/// keeps its last result, so PostgreSQL's own computation right after costs nothing more.
unsafe fn new_value(rel: pg_sys::Relation, row: pg_sys::HeapTuple, attnum: i32) -> Option<u64> {
    unsafe {
        let tupdesc = (*rel).rd_att;
        let attr = (*tupdesc).attrs.as_slice((*tupdesc).natts as usize)[attnum as usize - 1];
        if attr.attgenerated as u8 != pg_sys::ATTRIBUTE_GENERATED_STORED {
            return column_value(row, tupdesc, attnum);
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
        let value = pg_sys::ExecEvalExpr(state, econtext, &mut is_null);
        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::FreeExecutorState(estate);
        (!is_null).then(|| value.value() as u64)
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
            let tid = (*tuple).t_self;
            let block = (tid.ip_blkid.bi_hi as u32) << 16 | tid.ip_blkid.bi_lo as u32;
            return Some(format!("({block},{})", tid.ip_posid));
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
/// `$2` (a tid), returning its key as text and its distance.
unsafe fn lookup_statement(rel: pg_sys::Relation, column: &str, k: u32, schema: Oid) -> String {
    unsafe {
        let s = quote_identifier(&CStr::from_ptr(pg_sys::get_namespace_name(schema)).to_string_lossy());
        let column = format!("t.{}", quote_identifier(column));
        format!(
            "SELECT {key}, ({column} OPERATOR({s}.<~>) $1)::pg_catalog.int4 FROM ONLY {table} t \
             WHERE {column} OPERATOR({s}.<~>) $1 OPERATOR({s}.<=) {k} AND t.ctid OPERATOR(pg_catalog.<>) $2 \
             ORDER BY 2, 1 LIMIT 1",
            key = key_columns(rel).expression(),
            table = qualified_name((*rel).rd_id),
        )
    }
}

/// `simhash_dedup_lookup(tbl, col, k)`: the statement the trigger runs for each row, to EXPLAIN it.
#[pg_extern(sql = false)]
fn simhash_dedup_lookup(tbl: Oid, col: &CStr, k: i32, fcinfo: pg_sys::FunctionCallInfo) -> String {
    unsafe {
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let rel = pg_sys::RelationIdGetRelation(tbl);
        if rel.is_null() {
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {} does not exist", tbl.to_u32()),
                None,
            );
        }
        let text = lookup_statement(rel, &col.to_string_lossy(), k.max(0) as u32, schema);
        pg_sys::RelationClose(rel);
        text
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
) -> Option<(String, i32)> {
    unsafe {
        let text = lookup_statement(rel, &config.column, config.k, schema);
        let owner = (*(*rel).rd_rel).relowner;
        let plan = PLANS.with(|plans| {
            let mut plans = plans.borrow_mut();
            match plans.get_mut(&trigger_oid) {
                Some(p) if p.lookup_text == text => p.lookup,
                Some(p) => {
                    // The table changed under the trigger: a new plan (the old one stays allocated:
                    // it may be in use further up the stack).
                    p.lookup = as_user(owner, || {
                        prepare(&text, &[crate::planner_support::simhash64_type(schema), pg_sys::TIDOID])
                    });
                    p.lookup_text = text;
                    p.lookup
                }
                None => {
                    let lookup = as_user(owner, || {
                        prepare(&text, &[crate::planner_support::simhash64_type(schema), pg_sys::TIDOID])
                    });
                    plans.insert(trigger_oid, TriggerPlans { lookup_text: text, lookup, report: None });
                    lookup
                }
            }
        });
        let mut tid = exclude;
        let args = [Datum::from(fp), Datum::from(&mut tid as *mut pg_sys::ItemPointerData)];
        let status = with_index_lookups(|| as_user(owner, || execute(plan, &args, &[false, false], 1)));
        if status != pg_sys::SPI_OK_SELECT as i32 || pg_sys::SPI_processed == 0 {
            return None;
        }
        let table = pg_sys::SPI_tuptable;
        let tuple = *(*table).vals;
        let key = CStr::from_ptr(pg_sys::SPI_getvalue(tuple, (*table).tupdesc, 1)).to_string_lossy().into_owned();
        let mut is_null = false;
        let distance = pg_sys::SPI_getbinval(tuple, (*table).tupdesc, 2, &mut is_null).value() as i32;
        Some((key, distance))
    }
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
    existing_key: Option<&str>,
    distance: i32,
) {
    unsafe {
        let table = qualified_name(config.report_table.expect("report has a table"));
        let text = format!(
            "INSERT INTO {table} (relation, trigger_name, new_key, existing_key, distance, new_fingerprint) \
             VALUES ($1, $2, $3, $4, $5, $6)"
        );
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
                    ];
                    let plan = prepare(&text, &types);
                    entry.report = Some((text, plan));
                    plan
                }
            }
        });
        let args = [
            Datum::from(relid.to_u32()),
            trigger_name(trigger).into_datum().expect("text"),
            new_key.clone().into_datum().unwrap_or(Datum::from(0usize)),
            existing_key.into_datum().unwrap_or(Datum::from(0usize)),
            Datum::from(distance),
            Datum::from(fp),
        ];
        let nulls = [false, false, new_key.is_none(), existing_key.is_none(), false, false];
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
