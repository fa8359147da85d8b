//! The lookup of the row trigger: one SPI statement per trigger, prepared once per backend and
//! kept while its text is unchanged, run as the table's owner with sequential scans and JIT
//! disabled so that it always takes the segment indexes; and `simhash_dedup_lookup()`, the same
//! lookup as a set-returning function for tests and troubleshooting.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};

use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::prelude::*;

use super::config::{check_arguments, read_verify, Config, Verify};
use super::messages::key_columns;
use super::value::{column_kind, Fingerprint, Kind};
use crate::pg::errors::{raise, spi_failure};
use crate::pg::names::{namespace_name, qualified_name, quote_identifier};

/// Plans kept for the life of the backend, per trigger. The statement text is rebuilt on each call
/// (cheap) and a new plan is prepared only when it changes (a new primary key, a renamed table).
pub(super) struct TriggerPlans {
    pub(super) lookup_text: String,
    pub(super) lookup: pg_sys::SPIPlanPtr,
    pub(super) report: Option<(String, pg_sys::SPIPlanPtr)>,
}

thread_local! {
    pub(super) static PLANS: RefCell<HashMap<Oid, TriggerPlans>> = RefCell::new(HashMap::new());
}

pub(super) fn connect() {
    unsafe {
        let code = pg_sys::SPI_connect();
        if code < 0 {
            spi_failure("SPI_connect", code);
        }
    }
}

pub(super) fn finish() {
    unsafe {
        pg_sys::SPI_finish();
    }
}

