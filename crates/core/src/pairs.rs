//! All pairs within Hamming distance k in a set of fingerprints, by Manku et al.'s permuted tables.
//!
//! Split the 64 bits into `B > k` blocks. Two fingerprints within distance `k` differ in at most `k`
//! blocks, so they agree on at least `B - k` of them. For every choice of `B - k` blocks ("a table"),
//! sort the fingerprints by those blocks' bits and compare only within runs of equal keys. A pair that
//! agrees on more blocks shows up in several tables; it is reported only in the first table (in the
//! enumeration order) whose blocks it agrees on, so each pair comes out exactly once with no set of
//! seen pairs. `B` is chosen per run to balance the number of sorts against the run lengths.
//!
//! Memory: the input (8 bytes per fingerprint) plus one table of (key, index) pairs (16 bytes per
//! fingerprint), plus the pairs found. Every vector that grows with the rows is reserved with
//! `try_reserve`: memory the system refuses is [`OutOfMemory`], not the abort of the process.

use crate::distance::hamming;

/// The system refused memory for a vector that grows with the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfMemory;

/// An empty vector with room for `n` items, or [`OutOfMemory`].
pub fn vec_with_room<T>(n: usize) -> Result<Vec<T>, OutOfMemory> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| OutOfMemory)?;
    Ok(v)
}

/// `vec.push(item)`, or [`OutOfMemory`].
pub fn push<T>(vec: &mut Vec<T>, item: T) -> Result<(), OutOfMemory> {
    vec.try_reserve(1).map_err(|_| OutOfMemory)?;
    vec.push(item);
    Ok(())
}

/// Largest radius accepted: beyond it nearly every pair of a large set is a pair.
pub const MAX_PAIRS_RADIUS: u32 = 16;

/// What the caller hears between tables: (tables done, tables in all, pairs so far).
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, usize);

/// Calls `on_pair(i, j, distance)` (i < j, indexes into `fps`) once for every pair within `k`.
/// `progress` is called after each table and every million comparisons or so; `interrupt` every
/// [`crate::interrupt::STEP`] rows while a table is filled, sorted and read (a table holds every
/// row: with few comparisons, tens of millions of rows are seconds between two progress calls).
/// Returns the number of tables used, or [`OutOfMemory`] (before any pair) when the table of
/// (key, index) pairs does not fit.
pub fn for_each_pair(
    fps: &[u64],
    k: u32,
    on_pair: &mut dyn FnMut(usize, usize, u32),
    progress: Progress,
    interrupt: crate::Interrupt,
) -> Result<usize, OutOfMemory> {
    assert!(k <= MAX_PAIRS_RADIUS, "radius {k} is out of range");
    let blocks = block_masks(choose_block_count(fps.len(), k));
    let tables = combinations(blocks.len(), blocks.len() - k as usize);
    let mut order: Vec<(u64, u32)> = vec_with_room(fps.len())?;
    let mut found = 0usize;
    let mut comparisons = 0u64;
    for (t, table) in tables.iter().enumerate() {
        let mask = table.iter().fold(0u64, |m, &b| m | blocks[b]);
        order.clear();
        for range in crate::interrupt::ranges(fps.len(), interrupt) {
            order.extend(fps[range.clone()].iter().zip(range).map(|(&fp, i)| (fp & mask, i as u32)));
        }
        crate::interrupt::sort_checked(&mut order, &|a, b| a.cmp(b), interrupt);
        let mut start = 0;
        let mut next_check = 0;
        while start < order.len() {
            if start >= next_check {
                interrupt.check();
                next_check = start + crate::interrupt::STEP;
            }
            let key = order[start].0;
            let end = start + order[start..].iter().take_while(|e| e.0 == key).count();
            for x in start..end {
                for y in x + 1..end {
                    let (i, j) = (order[x].1 as usize, order[y].1 as usize);
                    let distance = hamming(fps[i], fps[j]);
                    if distance <= k && first_agreeing_table(fps[i], fps[j], &blocks, table.len()) == *table {
                        on_pair(i.min(j), i.max(j), distance);
                        found += 1;
                    }
                }
                comparisons += (end - x - 1) as u64;
                if comparisons >= 1 << 20 {
                    comparisons = 0;
                    progress(t, tables.len(), found);
                }
            }
            start = end;
        }
        progress(t + 1, tables.len(), found);
    }
    Ok(tables.len())
}

