//! The entries of a bucket page (and of a page of the chain of NULL rows), packed or apart
//! (`super::page` has both layouts): read, appended, rewritten, sorted, compacted.

use std::mem::size_of;

use pgrx::pg_sys::{self, Page};

use super::page::{
    contents, entries_per_page, header_contents_offset, header_fault, header_fits, set_used, special, used, Entry, TID,
};
use super::readahead::prefetch;

/// The entries of a bucket page, as the page holds them.
#[derive(Clone, Copy)]
pub(super) enum Entries<'a> {
    /// Fingerprint and TID together (format 1 to 3).
    Packed(&'a [Entry]),
    /// The fingerprints, and the TIDs apart (format 4).
    Apart(Apart<'a>),
}

/// The entries of a page that keeps them apart: `fps[i]`, and TID `i` the `i + 1`-th down from the
/// special space.
#[derive(Clone, Copy)]
pub(super) struct Apart<'a> {
    pub fps: &'a [u64],
    /// The end of the TIDs (the special space).
    tids_end: *const u8,
}

impl Apart<'_> {
    /// The TID of entry `i` (below `fps.len()`, else a panic).
    pub fn tid(&self, i: usize) -> pg_sys::ItemPointerData {
        assert!(i < self.fps.len(), "entry {i} of {}", self.fps.len());
        // SAFETY: the page holds `fps.len()` TIDs below `tids_end` (`entries`).
        unsafe { self.tids_end.sub((i + 1) * TID).cast::<pg_sys::ItemPointerData>().read_unaligned() }
    }

    /// Asks the CPU for the TID of entry `i`, ahead of reading it.
    pub fn prefetch_tid(&self, i: usize) {
        prefetch(self.tids_end.wrapping_sub((i + 1) * TID));
    }

    /// The position of `fp`, an element of `fps` (the loops of `simhash_core::buckets` hand out
    /// references into the slice they are given). Checked: a reference from elsewhere panics.
    pub fn position(&self, fp: &u64) -> usize {
        let offset = (fp as *const u64 as usize).wrapping_sub(self.fps.as_ptr() as usize);
        let i = offset / size_of::<u64>();
        assert!(offset.is_multiple_of(size_of::<u64>()) && i < self.fps.len(), "not an entry of the page");
        i
    }

    /// The TID of the entry whose fingerprint `fp` is (an element of `fps`).
    pub fn tid_of(&self, fp: &u64) -> pg_sys::ItemPointerData {
        self.tid(self.position(fp))
    }
}

impl Entries<'_> {
    pub fn len(&self) -> usize {
        match self {
            Entries::Packed(entries) => entries.len(),
            Entries::Apart(apart) => apart.fps.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fingerprint of entry `i`.
    pub fn fp(&self, i: usize) -> u64 {
        match self {
            Entries::Packed(entries) => entries[i].fp,
            Entries::Apart(apart) => apart.fps[i],
        }
    }

    /// A copy of every entry, in order.
    pub fn to_vec(self) -> Vec<Entry> {
        self.iter().map(|(fp, tid)| Entry { fp, tid }).collect()
    }

    /// Every entry, in order: (fingerprint, TID).
    pub fn iter(&self) -> impl Iterator<Item = (u64, pg_sys::ItemPointerData)> + '_ {
        (0..self.len()).map(|i| match self {
            Entries::Packed(entries) => (entries[i].fp, entries[i].tid),
            Entries::Apart(apart) => (apart.fps[i], apart.tid(i)),
        })
    }
}

/// Whether a bucket page (or a page of the chain of NULL rows) keeps its entries apart: it holds
/// TIDs below its special space.
///
/// # Safety
///
/// `page` is a locked bucket page.
pub(super) unsafe fn is_apart(page: Page) -> bool {
    unsafe {
        let header = page as *const pg_sys::PageHeaderData;
        (*header).pd_upper < (*header).pd_special
    }
}

/// The entries of a bucket page; none when its header does not fit the page (which
/// [`expect_kind`] reports, as every reader checks first): never a byte outside the page.
///
/// # Safety
///
/// `page` is a locked bucket page.
pub(super) unsafe fn entries<'a>(page: Page) -> Entries<'a> {
    unsafe {
        if !header_fits(page) {
            return Entries::Packed(&[]);
        }
        if is_apart(page) {
            let header = page as *const pg_sys::PageHeaderData;
            let tids = usize::from((*header).pd_special - (*header).pd_upper) / TID;
            let n = (used(page) / size_of::<u64>()).min(tids);
            Entries::Apart(Apart {
                fps: std::slice::from_raw_parts(contents(page).cast::<u64>(), n),
                tids_end: (page as *const u8).add(usize::from((*header).pd_special)),
            })
        } else {
            let n = used(page) / size_of::<Entry>();
            Entries::Packed(std::slice::from_raw_parts(contents(page).cast::<Entry>(), n))
        }
    }
}

