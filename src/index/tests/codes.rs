//! A damaged index of bit codes (`crate::index::codes`: an entry naming a row beyond the code
//! store, a directory pointing beyond the entries, a code-store page whose size is not a number
//! of slots, a tail that loops, a metapage of another format) is an ERROR XX002 for every
//! reader, never a read outside the index or a wait forever.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use super::super::pages::{each_page, header};
    use crate::index::page::{self, Kind};

    /// A table of 3,000 codes of 128 bits with an index, then 300 rows inserted (the tail) and a
    /// NULL one.
    fn table(name: &str) {
        Spi::run(&format!(
            "CREATE TABLE {name} (id int, code bit(128));
             INSERT INTO {name} SELECT i, ('x' || md5(i::text))::bit(128) FROM generate_series(1, 3000) i;
             CREATE INDEX {name}_code ON {name} USING simhash (code);
             INSERT INTO {name} SELECT -i, ('x' || md5(i::text))::bit(128) FROM generate_series(1, 300) i;
             INSERT INTO {name} VALUES (0, NULL);"
        ))
        .unwrap();
    }

    /// The SQLSTATE and message of the error `query` raises ("" when none), caught in a PL/pgSQL
    /// block, with sequential scans off.
    fn error_of(query: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.error_of(query text) RETURNS text LANGUAGE plpgsql AS $f$
             BEGIN
                 EXECUTE query;
                 RETURN '';
             EXCEPTION WHEN OTHERS THEN
                 RETURN SQLSTATE || ': ' || SQLERRM;
             END $f$",
        )
        .unwrap();
        Spi::run("SET enable_seqscan = off").unwrap();
        let error = Spi::get_one::<String>(&format!("SELECT pg_temp.error_of($q${query}$q$)")).unwrap().unwrap();
        Spi::run("RESET enable_seqscan").unwrap();
        error
    }

    /// Asserts that lookups (index and bitmap scans), an ordered scan, an insert and the check
    /// of the table `name`, whose index `damage` damaged, fail with XX002 naming the index (those
    /// of `ops`: "lookup", "bitmap", "ordered", "insert", "check").
    fn assert_corrupt(name: &str, damage: &str, ops: &[&str]) {
        let q = format!("(SELECT code FROM {name} WHERE id = 7)");
        for &op in ops {
            let query = match op {
                "lookup" => format!(
                    "SELECT count(*) FROM (SELECT id FROM {name} WHERE code <@ simhash_code_ball({q}, 3) ORDER BY code <-> simhash_code_ball({q}, 0)) s"
                ),
                "bitmap" => format!("SELECT count(*) FROM {name} WHERE code <@ simhash_code_ball({q}, 3)"),
                "ordered" => format!("SELECT count(*) FROM (SELECT id FROM {name} ORDER BY code <-> simhash_code_ball({q}, 0)) s"),
                "insert" => format!("INSERT INTO {name} VALUES (-1000, {q})"),
                "check" => format!("SELECT simhash_index_check('{name}_code')"),
                _ => unreachable!(),
            };
            let error = error_of(&query);
            assert!(
                error.starts_with("XX002: ") && error.contains(&format!("\"{name}_code\"")),
                "{damage}: {op} gave {error:?}"
            );
        }
    }

    /// Applies `damage` to every page of `kind` of the index of the table `name`.
    fn damage_pages(name: &str, kind: Kind, mut damage: impl FnMut(pgrx::pg_sys::Page)) {
        let mut damaged = 0;
        each_page(&format!("{name}_code"), true, |_, any_page| unsafe {
            if page::is_kind(any_page, kind) {
                damage(any_page);
                damaged += 1;
            }
        });
        assert!(damaged > 0, "no {kind:?} page in {name}_code");
    }

    #[pg_test]
    fn damaged_indexes_of_codes_are_corrupt() {
        // Sound: every reader works.
        table("codes_sound");
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('codes_sound_code')").unwrap(), Some(3301));

        // Entries naming rows beyond the code store.
        table("codes_ordinals");
        damage_pages("codes_ordinals", Kind::CodeEntries, |entries_page| unsafe {
            let ordinals = page::contents(entries_page).cast::<u32>();
            for i in 0..crate::index::codes::meta::entries_on(entries_page, 1) {
                ordinals.add(i).write_unaligned(u32::MAX - 1);
            }
        });
        assert_corrupt("codes_ordinals", "ordinals beyond the rows", &["lookup", "bitmap", "check"]);

        // A directory pointing beyond the entries.
        table("codes_directory");
        damage_pages("codes_directory", Kind::CodeDirectory, |directory_page| unsafe {
            let positions = page::contents(directory_page).cast::<u32>();
            for i in 0..page::used(directory_page) / 4 {
                positions.add(i).write_unaligned(1_000_000 + i as u32);
            }
        });
        assert_corrupt("codes_directory", "a directory beyond the entries", &["lookup", "bitmap", "check"]);

        // Code-store pages whose size is not a number of slots (or beyond the page).
        table("codes_store");
        damage_pages("codes_store", Kind::CodeStore, |store_page| unsafe { (*header(store_page)).pd_lower -= 5 });
        assert_corrupt("codes_store", "store pages of part of a slot", &["lookup", "bitmap", "ordered", "check"]);
        table("codes_store_big");
        damage_pages("codes_store_big", Kind::CodeStore, |store_page| unsafe {
            (*header(store_page)).pd_lower = 0xFFF0;
        });
        assert_corrupt("codes_store_big", "store pages beyond the page", &["lookup", "bitmap", "ordered", "check"]);

        // A tail that loops (each page linking to itself).
        table("codes_loop");
        let mut blocks = Vec::new();
        each_page("codes_loop_code", false, |block, any_page| unsafe {
            if page::is_kind(any_page, Kind::CodeTail) {
                blocks.push(block);
            }
        });
        each_page("codes_loop_code", true, |block, any_page| unsafe {
            if blocks.contains(&block) {
                (*page::special(any_page)).next = block;
            }
        });
        assert_corrupt("codes_loop", "a tail that loops", &["lookup", "bitmap", "ordered", "check"]);

        // A metapage of the simhash64 kind's format.
        table("codes_meta");
        each_page("codes_meta_code", true, |block, any_page| unsafe {
            if block == 0 {
                (*crate::index::codes::meta::codes_meta(any_page)).version = 5;
            }
        });
        assert_corrupt("codes_meta", "a metapage of format 5", &["lookup", "bitmap", "ordered", "insert", "check"]);
    }
}