/// Rows grouped by fingerprint: the distinct values (ascending) and, for each, the rows holding it,
/// in one flat array (8 bytes per row in all). Searching the distinct values keeps exact duplicates
/// out of the quadratic comparisons within a run.
#[derive(Debug, PartialEq, Eq)]
pub struct Duplicates {
    pub distinct: Vec<u64>,
    starts: Vec<u32>,
    rows: Vec<u32>,
}

impl Duplicates {
    /// The groups of `fps`, or [`OutOfMemory`]; `interrupt` checked while they are sorted and
    /// gathered.
    pub fn group(fps: &[u64], interrupt: crate::Interrupt) -> Result<Self, OutOfMemory> {
        let mut rows: Vec<u32> = vec_with_room(fps.len())?;
        rows.extend(0..fps.len() as u32);
        crate::interrupt::sort_checked(&mut rows, &|&a, &b| fps[a as usize].cmp(&fps[b as usize]), interrupt);
        let mut distinct = Vec::new();
        let mut starts = Vec::new();
        for range in crate::interrupt::ranges(rows.len(), interrupt) {
            for position in range {
                let fp = fps[rows[position] as usize];
                if distinct.last() != Some(&fp) {
                    push(&mut distinct, fp)?;
                    push(&mut starts, position as u32)?;
                }
            }
        }
        push(&mut starts, rows.len() as u32)?;
        Ok(Duplicates { distinct, starts, rows })
    }

    /// The rows (indexes into the grouped slice) whose fingerprint is `distinct[u]`.
    pub fn holders(&self, u: usize) -> &[u32] {
        &self.rows[self.starts[u] as usize..self.starts[u + 1] as usize]
    }

    /// Groups of more than one row.
    pub fn repeated(&self) -> impl Iterator<Item = &[u32]> {
        (0..self.distinct.len()).map(|u| self.holders(u)).filter(|rows| rows.len() > 1)
    }
}

/// The first `size` blocks (in order) on which `a` and `b` agree: the table that reports the pair.
fn first_agreeing_table(a: u64, b: u64, blocks: &[u64], size: usize) -> Vec<usize> {
    blocks.iter().enumerate().filter(|(_, &m)| (a ^ b) & m == 0).map(|(i, _)| i).take(size).collect()
}

/// `count` masks of near-equal width covering the 64 bits, most significant first.
fn block_masks(count: usize) -> Vec<u64> {
    let mut masks = Vec::with_capacity(count);
    let mut high = 64;
    for b in 0..count {
        let width = (64 - b * 64 / count) - (64 - (b + 1) * 64 / count);
        let low = high - width;
        masks.push(if width == 64 { !0 } else { ((1u64 << width) - 1) << low });
        high = low;
    }
    masks
}

/// All `size`-element subsets of `0..n`, in lexicographic order.
fn combinations(n: usize, size: usize) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    let mut current: Vec<usize> = (0..size).collect();
    loop {
        all.push(current.clone());
        let Some(i) = (0..size).rev().find(|&i| current[i] < n - size + i) else { return all };
        current[i] += 1;
        for j in i + 1..size {
            current[j] = current[j - 1] + 1;
        }
    }
}

/// The block count with the least estimated work: per table one sort (n log n) plus the
/// comparisons within runs (n^2 / 2 / 2^matched bits, for uniform fingerprints).
fn choose_block_count(n: usize, k: u32) -> usize {
    let n = n.max(2) as f64;
    let cost = |blocks: usize| {
        let tables = binomial(blocks, blocks - k as usize);
        let matched_bits = 64.0 * (blocks - k as usize) as f64 / blocks as f64;
        tables * (n * n.log2() * 4.0 + n * n / 2.0 / matched_bits.exp2())
    };
    (k as usize + 1..=(k as usize + 8).min(64)).min_by(|&a, &b| cost(a).total_cmp(&cost(b))).expect("a non-empty range")
}

