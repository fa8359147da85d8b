//! One probe of one segment B-tree: the index entries whose segment value is within the segment
//! radius of the query's, with the distance checked on the fingerprint the index INCLUDEs, so the
//! caller visits the table only for entries within `k`. Shared by the radius scan and the
//! near-duplicate constraint's recheck.
//!
//! The probe values come as ranges of consecutive values (`simhash_core::probes::probe_ranges`):
//! one B-tree descent per range rather than per value.

use pgrx::pg_sys::{self, Datum, Oid};

use super::catalog::SegmentIndex;

pub(crate) struct SegmentScan {
    index: pg_sys::Relation,
    scan: pg_sys::IndexScanDesc,
    ranges: Vec<(u16, u16)>,
    next_range: usize,
    /// Where the fingerprint is in the index tuple, when the index holds it.
    fingerprint: Option<Fingerprint>,
    query: u64,
    k: u32,
    /// Index entries read (for EXPLAIN ANALYZE).
    pub checked: u64,
}

#[derive(Clone, Copy)]
struct Fingerprint {
    /// 0-based attribute number in the index tuple.
    column: usize,
    /// Its byte offset from the start of the data of a tuple without NULLs, when every attribute up
    /// to it has a fixed length (then no decoding is needed).
    offset: Option<usize>,
}

impl SegmentScan {
    /// Opens segment index `segment` (0..4) of `heap` for the entries that can be within `k` of
    /// `query` (`k` at most `MAX_PROBED_RADIUS`); when the index INCLUDEs the fingerprint
    /// (`column_in_index`), only entries within `k` are returned.
    ///
    /// # Safety
    ///
    /// In a backend, inside a transaction; `heap` is open and `snapshot` is valid for the life of
    /// the scan; `k` is at most `MAX_PROBED_RADIUS`.
    pub(crate) unsafe fn begin(
        heap: pg_sys::Relation,
        segment_index: SegmentIndex,
        segment: i32,
        snapshot: pg_sys::Snapshot,
        query: u64,
        k: u32,
    ) -> SegmentScan {
        unsafe {
            let index = pg_sys::index_open(segment_index.oid, pg_sys::AccessShareLock as i32);
            let scan = crate::pg::compat::index_beginscan(heap, index, snapshot, 2, 0);
            let fingerprint = segment_index.column_in_index.map(|attno| {
                // Index tuples with their included fingerprint, as for an index-only scan.
                (*scan).xs_want_itup = true;
                let column = attno as usize - 1;
                Fingerprint { column, offset: fixed_offset((*index).rd_att, column) }
            });
            let radius = simhash_core::probes::segment_radii(k).expect("k was checked when planning")[segment as usize];
            let value = simhash_core::segment(query, segment).expect("segment < 4");
            SegmentScan {
                index,
                scan,
                ranges: simhash_core::probes::probe_ranges(value, radius),
                next_range: 0,
                fingerprint,
                query,
                k,
                checked: 0,
            }
        }
    }

    /// The scan, for `index_fetch_heap` and `xs_heap_continue`.
    pub(crate) fn scan(&self) -> pg_sys::IndexScanDesc {
        self.scan
    }

