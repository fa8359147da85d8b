//! The built part of an index of format 5 (`simhash_core::dense` has the layout and why a lookup
//! is exact): the rows the table held when the index was built, written once by the build, in
//! four runs of blocks, one per segment, each a directory (where each segment value's run of
//! entries starts, 4 bytes per value) and then the entries, densely:
//! - segment 0: residual and TID (12 bytes), [`per_page`] to a page, the residuals from the start
//!   of the page's contents, the TIDs after all of them;
//! - segments 1 to 3: the residual alone (6 bytes).
//!
//! Its pages never change but for VACUUM, which marks the TIDs of removed rows in segment 0 as
//! invalid (offset 0): their fingerprints stay in every segment, and a match with such a row finds
//! no TID. The rows inserted since the build are in the buckets (`super::page`), as in an index of
//! format 4; a REINDEX moves them here.

use pgrx::pg_sys::{self, BlockNumber, Buffer, Page};
use simhash_core::dense::{self as layout, RESIDUAL_BYTES, VALUES};

use super::buffers;
use super::page::{self, Kind, Meta, TID};
use super::readahead::{prefetch_bytes, ReadAhead};
use super::SEGMENTS;

/// Entries of a page of segment `n`.
pub(super) fn per_page(n: u32) -> usize {
    if n == 0 {
        page::usable() / (RESIDUAL_BYTES + TID)
    } else {
        page::usable() / RESIDUAL_BYTES
    }
}

/// The bytes of a page of segment `n` that its entries may take.
fn used_bytes(n: u32) -> usize {
    if n == 0 {
        per_page(0) * (RESIDUAL_BYTES + TID)
    } else {
        per_page(n) * RESIDUAL_BYTES
    }
}

/// Directory positions on a directory page.
fn directory_per_page() -> usize {
    page::usable() / std::mem::size_of::<u32>()
}

/// Directory pages of a segment: `VALUES + 1` positions.
pub(super) fn directory_pages() -> u32 {
    (VALUES + 1).div_ceil(directory_per_page()) as u32
}

/// Whether a TID of segment 0 is a row's (not one VACUUM removed).
pub(super) fn is_live(tid: &pg_sys::ItemPointerData) -> bool {
    tid.ip_posid != 0
}

/// The built part of an index: where it starts and how many rows it holds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dense {
    pub start: BlockNumber,
    pub rows: u32,
}

impl Dense {
    /// The built part of the index of `meta`, if it has one.
    pub fn of(meta: &Meta) -> Option<Dense> {
        meta.has_dense().then_some(Dense { start: meta.dense_start, rows: meta.dense_rows })
    }

    /// The pages of the entries of segment `n`.
    pub fn data_pages(&self, n: u32) -> u32 {
        (self.rows as usize).div_ceil(per_page(n)) as u32
    }

    /// The first block of segment `n` (its directory, then its entries).
    pub fn segment_start(&self, n: u32) -> BlockNumber {
        self.start + (0..n).map(|m| directory_pages() + self.data_pages(m)).sum::<u32>()
    }

    /// The blocks of the built part.
    pub fn blocks(&self) -> u32 {
        self.segment_start(SEGMENTS) - self.start
    }

    /// The block of the directory of segment `n` that holds position `value` of it, and where.
    fn directory_position(&self, n: u32, value: usize) -> (BlockNumber, usize) {
        let per = directory_per_page();
        (self.segment_start(n) + (value / per) as u32, value % per)
    }

    /// The first block of the entries of segment `n` (after its directory).
    pub fn data_start(&self, n: u32) -> BlockNumber {
        self.segment_start(n) + directory_pages()
    }

    /// The block of entry `position` of segment `n`, and the entry's place on it.
    pub fn position(&self, n: u32, position: u32) -> (BlockNumber, usize) {
        let per = per_page(n);
        (self.data_start(n) + (position as usize / per) as u32, position as usize % per)
    }

