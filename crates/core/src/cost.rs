//! The arithmetic behind two choices the extension makes, kept here with its tests: what the radius
//! scan costs the planner (in PostgreSQL's cost units, which the caller passes in), and whether
//! the near-duplicate constraint's commit-time recheck reads the table once or looks each
//! fingerprint up.

use crate::probes::{mean_probes_per_segment, uniform_share_within};

/// Rows that share one 16-bit segment value, as a share of the table (uniform segments).
const SHARE_PER_SEGMENT_VALUE: f64 = 1.0 / 65_536.0;

/// PostgreSQL's cost parameters (`cpu_operator_cost` and the others; the caller reads the GUCs).
#[derive(Clone, Copy, Debug)]
pub struct CostUnits {
    pub cpu_operator: f64,
    pub cpu_index_tuple: f64,
    pub cpu_tuple: f64,
    pub random_page: f64,
}

/// What the planner knows of one segment B-tree.
#[derive(Clone, Copy, Debug)]
pub struct IndexSize {
    pub tuples: f64,
    pub pages: f64,
    pub tree_height: i32,
}

/// The cost of probing one segment B-tree at radius `k` (all of it before the first row): per
/// probe value one descent of the B-tree, then the candidates' index tuples, as many as rows share
/// the probed values (uniform segments assumed), on as many leaf pages as they fill, read at
/// random (the model of PostgreSQL's own index scans, btcostestimate).
pub fn segment_probe_cost(index: IndexSize, k: u32, units: CostUnits) -> f64 {
    let probes = mean_probes_per_segment(k).unwrap_or(1.0);
    let tuples = index.tuples.max(1.0);
    let pages = index.pages.max(1.0);
    let candidates = tuples * probes * SHARE_PER_SEGMENT_VALUE;
    let descent = (tuples.log2().ceil() + (f64::from(index.tree_height.max(0)) + 1.0) * 50.0) * units.cpu_operator;
    let leaf_pages = (candidates * pages / tuples).ceil().max(1.0);
    probes * descent + leaf_pages * units.random_page + candidates * (units.cpu_index_tuple + units.cpu_operator)
}

/// The rows within `k` the radius scan expects among `table_rows`, for uniform fingerprints, at
/// least one and at most `rows` (the planner's estimate of the scan's output). The planner's own
/// estimate of the exact test is a default third of the candidates, which would price the scan
/// like the BitmapOr it exists to beat.
pub fn expected_matches(table_rows: f64, k: u32, rows: f64) -> f64 {
    (table_rows * uniform_share_within(k)).clamp(1.0, rows.max(1.0))
}

/// How the commit-time recheck can look a fingerprint up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecheckRoute {
    /// The simhash index, [`RECHECK_BATCH`] fingerprints at a time (each page read once for them).
    SimhashIndex,
    /// The four segment B-trees, one descent per probe value and fingerprint.
    SegmentBtrees,
    /// A scan of the whole table per fingerprint.
    NoIndex,
}

/// How many fingerprints the recheck looks up together through the simhash index.
pub const RECHECK_BATCH: usize = 1000;

// The recheck's costs in the time of checking one index entry (about 3.5 ns on the 2-core
// machine of the README; measured with commits of 97 to 9,507 rows at k = 11 on 1,000,000 rows,
// one run each): a table row read in the one pass with a dirty snapshot (0.1-0.28 µs: 116 ms
// for 287 fingerprints on a table just vacuumed, 281 ms for 3,825 on one with dead rows), a
// candidate checked in the pass (about twice an index entry: the members it compares are spread
// in memory; 9,507 fingerprints took 790 ms), a simhash index page reached (about 1 µs; 1,000
// fingerprints took 33-38 ms, 9,505 291 ms), a segment B-tree descent with its few entries
// (about 2 µs; 97 fingerprints took 111 ms).
const ROW_READ: f64 = 80.0;
const PASS_CHECK: f64 = 2.0;
const INDEX_PAGE: f64 = 285.0;
const BTREE_DESCENT: f64 = 550.0;
/// Rows per page of the simhash index (4 entries per row, pages about three quarters full).
const ROWS_PER_INDEX_PAGE: f64 = 110.0;

/// The pages of the simhash index of a table of `rows` rows that lookups can reach: a page per
/// [`ROWS_PER_INDEX_PAGE`] rows, and on a small table a page per filled bucket (at least
/// [`crate::buckets::MIN_BUCKET_BITS`] bits per segment, so up to 1,024 buckets of one row each).
fn index_pages(rows: f64) -> f64 {
    let buckets = 4.0 * f64::from(1u32 << crate::buckets::MIN_BUCKET_BITS);
    f64::max(rows / ROWS_PER_INDEX_PAGE, f64::min(4.0 * rows, buckets)) + 1.0
}

