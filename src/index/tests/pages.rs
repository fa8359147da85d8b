//! What the tests of the index share: tables with an index of a given page format, made as no
//! SQL can (an older format's metapage and pages rewritten), a walk over an index's pages, and the
//! errors of the operations a corruption test runs.

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::index::{buffers, entries, page};

/// Turns a new index into one as 0.3.0 built it (page format 1: a 16-byte metapage, no chain
/// of NULL rows): the metapage rewritten, as no SQL can.
pub(super) fn make_format_1(name: &str) {
    let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{name}'::regclass::oid")).unwrap().unwrap();
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::AccessExclusiveLock as i32);
        let buffer = buffers::read_locked(index, 0, pg_sys::BUFFER_LOCK_EXCLUSIVE);
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
pub(super) fn pack_pages(name: &str) {
    each_page(name, true, |_, any_page| unsafe {
        if page::is_kind(any_page, page::Kind::Bucket) || page::is_kind(any_page, page::Kind::Nulls) {
            entries::rewrite_entries(any_page, &entries::entries(any_page).to_vec(), false);
        }
    });
}

/// A table of 2,000 fingerprints with a simhash index (no NULL ones: a format 1 index has no
/// pages for them) of format 4, every row in the buckets, as the tests of the older formats
/// start from.
pub(super) fn table_with_index(name: &str) {
    crate::index::build::BUILD_FORMAT_4.with(|f| f.set(true));
    let created = Spi::run(&format!(
        "CREATE TABLE {name} (id int, fp simhash64);
         INSERT INTO {name} SELECT i, ('x' || substr(md5(i::text), 1, 16))::bit(64)::bigint::simhash64
         FROM generate_series(1, 2000) i;
         CREATE INDEX {name}_fp ON {name} USING simhash (fp);"
    ));
    crate::index::build::BUILD_FORMAT_4.with(|f| f.set(false));
    created.unwrap();
    assert_eq!(format(&format!("{name}_fp")), 4);
}

/// The page format of the index `name`.
pub(super) fn format(name: &str) -> u32 {
    let mut version = 0;
    each_page(name, false, |block, any_page| unsafe {
        if block == 0 {
            version = (*page::meta(any_page)).version;
        }
    });
    version
}