    /// The position in segment `n` of the first entry of its page `block`, and the entries on
    /// that page.
    pub fn entries_of(&self, n: u32, block: BlockNumber) -> (u32, usize) {
        let base = (block - self.data_start(n)) * per_page(n) as u32;
        (base, (self.rows.saturating_sub(base) as usize).min(per_page(n)))
    }
}

/// Checks that `any_page`, block `block` of `index`, is a page of `kind` of segment `n` (else an
/// ERROR: the index is corrupt).
///
/// # Safety
///
/// `any_page` is that page, locked.
pub(super) unsafe fn expect_page(index: pg_sys::Relation, any_page: Page, block: BlockNumber, kind: Kind, n: u32) {
    unsafe {
        page::expect_kind(any_page, kind, index, block);
        if u32::from((*page::special(any_page)).segment()) != n {
            page::corrupt(index, format!("block {block} is not a page of segment {n}"));
        }
    }
}

/// The TIDs of a page of segment 0.
#[derive(Clone, Copy)]
pub(super) struct Tids {
    start: *const u8,
    len: usize,
}

impl Tids {
    /// TID `i` (below the entries of the page, else a panic).
    pub fn get(&self, i: usize) -> pg_sys::ItemPointerData {
        assert!(i < self.len, "TID {i} of {}", self.len);
        // SAFETY: the page holds `len` TIDs from `start`.
        unsafe { self.start.add(i * TID).cast::<pg_sys::ItemPointerData>().read_unaligned() }
    }
}

/// The residuals of a page of segment `n`, and its TIDs in segment 0.
///
/// # Safety
///
/// `page` is a locked page of the entries of segment `n`, holding `entries`.
unsafe fn page_entries<'a>(page: Page, n: u32, entries: usize) -> (&'a [u8], Option<Tids>) {
    unsafe {
        let contents = page::contents(page) as *const u8;
        let residuals = std::slice::from_raw_parts(contents, per_page(n) * RESIDUAL_BYTES);
        let tids = (n == 0).then(|| Tids { start: contents.add(per_page(0) * RESIDUAL_BYTES), len: entries });
        (residuals, tids)
    }
}

/// A page of the built part at a time, share-locked (the pages after one another, each left when
/// the next is asked for).
struct Reader {
    index: pg_sys::Relation,
    current: Option<(BlockNumber, Buffer)>,
}

impl Reader {
    fn new(index: pg_sys::Relation) -> Reader {
        Reader { index, current: None }
    }

    /// Page `block`, of `kind` and segment `n` (else an ERROR: the index is corrupt).
    unsafe fn page(&mut self, block: BlockNumber, kind: Kind, n: u32) -> Page {
        unsafe {
            match self.current {
                Some((current, buffer)) if current == block => return pg_sys::BufferGetPage(buffer),
                Some((_, buffer)) => {
                    pg_sys::UnlockReleaseBuffer(buffer);
                    self.current = None;
                    pgrx::check_for_interrupts!();
                }
                None => {}
            }
            let buffer = buffers::read_locked(self.index, block, pg_sys::BUFFER_LOCK_SHARE);
            self.current = Some((block, buffer));
            let dense_page = pg_sys::BufferGetPage(buffer);
            expect_page(self.index, dense_page, block, kind, n);
            dense_page
        }
    }

    fn finish(self) {
        if let Some((_, buffer)) = self.current {
            unsafe { pg_sys::UnlockReleaseBuffer(buffer) };
        }
    }
}

/// Position `value` (0..=VALUES) of the directory of segment `n`.
unsafe fn directory_at(reader: &mut Reader, dense: &Dense, n: u32, value: usize) -> u32 {
    unsafe {
        let (block, slot) = dense.directory_position(n, value);
        let directory = reader.page(block, Kind::DenseDirectory, n);
        let position = page::contents(directory).cast::<u32>().add(slot).read();
        if position > dense.rows {
            page::corrupt(
                reader.index,
                format!("the directory of segment {n} gives position {position} of {}", dense.rows),
            );
        }
        position
    }
}

