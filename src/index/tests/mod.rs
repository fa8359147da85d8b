//! The `#[pg_test]` tests of the index access method, by what they cover: the page formats
//! (`formats`) and damaged indexes (`corruption`), with what they share (`pages`). Each file's
//! tests are in a `#[pg_schema] mod tests` of its own (the schema `cargo pgrx test` calls them in).

mod codes;
mod corruption;
mod formats;
mod pages;
