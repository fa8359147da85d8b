//! The `simhash` index access method: `CREATE INDEX ... USING simhash (fp)`.
//!
//! Each fingerprint is filed under each of its four 16-bit segments: the rows the index was built
//! with in its built part, by whole segment value, densely (`dense`, `simhash_core::dense`; since
//! format 5), and the rows inserted since in the bucket of the segment's top bits
//! (`simhash_core::buckets` has that layout and why a lookup is exact; `page` the pages). A radius
//! test reaches it as the operator `fp <@ simhash_ball(q, k)`, which the planner rewrite makes of
//! `fp <~> q <= k` where the column has such an index (`crate::lookup::support`); the scan
//! (`scan`) reads the runs and buckets of the values within each segment's radius of the query's
//! segments (radii adding up to `k - 3`, `simhash_core::probes::segment_radii`) and checks each
//! entry's distance in the page, so the table is read only for the rows within `k`. `build` writes
//! a new index, `insert` adds a row, `vacuum` removes the entries of removed rows (in the built
//! part, marks their TIDs); every change is WAL-logged (GenericXLog, or whole pages after a build).
//!
//! `ORDER BY fp <~> q` is served too, nearest first (`scan`). Not yet: parallel scans.

use pgrx::pg_sys::{self, Datum};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

mod build;
mod check;
mod dense;
mod insert;
mod page;
mod pairs;
mod recent;
mod scan;
mod selectivity;
mod vacuum;

pub(crate) const SEGMENTS: u32 = simhash_core::SEGMENTS;

/// Room for `more` items, or an ERROR (53200) instead of the abort of a failed allocation.
pub(super) fn reserve<T>(vec: &mut Vec<T>, more: usize) {
    if vec.try_reserve(more).is_err() {
        raise(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!(
                "out of memory for {more} more entries of a simhash index ({} bytes each, {} held)",
                std::mem::size_of::<T>(),
                vec.len()
            ),
            None,
            Some(
                "A build or a check of a simhash index holds every row's entry in memory, and a radius \
                 lookup every match: give the server more memory, or use a smaller radius."
                    .into(),
            ),
        );
    }
}

/// Elements that [`sort_interruptibly`] sorts in one go (about 30 ms for 16-byte keys).
const SORTED_AT_ONCE: usize = 1 << 20;

/// `items.sort_unstable_by_key(key)`, in pieces of at most [`SORTED_AT_ONCE`] elements with a
/// check for interrupts between them (a sort of ten million entries takes a third of a second,
/// more for a hundred million): each slice beyond that is split at its median
/// (`select_nth_unstable_by_key`, linear: 40 ms for ten million), and its halves sorted alone.
pub(super) fn sort_interruptibly<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K + Copy) {
    if items.len() <= SORTED_AT_ONCE {
        items.sort_unstable_by_key(key);
    } else {
        let middle = items.len() / 2;
        items.select_nth_unstable_by_key(middle, key);
        pgrx::check_for_interrupts!();
        let (low, high) = items.split_at_mut(middle);
        sort_interruptibly(low, key);
        sort_interruptibly(high, key);
    }
    pgrx::check_for_interrupts!();
}

/// `vec.push(item)`, or an ERROR (53200) when memory runs out.
pub(super) fn push<T>(vec: &mut Vec<T>, item: T) {
    if vec.len() == vec.capacity() {
        reserve(vec, vec.len().max(1024));
    }
    vec.push(item);
}

/// The TIDs of the rows whose fingerprint is within `k` bits of `fp` (each once, ascending), as
/// `index` holds them now: for the near-duplicate constraint's recheck, which fetches the rows with
/// a dirty snapshot (a scan through the index AM accepts only MVCC snapshots).
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn rows_within(index: pg_sys::Relation, fp: u64, k: u32) -> Vec<pg_sys::ItemPointerData> {
    unsafe { scan::search(index, &[Some((fp, k.min(64) as i32))]) }
}

/// For each fingerprint of `fps`, the rows within `k` bits of it (`k` at most
/// `simhash_core::buckets::MAX_PROBED_RADIUS`): (position in `fps`, TID) pairs, each once, with
/// every bucket read once for all of them: for the near-duplicate constraint's recheck of many rows.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn rows_within_each(
    index: pg_sys::Relation,
    fps: &[u64],
    k: u32,
) -> Vec<(usize, pg_sys::ItemPointerData)> {
    unsafe { scan::search_many(index, fps, k) }
}