/// The runs of entries of `values` (segment values) in segment `n`: (first, end) positions.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn runs(index: pg_sys::Relation, dense: &Dense, n: u32, values: &[u16]) -> Vec<(u32, u32)> {
    unsafe {
        let mut reader = Reader::new(index);
        let mut runs = Vec::new();
        super::memory::reserve(&mut runs, values.len());
        // The positions asked for, requested from memory a page at a time ahead of their reads.
        let per = directory_per_page();
        let mut requested = usize::MAX;
        for (i, &value) in values.iter().enumerate() {
            let value = usize::from(value);
            if value / per != requested {
                requested = value / per;
                let (block, _) = dense.directory_position(n, value);
                let directory = reader.page(block, Kind::DenseDirectory, n);
                for &other in values[i..].iter().take_while(|&&v| usize::from(v) / per == requested) {
                    prefetch_bytes(page::contents(directory).add(usize::from(other) % per * 4), 8);
                }
            }
        }
        for &value in values {
            let first = directory_at(&mut reader, dense, n, usize::from(value));
            let end = directory_at(&mut reader, dense, n, usize::from(value) + 1);
            if end < first {
                page::corrupt(index, format!("the run of value {value} in segment {n} ends before it starts"));
            }
            runs.push((first, end));
        }
        reader.finish();
        runs
    }
}

/// The entries of a run on one page.
pub(super) struct Part<'a> {
    /// Which run (its position in the runs read).
    pub run: usize,
    /// The page's residuals.
    pub residuals: &'a [u8],
    /// The run's entries on the page: `from..to`.
    pub from: usize,
    pub to: usize,
    /// The page's TIDs (segment 0).
    pub tids: Option<Tids>,
    /// The position in the segment of the page's first entry.
    pub base: u32,
}

impl Part<'_> {
    /// Calls `found(i, fp)` for each entry `i` of the part, whose segment `n` is `value`, within
    /// `k` bits of `query` (its fingerprint `fp`): the value's distance, one for the run, and the
    /// residuals' ([`layout::for_each_near_residual`]).
    pub fn near(&self, value: u16, n: u32, query: u64, k: u32, mut found: impl FnMut(usize, u64)) {
        let value_distance = (value ^ simhash_core::buckets::segment_value(query, n)).count_ones();
        let Some(limit) = k.checked_sub(value_distance) else { return };
        layout::for_each_near_residual(
            self.residuals,
            self.from,
            self.to,
            layout::residual(query, n),
            limit,
            |i, r| found(i, layout::assemble(r, value, n)),
        );
    }
}

/// Calls `each` with the entries of each run of `runs` (first and end position in segment `n`), a
/// page at a time ([`Part`]). The pages are read in block order, each once for the runs on it,
/// pinned ahead of their read with the entries to check requested from memory.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn read_runs(
    index: pg_sys::Relation,
    dense: &Dense,
    n: u32,
    runs: &[(u32, u32)],
    mut each: impl FnMut(Part<'_>),
) {
    unsafe {
        // The parts of the runs on each page: (block, run, from, to), in block order.
        let mut parts: Vec<(BlockNumber, u32, u16, u16)> = Vec::new();
        for (j, &(first, end)) in runs.iter().enumerate() {
            let mut at = first;
            while at < end {
                let (block, slot) = dense.position(n, at);
                let on_page = (per_page(n) - slot).min((end - at) as usize);
                super::memory::push(&mut parts, (block, j as u32, slot as u16, (slot + on_page) as u16));
                at += on_page as u32;
            }
        }
        parts.sort_by_key(|&(block, ..)| block);
        let mut blocks: Vec<BlockNumber> = parts.iter().map(|&(block, ..)| block).collect();
        blocks.dedup();
        let mut pages = ReadAhead::new(index, &blocks);
        let mut part = 0; // the first part on the page being read
        let request = |j: usize, ahead: Page, part: usize| {
            let first = part + parts[part..].iter().take_while(|p| p.0 < blocks[j]).count();
            for p in parts[first..].iter().take_while(|p| p.0 == blocks[j]) {
                prefetch_residuals(ahead, usize::from(p.2), usize::from(p.3));
            }
        };
        while let Some((i, buffer)) = pages.next(|j, ahead| request(j, ahead, part)) {
            let block = blocks[i];
            pg_sys::LockBuffer(buffer, pg_sys::BUFFER_LOCK_SHARE as i32);
            let dense_page = pg_sys::BufferGetPage(buffer);
            expect_page(index, dense_page, block, Kind::Dense, n);
            let (base, entries) = dense.entries_of(n, block);
            let (residuals, tids) = page_entries(dense_page, n, entries);
            while let Some(&(at, run, from, to)) = parts.get(part) {
                if at != block {
                    break;
                }
                each(Part { run: run as usize, residuals, from: usize::from(from), to: usize::from(to), tids, base });
                part += 1;
            }
            pg_sys::UnlockReleaseBuffer(buffer);
            pgrx::check_for_interrupts!();
        }
    }
}