/// Whether one pass over a table of `rows` rows (comparing each with all `pending` fingerprints in
/// memory: `crate::dedup::NearSet`) costs less than looking each fingerprint up through `route`.
/// A lookup probes the four segments within their radii (on average 1 to 137 values,
/// [`mean_probes_per_segment`]) and checks the entries that share each value (about
/// rows / 65,536), as many as the pass checks (there at about twice the cost); through the
/// simhash index a batch reaches each page once, at most every page.
/// `None` for a radius the probes cannot answer.
pub fn one_pass_is_cheaper(rows: f64, route: RecheckRoute, pending: usize, k: u32) -> Option<bool> {
    let probes = 4.0 * mean_probes_per_segment(k)?;
    let pending = pending as f64;
    let filed = pending * probes <= crate::dedup::PROBES_FILED_UP_TO as f64;
    // Both check the same candidates: each pending fingerprint against the rows that share one of
    // its probed segment values.
    let entries = pending * probes * rows * SHARE_PER_SEGMENT_VALUE;
    let one_pass = rows * (ROW_READ + if filed { 4.0 } else { probes }) + PASS_CHECK * entries;
    let lookups = match route {
        RecheckRoute::SimhashIndex => {
            let batches = (pending / RECHECK_BATCH as f64).ceil();
            let pages_per_batch = f64::min(pending.min(RECHECK_BATCH as f64) * probes, index_pages(rows));
            batches * pages_per_batch * INDEX_PAGE + entries
        }
        RecheckRoute::SegmentBtrees => pending * probes * BTREE_DESCENT + entries,
        RecheckRoute::NoIndex => pending * rows * ROW_READ,
    };
    Some(one_pass < lookups)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNITS: CostUnits =
        CostUnits { cpu_operator: 0.0025, cpu_index_tuple: 0.005, cpu_tuple: 0.01, random_page: 4.0 };

    #[test]
    fn probing_costs_more_at_larger_radii_and_on_larger_indexes() {
        let index = IndexSize { tuples: 1e6, pages: 3000.0, tree_height: 2 };
        let costs: Vec<f64> = [0, 3, 4, 7, 8, 11].iter().map(|&k| segment_probe_cost(index, k, UNITS)).collect();
        // One probe value up to k = 3, then on average 5, 17, 47 and 137 (the segments' radii).
        assert_eq!(costs[0], costs[1]);
        assert!(costs.windows(2).skip(1).all(|w| w[0] < w[1]), "{costs:?}");
        let bigger = IndexSize { tuples: 1e7, pages: 30000.0, tree_height: 3 };
        assert!(segment_probe_cost(bigger, 7, UNITS) > costs[3]);
        // An empty index still costs a descent and a page.
        assert!(segment_probe_cost(IndexSize { tuples: 0.0, pages: 0.0, tree_height: 0 }, 0, UNITS) >= 4.0);
    }

    #[test]
    fn matches_are_at_least_one_and_at_most_the_rows() {
        assert_eq!(expected_matches(0.0, 3, 100.0), 1.0);
        assert_eq!(expected_matches(1e12, 11, 100.0), 100.0);
        // Uniform fingerprints are about 5e-8 within 11 bits of each other.
        let m = expected_matches(1e9, 11, 1e9);
        assert!(m > 10.0 && m < 1000.0, "{m}");
    }

    #[test]
    fn one_pass_wins_for_many_fingerprints_or_no_index() {
        use RecheckRoute::*;
        // Measured on 1,000,000 rows at k = 11: a commit of 2,848 rows looked up through the
        // simhash index took 94 ms and one of 9,505 rows 291 ms; one of 3,825 rows in one pass
        // 281 ms and one of 9,507 790 ms. The candidates dominate both and cost the pass more:
        // at k = 11 on 1,000,000 rows the lookups are never dearer.
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 3_000, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 20_000, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 1_000_000, 11), Some(false));
        // At k = 3 a lookup reaches 4 pages: the pass wins only for many more.
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 1, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 20_000, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 1_000_000, 3), Some(true));
        // The B-trees take a descent per probe value (the pass wins from about 290 at k = 11).
        assert_eq!(one_pass_is_cheaper(1e6, SegmentBtrees, 50, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, SegmentBtrees, 1_000, 11), Some(true));
        // Without the indexes each lookup is a pass of its own.
        assert_eq!(one_pass_is_cheaper(1e6, NoIndex, 1, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, NoIndex, 2, 11), Some(true));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 1, 12), None);
        // A small table (a block, at least 60 rows to the caller): a lookup or two at k = 3, and
        // the pass for more. The regress test dedup and the isolation spec dedup_in_progress
        // rely on it with 41 or 42 rows through the B-trees (simhash_create_indexes' default);
        // the spec dedup_simhash_index looks its 41 rows up through the simhash index of its
        // 2,000 rows (a small index has a page per filled bucket: 4 pages per row at k = 3).
        assert_eq!(one_pass_is_cheaper(60.0, SegmentBtrees, 1, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(60.0, SegmentBtrees, 41, 3), Some(true));
        assert_eq!(one_pass_is_cheaper(60.0, SimhashIndex, 1, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(60.0, SimhashIndex, 41, 3), Some(true));
        assert_eq!(one_pass_is_cheaper(2000.0, SimhashIndex, 41, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(60.0, SimhashIndex, 1, 11), Some(true));
        assert_eq!(one_pass_is_cheaper(1e6, SimhashIndex, 1, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(0.0, SimhashIndex, 1, 0), Some(true));
    }
}