/// Reports once each pair of entries of `index` within `k` (at most
/// `simhash_core::buckets::MAX_PROBED_RADIUS`), live or not, to `on_pairs`, a group of entries with
/// one fingerprint at a time (`simhash_core::bucket_pairs::OnPairs`; TIDs as
/// `crate::pg::tid::tid_order` keys), a bucket or two in memory at a time: for `simhash_pairs` of a
/// table. No page is locked or pinned during the calls.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(crate) unsafe fn pairs_within(index: pg_sys::Relation, k: u32, on_pair: simhash_core::bucket_pairs::OnPairs<u64>) {
    unsafe { pairs::for_each_pair(index, k, on_pair) }
}

/// The fingerprint of an index value (`None` for NULL).
pub(super) fn fingerprint_of(value: Datum, isnull: bool) -> Option<u64> {
    (!isnull).then(|| value.value() as u64)
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_amhandler() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The access method's handler: its capabilities and callbacks.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_amhandler(_fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let am = pg_sys::palloc0(std::mem::size_of::<pg_sys::IndexAmRoutine>()) as *mut pg_sys::IndexAmRoutine;
        (*am).type_ = pg_sys::NodeTag::T_IndexAmRoutine;
        (*am).amstrategies = 2; // 1: fp <@ simhash_ball, 2: ORDER BY fp <~> q
        (*am).amsupport = 0;
        (*am).amoptsprocnum = 0;
        (*am).amcanorder = false;
        (*am).amcanorderbyop = true;
        (*am).amcanbackward = false;
        (*am).amcanunique = false;
        (*am).amcanmulticol = false;
        // ORDER BY without a radius test: the scan returns every row, those with a NULL
        // fingerprint too (the index holds them in a chain of their own).
        (*am).amoptionalkey = true;
        (*am).amsearcharray = false;
        (*am).amsearchnulls = false;
        (*am).amstorage = false;
        (*am).amclusterable = false;
        (*am).ampredlocks = false;
        (*am).amcanparallel = false;
        (*am).amcaninclude = false;
        (*am).amusemaintenanceworkmem = false;
        (*am).amparallelvacuumoptions = 0; // VACUUM_OPTION_NO_PARALLEL
        (*am).amkeytype = pg_sys::InvalidOid;

        (*am).ambuild = Some(build::ambuild);
        (*am).ambuildempty = Some(build::ambuildempty);
        (*am).aminsert = Some(insert::aminsert);
        (*am).ambulkdelete = Some(vacuum::ambulkdelete);
        (*am).amvacuumcleanup = Some(vacuum::amvacuumcleanup);
        (*am).amcostestimate = Some(scan::amcostestimate);
        (*am).amoptions = Some(amoptions);
        (*am).amvalidate = Some(amvalidate);
        (*am).ambeginscan = Some(scan::ambeginscan);
        (*am).amrescan = Some(scan::amrescan);
        (*am).amgettuple = Some(scan::amgettuple);
        (*am).amgetbitmap = Some(scan::amgetbitmap);
        (*am).amendscan = Some(scan::amendscan);
        Datum::from(am)
    }
}

/// `WITH (...)`: a simhash index takes no options.
#[pg_guard]
unsafe extern "C-unwind" fn amoptions(reloptions: Datum, validate: bool) -> *mut pg_sys::bytea {
    if validate && !reloptions.is_null() {
        raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "simhash indexes take no storage parameters".into(),
            None,
            Some("Leave out the WITH clause.".into()),
        );
    }
    std::ptr::null_mut()
}

