//! How a lookup uses the index: `WHERE fp <~> q <= k` answered through the four segment B-trees.
//!
//! The idea (Manku et al., seed 002): split the 64 bits into four 16-bit segments. Two fingerprints
//! within k bits differ by at most k / 4 bits in at least one segment (pigeonhole), so every row
//! within k has, in some segment, a value within k / 4 bits of the query's there: for k <= 3 the
//! same value, for k = 4..7 one of 17 values, for k = 8..11 one of 137 (`simhash_core::probes`).
//! The segments may take unequal radii adding up to k - 3 (a row within k cannot differ in more than
//! its radius in every segment), which the B-tree rewrite and the radius scan probe: k = 9 is 2, 2,
//! 1 and 1 bits (`simhash_core::probes::segment_radii`); the GIN bands keep k / 4 in each.
//! An index on each segment (`simhash_segment(fp, n)`) finds those rows; the exact distance then
//! keeps only the rows within k. The answers are exactly those of the sequential scan.
//!
//! The path of a query, in order:
//!
//! 1. **Rewrite** (`support`): `<=` on `simhash_distance` has a planner support function. When
//!    `fp` is a column with the indexes (found by `catalog`) and k is a constant from 0 to 11, it
//!    returns the exact test AND a candidate test (an OR over the segments of
//!    `simhash_segment(fp, n) = ANY(probes)`, or `&&` on a GIN index of `simhash_bands(fp)`), whose
//!    expression `shape` builds. PostgreSQL then plans the candidate test as a BitmapOr of index
//!    scans, like any other. With a `simhash` index on the column, at any k, it returns
//!    `fp <@ simhash_ball(q, k)`, the index's own operator; on an indexed expression instead of a
//!    column (`code::simhash64`, `minhash64(body)`), the same (`expression`).
//! 2. **Radius scan** (`radius_path`, `radius_exec`): when the four B-trees also INCLUDE `fp`, a
//!    custom scan recognises the exact test (`shape` matches what it built) and competes with the
//!    BitmapOr: it probes the B-trees itself (`segment_scan`: one descent per range of consecutive
//!    probe values), checks the distance on the fingerprint in each index tuple, and reads from the
//!    table only the rows within k, in table order.
//! 3. **Nearest rows** (`order_path`): `ORDER BY fp <~> q` gets the `simhash` index's ordered scan,
//!    as `ORDER BY fp <-> q` does, from the same planner hook.
//! 4. **Codes of any length** (`codes`): `simhash_hamming(code, q) <= k` on a `bit` column with a
//!    `simhash` index becomes `code <@ simhash_code_ball(q, k)` (the same support function), and
//!    the hook serves pgvector's `code <~> q <= k` and `ORDER BY code <~> q` (and
//!    `ORDER BY simhash_hamming(code, q)`) through that index.
//! 5. **SQL probe functions** (`probes`): `simhash_segment_probes()` and friends compute the probe
//!    arrays at run time when the query fingerprint is a parameter or another table's column.
//!
//! `segment_scan` also serves the near-duplicate constraint's commit-time recheck, which cannot use
//! an MVCC plan (`crate::dedup`).

pub(crate) mod catalog;
mod codes;
mod expression;
mod order_path;
mod probes;
mod radius_exec;
mod radius_path;
pub(crate) mod segment_scan;
mod settings;
mod shape;
mod support;

/// Defines the settings and installs the radius scan's planner hook; called from `_PG_init`.
pub(crate) fn init() {
    settings::define();
    radius_path::init();
}