/// Asks the CPU for residuals `from..to` of a page.
unsafe fn prefetch_residuals(dense_page: Page, from: usize, to: usize) {
    unsafe {
        let start = page::contents(dense_page) as *const u8;
        prefetch_bytes(start.add(from * RESIDUAL_BYTES), (to - from) * RESIDUAL_BYTES);
    }
}

/// Calls `each(fp, tid)` for the live rows of the built part whose fingerprint is one of `fps`
/// (sorted and deduplicated here): for the matches found in segments 1 to 3, which keep no TIDs.
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn rows_of(
    index: pg_sys::Relation,
    dense: &Dense,
    fps: &mut Vec<u64>,
    mut each: impl FnMut(u64, pg_sys::ItemPointerData),
) {
    unsafe {
        super::memory::sort_interruptibly(fps, |&fp| fp);
        fps.dedup();
        if fps.is_empty() {
            return;
        }
        let values: Vec<u16> = fps.iter().map(|&fp| simhash_core::buckets::segment_value(fp, 0)).collect();
        let runs = runs(index, dense, 0, &values);
        read_runs(index, dense, 0, &runs, |part| {
            let fp = fps[part.run];
            let residual = layout::residual(fp, 0);
            let tids = part.tids.expect("segment 0 has TIDs");
            let mut i = layout::lower_bound(part.residuals, part.from, part.to, residual);
            while i < part.to && layout::read_residual(part.residuals, i) == residual {
                let tid = tids.get(i);
                if is_live(&tid) {
                    each(fp, tid);
                }
                i += 1;
            }
        });
    }
}

/// Calls `each(fp, tid)` for every entry of the built part whose segment `n` value is in
/// `from..to`, in order (`tid`: `None` in segments 1 to 3; in segment 0 perhaps of a removed row,
/// [`is_live`]).
///
/// # Safety
///
/// `index` is an open simhash index with the built part `dense`.
pub(super) unsafe fn read_values(
    index: pg_sys::Relation,
    dense: &Dense,
    n: u32,
    from: usize,
    to: usize,
    mut each: impl FnMut(u64, Option<pg_sys::ItemPointerData>),
) {
    unsafe {
        // Where each value's run starts: the entries' values.
        let mut starts = Vec::new();
        super::memory::reserve(&mut starts, to - from + 1);
        let mut reader = Reader::new(index);
        for value in from..=to {
            starts.push(directory_at(&mut reader, dense, n, value));
        }
        reader.finish();
        if starts.windows(2).any(|w| w[1] < w[0]) {
            page::corrupt(index, format!("the directory of segment {n} is not in order"));
        }
        let mut value = from;
        read_runs(index, dense, n, &[(starts[0], starts[to - from])], |part| {
            for i in part.from..part.to {
                let position = part.base + i as u32;
                while starts[value + 1 - from] <= position {
                    value += 1;
                }
                let fp = layout::assemble(layout::read_residual(part.residuals, i), value as u16, n);
                each(fp, part.tids.map(|tids| tids.get(i)));
            }
        });
    }
}

