//! `action => 'report'`: the near-duplicate row is stored and a row describing the match goes into
//! the report table, through a prepared INSERT kept with the trigger's lookup plan.

use super::config::Config;
use super::lookup::{as_user, execute, prepare, Found, PLANS};
use super::value::Kind;
use crate::pg::errors::raise;
use crate::pg::names::{qualified_name, trigger_name};
use pgrx::pg_sys::{self, Datum, Oid};
use pgrx::IntoDatum;
use pgrx::PgSqlErrorCode;

/// Records a near-duplicate in the report table, as the table's owner (in a security-restricted
/// operation: see `as_user`), who must own the report table: a report table of another role would
/// run that role's triggers and rules with the owner's rights (42501).
///
/// # Safety
///
/// In a trigger call, connected to SPI; `trigger` is the current trigger.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn report(
    trigger_oid: Oid,
    trigger: *const pg_sys::Trigger,
    relid: Oid,
    config: &Config,
    schema: Oid,
    fp: Datum,
    new_key: Option<String>,
    found: Found<'_>,
) {
    unsafe {
        let report_table = config.report_table.expect("report has a table");
        let table = qualified_name(report_table);
        let owner = table_owner(relid);
        if table_owner(report_table) != owner {
            raise(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!(
                    "report table {table} of trigger \"{}\" is not owned by the owner of relation {}",
                    trigger_name(trigger),
                    qualified_name(relid)
                ),
                None,
                Some("Give the report table to the table's owner (ALTER TABLE ... OWNER TO), or attach the constraint again with simhash_add_dedup.".into()),
            );
        }
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
        // Keyed by the kind of value too: a trigger replaced (same OID) to guard a column of the
        // other kind with the same report table must not reuse a plan that takes the other type
        // (a `simhash64` passed where a plan reads a `bit varying` pointer crashed the backend).
        let text = format!("{text} -- {:?}", config.kind);
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
                        match config.kind {
                            Kind::Simhash64 => crate::lookup::catalog::simhash64_type(schema),
                            Kind::Code => pg_sys::VARBITOID,
                        },
                        pg_sys::FLOAT8OID,
                    ];
                    let types = &types[..if config.verify.is_some() { 7 } else { 6 }];
                    let plan = as_user(owner, || prepare(&text, types));
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
            fp,
        ];
        let mut nulls = vec![false, false, new_key.is_none(), existing_key.is_none(), false, false];
        if config.verify.is_some() {
            args.push(Datum::from(similarity.unwrap_or_default().to_bits()));
            nulls.push(similarity.is_none());
        }
        as_user(owner, || execute(plan, &args, &nulls, 0));
    }
}

/// The owner of relation `relid` (invalid if it does not exist).
///
/// # Safety
///
/// In a backend, inside a transaction.
unsafe fn table_owner(relid: Oid) -> Oid {
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return Oid::INVALID;
        }
        let owner = (*(*rel).rd_rel).relowner;
        pg_sys::RelationClose(rel);
        owner
    }
}
