//! simhash: near-duplicate text detection inside PostgreSQL.
//!
//! This crate is the thin pgrx glue: each module maps one SQL concern onto `simhash-core`.
//! All SQL objects are declared by hand in `sql/simhash.sql` (the Rust functions are
//! `#[pg_extern(sql = false)]`), so the install script reads like pgvector's and every object
//! carries its COMMENT.

use pgrx::prelude::*;

mod errors;
mod fingerprint;
mod planner_support;
mod simhash64;

pub use simhash64::SimHash64;

::pgrx::pg_module_magic!();

extension_sql_file!(
    "../sql/simhash.sql",
    name = "simhash_objects",
    bootstrap,
    creates = [Type(SimHash64)]
);

/// Hooks `cargo pgrx test` calls before the `#[pg_test]` functions run.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