/// Calls `each(block, page)` with every page of the index `name`, exclusively locked (marked
/// dirty with `write`).
pub(super) fn each_page(name: &str, write: bool, mut each: impl FnMut(pg_sys::BlockNumber, pg_sys::Page)) {
    let oid = Spi::get_one::<pg_sys::Oid>(&format!("SELECT '{name}'::regclass::oid")).unwrap().unwrap();
    unsafe {
        let index = pg_sys::index_open(oid, pg_sys::AccessExclusiveLock as i32);
        let blocks = pg_sys::RelationGetNumberOfBlocksInFork(index, pg_sys::ForkNumber::MAIN_FORKNUM);
        for block in 0..blocks {
            let buffer = buffers::read_locked(index, block, pg_sys::BUFFER_LOCK_EXCLUSIVE);
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
pub(super) fn bucket_pages(name: &str) -> Vec<(usize, usize, bool)> {
    let mut pages = Vec::new();
    each_page(name, false, |_, any_page| unsafe {
        if page::is_kind(any_page, page::Kind::Bucket) {
            let special = *page::special(any_page);
            pages.push((entries::entries(any_page).len(), special.sorted(), special.next == page::INVALID_BLOCK));
        }
    });
    pages
}

/// Whether every bucket page (and page of NULL rows) with entries of the index `name` keeps
/// them apart (`true`) or packed (`false`); `None` when they differ.
pub(super) fn layout(name: &str) -> Option<bool> {
    let mut layouts = Vec::new();
    each_page(name, false, |_, any_page| unsafe {
        if page::is_kind(any_page, page::Kind::Bucket) || page::is_kind(any_page, page::Kind::Nulls) {
            match entries::entries(any_page) {
                entries::Entries::Packed(entries) if !entries.is_empty() => layouts.push(false),
                entries::Entries::Apart(apart) if !apart.fps.is_empty() => layouts.push(true),
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
pub(super) fn lookups_agree(table: &str) {
    let query = format!(
        "SELECT count(*) FROM {table} s, (SELECT fp FROM {table} WHERE id % 100 = 3) q WHERE s.fp <~> q.fp <= 11"
    );
    let nearest = format!(
        "SELECT array_agg(d)::text FROM (SELECT fp <~> '0123456789abcdef' AS d FROM {table}
         ORDER BY fp <-> '0123456789abcdef' LIMIT 100) o"
    );
    Spi::run("SET enable_seqscan = off").unwrap();
    let (through_index, ordered) = (Spi::get_one::<i64>(&query).unwrap(), Spi::get_one::<String>(&nearest).unwrap());
    Spi::run("SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on").unwrap();
    assert_eq!(Spi::get_one::<i64>(&query).unwrap(), through_index);
    assert_eq!(Spi::get_one::<String>(&nearest).unwrap(), ordered);
    Spi::run("RESET enable_indexscan; RESET enable_bitmapscan; RESET enable_seqscan").unwrap();
}

/// What of the index of a table a corruption test runs (`Damaged::errors`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Op {
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

pub(super) const ALL_OPS: [Op; 4] = [Op::Lookup, Op::Insert, Op::Ordered, Op::Check];

/// A table `name` (id, fp) of 2,000 rows with the index `{name}_fp` of page format `version`
/// (3, 4 or 5; in 5, 300 rows and 10 NULL ones inserted after the build, so that its buckets
/// have pages), and the fingerprint of row 1 as text.
pub(super) fn damaged_table(name: &str, version: u32) -> String {
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
pub(super) fn error_of(name: &str, fp: &str, op: Op) -> String {
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
pub(super) fn assert_corrupt(name: &str, fp: &str, damage: &str, ops: &[Op]) {
    for &op in ops {
        let error = error_of(name, fp, op);
        assert!(
            error.starts_with("XX002: ") && error.contains(&format!("\"{name}_fp\"")) && error.contains("block"),
            "{damage}: {op:?} gave {error:?}"
        );
    }
}

/// The header of `any_page`.
pub(super) unsafe fn header(any_page: pg_sys::Page) -> *mut pg_sys::PageHeaderData {
    any_page as *mut pg_sys::PageHeaderData
}

/// An `INSERT` of rows `ids` into `table` whose fingerprints share the bits of `top` (hex) in the
/// top byte of each segment (`tag` varies the rest), so that they fill a few buckets and their
/// chains grow pages.
pub(super) fn clustered(table: &str, tag: &str, top: &str, ids: std::ops::RangeInclusive<i32>) -> String {
    format!(
        "INSERT INTO {table} SELECT i, (('x' || substr(md5('{tag}' || i), 1, 16))::bit(64)::bigint
             & x'00ff00ff00ff00ff'::bigint | x'{top}'::bigint)::simhash64
         FROM generate_series({}, {}) i",
        ids.start(),
        ids.end()
    )
}

/// Makes a table `name` with an index of page format `version` (`damaged_table`), applies `damage`
/// to the header of each of its pages for which `which(block, page)` holds, and asserts that every
/// operation of [`ALL_OPS`] reports the index as corrupt (`assert_corrupt`; `what` names the damage).
pub(super) fn assert_damaged_headers_corrupt(
    name: &str,
    version: u32,
    which: impl Fn(pg_sys::BlockNumber, pg_sys::Page) -> bool,
    what: &str,
    damage: impl Fn(&mut pg_sys::PageHeaderData),
) {
    let fp = damaged_table(name, version);
    each_page(&format!("{name}_fp"), true, |block, any_page| {
        if which(block, any_page) {
            damage(unsafe { &mut *header(any_page) });
        }
    });
    assert_corrupt(name, &fp, what, &ALL_OPS);
}
