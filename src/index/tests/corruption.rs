//! A damaged index (a page header outside the page, a link to a block of no chain, a chain that
//! loops, a built part whose segments disagree) is an ERROR XX002 for every reader, never a read
//! outside the index or a wait forever (issue 35).

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use super::super::pages::*;
    use crate::index::page;

    /// A built part whose segments disagree (a residual of segment 2 changed) is a fault of the
    /// check (XX002).
    #[pg_test(
        error = "simhash index \"v5_damaged_fp\" is corrupt: segment 2 of its built part holds other fingerprints than segment 0"
    )]
    fn built_parts_whose_segments_disagree_are_corrupt() {
        Spi::run(
            "CREATE TABLE v5_damaged (id int, fp simhash64);
             INSERT INTO v5_damaged SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
             FROM generate_series(1, 2000) i;
             CREATE INDEX v5_damaged_fp ON v5_damaged USING simhash (fp);",
        )
        .unwrap();
        let mut damaged = false;
        each_page("v5_damaged_fp", true, |_, any_page| unsafe {
            if !damaged && page::is_kind(any_page, page::Kind::Dense) && (*page::special(any_page)).segment() == 2 {
                *page::contents(any_page).add(100) ^= 1;
                damaged = true;
            }
        });
        assert!(damaged);
        Spi::get_one::<i64>("SELECT simhash_index_check('v5_damaged_fp')").unwrap();
    }

    /// A page whose header puts its entries or its special space outside the page (of any kind:
    /// bucket pages of formats 3 and 4, pages of the built part, directory, metapage) is reported
    /// as corrupt (XX002) by lookups, inserts, ordered scans and the check, which read nothing
    /// outside the page.
    #[pg_test]
    fn pages_whose_header_leaves_the_page_are_corrupt() {
        // Entries apart, their fingerprints up to pd_lower beyond the page, pd_upper below them.
        let bucket = |_: pgrx::pg_sys::BlockNumber, any_page: pgrx::pg_sys::Page| unsafe {
            page::is_kind(any_page, page::Kind::Bucket)
        };
        assert_damaged_headers_corrupt("hdr_apart", 4, bucket, "pd_lower beyond the page (apart)", |header| {
            (header.pd_lower, header.pd_upper) = (0xFFF8, 32)
        });
        // Entries packed (format 3), up to pd_lower beyond the page.
        assert_damaged_headers_corrupt("hdr_packed", 3, bucket, "pd_lower beyond the page (packed)", |header| {
            header.pd_lower = 0xFFF8
        });
        // The special space beyond the page.
        assert_damaged_headers_corrupt("hdr_special", 4, bucket, "pd_special beyond the page", |header| {
            header.pd_special = 0xFFF0
        });
        // Pages of the built part: the special space beyond the page, or pd_lower (an insert
        // does not read the built part).
        for (name, lower) in [("hdr_dense", false), ("hdr_dense_lower", true)] {
            let fp = damaged_table(name, 5);
            each_page(&format!("{name}_fp"), true, |_, any_page| unsafe {
                if page::is_kind(any_page, page::Kind::Dense) || page::is_kind(any_page, page::Kind::DenseDirectory) {
                    if lower {
                        (*header(any_page)).pd_lower = 0xFFF8;
                    } else {
                        (*header(any_page)).pd_special = 0xFFF0;
                    }
                }
            });
            assert_corrupt(name, &fp, "a page of the built part", &[Op::Lookup, Op::Ordered, Op::Check]);
            assert_eq!(error_of(name, &fp, Op::Insert), "");
        }
        // The directory's pages and the metapage.
        let directory = |_: pgrx::pg_sys::BlockNumber, any_page: pgrx::pg_sys::Page| unsafe {
            page::is_kind(any_page, page::Kind::Directory)
        };
        assert_damaged_headers_corrupt("hdr_directory", 5, directory, "directory pages", |header| {
            header.pd_special = 0xFFF0
        });
        assert_damaged_headers_corrupt(
            "hdr_meta",
            5,
            |block, _| block == 0,
            "the metapage",
            |header| header.pd_special = 0xFFF0,
        );
    }

    /// A link to a block that cannot be a page of a chain (the metapage, the directory page that
    /// holds it, the built part, beyond the index's end) is reported as corrupt (XX002) before the
    /// block is locked: an insert, which holds the directory page or the metapage while it locks
    /// the last page of the chain, does not wait for itself.
    #[pg_test]
    fn links_to_blocks_of_no_chain_are_corrupt() {
        // Every bucket of segment 0 starts and ends at its own directory page (block 1).
        let fp = damaged_table("link_directory", 5);
        each_page("link_directory_fp", true, |block, any_page| unsafe {
            if block == 1 {
                assert!(page::is_kind(any_page, page::Kind::Directory) && (*page::special(any_page)).segment() == 0);
                let slots = page::used(any_page) / std::mem::size_of::<page::DirectoryEntry>();
                for slot in 0..slots {
                    *page::directory_entry(any_page, slot) = page::DirectoryEntry { head: 1, tail: 1 };
                }
            }
        });
        assert_corrupt("link_directory", &fp, "links to the directory", &ALL_OPS);
        // The chain of NULL rows starts and ends at the metapage.
        let fp = damaged_table("link_meta", 5);
        each_page("link_meta_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*page::meta(any_page)).nulls = page::DirectoryEntry { head: 0, tail: 0 };
            }
        });
        assert_corrupt("link_meta", &fp, "links to the metapage", &[Op::InsertNull, Op::Ordered, Op::Check]);
        // Every bucket links beyond the index's end, or into its built part.
        for (name, target) in [("link_beyond", 1_000_000), ("link_built", 0)] {
            let fp = damaged_table(name, 5);
            let mut built = 0;
            each_page(&format!("{name}_fp"), true, |block, any_page| unsafe {
                if block == 0 {
                    built = (*page::meta(any_page)).dense_start;
                }
                if page::is_kind(any_page, page::Kind::Directory) {
                    let slots = page::used(any_page) / std::mem::size_of::<page::DirectoryEntry>();
                    let target = if target == 0 { built } else { target };
                    for slot in 0..slots {
                        *page::directory_entry(any_page, slot) = page::DirectoryEntry { head: target, tail: target };
                    }
                }
            });
            assert_corrupt(name, &fp, "links beyond the end or into the built part", &ALL_OPS);
        }
        // A metapage whose built part does not fit the index.
        let fp = damaged_table("link_rows", 5);
        each_page("link_rows_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*page::meta(any_page)).dense_rows = 4_000_000_000;
            }
        });
        assert_corrupt("link_rows", &fp, "a built part beyond the end", &ALL_OPS);
    }

    /// A chain that loops (each last page linking to itself) is reported as corrupt (XX002) by the
    /// walks along it, which would follow it forever, and by an insert (its last page has a next
    /// page).
    #[pg_test]
    fn chains_that_loop_are_corrupt() {
        let fp = damaged_table("looped", 4);
        each_page("looped_fp", true, |block, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) && (*page::special(any_page)).next == page::INVALID_BLOCK {
                (*page::special(any_page)).next = block;
            }
        });
        assert_corrupt("looped", &fp, "chains that loop", &ALL_OPS);
        // The same in the buckets of an index of format 5 (the rows inserted since its build), and
        // in its chain of NULL rows, which only ordered scans read.
        let fp = damaged_table("looped_5", 5);
        each_page("looped_5_fp", true, |block, any_page| unsafe {
            let chain = page::is_kind(any_page, page::Kind::Bucket) || page::is_kind(any_page, page::Kind::Nulls);
            if chain && (*page::special(any_page)).next == page::INVALID_BLOCK {
                (*page::special(any_page)).next = block;
            }
        });
        assert_corrupt(
            "looped_5",
            &fp,
            "chains of format 5 that loop",
            &[Op::Insert, Op::InsertNull, Op::Ordered, Op::Check],
        );
    }
}
