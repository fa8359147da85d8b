//! simhash: near-duplicate text detection inside PostgreSQL.
//!
//! This crate is the thin pgrx glue: each module maps one SQL concern onto `simhash-core`.
//! All SQL objects are declared by hand in `sql/simhash.sql` (the Rust functions are
//! `#[pg_extern(sql = false)]`), so the install script reads like pgvector's and every object
//! carries its COMMENT.

use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

mod dedup;
mod fingerprint;
mod lookup;
mod pairs;
mod pg;

pub use fingerprint::simhash64::SimHash64;

::pgrx::pg_module_magic!();

/// `simhash.enable_rewrite`: the planner rewrite of radius tests into index probes.
pub static ENABLE_REWRITE: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `simhash.enable_radius_scan`: the custom scan that checks distances inside covering indexes.
pub static ENABLE_RADIUS_SCAN: GucSetting<bool> = GucSetting::<bool>::new(true);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    GucRegistry::define_bool_guc(
        c"simhash.enable_rewrite",
        c"Rewrites radius tests such as fp <~> q <= k into lookups through simhash indexes.",
        c"Off leaves every radius test as written: useful to compare plans and timings.",
        &ENABLE_REWRITE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"simhash.enable_radius_scan",
        c"Lets the planner answer radius tests with the SimHash Radius Scan over covering segment indexes.",
        c"Off leaves radius tests to PostgreSQL's own scans (BitmapOr or sequential).",
        &ENABLE_RADIUS_SCAN,
        GucContext::Userset,
        GucFlags::default(),
    );
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"simhash".as_ptr()) };
    dedup::init();
    lookup::init();
    // Loaded by shared_preload_libraries: build the dictionaries in the postmaster, so that every
    // backend starts with them (copy-on-write) instead of building them on its first call (README,
    // "Fingerprinting speed").
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        simhash_core::features::preload();
    }
}

extension_sql_file!("../sql/simhash.sql", name = "simhash_objects", bootstrap, creates = [Type(SimHash64)]);

/// Hooks `cargo pgrx test` calls before the `#[pg_test]` functions run.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
