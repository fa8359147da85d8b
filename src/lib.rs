//! simhash: near-duplicate text detection inside PostgreSQL.
//!
//! This crate is the thin pgrx glue that maps `simhash-core` onto SQL, in folders by subsystem:
//! `fingerprint` (the type and the functions that make fingerprints), `codes` (binary codes of any
//! length as `bit(n)`), `index` (the `simhash` index
//! access method: its pages, build, insert, scans, VACUUM and check), `lookup` (how a radius test
//! uses the indexes), `dedup` (the near-duplicate constraint), `pairs` (batch pairs and clusters)
//! and `pg` (small PostgreSQL helpers); each folder's `mod.rs` tells its story. `memory` grows the
//! vectors of a statement's rows with `try_reserve` (an ERROR 53200, never an abort).
//! All SQL objects are declared by hand in `sql/simhash.sql` (the Rust functions are
//! `#[pg_extern(sql = false)]`), so the install script reads like pgvector's and every object
//! carries its COMMENT.

use pgrx::prelude::*;

mod codes;
mod dedup;
mod fingerprint;
mod index;
mod lookup;
mod memory;
mod pairs;
mod pg;

pub use fingerprint::simhash64::SimHash64;

::pgrx::pg_module_magic!();

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    lookup::init();
    dedup::init();
    fingerprint::memory::define();
    index::define_settings();
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"simhash".as_ptr()) };
    // Loaded by shared_preload_libraries: build the dictionaries in the postmaster, so that every
    // backend starts with them (copy-on-write) instead of building them on its first call (docs/performance.md,
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