/// The rows of a build as the built part orders them, one segment after the other: in memory
/// ([`InMemory`]), or from sorts that spilled to disk (`super::build`).
pub(super) trait SortedRows {
    /// The rows (each segment has them all).
    fn rows(&self) -> u32;
    /// Gets segment `n` ready (0 to 3, in turn) and returns where each segment value's run
    /// starts (`VALUES + 1` positions).
    fn begin(&mut self, n: u32) -> Vec<u32>;
    /// The next entry of the segment begun: its order key (`(value << 48) | residual`,
    /// `simhash_core::dense::order_key`) and its TID (read in segment 0 only).
    fn next(&mut self) -> Option<(u64, pg_sys::ItemPointerData)>;
}

/// The order key of `fp` in segment `n`, as [`SortedRows::next`] returns it.
pub(super) fn order_key(fp: u64, n: u32) -> u64 {
    let (value, residual) = layout::order_key(fp, n);
    (u64::from(value) << 48) | residual
}

/// A build's rows in memory, each segment sorted when begun: 16 bytes a row besides the entries.
pub(super) struct InMemory<'a> {
    entries: &'a [page::Entry],
    keys: Vec<(u64, u32)>,
    at: usize,
}

impl<'a> InMemory<'a> {
    /// The rows of `entries` (at most `u32::MAX`).
    pub fn new(entries: &'a [page::Entry]) -> InMemory<'a> {
        let mut keys = Vec::new();
        super::memory::reserve(&mut keys, entries.len());
        InMemory { entries, keys, at: 0 }
    }
}

impl SortedRows for InMemory<'_> {
    fn rows(&self) -> u32 {
        self.entries.len() as u32
    }
    fn begin(&mut self, n: u32) -> Vec<u32> {
        self.keys.clear();
        self.keys.extend(self.entries.iter().enumerate().map(|(i, entry)| (order_key(entry.fp, n), i as u32)));
        super::memory::sort_interruptibly(&mut self.keys, |&key| key);
        self.at = 0;
        layout::directory(self.keys.iter().map(|&(key, _)| (key >> 48) as u16))
    }
    fn next(&mut self) -> Option<(u64, pg_sys::ItemPointerData)> {
        let &(key, row) = self.keys.get(self.at)?;
        self.at += 1;
        Some((key, self.entries[row as usize].tid))
    }
}

/// Writes the built part of `rows` from block `start` on, one block after the other with
/// `write_page(block, fill)`: segment by segment, its directory and then its entries; returns the
/// built part.
///
/// # Safety
///
/// `write_page` writes block `block` of the index, new, as `fill` makes it.
pub(super) unsafe fn write(
    rows: &mut dyn SortedRows,
    start: BlockNumber,
    mut write_page: impl FnMut(BlockNumber, &mut dyn FnMut(Page)),
) -> Dense {
    unsafe {
        let dense = Dense { start, rows: rows.rows() };
        let mut block = start;
        for n in 0..SEGMENTS {
            let starts = rows.begin(n);
            let per_directory = directory_per_page();
            for d in 0..directory_pages() as usize {
                write_page(block, &mut |directory: Page| {
                    page::init_page(directory, Kind::DenseDirectory, n as u16);
                    let slots = &starts[d * per_directory..((d + 1) * per_directory).min(starts.len())];
                    std::ptr::copy_nonoverlapping(slots.as_ptr(), page::contents(directory).cast::<u32>(), slots.len());
                    page::set_used(directory, std::mem::size_of_val(slots));
                });
                block += 1;
            }
            let per = per_page(n);
            let mut written = 0u64;
            for _ in 0..dense.data_pages(n) {
                write_page(block, &mut |data: Page| {
                    page::init_page(data, Kind::Dense, n as u16);
                    let contents = page::contents(data);
                    let residuals = std::slice::from_raw_parts_mut(contents, per * RESIDUAL_BYTES);
                    let tids = contents.add(per * RESIDUAL_BYTES).cast::<pg_sys::ItemPointerData>();
                    for i in 0..per {
                        let Some((key, tid)) = rows.next() else { break };
                        layout::write_residual(residuals, i, key & layout::RESIDUAL_MASK);
                        if n == 0 {
                            tids.add(i).write_unaligned(tid);
                        }
                        written += 1;
                    }
                    page::set_used(data, used_bytes(n));
                });
                block += 1;
                if block.is_multiple_of(64) {
                    pgrx::check_for_interrupts!();
                }
            }
            if written != u64::from(dense.rows) || rows.next().is_some() {
                pgrx::error!("simhash index build: segment {n} has {written} rows or more, not {}", dense.rows);
            }
            pgrx::check_for_interrupts!();
        }
        debug_assert_eq!(block, dense.segment_start(SEGMENTS));
        dense
    }
}

