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

/// Whether one pass over a table of `rows` rows (comparing each with all `pending` fingerprints in
/// memory: `crate::dedup`) visits fewer rows than looking each fingerprint up. Both probe the four
/// segments within their radii (on average 1 to 137 values, [`mean_probes_per_segment`]); a lookup
/// visits the rows sharing each value (about rows / 65,536), or the whole table without the
/// indexes. `None` for a radius the probes cannot answer.
pub fn one_pass_is_cheaper(rows: f64, indexed: bool, pending: usize, k: u32) -> Option<bool> {
    let probes = mean_probes_per_segment(k)?;
    let one_pass = rows * (1.0 + probes / 4.0);
    let lookups = pending as f64 * if indexed { 4.0 * probes * (2.0 + rows * SHARE_PER_SEGMENT_VALUE) } else { rows };
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
        assert_eq!(one_pass_is_cheaper(1e6, true, 1, 3), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, true, 1_000_000, 3), Some(true));
        // Without the indexes each lookup is a pass of its own.
        assert_eq!(one_pass_is_cheaper(1e6, false, 2, 11), Some(false));
        assert_eq!(one_pass_is_cheaper(1e6, false, 100, 11), Some(true));
        assert_eq!(one_pass_is_cheaper(1e6, true, 1, 12), None);
    }
}
