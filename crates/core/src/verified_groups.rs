//! The groups of verified pairs with as few verifications as the groups need: the connected
//! components of the candidate pairs (rows within `k`) whose verification (the texts' similarity)
//! succeeds, each row with the least id of its group, exactly as if every candidate were verified
//! and the verified pairs grouped.
//!
//! A candidate whose two rows are already in one group cannot change the groups (its edge would
//! join a component with itself), so it is not verified. Candidates are taken closest first
//! (distance ascending): true duplicates, mostly close, join their groups early, so that more of the
//! farther candidates fall inside a group and are skipped.
//!
//! Candidates are kept compact: a set of rows with one fingerprint ("every two of these", distance
//! 0) or two sets at a distance ("every row of one with every row of the other"), as the searches
//! report them, not one entry per pair.

use crate::pairs::{push, vec_with_room, Groups, OutOfMemory};

/// Candidates as they were found: ids in one flat vector, entries pointing into it.
#[derive(Default)]
pub struct Candidates {
    ids: Vec<i64>,
    entries: Vec<Entry>,
    /// Pairs of one row with one row (most of them), 24 bytes each: (a, b, distance).
    singles: Vec<(i64, i64, u32)>,
}

/// `ids[start..start + a]` with each other (`b` `None`) or with `ids[start + a..start + a + b]`.
#[derive(Clone, Copy)]
struct Entry {
    start: usize,
    a: u32,
    b: Option<u32>,
    distance: u32,
}

/// Bytes one entry takes, one id, and one pair of one row with one row.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
pub const ID_BYTES: usize = 8;
pub const SINGLE_BYTES: usize = std::mem::size_of::<(i64, i64, u32)>();

/// How far the grouping went, for progress reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Candidate pairs taken (verified or skipped).
    pub taken: u64,
    /// Candidate pairs verified (the callback called).
    pub verified: u64,
    /// Verified pairs that joined two groups.
    pub joined: u64,
}

/// Pairs taken between two calls of the progress callback.
pub const PROGRESS_STEP: u64 = 1 << 14;

impl Candidates {
    /// Every two rows of `ids` (one fingerprint: distance 0); [`OutOfMemory`] (nothing added) when
    /// memory for them is refused.
    pub fn push_all_pairs(&mut self, ids: &[i64]) -> Result<(), OutOfMemory> {
        if ids.len() > 1 {
            self.push(ids, None, 0)?;
        }
        Ok(())
    }

    /// Every row of `a` with every row of `b`, at `distance`; [`OutOfMemory`] (nothing added) when
    /// memory for them is refused.
    pub fn push_cross(&mut self, a: &[i64], b: &[i64], distance: u32) -> Result<(), OutOfMemory> {
        match (a, b) {
            ([a], [b]) => push(&mut self.singles, (*a, *b, distance))?,
            _ if !a.is_empty() && !b.is_empty() => self.push(a, Some(b), distance)?,
            _ => {}
        }
        Ok(())
    }

    fn push(&mut self, a: &[i64], b: Option<&[i64]>, distance: u32) -> Result<(), OutOfMemory> {
        let start = self.ids.len();
        self.ids.try_reserve(a.len() + b.map_or(0, <[i64]>::len)).map_err(|_| OutOfMemory)?;
        self.entries.try_reserve(1).map_err(|_| OutOfMemory)?;
        self.ids.extend_from_slice(a);
        if let Some(b) = b {
            self.ids.extend_from_slice(b);
        }
        self.entries.push(Entry { start, a: a.len() as u32, b: b.map(|b| b.len() as u32), distance });
        Ok(())
    }

    /// The memory the candidates take.
    pub fn bytes(&self) -> usize {
        self.ids.len() * ID_BYTES + self.entries.len() * ENTRY_BYTES + self.singles.len() * SINGLE_BYTES
    }

    /// The number of candidate pairs (with duplicate rows counted as pairs).
    pub fn pairs(&self) -> u64 {
        self.entries
            .iter()
            .map(|e| match e.b {
                None => u64::from(e.a) * (u64::from(e.a) - 1) / 2,
                Some(b) => u64::from(e.a) * u64::from(b),
            })
            .sum::<u64>()
            + self.singles.len() as u64
    }