    /// The TID of the next entry that can be within `k` (that is within `k` when the index holds
    /// the fingerprint), or `None` at the end.
    ///
    /// # Safety
    ///
    /// As for [`SegmentScan::begin`]; the returned TID points into the scan and is valid until the
    /// next call.
    pub(crate) unsafe fn next(&mut self) -> Option<pg_sys::ItemPointer> {
        unsafe {
            loop {
                let tid = if self.next_range == 0 || self.next_range > self.ranges.len() {
                    std::ptr::null_mut()
                } else {
                    pg_sys::index_getnext_tid(self.scan, pg_sys::ScanDirection::ForwardScanDirection)
                };
                if tid.is_null() {
                    // (After the last range, the scan is not touched again: a B-tree scan whose
                    // position is invalid would start over.)
                    let Some(&(low, high)) = self.ranges.get(self.next_range) else {
                        self.next_range = self.ranges.len() + 1;
                        return None;
                    };
                    self.next_range += 1;
                    pgrx::check_for_interrupts!();
                    let mut keys: [pg_sys::ScanKeyData; 2] = std::mem::zeroed();
                    let bounds = [
                        (pg_sys::BTGreaterEqualStrategyNumber, pg_sys::F_INT4GE, low),
                        (pg_sys::BTLessEqualStrategyNumber, pg_sys::F_INT4LE, high),
                    ];
                    for (key, (strategy, function, value)) in keys.iter_mut().zip(bounds) {
                        pg_sys::ScanKeyInit(
                            key,
                            1,
                            strategy as u16,
                            Oid::from(function),
                            Datum::from(i32::from(value)),
                        );
                    }
                    pg_sys::index_rescan(self.scan, keys.as_mut_ptr(), 2, std::ptr::null_mut(), 0);
                    continue;
                }
                self.checked += 1;
                match self.fingerprint {
                    Some(fingerprint) => match self.fingerprint_of(fingerprint) {
                        Some(fp) if simhash_core::hamming(fp, self.query) <= self.k => return Some(tid),
                        _ => {}
                    },
                    None => return Some(tid),
                }
            }
        }
    }

    /// The fingerprint in the current index tuple (`None` if NULL).
    unsafe fn fingerprint_of(&self, fingerprint: Fingerprint) -> Option<u64> {
        unsafe {
            let tuple = (*self.scan).xs_itup;
            let has_nulls = (*tuple).t_info as u32 & pg_sys::INDEX_NULL_MASK != 0;
            if let (Some(offset), false) = (fingerprint.offset, has_nulls) {
                // The data of a tuple without NULLs starts right after the MAXALIGNed header.
                let data = (tuple as *const u8).add(maxalign(size_of::<pg_sys::IndexTupleData>()));
                return Some(std::ptr::read_unaligned(data.add(offset) as *const u64));
            }
            let mut values = [Datum::from(0); pg_sys::INDEX_MAX_KEYS as usize];
            let mut nulls = [false; pg_sys::INDEX_MAX_KEYS as usize];
            pg_sys::index_deform_tuple(tuple, (*self.scan).xs_itupdesc, values.as_mut_ptr(), nulls.as_mut_ptr());
            (!nulls[fingerprint.column]).then(|| values[fingerprint.column].value() as u64)
        }
    }
}

/// Ends the scan and closes the index. Not while unwinding from an ERROR: the transaction's abort
/// releases the scan's buffer pins and the index reference then, and PostgreSQL is not to be
/// called in between.
impl Drop for SegmentScan {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        unsafe {
            pg_sys::index_endscan(self.scan);
            // The lock is kept to the end of the transaction, as for any scan.
            pg_sys::index_close(self.index, pg_sys::NoLock as i32);
        }
    }
}

/// The offset of attribute `column` in the data of a tuple of `desc` without NULLs, when it and
/// every attribute before it are fixed-length (so each starts at its aligned position) and the
/// attribute is an 8-byte pass-by-value datum.
unsafe fn fixed_offset(desc: pg_sys::TupleDesc, column: usize) -> Option<usize> {
    unsafe {
        let mut offset: usize = 0;
        for i in 0..((*desc).natts as usize).min(column + 1) {
            let attribute = crate::pg::compat::tuple_desc_attr(desc, i);
            if attribute.attlen <= 0 {
                return None;
            }
            let align = match attribute.attalign as u8 {
                b'c' => 1,
                b's' => 2,
                b'i' => 4,
                b'd' => 8,
                _ => return None,
            };
            offset = offset.next_multiple_of(align);
            if i == column {
                return (attribute.attlen == 8 && attribute.attbyval).then_some(offset);
            }
            offset += attribute.attlen as usize;
        }
        None
    }
}

fn maxalign(size: usize) -> usize {
    size.next_multiple_of(pg_sys::MAXIMUM_ALIGNOF as usize)
}