/// Runs `f` as `user`, like foreign-key checks do: with the table owner's rights and no forced
/// RLS; and, like `CREATE INDEX` runs the owner's index expressions, in a security-restricted
/// operation, so that nothing the owner's code (type output functions, triggers of the report
/// table) leaves behind (a temporary object, a held cursor, a changed role) outlives the call and
/// runs later with the inserting role's rights.
pub(super) unsafe fn as_user<T>(user: Oid, f: impl FnOnce() -> T) -> T {
    unsafe {
        let (mut saved_user, mut saved_context) = (Oid::INVALID, 0);
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        let context = saved_context
            | (pg_sys::SECURITY_LOCAL_USERID_CHANGE
                | pg_sys::SECURITY_NOFORCE_RLS
                | pg_sys::SECURITY_RESTRICTED_OPERATION) as i32;
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

/// # Safety
///
/// In a backend, connected to SPI (`connect`).
pub(super) unsafe fn prepare(text: &str, arg_types: &[Oid]) -> pg_sys::SPIPlanPtr {
    unsafe {
        let text = CString::new(text).expect("statement text has no NUL byte");
        let plan = pg_sys::SPI_prepare(text.as_ptr(), arg_types.len() as i32, arg_types.as_ptr().cast_mut());
        if plan.is_null() {
            spi_failure("SPI_prepare", pg_sys::SPI_result);
        }
        let code = pg_sys::SPI_keepplan(plan);
        if code != 0 {
            spi_failure("SPI_keepplan", code);
        }
        plan
    }
}

/// # Safety
///
/// Connected to SPI; `plan` came from [`prepare`] and `args`, `nulls` match its argument types.
pub(super) unsafe fn execute(plan: pg_sys::SPIPlanPtr, args: &[Datum], nulls: &[bool], limit: i64) -> i32 {
    unsafe {
        let nulls: Vec<c_char> = nulls.iter().map(|&n| if n { b'n' } else { b' ' } as c_char).collect();
        pg_sys::SPI_execute_plan(plan, args.as_ptr().cast_mut(), nulls.as_ptr(), false, limit)
    }
}

/// The statement that finds the nearest row within `k` of `$1` (a simhash64, or for a column of
/// codes a `bit`) other than the row at `$2` (a tid), returning its key as text and its distance;
/// with `verify`, only rows whose text is at least `min_similarity` similar to `$3` (a text), the
/// most similar first, and the similarity. On codes the test is `simhash_hamming(col, $1) <= k`
/// (`col::"bit"` unless `col` is of type `bit`), which the planner rewrite sends to the column's
/// `simhash` index (`crate::lookup::codes`).
unsafe fn lookup_statement(
    rel: pg_sys::Relation,
    column: &str,
    kind: Kind,
    k: u32,
    schema: Oid,
    verify: Option<&Verify>,
) -> String {
    unsafe {
        let s = quote_identifier(&namespace_name(schema));
        let name = std::ffi::CString::new(column).unwrap_or_default();
        let attnum = pg_sys::get_attnum((*rel).rd_id, name.as_ptr());
        let atttype = if attnum > 0 { pg_sys::get_atttype((*rel).rd_id, attnum) } else { Oid::INVALID };
        if kind == Kind::Code {
            // A column of any type but `bit` itself (`bit varying`, a domain over either) is cast
            // to `bit`, without a length (`::bit` is `bit(1)`): a `simhash_hamming` declared for
            // its own type in the extension's schema would match it more exactly than ours.
            // (A relabelling: the planner rewrite still finds the column's index under it.)
            let cast = if atttype == pg_sys::BITOID { "" } else { "::pg_catalog.\"bit\"" };
            let key = key_columns(rel).expression();
            let table = qualified_name((*rel).rd_id);
            let distance = format!("{s}.simhash_hamming(t.{}{cast}, $1)", quote_identifier(column));
            let within = format!("{distance} OPERATOR({s}.<=) {k} AND t.ctid OPERATOR(pg_catalog.<>) $2");
            let Some(verify) = verify else {
                return format!(
                    "SELECT {key}, {distance}::pg_catalog.int4 FROM ONLY {table} t WHERE {within} ORDER BY 2, 1 LIMIT 1"
                );
            };
            let similarity = similarity_test(&s, verify);
            return format!(
                "SELECT {key}, {distance}::pg_catalog.int4, {similarity} FROM ONLY {table} t \
                 WHERE {within} AND {similarity} OPERATOR(pg_catalog.>=) {:?}::pg_catalog.float8 \
                 ORDER BY 3 DESC, 2, 1 LIMIT 1",
                verify.min_similarity
            );
        }
        // A column of a domain over simhash64 is cast to simhash64 itself: it would match an
        // operator declared for that domain more exactly than the extension's own.
        let domain = atttype != Oid::INVALID && pg_sys::get_typtype(atttype) as u8 == b'd';
        let cast = if domain { format!("::{s}.simhash64") } else { String::new() };
        let column = format!("t.{}{cast}", quote_identifier(column));
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
        let similarity = similarity_test(&s, verify);
        format!(
            "SELECT {key}, ({column} OPERATOR({s}.<~>) $1)::pg_catalog.int4, {similarity} FROM ONLY {table} t \
             WHERE {within} AND {similarity} OPERATOR(pg_catalog.>=) {:?}::pg_catalog.float8 \
             ORDER BY 3 DESC, 2, 1 LIMIT 1",
            verify.min_similarity
        )
    }
}

/// The similarity of a stored row's text (`t.<verify column>`) with the new row's (`$3`), in a
/// statement where `s` is the extension's schema, quoted.
fn similarity_test(s: &str, verify: &Verify) -> String {
    format!("{s}.simhash_similarity(t.{}::pg_catalog.text, $3, {})", quote_identifier(&verify.column), verify.n)
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
    let min_similarity = min_similarity.or(Some(Verify::DEFAULT_MIN_SIMILARITY));
    let n = n.or(Some(Verify::DEFAULT_N as i32));
    unsafe {
        let schema = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let rel = pg_sys::RelationIdGetRelation(tbl);
        if rel.is_null() {
            check_arguments("simhash_dedup_lookup", Kind::Simhash64, Some(k), verify.is_some(), min_similarity, n);
            raise(
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {} does not exist", tbl.to_u32()),
                None,
                None,
            );
        }
        // (the radius's range depends on the column's kind: simhash64 unless it holds codes)
        let attnum = pg_sys::get_attnum(tbl, col.as_ptr()) as i32;
        let kind = if attnum > 0 { column_kind(rel, attnum, schema) } else { None }.unwrap_or(Kind::Simhash64);
        let (k, min_similarity, n) =
            check_arguments("simhash_dedup_lookup", kind, Some(k), verify.is_some(), min_similarity, n);
        let options = verify.map(|column| {
            [
                format!("verify={}", column.to_string_lossy()),
                format!("min_similarity={min_similarity}"),
                format!("n={n}"),
            ]
        });
        let options: Vec<&String> = options.iter().flatten().collect();
        let verify = read_verify(rel, &options, "");
        let text = lookup_statement(rel, &col.to_string_lossy(), kind, k, schema, verify.as_ref());
        pg_sys::RelationClose(rel);
        Some(text)
    }
}

/// The nearest row within the radius (its key as text and its distance), other than `exclude`
/// (the old version of an updated row).
///
/// # Safety
///
/// In a trigger call, connected to SPI; `rel` is the trigger's open relation.
pub(super) unsafe fn find_near_duplicate<F: Fingerprint>(
    trigger_oid: Oid,
    rel: pg_sys::Relation,
    config: &Config,
    schema: Oid,
    fp: &F,
    exclude: pg_sys::ItemPointerData,
    new_text: Option<Datum>,
) -> Option<(Option<String>, i32, Option<f64>)> {
    unsafe {
        let text = lookup_statement(rel, &config.column, config.kind, config.k, schema, config.verify.as_ref());
        let value_type = match config.kind {
            Kind::Simhash64 => crate::lookup::catalog::simhash64_type(schema),
            Kind::Code => pg_sys::BITOID,
        };
        let mut types = vec![value_type, pg_sys::TIDOID];
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
        let mut args = vec![fp.to_datum(), Datum::from(&mut tid as *mut pg_sys::ItemPointerData)];
        args.extend(new_text);
        let nulls = vec![false; args.len()];
        let status = with_index_lookups(|| as_user(owner, || execute(plan, &args, &nulls, 1)));
        if status != pg_sys::SPI_OK_SELECT as i32 || pg_sys::SPI_processed == 0 {
            return None;
        }
        let table = pg_sys::SPI_tuptable;
        let tuple = *(*table).vals;
        // (NULL where the key's cast to text gives NULL: a type's own cast may; the row is then
        // named without its key)
        let key = pg_sys::SPI_getvalue(tuple, (*table).tupdesc, 1);
        let key = (!key.is_null()).then(|| CStr::from_ptr(key).to_string_lossy().into_owned());
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
pub(super) struct Found<'a> {
    pub(super) existing_key: Option<&'a str>,
    pub(super) distance: i32,
    pub(super) similarity: Option<f64>,
}
