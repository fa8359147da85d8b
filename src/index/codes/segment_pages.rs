//! The segments of an index of codes as `simhash_core::code_index::candidates` reads them
//! ([`SegmentPages`]): directory positions, entries' low bits and ordinals, each checked before
//! it is followed (ERROR XX002).

use pgrx::pg_sys::Page;
use simhash_core::code_index::{self, Segments};

use super::super::page::{self, corrupt, Kind};
use super::super::readahead::prefetch_bytes;
use super::meta;
use super::read::Reader;

/// The segments of a [`Reader`]'s index, for `simhash_core::code_index::candidates` (whose own
/// interrupt checks run with pages locked, which holds interrupts off: every 1,024th probe here
/// checks with none).
pub(super) struct SegmentPages<'a> {
    reader: &'a mut Reader,
    probes: usize,
}

impl<'a> SegmentPages<'a> {
    pub fn new(reader: &'a mut Reader) -> SegmentPages<'a> {
        SegmentPages { reader, probes: 0 }
    }

    fn corrupt(&self, what: String) -> ! {
        corrupt(self.reader.index, what)
    }
}

impl Segments for SegmentPages<'_> {
    fn directory(&mut self, i: u32, prefix: u32) -> u32 {
        self.probes += 1;
        if self.probes.is_multiple_of(2048) {
            self.reader.pages.release();
            pgrx::check_for_interrupts!();
        }
        let per_page = meta::directory_per_page() as u32;
        let block = self.reader.places.segments[i as usize].0 + prefix / per_page;
        let at = (prefix % per_page) as usize;
        unsafe {
            let directory_page = self.reader.pages.page(0, block, Kind::CodeDirectory);
            if (at + 1) * 4 > page::used(directory_page) {
                self.corrupt(format!("directory block {block} has no position {at}"));
            }
            let position = (page::contents(directory_page) as *const u32).add(at).read_unaligned();
            if position > self.reader.meta.rows {
                self.corrupt(format!("directory block {block} points to entry {position}"));
            }
            position
        }
    }

    fn low(&mut self, i: u32, position: u32) -> u16 {
        let (entries_page, at) = self.entry(i, position);
        unsafe { meta::low_at(entries_page, self.reader.layout.low_bytes_of(i), at) }
    }

    fn ordinal(&mut self, i: u32, position: u32) -> u32 {
        let (entries_page, at) = self.entry(i, position);
        let ordinal = unsafe { (page::contents(entries_page) as *const u32).add(at).read_unaligned() };
        if ordinal >= self.reader.meta.rows {
            self.corrupt(format!("segment {i} entry {position} names row {ordinal} of {}", self.reader.meta.rows));
        }
        ordinal
    }

    fn ordinals(&mut self, i: u32, positions: std::ops::Range<u32>, tag: u64, read: &[u64], out: &mut Vec<u64>) {
        let per_page = meta::entries_per_page(self.reader.layout.low_bytes_of(i)) as u32;
        let rows = self.reader.meta.rows;
        let mut position = positions.start;
        while position < positions.end {
            // (the entries of `position`'s page, checked by `entry`)
            let (entries_page, at) = self.entry(i, position);
            let on_page = (positions.end - position).min(per_page - at as u32) as usize;
            if at + on_page > unsafe { meta::entries_on(entries_page, self.reader.layout.low_bytes_of(i)) } {
                self.corrupt(format!("segment {i} has no entry {}", position + on_page as u32 - 1));
            }
            let ordinals = unsafe { (page::contents(entries_page) as *const u32).add(at) };
            // (asked for at once: a run of a cluster's rows spans a few kB of the page)
            prefetch_bytes(ordinals.cast(), on_page * 4);
            for n in 0..on_page {
                let ordinal = unsafe { ordinals.add(n).read_unaligned() };
                if ordinal >= rows {
                    self.corrupt(format!("segment {i} entry {} names row {ordinal} of {rows}", position + n as u32));
                }
                if !code_index::is_marked(read, ordinal) {
                    out.push(u64::from(ordinal) << 32 | tag);
                }
            }
            position += on_page as u32;
        }
    }
}

impl SegmentPages<'_> {
    fn entry(&mut self, i: u32, position: u32) -> (Page, usize) {
        let low_bytes = self.reader.layout.low_bytes_of(i);
        let per_page = meta::entries_per_page(low_bytes) as u32;
        if position >= self.reader.meta.rows {
            self.corrupt(format!("segment {i} has no entry {position}"));
        }
        let block = self.reader.places.segments[i as usize].1 + position / per_page;
        unsafe {
            let entries_page = self.reader.pages.page(1, block, Kind::CodeEntries);
            let at = (position % per_page) as usize;
            if at >= meta::entries_on(entries_page, low_bytes) {
                self.corrupt(format!("entries block {block} has no entry {at}"));
            }
            (entries_page, at)
        }
    }
}