/// The operator classes are the extension's own (sql/simhash.sql): nothing to check.
#[pg_guard]
unsafe extern "C-unwind" fn amvalidate(_opclass: pg_sys::Oid) -> bool {
    true
}

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_simhash_within_ball() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `fp <@ simhash_ball(q, k)`: whether `fp` is within `k` bits of `q` (NULL when the ball's center
/// or radius is NULL), as `fp <~> q <= k`.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn simhash_within_ball(fcinfo: pg_sys::FunctionCallInfo) -> Datum {
    unsafe {
        let args = (*fcinfo).args.as_slice(2);
        // STRICT: both arguments are non-NULL here.
        match scan::ball_of(args[1].value) {
            Some(ball) => Datum::from(scan::within(args[0].value.value() as u64, ball)),
            None => {
                (*fcinfo).isnull = true;
                Datum::from(0)
            }
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::pg_sys;
    use pgrx::prelude::*;

    use super::page;

    /// Turns a new index into one as 0.3.0 built it (page format 1: a 16-byte metapage, no chain
    /// of NULL rows): the metapage rewritten, as no SQL can.
    fn make_format_1(name: &str) {
        let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{name}'::regclass::oid")).unwrap().unwrap();
        unsafe {
            let index = pg_sys::index_open(oid, pg_sys::AccessExclusiveLock as i32);
            let buffer = page::read_locked(index, 0, pg_sys::BUFFER_LOCK_EXCLUSIVE);
            let metapage = pg_sys::BufferGetPage(buffer);
            (*page::meta(metapage)).version = 1;
            (*page::meta(metapage)).nulls = page::DirectoryEntry { head: 0, tail: 0 }; // (past pd_lower in format 1)
            page::set_used(metapage, 16);
            pg_sys::MarkBufferDirty(buffer);
            pg_sys::UnlockReleaseBuffer(buffer);
            pg_sys::index_close(index, pg_sys::AccessExclusiveLock as i32);
        }
        pack_pages(name);
    }

    /// Rewrites the entries of every bucket page (and page of NULL rows) of the index `name`
    /// packed, as the pages of formats 1 to 3 hold them.
    fn pack_pages(name: &str) {
        each_page(name, true, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) || page::is_kind(any_page, page::Kind::Nulls) {
                page::rewrite_entries(any_page, &page::entries(any_page).to_vec(), false);
            }
        });
    }

    /// A table of 2,000 fingerprints with a simhash index (no NULL ones: a format 1 index has no
    /// pages for them) of format 4, every row in the buckets, as the tests of the older formats
    /// start from.
    fn table_with_index(name: &str) {
        super::build::BUILD_FORMAT_4.with(|f| f.set(true));
        let created = Spi::run(&format!(
            "CREATE TABLE {name} (id int, fp simhash64);
             INSERT INTO {name} SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
             FROM generate_series(1, 2000) i;
             CREATE INDEX {name}_fp ON {name} USING simhash (fp);"
        ));
        super::build::BUILD_FORMAT_4.with(|f| f.set(false));
        created.unwrap();
        assert_eq!(format(&format!("{name}_fp")), 4);
    }

    /// The page format of the index `name`.
    fn format(name: &str) -> u32 {
        let mut version = 0;
        each_page(name, false, |block, any_page| unsafe {
            if block == 0 {
                version = (*page::meta(any_page)).version;
            }
        });
        version
    }

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

    /// Calls `each(block, page)` with every page of the index `name`, exclusively locked (marked
    /// dirty with `write`).
    fn each_page(name: &str, write: bool, mut each: impl FnMut(pg_sys::BlockNumber, pg_sys::Page)) {
        let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{name}'::regclass::oid")).unwrap().unwrap();
        unsafe {
            let index = pg_sys::index_open(oid, pg_sys::AccessExclusiveLock as i32);
            let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
            for block in 0..blocks {
                let buffer = page::read_locked(index, block, pg_sys::BUFFER_LOCK_EXCLUSIVE);
                each(block, pg_sys::BufferGetPage(buffer));
                if write {
                    pg_sys::MarkBufferDirty(buffer);
                }
                pg_sys::UnlockReleaseBuffer(buffer);
            }
            pg_sys::index_close(index, pg_sys::AccessExclusiveLock as i32);
        }
    }

    /// (entries, sorted entries, whether the page is the last of its chain) of every bucket page.
    fn bucket_pages(name: &str) -> Vec<(usize, usize, bool)> {
        let mut pages = Vec::new();
        each_page(name, false, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) {
                let special = *page::special(any_page);
                pages.push((page::entries(any_page).len(), special.sorted(), special.next == page::INVALID_BLOCK));
            }
        });
        pages
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
        Spi::run(
            "INSERT INTO sorted_docs SELECT i, (('x' || substr(md5('more' || i), 1, 16))::bit(64)::bigint
                 & x'00ff00ff00ff00ff'::bigint | x'1200120012001200'::bigint)::simhash64
             FROM generate_series(2001, 6000) i",
        )
        .unwrap();
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
        Spi::run(
            "INSERT INTO v2_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             INSERT INTO v2_docs SELECT i, (('x' || substr(md5('v2' || i), 1, 16))::bit(64)::bigint
                 & x'00ff00ff00ff00ff'::bigint | x'3400340034003400'::bigint)::simhash64
             FROM generate_series(3001, 5000) i",
        )
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

    /// Whether every bucket page (and page of NULL rows) with entries of the index `name` keeps
    /// them apart (`true`) or packed (`false`); `None` when they differ.
    fn layout(name: &str) -> Option<bool> {
        let mut layouts = Vec::new();
        each_page(name, false, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) || page::is_kind(any_page, page::Kind::Nulls) {
                match page::entries(any_page) {
                    page::Entries::Packed(entries) if !entries.is_empty() => layouts.push(false),
                    page::Entries::Apart(apart) if !apart.fps.is_empty() => layouts.push(true),
                    _ => {}
                }
            }
        });
        layouts.dedup();
        (layouts.len() == 1).then(|| layouts[0])
    }

    /// The rows within `k` of 20 of the rows of `table`, counted through the index and by a
    /// sequential scan; and the distances of the 100 rows nearest to one, in the order of an
    /// ordered index scan and of a sort.
    fn lookups_agree(table: &str) {
        let query = format!(
            "SELECT count(*) FROM {table} s, (SELECT fp FROM {table} WHERE id % 100 = 3) q WHERE s.fp <~> q.fp <= 11"
        );
        let nearest = format!(
            "SELECT array_agg(d)::text FROM (SELECT fp <~> '0123456789abcdef' AS d FROM {table}
             ORDER BY fp <-> '0123456789abcdef' LIMIT 100) o"
        );
        Spi::run("SET enable_seqscan = off").unwrap();
        let (through_index, ordered) =
            (Spi::get_one::<i64>(&query).unwrap(), Spi::get_one::<String>(&nearest).unwrap());
        Spi::run("SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on").unwrap();
        assert_eq!(Spi::get_one::<i64>(&query).unwrap(), through_index);
        assert_eq!(Spi::get_one::<String>(&nearest).unwrap(), ordered);
        Spi::run("RESET enable_indexscan; RESET enable_bitmapscan; RESET enable_seqscan").unwrap();
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
        Spi::run(
            "INSERT INTO v3_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             INSERT INTO v3_docs SELECT i, (('x' || substr(md5('v3' || i), 1, 16))::bit(64)::bigint
                 & x'00ff00ff00ff00ff'::bigint | x'5600560056005600'::bigint)::simhash64
             FROM generate_series(3001, 5000) i",
        )
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
        Spi::run(
            "INSERT INTO v4_docs VALUES (-1, NULL), (-2, '0123456789abcdef');
             INSERT INTO v4_docs SELECT i, (('x' || substr(md5('v4' || i), 1, 16))::bit(64)::bigint
                 & x'00ff00ff00ff00ff'::bigint | x'7800780078007800'::bigint)::simhash64
             FROM generate_series(3001, 5000) i;
             DELETE FROM v4_docs WHERE id % 7 = 0",
        )
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
        Spi::run(
            "INSERT INTO v5_docs VALUES (-101, NULL), (-6, '0123456789abcdef'), (-8, '0123456789abcdee');
             INSERT INTO v5_docs SELECT i, (('x' || substr(md5('v5' || i), 1, 16))::bit(64)::bigint
                 & x'00ff00ff00ff00ff'::bigint | x'7800780078007800'::bigint)::simhash64
             FROM generate_series(3001, 5000) i;
             DELETE FROM v5_docs WHERE id % 7 = 0",
        )
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

    /// What of the index of a table a corruption test runs (`Damaged::errors`).
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Op {
        /// A radius lookup through the index.
        Lookup,
        /// An insert of a row with the fingerprint of row 1.
        Insert,
        /// An insert of a row whose fingerprint is NULL.
        InsertNull,
        /// A full ordered scan (every row, through the index).
        Ordered,
        /// `simhash_index_check`.
        Check,
    }

    const ALL_OPS: [Op; 4] = [Op::Lookup, Op::Insert, Op::Ordered, Op::Check];

    /// A table `name` (id, fp) of 2,000 rows with the index `{name}_fp` of page format `version`
    /// (3, 4 or 5; in 5, 300 rows and 10 NULL ones inserted after the build, so that its buckets
    /// have pages), and the fingerprint of row 1 as text.
    fn damaged_table(name: &str, version: u32) -> String {
        if version < 5 {
            table_with_index(name);
            if version == 3 {
                each_page(&format!("{name}_fp"), true, |block, any_page| unsafe {
                    if block == 0 {
                        (*page::meta(any_page)).version = 3;
                    }
                });
                pack_pages(&format!("{name}_fp"));
            }
        } else {
            Spi::run(&format!(
                "CREATE TABLE {name} (id int, fp simhash64);
                 INSERT INTO {name} SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
                 FROM generate_series(1, 2000) i;
                 CREATE INDEX {name}_fp ON {name} USING simhash (fp);
                 INSERT INTO {name} SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
                 FROM generate_series(2001, 2300) i;
                 INSERT INTO {name} SELECT -i, NULL FROM generate_series(1, 10) i;"
            ))
            .unwrap();
        }
        assert_eq!(format(&format!("{name}_fp")), version);
        Spi::get_one::<String>(&format!("SELECT fp::text FROM {name} WHERE id = 1")).unwrap().unwrap()
    }

    /// The SQLSTATE and message of the error `op` raises on the table `name` ("" when none),
    /// caught in a PL/pgSQL block (a subtransaction, which releases what the failed statement
    /// held); `fp` is the fingerprint of row 1.
    fn error_of(name: &str, fp: &str, op: Op) -> String {
        let query = match op {
            Op::Lookup => format!("SELECT count(*) FROM {name} WHERE fp <~> '{fp}' <= 3"),
            Op::Insert => format!("INSERT INTO {name} VALUES (-100, '{fp}')"),
            Op::InsertNull => format!("INSERT INTO {name} VALUES (-101, NULL)"),
            Op::Ordered => format!("SELECT count(*) FROM (SELECT id FROM {name} ORDER BY fp <-> '{fp}') s"),
            Op::Check => format!("SELECT simhash_index_check('{name}_fp')"),
        };
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
        // (only the index can serve the lookup and the ordered scan)
        Spi::run("SET enable_seqscan = off").unwrap();
        let error = Spi::get_one::<String>(&format!("SELECT pg_temp.error_of($q${query}$q$)")).unwrap().unwrap();
        Spi::run("RESET enable_seqscan").unwrap();
        error
    }

    /// Asserts that each of `ops` on the table `name`, whose index `damage` damaged, fails with
    /// XX002 (index corrupted) and a message that names the index and a block.
    fn assert_corrupt(name: &str, fp: &str, damage: &str, ops: &[Op]) {
        for &op in ops {
            let error = error_of(name, fp, op);
            assert!(
                error.starts_with("XX002: ") && error.contains(&format!("\"{name}_fp\"")) && error.contains("block"),
                "{damage}: {op:?} gave {error:?}"
            );
        }
    }

    /// The header of `any_page`.
    unsafe fn header(any_page: pg_sys::Page) -> *mut pg_sys::PageHeaderData {
        any_page as *mut pg_sys::PageHeaderData
    }

    /// A page whose header puts its entries or its special space outside the page (of any kind:
    /// bucket pages of formats 3 and 4, pages of the built part, directory, metapage) is reported
    /// as corrupt (XX002) by lookups, inserts, ordered scans and the check, which read nothing
    /// outside the page.
    #[pg_test]
    fn pages_whose_header_leaves_the_page_are_corrupt() {
        // Entries apart, their fingerprints up to pd_lower beyond the page, pd_upper below them.
        let fp = damaged_table("hdr_apart", 4);
        each_page("hdr_apart_fp", true, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) {
                ((*header(any_page)).pd_lower, (*header(any_page)).pd_upper) = (0xFFF8, 32);
            }
        });
        assert_corrupt("hdr_apart", &fp, "pd_lower beyond the page (apart)", &ALL_OPS);
        // Entries packed (format 3), up to pd_lower beyond the page.
        let fp = damaged_table("hdr_packed", 3);
        each_page("hdr_packed_fp", true, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) {
                (*header(any_page)).pd_lower = 0xFFF8;
            }
        });
        assert_corrupt("hdr_packed", &fp, "pd_lower beyond the page (packed)", &ALL_OPS);
        // The special space beyond the page.
        let fp = damaged_table("hdr_special", 4);
        each_page("hdr_special_fp", true, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Bucket) {
                (*header(any_page)).pd_special = 0xFFF0;
            }
        });
        assert_corrupt("hdr_special", &fp, "pd_special beyond the page", &ALL_OPS);
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
        let fp = damaged_table("hdr_directory", 5);
        each_page("hdr_directory_fp", true, |_, any_page| unsafe {
            if page::is_kind(any_page, page::Kind::Directory) {
                (*header(any_page)).pd_special = 0xFFF0;
            }
        });
        assert_corrupt("hdr_directory", &fp, "directory pages", &ALL_OPS);
        let fp = damaged_table("hdr_meta", 5);
        each_page("hdr_meta_fp", true, |block, any_page| unsafe {
            if block == 0 {
                (*header(any_page)).pd_special = 0xFFF0;
            }
        });
        assert_corrupt("hdr_meta", &fp, "the metapage", &ALL_OPS);
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
