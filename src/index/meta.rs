//! The metapage (block 0): written by a build ([`new_meta`]), read by every reader and checked,
//! with the blocks it names inside the index ([`load_meta`]); the page format's version is here.

use pgrx::pg_sys::{self, Page};

use super::buffers::{number_of_blocks, read_locked};
use super::page::{corrupt, directory_pages, expect_kind, meta, DirectoryEntry, Kind, Meta, INVALID_BLOCK};

pub(super) const MAGIC: u32 = 0x5348_4958; // "SHIX"

/// The page format: 5 since release 0.8.0 (the rows of the build in a built part of their own,
/// `super::dense`; the buckets' entries apart as in 4); 4 (development builds of 0.8.0: the entries
/// of a bucket page apart, fingerprints, then TIDs) is read and written too; 3 (0.4.1: bucket pages count their sorted entries, 8 bucket bits at least) and 2 (0.4.0,
/// the chain of NULL rows; its pages neither sorted nor read as sorted, [`Meta::sorts_pages`]) are
/// read and written too, their pages packed, until a REINDEX; 1 (0.3.0) is read too, its indexes
/// hold no NULL rows and serve no `ORDER BY` (the update to 0.4.0 rebuilds them).
pub(super) const VERSION: u32 = 5;

pub(super) fn new_meta(bits: u32, directory_pages: u32) -> Meta {
    Meta {
        magic: MAGIC,
        version: VERSION,
        bits,
        directory_pages,
        nulls: DirectoryEntry::EMPTY,
        dense_start: INVALID_BLOCK,
        dense_rows: 0,
    }
}

/// Checks the metapage and returns its contents.
///
/// # Safety
///
/// `page` is block 0 of `index`, share-locked.
pub(super) unsafe fn read_meta(index: pg_sys::Relation, page: Page) -> Meta {
    unsafe {
        expect_kind(page, Kind::Meta, index, 0);
        let mut meta = *meta(page);
        if meta.magic == MAGIC && meta.version == 1 {
            meta.nulls = DirectoryEntry::EMPTY; // (not in a version 1 metapage)
        } else if meta.magic != MAGIC || !(2..=VERSION).contains(&meta.version) {
            corrupt(index, format!("its metapage has version {} of the page format, not {VERSION}", meta.version));
        }
        if meta.version < 5 {
            // (not in the metapage of an older format)
            (meta.dense_start, meta.dense_rows) = (INVALID_BLOCK, 0);
        }
        if meta.bits > simhash_core::buckets::MAX_BUCKET_BITS || meta.directory_pages != directory_pages(meta.bits) {
            corrupt(index, format!("bad metapage (bits {}, directory pages {})", meta.bits, meta.directory_pages));
        }
        // The built part follows the directory (where the build writes it).
        if meta.dense_rows > 0 && meta.dense_start != 1 + simhash_core::SEGMENTS * meta.directory_pages {
            corrupt(
                index,
                format!("bad metapage (built part at block {} of {} rows)", meta.dense_start, meta.dense_rows),
            );
        }
        meta
    }
}

/// The metapage of `index`, read under a share lock and checked, with the blocks it names (the
/// directory, the built part) inside the index.
///
/// # Safety
///
/// `index` is an open simhash index.
pub(super) unsafe fn load_meta(index: pg_sys::Relation) -> Meta {
    unsafe {
        // (Read before the metapage: the blocks it names were there at the build, and an index
        // only grows.)
        let blocks = number_of_blocks(index);
        if blocks == 0 {
            corrupt(index, "it has no metapage".into());
        }
        let buffer = read_locked(index, 0, pg_sys::BUFFER_LOCK_SHARE);
        let meta = read_meta(index, pg_sys::BufferGetPage(buffer));
        pg_sys::UnlockReleaseBuffer(buffer);
        let directory_end = 1 + simhash_core::SEGMENTS * meta.directory_pages;
        if directory_end > blocks {
            corrupt(
                index,
                format!("its {blocks} blocks cannot hold its directory (blocks 1 to {})", directory_end - 1),
            );
        }
        let built = super::dense::blocks(&meta);
        if built.end > blocks {
            corrupt(
                index,
                format!(
                    "its {blocks} blocks cannot hold its built part of {} rows (blocks {} to {})",
                    meta.dense_rows,
                    built.start,
                    built.end - 1
                ),
            );
        }
        meta
    }
}
