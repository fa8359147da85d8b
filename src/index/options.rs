//! The index's storage parameter, `WITH (segments = s)`: how many segments of a code an index of
//! `bit(n)` codes files its rows under (`simhash_core::code_index::Layout::for_table`). The
//! `simhash64` kind leaves it unused (a WARNING at its build).

use std::sync::atomic::{AtomicU32, Ordering};

use pgrx::pg_sys::{self, Datum};
use pgrx::PgSqlErrorCode;
use simhash_core::code_index::{DEFAULT_INDEXED_SEGMENTS, MAX_INDEXED_SEGMENTS};

use crate::pg::errors::warn;

/// The options as `build_reloptions` lays them out (a varlena).
#[repr(C)]
struct Options {
    vl_len_: i32,
    segments: i32,
}

/// The option kind registered for the access method (0 until [`define`]).
static KIND: AtomicU32 = AtomicU32::new(0);

/// Registers the option; called once per backend from `_PG_init`.
pub(crate) fn define() {
    unsafe {
        let kind = pg_sys::add_reloption_kind();
        KIND.store(kind as u32, Ordering::Relaxed);
        pg_sys::add_int_reloption(
            kind as pg_sys::bits32,
            c"segments".as_ptr(),
            c"The most segments of a bit code an index files its rows under".as_ptr(),
            DEFAULT_INDEXED_SEGMENTS as i32,
            1,
            MAX_INDEXED_SEGMENTS as i32,
            pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE,
        );
    }
}

/// `amoptions`: parses (and with `validate` checks) the options, or NULL when there are none.
///
/// # Safety
///
/// As `amoptions`.
pub(super) unsafe fn parse(reloptions: Datum, validate: bool) -> *mut pg_sys::bytea {
    // (`..Default::default()`: PostgreSQL 18 adds `isset_offset`, 0 for none)
    #[allow(clippy::needless_update)]
    let elements = [pg_sys::relopt_parse_elt {
        optname: c"segments".as_ptr(),
        opttype: pg_sys::relopt_type::RELOPT_TYPE_INT,
        offset: std::mem::offset_of!(Options, segments) as i32,
        ..Default::default()
    }];
    unsafe {
        pg_sys::build_reloptions(
            reloptions,
            validate,
            KIND.load(Ordering::Relaxed) as pg_sys::relopt_kind::Type,
            std::mem::size_of::<Options>(),
            elements.as_ptr(),
            elements.len() as i32,
        )
        .cast()
    }
}

/// The segments an index of codes asks for: its `segments` option, else the default.
///
/// # Safety
///
/// `index` is an open index of the access method.
pub(super) unsafe fn segments(index: pg_sys::Relation) -> u32 {
    unsafe {
        let options = (*index).rd_options as *const Options;
        if options.is_null() {
            DEFAULT_INDEXED_SEGMENTS
        } else {
            (*options).segments.clamp(1, MAX_INDEXED_SEGMENTS as i32) as u32
        }
    }
}

/// Warns (01000) that an index of `simhash64` fingerprints, which always files its rows under
/// their four 16-bit segments, leaves its `segments` option unused. Not refused: `ALTER INDEX ...
/// SET (segments = s)` cannot tell the two kinds of index apart (`amoptions` is not told which
/// index), and a refusal at the build would then fail every later REINDEX, VACUUM FULL and
/// CLUSTER of the table, and the restore of a dump of the index (`WITH (segments='s')`).
///
/// # Safety
///
/// `index` is an open index of the access method.
pub(super) unsafe fn warn_for_fingerprints(index: pg_sys::Relation) {
    if unsafe { !(*index).rd_options.is_null() } {
        warn(
            PgSqlErrorCode::ERRCODE_WARNING,
            "the storage parameter \"segments\" has no effect on a simhash index of simhash64 fingerprints".into(),
            Some("An index of simhash64 fingerprints always files its rows under their four 16-bit segments.".into()),
            Some("ALTER INDEX ... RESET (segments) removes it.".into()),
        );
    }
}

/// A NOTICE when lean bits (the same in nearly every row: `simhash_core::bit_deal`) crowd one of
/// the segments an index being built files its rows under (`bit_deal::most_crowded`): its lookups
/// meet about 2^lean times the rows there that they would meet on values whose bits vary. `lean`
/// are the lean bits of the `bits`-bit values, numbered from 0; `plan` and `indexed` the index's
/// segments.
///
/// # Safety
///
/// `index` is an open index relation.
pub(crate) unsafe fn notice_lean_bits(
    index: pg_sys::Relation,
    bits: u32,
    lean: &[u32],
    plan: &simhash_core::multi_index::SegmentPlan,
    indexed: u32,
) {
    if lean.len() == bits as usize {
        // (Copies of a few values, not a short value in a long type: nothing to say of its bits.)
        return;
    }
    let Some(crowded) = simhash_core::bit_deal::most_crowded(lean, plan, indexed) else { return };
    // The lean bits as ranges numbered from 1, as `get_bit` numbers them from 0: "1-14, 33".
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &b in lean {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == b => *last = b,
            _ => ranges.push((b, b)),
        }
    }
    let ranges: Vec<String> = ranges
        .iter()
        .map(
            |&(first, last)| {
                if first == last {
                    format!("{}", first + 1)
                } else {
                    format!("{}-{}", first + 1, last + 1)
                }
            },
        )
        .collect();
    crate::pg::errors::notice(
        format!(
            "{} of the {bits} bits of the values in simhash index \"{}\" are the same in nearly every row (bits {}), {} of them among the {} bits of one segment it files rows under",
            lean.len(),
            unsafe { crate::pg::names::relation_name(index) },
            ranges.join(", "),
            crowded.lean,
            crowded.width,
        ),
        Some(format!(
            "A lookup meets about {} times as many rows in that segment as on values whose bits vary.",
            1u64 << crowded.lean.min(63)
        )),
        Some("Index values without such bits: a 50-bit value as a bit(50), not in a bit(64) or a bigint cast to simhash64.".into()),
    );
}