/// The blocks of the entries of segment 0 of the built part of the index of `meta` (empty
/// without one): those VACUUM reads.
pub(super) fn segment_0_blocks(meta: &Meta) -> std::ops::Range<BlockNumber> {
    match Dense::of(meta) {
        Some(built) => built.data_start(0)..built.data_start(0) + built.data_pages(0),
        None => 0..0,
    }
}

/// The blocks of the built part of the index of `meta` (empty without one).
pub(super) fn blocks(meta: &Meta) -> std::ops::Range<BlockNumber> {
    match Dense::of(meta) {
        Some(built) => built.start..built.start + built.blocks(),
        None => 0..0,
    }
}

/// Marks the TIDs of page `block` of segment 0 for which `removed` holds as removed; returns the
/// rows left and those marked.
///
/// # Safety
///
/// `dense_page` is that page, exclusively locked (or its GenericXLog copy; share-locked if
/// `removed` never holds).
pub(super) unsafe fn mark_removed(
    built: &Dense,
    block: BlockNumber,
    dense_page: Page,
    mut removed: impl FnMut(&mut pg_sys::ItemPointerData) -> bool,
) -> (usize, usize) {
    unsafe {
        let (_, entries) = built.entries_of(0, block);
        let tids = page::contents(dense_page).add(per_page(0) * RESIDUAL_BYTES).cast::<pg_sys::ItemPointerData>();
        let (mut left, mut marked) = (0, 0);
        for i in 0..entries {
            let mut tid = tids.add(i).read_unaligned();
            if !is_live(&tid) {
                continue;
            }
            if removed(&mut tid) {
                tids.add(i).write_unaligned(pg_sys::ItemPointerData { ip_blkid: tid.ip_blkid, ip_posid: 0 });
                marked += 1;
            } else {
                left += 1;
            }
        }
        (left, marked)
    }
}

/// What is wrong with page `block` of the built part `built`, if anything: its kind, segment and
/// the bytes its header says it uses (GenericXLog, which VACUUM's marks go through, keeps only
/// those), for `simhash_index_check`.
///
/// # Safety
///
/// `any_page` is that page, locked.
pub(super) unsafe fn page_fault(built: &Dense, block: BlockNumber, any_page: Page) -> Option<String> {
    unsafe {
        let n = (0..SEGMENTS).rev().find(|&n| built.segment_start(n) <= block)?;
        let data = block >= built.data_start(n);
        let kind = if data { Kind::Dense } else { Kind::DenseDirectory };
        if !page::is_kind(any_page, kind) {
            return Some(format!("not a {kind:?} page"));
        }
        if u32::from((*page::special(any_page)).segment()) != n {
            return Some(format!("not a page of segment {n}"));
        }
        let used = if data {
            used_bytes(n)
        } else {
            let d = (block - built.segment_start(n)) as usize;
            ((VALUES + 1) - d * directory_per_page()).min(directory_per_page()) * std::mem::size_of::<u32>()
        };
        let header = any_page as *const pg_sys::PageHeaderData;
        if page::used(any_page) != used || (*header).pd_upper < (*header).pd_lower {
            return Some(format!("it uses {} bytes, not {used}", page::used(any_page)));
        }
        None
    }
}