    /// The distinct ids in some candidate, ascending, or [`OutOfMemory`]; `interrupt` checked
    /// while they are gathered and sorted.
    pub fn distinct_ids(&self, interrupt: crate::Interrupt) -> Result<Vec<i64>, OutOfMemory> {
        // (through a set: the ids repeat, and a copy of them all would double the memory)
        let mut set = std::collections::HashSet::new();
        let all = self.ids.iter().copied().chain(self.singles.iter().flat_map(|&(a, b, _)| [a, b]));
        for id in crate::interrupt::Checked::new(all, interrupt) {
            set.try_reserve(1).map_err(|_| OutOfMemory)?;
            set.insert(id);
        }
        let mut ids = vec_with_room(set.len())?;
        ids.extend(set);
        crate::interrupt::sort_checked(&mut ids, &|a, b| a.cmp(b), interrupt);
        Ok(ids)
    }

    /// The groups of the candidates that `verify` accepts: every id in an accepted pair, with the
    /// least id of its group, in ascending order of id. `distinct` is [`Self::distinct_ids`];
    /// `verify(i, j)` gets positions in it (`i` may equal `j` when one id is on two rows) and is
    /// called only for pairs whose rows are not already in one group; `progress` every
    /// [`PROGRESS_STEP`] pairs taken (and may stop everything by unwinding); `interrupt` every
    /// [`crate::interrupt::STEP`] ids or so while the candidates are numbered, sorted and the rows
    /// written. [`OutOfMemory`] when the groups of the distinct ids do not fit.
    pub fn groups(
        mut self,
        distinct: &[i64],
        verify: &mut dyn FnMut(usize, usize) -> bool,
        progress: &mut dyn FnMut(Progress),
        interrupt: crate::Interrupt,
    ) -> Result<Vec<(i64, i64)>, OutOfMemory> {
        use crate::interrupt::{ranges, sort_checked};
        // Ids to positions in `distinct`, once (a binary search each: checked every STEP of them).
        let position = |id: i64| distinct.binary_search(&id).expect("every candidate id is in distinct") as i64;
        for range in ranges(self.ids.len(), interrupt) {
            for id in &mut self.ids[range] {
                *id = position(*id);
            }
        }
        for range in ranges(self.singles.len(), interrupt) {
            for (a, b, _) in &mut self.singles[range] {
                (*a, *b) = (position(*a), position(*b));
            }
        }
        // (unstable sorts, which take no memory; the entries keep the order they came in, as
        // `start` grows with them, and the singles' order among equal distances changes which
        // pairs are verified, not the groups)
        sort_checked(&mut self.entries, &|x, y| (x.distance, x.start).cmp(&(y.distance, y.start)), interrupt);
        sort_checked(&mut self.singles, &|&(a, b, d), &(x, y, e)| (d, a, b).cmp(&(e, x, y)), interrupt);
        let mut keys = vec_with_room(distinct.len())?;
        keys.extend_from_slice(distinct);
        let mut groups = Groups::of(keys)?;
        // Whether a position is in some accepted pair.
        let mut joined = vec_with_room(distinct.len())?;
        joined.resize(distinct.len(), false);
        let mut done = Progress::default();
        let mut take = |i: usize, j: usize, groups: &mut Groups<i64>, done: &mut Progress| {
            done.taken += 1;
            if done.taken.is_multiple_of(PROGRESS_STEP) {
                progress(*done);
            }
            if joined[i] && joined[j] && groups.root(i) == groups.root(j) {
                return;
            }
            done.verified += 1;
            if verify(i, j) {
                done.joined += 1;
                joined[i] = true;
                joined[j] = true;
                groups.union(i, j);
            }
        };
        // Entries and singles merged by distance.
        let mut singles = self.singles.iter().peekable();
        for e in &self.entries {
            while let Some(&(i, j, _)) = singles.next_if(|s| s.2 < e.distance) {
                take(i as usize, j as usize, &mut groups, &mut done);
            }
            let a = &self.ids[e.start..e.start + e.a as usize];
            match e.b {
                None => {
                    for (x, &i) in a.iter().enumerate() {
                        for &j in &a[x + 1..] {
                            take(i as usize, j as usize, &mut groups, &mut done);
                        }
                    }
                }
                Some(b) => {
                    let b = &self.ids[e.start + a.len()..e.start + a.len() + b as usize];
                    for &i in a {
                        for &j in b {
                            take(i as usize, j as usize, &mut groups, &mut done);
                        }
                    }
                }
            }
        }
        for &(i, j, _) in singles {
            take(i as usize, j as usize, &mut groups, &mut done);
        }
        progress(done);
        let mut rows = vec_with_room(joined.iter().filter(|&&j| j).count())?;
        for range in ranges(distinct.len(), interrupt) {
            rows.extend(range.filter(|&i| joined[i]).map(|i| (distinct[i], groups.representative(i))));
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    /// The groups of all accepted pairs, the plain way: every pair verified, then grouped.
    fn all_verified(pairs: &[(i64, i64)], accept: &dyn Fn(i64, i64) -> bool) -> Vec<(i64, i64)> {
        let mut index = BTreeMap::new();
        for &(a, b) in pairs {
            if accept(a, b) {
                index.insert(a, ());
                index.insert(b, ());
            }
        }
        let keys: Vec<i64> = index.keys().copied().collect();
        let mut groups = Groups::of(keys.clone()).unwrap();
        for &(a, b) in pairs {
            if accept(a, b) {
                groups.union(keys.binary_search(&a).unwrap(), keys.binary_search(&b).unwrap());
            }
        }
        (0..keys.len()).map(|i| (keys[i], groups.representative(i))).collect()
    }

    /// A small deterministic generator.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 33
    }

    #[test]
    fn same_groups_as_verifying_every_pair() {
        let mut state = 7;
        for round in 0..200 {
            let rows = 2 + next(&mut state) % 30;
            // Each row a "text" (a class); pairs accepted when classes are close; some rows share ids.
            let class: HashMap<i64, u64> = (0..rows as i64).map(|id| (id, next(&mut state) % 6)).collect();
            let accept = |a: i64, b: i64| class[&a].abs_diff(class[&b]) <= 1 && (a + b) % 7 != round % 7;
            let mut candidates = Candidates::default();
            let mut pairs = Vec::new();
            for _ in 0..next(&mut state) % 40 {
                let d = (next(&mut state) % 4) as u32;
                let a: Vec<i64> = (0..1 + next(&mut state) % 3).map(|_| (next(&mut state) % rows) as i64).collect();
                if next(&mut state).is_multiple_of(3) {
                    candidates.push_all_pairs(&a).unwrap();
                    for (x, &i) in a.iter().enumerate() {
                        for &j in &a[x + 1..] {
                            pairs.push((i, j));
                        }
                    }
                } else {
                    let b: Vec<i64> = (0..1 + next(&mut state) % 3).map(|_| (next(&mut state) % rows) as i64).collect();
                    candidates.push_cross(&a, &b, d).unwrap();
                    for &i in &a {
                        for &j in &b {
                            pairs.push((i, j));
                        }
                    }
                }
            }
            assert_eq!(candidates.pairs(), pairs.len() as u64);
            let distinct = candidates.distinct_ids(crate::Interrupt::NEVER).unwrap();
            let mut calls = 0;
            let got = candidates
                .groups(
                    &distinct,
                    &mut |i, j| {
                        calls += 1;
                        accept(distinct[i], distinct[j])
                    },
                    &mut |_| {},
                    crate::Interrupt::NEVER,
                )
                .unwrap();
            assert_eq!(got, all_verified(&pairs, &accept), "round {round}");
            assert!(calls <= pairs.len());
        }
    }

    #[test]
    fn closest_first_and_skips_pairs_within_a_group() {
        // 1-2-3 all alike: the close pairs join them, the far pair 1-3 is never verified.
        let mut candidates = Candidates::default();
        candidates.push_cross(&[1], &[3], 5).unwrap();
        candidates.push_cross(&[1], &[2], 1).unwrap();
        candidates.push_all_pairs(&[2, 3]).unwrap();
        let distinct = candidates.distinct_ids(crate::Interrupt::NEVER).unwrap();
        let mut seen = Vec::new();
        let got = candidates
            .groups(
                &distinct,
                &mut |i, j| {
                    seen.push((distinct[i], distinct[j]));
                    true
                },
                &mut |_| {},
                crate::Interrupt::NEVER,
            )
            .unwrap();
        assert_eq!(seen, vec![(2, 3), (1, 2)]);
        assert_eq!(got, vec![(1, 1), (2, 1), (3, 1)]);
    }

    #[test]
    fn a_chain_through_a_rejected_pair_still_joins() {
        // 1-3 rejected, but 1-2 and 2-3 accepted: one group.
        let mut candidates = Candidates::default();
        candidates.push_cross(&[1], &[3], 0).unwrap();
        candidates.push_cross(&[1], &[2], 2).unwrap();
        candidates.push_cross(&[2], &[3], 2).unwrap();
        candidates.push_cross(&[4], &[5], 1).unwrap();
        let distinct = candidates.distinct_ids(crate::Interrupt::NEVER).unwrap();
        let got = candidates
            .groups(
                &distinct,
                &mut |i, j| (distinct[i], distinct[j]) != (1, 3) && distinct[i] != 4,
                &mut |_| {},
                crate::Interrupt::NEVER,
            )
            .unwrap();
        assert_eq!(got, vec![(1, 1), (2, 1), (3, 1)]);
    }

    #[test]
    fn many_candidates_are_interruptible() {
        use crate::interrupt::{tests::run_stopping, STEP};
        // 2^21 pairs of one row with one row (0-1, 1-2, ...) and one entry of 2 rows with 3 STEP rows.
        let singles = 1usize << 21;
        let build = || {
            let mut candidates = Candidates::default();
            for i in 0..singles as i64 {
                candidates.push_cross(&[i], &[i + 1], (i % 7) as u32).unwrap();
            }
            let big: Vec<i64> = (2..2 + 3 * STEP as i64).collect();
            candidates.push_cross(&[0, 1], &big, 3).unwrap();
            candidates
        };
        let candidates = build();
        // Gathering the ids checks every STEP of them (the sort alone checks a few times).
        let (stopped, calls) = run_stopping(usize::MAX, |i| candidates.distinct_ids(i));
        assert!(!stopped && calls >= (2 * singles + 3 * STEP) / STEP, "{calls} checks");
        let distinct = candidates.distinct_ids(crate::Interrupt::NEVER).unwrap();
        assert_eq!(distinct.len(), singles + 1);
        // Numbering the ids of the entry (4 ranges) and of the singles (128), sorting the singles
        // (split in parts of at most 2^20, each split checking every STEP elements: 128 checks
        // for the first, fewer than as many again for the parts it leaves larger than 2^20) and
        // writing the rows (129 ranges of the distinct ids).
        let (stopped, calls) =
            run_stopping(usize::MAX, |i| candidates.groups(&distinct, &mut |_, _| false, &mut |_| {}, i).unwrap());
        assert!(!stopped);
        assert!((4 + 128 + 128 + 129..4 + 128 + 2 * 128 + 8 + 129).contains(&calls), "{calls} checks");
        // Stopped at its first check, nothing is verified.
        let mut verified = 0;
        let (stopped, _) = run_stopping(1, |i| {
            build().groups(
                &distinct,
                &mut |_, _| {
                    verified += 1;
                    false
                },
                &mut |_| {},
                i,
            )
        });
        assert!(stopped && verified == 0);
    }

    #[test]
    fn one_id_on_two_rows() {
        let mut candidates = Candidates::default();
        candidates.push_all_pairs(&[9, 9]).unwrap();
        let distinct = candidates.distinct_ids(crate::Interrupt::NEVER).unwrap();
        assert_eq!(
            candidates.groups(&distinct, &mut |i, j| i == j, &mut |_| {}, crate::Interrupt::NEVER),
            Ok(vec![(9, 9)])
        );
    }
}