/// What is wrong with the layout of the entries of a bucket page (or a page of the chain of NULL
/// rows) of an index whose empty pages are started apart or not (`keeps_apart`), if anything: for
/// `simhash_index_check`. (Readers take only as many entries as both parts hold.)
///
/// # Safety
///
/// `page` is a locked bucket page.
pub(super) unsafe fn layout_fault(page: Page, keeps_apart: bool) -> Option<String> {
    unsafe {
        if let Some(fault) = header_fault(page) {
            return Some(fault);
        }
        let header = page as *const pg_sys::PageHeaderData;
        let (lower, upper, special) =
            (usize::from((*header).pd_lower), usize::from((*header).pd_upper), usize::from((*header).pd_special));
        let start = header_contents_offset();
        if upper < special {
            let (fps, tids) = (lower - start, special - upper);
            if !keeps_apart {
                return Some("its entries are apart in an index of format 3 or older".into());
            }
            if !fps.is_multiple_of(size_of::<u64>())
                || !tids.is_multiple_of(TID)
                || fps / size_of::<u64>() != tids / TID
            {
                return Some(format!("{fps} bytes of fingerprints and {tids} bytes of TIDs do not match"));
            }
        } else if !(lower - start).is_multiple_of(size_of::<Entry>()) {
            return Some(format!("{} bytes of entries are not whole entries", lower - start));
        }
        None
    }
}

/// Appends `entry` to a bucket page (apart if the page is empty and `apart`, else in the page's
/// layout); `false` when it is full.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn push_entry(page: Page, entry: Entry, apart: bool) -> bool {
    unsafe {
        let header = page as *mut pg_sys::PageHeaderData;
        let empty = used(page) == 0 && (*header).pd_upper == (*header).pd_special;
        if (empty && apart) || is_apart(page) {
            let (lower, upper) = (usize::from((*header).pd_lower), usize::from((*header).pd_upper));
            if upper < lower + size_of::<u64>() + TID {
                return false;
            }
            (page as *mut u8).add(lower).cast::<u64>().write_unaligned(entry.fp);
            (page as *mut u8).add(upper - TID).cast::<pg_sys::ItemPointerData>().write_unaligned(entry.tid);
            (*header).pd_lower = (lower + size_of::<u64>()) as u16;
            (*header).pd_upper = (upper - TID) as u16;
            return true;
        }
        let n = used(page) / size_of::<Entry>();
        if n >= entries_per_page() {
            return false;
        }
        contents(page).cast::<Entry>().add(n).write_unaligned(entry);
        set_used(page, (n + 1) * size_of::<Entry>());
        true
    }
}

/// Writes `entries` over those of a bucket page, apart or packed.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy), and `entries` fit.
pub(super) unsafe fn rewrite_entries(page: Page, entries: &[Entry], apart: bool) {
    unsafe {
        let header = page as *mut pg_sys::PageHeaderData;
        set_used(page, 0);
        (*header).pd_upper = (*header).pd_special;
        for &entry in entries {
            push_entry(page, entry, apart);
        }
    }
}

/// Sorts the entries of a bucket page by their segment value (stable: equal values keep their
/// order) and counts them all as sorted.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn sort_entries(page: Page) {
    unsafe {
        let segment = u32::from((*special(page)).segment());
        let mut sorted = entries(page).to_vec();
        sorted.sort_by_key(|entry| simhash_core::buckets::segment_value(entry.fp, segment));
        rewrite_entries(page, &sorted, is_apart(page));
        (*special(page)).set_sorted(sorted.len());
    }
}

/// Keeps the entries of a chain page for which `keep` holds, in order (the sorted ones stay
/// sorted); returns how many were removed.
///
/// # Safety
///
/// `page` is an exclusively locked bucket page (or its GenericXLog copy).
pub(super) unsafe fn retain_entries(page: Page, mut keep: impl FnMut(&Entry) -> bool) -> usize {
    unsafe {
        let (all, sorted) = (entries(page), (*special(page)).sorted());
        let (mut kept, mut kept_sorted) = (Vec::with_capacity(all.len()), 0);
        for (i, (fp, tid)) in all.iter().enumerate() {
            let entry = Entry { fp, tid };
            if keep(&entry) {
                kept.push(entry);
                if i < sorted {
                    kept_sorted += 1;
                }
            }
        }
        let removed = all.len() - kept.len();
        if removed > 0 {
            rewrite_entries(page, &kept, is_apart(page));
        }
        (*special(page)).set_sorted(kept_sorted);
        removed
    }
}