fn binomial(n: usize, r: usize) -> f64 {
    (0..r).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Groups (connected components) of linked items, each represented by its item with the least
/// key: union-find with path halving. Items are numbered 0, 1, ... in the order they are added.
#[derive(Debug, Default)]
pub struct Groups<K> {
    parent: Vec<usize>,
    keys: Vec<K>,
}

impl Groups<usize> {
    /// Items `0..n`, each in a group of its own (its key its number), or [`OutOfMemory`].
    pub fn numbered(n: usize) -> Result<Self, OutOfMemory> {
        let mut keys = vec_with_room(n)?;
        keys.extend(0..n);
        Groups::of(keys)
    }
}

impl<K: Ord + Copy> Groups<K> {
    /// One group per key, numbered as given, or [`OutOfMemory`].
    pub fn of(keys: Vec<K>) -> Result<Self, OutOfMemory> {
        let mut parent = vec_with_room(keys.len())?;
        parent.extend(0..keys.len());
        Ok(Groups { parent, keys })
    }

    /// Adds an item in a group of its own; returns its number, or [`OutOfMemory`] (nothing added).
    pub fn add(&mut self, key: K) -> Result<usize, OutOfMemory> {
        self.parent.try_reserve(1).map_err(|_| OutOfMemory)?;
        self.keys.try_reserve(1).map_err(|_| OutOfMemory)?;
        self.parent.push(self.keys.len());
        self.keys.push(key);
        Ok(self.keys.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn key(&self, i: usize) -> K {
        self.keys[i]
    }

    /// The item that represents `i`'s group.
    pub fn root(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Puts `i` and `j` in one group, represented by the least key of the two.
    pub fn union(&mut self, i: usize, j: usize) {
        let (ri, rj) = (self.root(i), self.root(j));
        if self.keys[ri] < self.keys[rj] {
            self.parent[rj] = ri
        } else {
            self.parent[ri] = rj
        }
    }

    /// The key of the item that represents `i`'s group: the least key in it.
    pub fn representative(&mut self, i: usize) -> K {
        let r = self.root(i);
        self.keys[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(fps: &[u64], k: u32) -> Vec<(usize, usize, u32)> {
        let mut pairs = Vec::new();
        for i in 0..fps.len() {
            for j in i + 1..fps.len() {
                let d = hamming(fps[i], fps[j]);
                if d <= k {
                    pairs.push((i, j, d));
                }
            }
        }
        pairs
    }

    fn fingerprints(n: usize, seed: u64) -> Vec<u64> {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut fps: Vec<u64> = (0..n).map(|_| next()).collect();
        // Near-duplicates at every distance up to 12, and exact duplicates.
        for d in 0..=12u32 {
            for c in 0..5 {
                let base = fps[(d as usize * 5 + c) % n];
                let flipped = (0..d).fold(base, |fp, t| fp ^ 1 << ((t * 13 + c as u32 * 7) % 64));
                fps.push(flipped);
            }
        }
        fps
    }

    #[test]
    fn matches_brute_force_for_every_radius() {
        let fps = fingerprints(3000, 0x1234_5678_9abc_def1);
        for k in 0..=MAX_PAIRS_RADIUS {
            let mut got = Vec::new();
            for_each_pair(&fps, k, &mut |i, j, d| got.push((i, j, d)), &mut |_, _, _| {}, crate::Interrupt::NEVER)
                .unwrap();
            got.sort_unstable();
            let want = brute_force(&fps, k);
            assert_eq!(got.len(), want.len(), "k={k}");
            assert_eq!(got, want, "k={k}");
        }
    }

    #[test]
    fn blocks_cover_all_bits_once() {
        for count in 1..=24 {
            let masks = block_masks(count);
            assert_eq!(masks.len(), count);
            assert_eq!(
                masks.iter().fold(0u64, |acc, m| {
                    assert_eq!(acc & m, 0);
                    acc | m
                }),
                !0
            );
        }
        assert_eq!(combinations(5, 3).len(), 10);
        assert_eq!(combinations(4, 4), vec![vec![0, 1, 2, 3]]);
    }

    #[test]
    fn groups_duplicates() {
        let groups = Duplicates::group(&[5, 1, 5, 3, 1, 5], crate::Interrupt::NEVER).unwrap();
        assert_eq!(groups.distinct, vec![1, 3, 5]);
        let mut holders: Vec<Vec<u32>> = (0..3).map(|u| groups.holders(u).to_vec()).collect();
        holders.iter_mut().for_each(|h| h.sort_unstable());
        assert_eq!(holders, vec![vec![1, 4], vec![3], vec![0, 2, 5]]);
        assert_eq!(groups.repeated().count(), 2);
        assert!(Duplicates::group(&[], crate::Interrupt::NEVER).unwrap().distinct.is_empty());
    }

    #[test]
    fn reports_progress_after_each_table() {
        let fps = fingerprints(500, 7);
        let mut calls = Vec::new();
        let tables = for_each_pair(
            &fps,
            3,
            &mut |_, _, _| {},
            &mut |done, all, _| calls.push((done, all)),
            crate::Interrupt::NEVER,
        )
        .unwrap();
        assert_eq!(calls.last(), Some(&(tables, tables)));
    }

    #[test]
    fn grouping_many_rows_is_interruptible() {
        // 4 STEP rows (sorted at once, no check there), gathered in 4 pieces.
        let fps: Vec<u64> = (0..4 * crate::interrupt::STEP as u64).map(|i| i / 3).collect();
        let (stopped, calls) = crate::interrupt::tests::run_stopping(usize::MAX, |i| Duplicates::group(&fps, i));
        assert!(!stopped && calls == 4, "{calls} checks");
    }

    #[test]
    fn a_table_of_many_rows_is_interruptible() {
        use crate::interrupt::{tests::run_stopping, STEP};
        // k = 0: one table, of 2^21 + 1 distinct fingerprints (no comparisons, so no progress
        // until its end): filled and read in 129 pieces each, sorted in pieces (2 checks at least).
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let fps: Vec<u64> = (0..(1usize << 21) + 1)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                state ^ state >> 29
            })
            .collect();
        let pieces = fps.len().div_ceil(STEP);
        let (stopped, calls) = run_stopping(usize::MAX, |i| {
            assert_eq!(for_each_pair(&fps, 0, &mut |_, _, _| {}, &mut |_, _, _| {}, i), Ok(1));
        });
        assert!(!stopped && calls >= 2 * pieces + 2, "{calls} checks");
        let mut progress = 0;
        let (stopped, _) =
            run_stopping(2, |i| for_each_pair(&fps, 0, &mut |_, _, _| {}, &mut |_, _, _| progress += 1, i));
        assert!(stopped && progress == 0);
    }

    /// Under a limit of the address space of 1 GB (`ulimit -v`, in a child process), the table of
    /// 48M fingerprints (768 MB beside their 384 MB) is refused: `OutOfMemory`, before any pair,
    /// instead of the abort of the process.
    #[test]
    fn a_table_beyond_memory_is_refused() {
        if !crate::code_index::tests::under_ulimit(1 << 20, "pairs::tests::a_table_beyond_memory_is_refused") {
            return;
        }
        let fps: Vec<u64> = (0..48u64 << 20).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut pairs = 0;
        assert_eq!(
            for_each_pair(&fps, 3, &mut |_, _, _| pairs += 1, &mut |_, _, _| {}, crate::Interrupt::NEVER),
            Err(OutOfMemory)
        );
        assert_eq!(pairs, 0);
    }

    #[test]
    fn groups_take_the_least_key() {
        let mut g = Groups::of(vec![50, 10, 30, 40]).unwrap();
        g.union(0, 2);
        g.union(3, 0);
        assert_eq!((0..4).map(|i| g.representative(i)).collect::<Vec<_>>(), vec![30, 10, 30, 30]);
        let five = g.add(5).unwrap();
        g.union(2, five);
        g.union(1, 1);
        assert_eq!((0..5).map(|i| g.representative(i)).collect::<Vec<_>>(), vec![5, 10, 5, 5, 5]);
        assert_eq!((g.len(), g.key(4)), (5, 5));
    }
}
