//! The page formats an index may have (1 to 5): each is read, written and checked as its library
//! left it, until a REINDEX writes the current one.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use super::super::pages::*;
    use crate::index::page;

    /// The 0.4.0 library reads an index of format 1: radius lookups, inserts (a NULL one is left
    /// out, as 0.3.0 did) and the check work (VACUUM cannot run in a #[pg_test]'s transaction); REINDEX makes it format 2, which serves ORDER BY.
    #[pg_test]
    fn format_1_indexes_work_until_reindexed() {
        table_with_index("v1_docs");
        make_format_1("v1_docs_fp");
        assert_eq!(layout("v1_docs_fp"), Some(false));
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v1_docs_fp')"), Ok(Some(2000)));
        Spi::run(
            "INSERT INTO v1_docs VALUES (-1, NULL), (-2, '0123456789abcdef'); DELETE FROM v1_docs WHERE id % 3 = 0",
        )
        .unwrap();
        let rows = Spi::get_one::<i64>("SELECT count(fp) FROM v1_docs").unwrap();
        // (the entries of the rows deleted stay until VACUUM; the NULL row has none)
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v1_docs_fp')"), Ok(Some(2001)));
        Spi::run("SET enable_seqscan = off").unwrap();
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM v1_docs WHERE fp <~> '0123456789abcdef' <= 64").unwrap(),
            rows
        );
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM v1_docs WHERE fp <~> '0123456789abcdef' <= 0"),
            Ok(Some(1))
        );
        Spi::run("REINDEX INDEX v1_docs_fp").unwrap();
        let all = Spi::get_one::<i64>("SELECT count(*) FROM v1_docs").unwrap();
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM (SELECT id FROM v1_docs ORDER BY fp <-> '0123456789abcdef') o")
                .unwrap(),
            all
        );
    }

    /// Bucket pages are sorted by segment value as built and once full; an INSERT appends unsorted
    /// entries to the last page of a chain; lookups find every row either way.
    #[pg_test]
    fn bucket_pages_are_sorted_as_built_and_when_full() {
        table_with_index("sorted_docs");
        let built = bucket_pages("sorted_docs_fp");
        assert!(!built.is_empty() && built.iter().all(|&(n, sorted, _)| n == sorted), "{built:?}");
        // 4,000 rows in one bucket of each segment (the same top 8 bits of every segment): its
        // chains grow pages.
        Spi::run(&clustered("sorted_docs", "more", "1200120012001200", 2001..=6000)).unwrap();
        let grown = bucket_pages("sorted_docs_fp");
        assert!(grown.iter().all(|&(n, sorted, last)| sorted <= n && (last || sorted == n)), "{grown:?}");
        assert!(grown.iter().any(|&(n, sorted, last)| last && sorted < n), "{grown:?}");
        assert!(grown.iter().filter(|&&(_, _, last)| !last).count() > built.iter().filter(|p| !p.2).count());
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('sorted_docs_fp')"), Ok(Some(6000)));
        Spi::run("SET enable_seqscan = off").unwrap();
        for k in [0, 3, 7, 11] {
            let query = format!(
                "SELECT count(*) FROM sorted_docs s, (SELECT fp FROM sorted_docs WHERE id % 500 = 7) q
                 WHERE s.fp <~> q.fp <= {k}"
            );
            let through_index = Spi::get_one::<i64>(&query).unwrap();
            Spi::run("SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on").unwrap();
            assert_eq!(Spi::get_one::<i64>(&query).unwrap(), through_index, "k = {k}");
            Spi::run("RESET enable_indexscan; RESET enable_bitmapscan; SET enable_seqscan = off").unwrap();
        }
    }

    /// The library reads an index of format 2 (0.4.0: no page counts sorted entries, made here by
    /// clearing the counts and the metapage's version): lookups read whole pages and find every
    /// row, inserts work, and REINDEX makes it format 4.
    #[pg_test]
    fn format_2_indexes_work_until_reindexed() {
        table_with_index("v2_docs");
        each_page("v2_docs_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*page::meta(any_page)).version = 2;
            } else if page::is_kind(any_page, page::Kind::Bucket) {
                (*page::special(any_page)).set_sorted(0);
            }
        });
        pack_pages("v2_docs_fp");
        assert_eq!(layout("v2_docs_fp"), Some(false));
        assert!(bucket_pages("v2_docs_fp").iter().all(|&(_, sorted, _)| sorted == 0));
        // Inserts that fill pages of one bucket (the same top 8 bits of every segment) leave them
        // unsorted: the 0.4.0 library may still write to the index.
        Spi::run(&format!(
            "INSERT INTO v2_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             {}",
            clustered("v2_docs", "v2", "3400340034003400", 3001..=5000)
        ))
        .unwrap();
        let grown = bucket_pages("v2_docs_fp");
        assert!(grown.iter().filter(|p| !p.2).count() >= 4 && grown.iter().all(|p| p.1 == 0), "{grown:?}");
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v2_docs_fp')"), Ok(Some(4002)));
        lookups_agree("v2_docs");
        Spi::run("REINDEX INDEX v2_docs_fp").unwrap();
        assert_eq!(format("v2_docs_fp"), 5);
        assert!(bucket_pages("v2_docs_fp").is_empty());
        lookups_agree("v2_docs");
    }

    /// A page with its entries apart in an index of format 3 or older, which an older library
    /// would misread, is a fault of the check (XX002).
    #[pg_test(
        error = "simhash index \"v3_apart_fp\" is corrupt: block 5 of segment 0 bucket 0: its entries are apart in an index of format 3 or older"
    )]
    fn apart_pages_in_an_older_format_are_corrupt() {
        table_with_index("v3_apart");
        each_page("v3_apart_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*page::meta(any_page)).version = 3;
            }
        });
        Spi::get_one::<i64>("SELECT simhash_index_check('v3_apart_fp')").unwrap();
    }

    /// The library keeps an index of format 3 (0.4.1 to 0.7.0: entries packed, made here by
    /// rewriting the pages and the metapage's version) as it is: lookups, ordered scans and the
    /// check read it, inserts add packed entries (pages that fill are sorted), which a session
    /// still running the older library reads; REINDEX makes it format 4, entries apart.
    #[pg_test]
    fn format_3_indexes_stay_packed_until_reindexed() {
        table_with_index("v3_docs");
        assert_eq!(layout("v3_docs_fp"), Some(true));
        each_page("v3_docs_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*page::meta(any_page)).version = 3;
            }
        });
        pack_pages("v3_docs_fp");
        assert_eq!(layout("v3_docs_fp"), Some(false));
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v3_docs_fp')"), Ok(Some(2000)));
        // 2,000 rows in one bucket of each segment: its chains grow pages, sorted once full.
        Spi::run(&format!(
            "INSERT INTO v3_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             {}",
            clustered("v3_docs", "v3", "5600560056005600", 3001..=5000)
        ))
        .unwrap();
        assert_eq!(layout("v3_docs_fp"), Some(false));
        let grown = bucket_pages("v3_docs_fp");
        assert!(grown.iter().any(|&(n, sorted, last)| !last && n == sorted && n > 500), "{grown:?}");
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v3_docs_fp')"), Ok(Some(4002)));
        lookups_agree("v3_docs");
        Spi::run("REINDEX INDEX v3_docs_fp").unwrap();
        assert_eq!(format("v3_docs_fp"), 5);
        lookups_agree("v3_docs");
    }

    /// An index of format 4 keeps its entries apart as built and as rows are added; lookups and
    /// ordered scans agree with a sequential scan.
    #[pg_test]
    fn format_4_indexes_keep_entries_apart() {
        table_with_index("v4_docs");
        Spi::run(&format!(
            "INSERT INTO v4_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             {};
             DELETE FROM v4_docs WHERE id % 7 = 0",
            clustered("v4_docs", "v4", "7800780078007800", 3001..=5000)
        ))
        .unwrap();
        assert_eq!(layout("v4_docs_fp"), Some(true));
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v4_docs_fp')"), Ok(Some(4002)));
        lookups_agree("v4_docs");
    }

    /// An index of format 5 holds the rows of its build in its built part, and those inserted
    /// since in its buckets, entries apart: lookups, ordered scans, the check and pairs agree with
    /// a sequential scan, with rows of one fingerprint in both parts and rows deleted.
    #[pg_test]
    fn format_5_indexes_hold_the_built_rows_densely() {
        Spi::run(
            "CREATE TABLE v5_docs (id int, fp simhash64);
             INSERT INTO v5_docs SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
             FROM generate_series(1, 3000) i;
             INSERT INTO v5_docs SELECT -i, '0123456789abcdef' FROM generate_series(1, 5) i;
             INSERT INTO v5_docs VALUES (-100, NULL);
             CREATE INDEX v5_docs_fp ON v5_docs USING simhash (fp);",
        )
        .unwrap();
        assert_eq!(format("v5_docs_fp"), 5);
        assert!(bucket_pages("v5_docs_fp").is_empty());
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v5_docs_fp')"), Ok(Some(3006)));
        lookups_agree("v5_docs");
        Spi::run(&format!(
            "INSERT INTO v5_docs VALUES (-101, NULL), (-6, '0123456789abcdef'), (-8, '0123456789abcdee');
             {};
             DELETE FROM v5_docs WHERE id % 7 = 0",
            clustered("v5_docs", "v5", "7800780078007800", 3001..=5000)
        ))
        .unwrap();
        assert_eq!(layout("v5_docs_fp"), Some(true));
        // (the deleted rows' entries stay until VACUUM, which cannot run in a test's transaction)
        assert_eq!(Spi::get_one::<i64>("SELECT simhash_index_check('v5_docs_fp')"), Ok(Some(5009)));
        lookups_agree("v5_docs");
        Spi::run("SET enable_seqscan = off").unwrap();
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM v5_docs WHERE fp <~> '0123456789abcdef' <= 0"),
            Ok(Some(6))
        );
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM v5_docs WHERE fp <~> '0123456789abcdef' <= 1"),
            Ok(Some(7))
        );
        for k in [0, 2, 5, 9, 11, 12, 20, 64] {
            let query = format!(
                "SELECT count(*) FROM v5_docs s, (SELECT fp FROM v5_docs WHERE id % 250 = 1 OR id < 0) q
                 WHERE s.fp <~> q.fp <= {k}"
            );
            let through_index = Spi::get_one::<i64>(&query).unwrap();
            Spi::run("SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on").unwrap();
            assert_eq!(Spi::get_one::<i64>(&query).unwrap(), through_index, "k = {k}");
            Spi::run("RESET enable_indexscan; RESET enable_bitmapscan; SET enable_seqscan = off").unwrap();
        }
        // Every row in order, with little memory for the rows waiting (64 kB: 4,096 rows, so the
        // farthest are dropped and met again in passes over segment 0): the distances in the
        // order of a sort, and each row once (those of the NULL fingerprints last).
        Spi::run("SET work_mem = 64").unwrap();
        let ordered = "SELECT string_agg(coalesce((fp <~> '0123456789abcdef')::text, 'null'), ',' ORDER BY n),
                              string_agg(id::text, ',' ORDER BY id)
                       FROM (SELECT id, fp, row_number() OVER () AS n
                             FROM (SELECT id, fp FROM v5_docs ORDER BY fp <-> '0123456789abcdef') o) r";
        let through_index = Spi::get_two::<String, String>(ordered).unwrap();
        Spi::run("SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on").unwrap();
        assert_eq!(Spi::get_two::<String, String>(ordered).unwrap(), through_index);
        Spi::run("RESET enable_indexscan; RESET enable_bitmapscan; RESET enable_seqscan; RESET work_mem").unwrap();
    }

    /// An ordered scan of a format 1 index, which holds no NULL rows, fails (55000) rather than
    /// leave them out.
    #[pg_test(error = "simhash index \"v1_order_fp\" was built by simhash 0.3.0 and cannot serve ORDER BY")]
    fn format_1_indexes_refuse_order_by() {
        table_with_index("v1_order");
        make_format_1("v1_order_fp");
        Spi::run("SET enable_seqscan = off").unwrap();
        Spi::get_one::<i64>("SELECT count(*) FROM (SELECT id FROM v1_order ORDER BY fp <-> '0123456789abcdef') o")
            .unwrap();
    }
}
