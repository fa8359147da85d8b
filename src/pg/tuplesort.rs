//! Sorts that keep to a memory budget: PostgreSQL's tuplesort over datums, which sorts in memory
//! while the items fit in its budget and spills to temporary files beyond it (they go where
//! `temp_tablespaces` says, count towards `temp_file_limit` and are removed at the end of the
//! transaction, even after an error). For the index build and check, whose rows need not fit in
//! `maintenance_work_mem`.
//!
//! Three kinds of items: 64-bit keys (sorted as `int8` with the sign bit flipped, so unsigned), a
//! 64-bit key with a TID (as a `uuid`, whose 16 bytes compare as bytes: the key big-endian, then
//! the TID's block and offset), and byte strings of one length (as `bytea`, compared as bytes).

use pgrx::pg_sys::{self, Datum};

/// `uuid`'s `<` (`uuid_lt`).
const UUID_LESS: u32 = 2974;

/// A sort of items `T` ([`Item`]) in at most `work_mem_kb` of memory.
pub(crate) struct Sort<T: Item> {
    state: *mut pg_sys::Tuplesortstate,
    items: u64,
    sorted: bool,
    _items: std::marker::PhantomData<T>,
}

/// What a [`Sort`] sorts.
pub(crate) trait Item: Sized {
    /// The type of the datums, and the OID of its `<`.
    const TYPE: (pg_sys::Oid, u32);
    /// Hands the item's datum to `put` (valid during the call).
    fn with_datum(&self, put: &mut dyn FnMut(Datum));
    /// The item of a datum.
    ///
    /// # Safety
    ///
    /// `datum` is one of this type's.
    unsafe fn of_datum(datum: Datum) -> Self;
}

/// Keys in unsigned order.
impl Item for u64 {
    const TYPE: (pg_sys::Oid, u32) = (pg_sys::INT8OID, pg_sys::Int8LessOperator);
    fn with_datum(&self, put: &mut dyn FnMut(Datum)) {
        put(Datum::from((self ^ (1 << 63)) as i64))
    }
    unsafe fn of_datum(datum: Datum) -> Self {
        datum.value() as u64 ^ (1 << 63)
    }
}

/// Keys, then TIDs, in order.
impl Item for (u64, pg_sys::ItemPointerData) {
    const TYPE: (pg_sys::Oid, u32) = (pg_sys::UUIDOID, UUID_LESS);
    fn with_datum(&self, put: &mut dyn FnMut(Datum)) {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.0.to_be_bytes());
        bytes[8..].copy_from_slice(&super::tid::tid_order(&self.1).to_be_bytes());
        put(Datum::from(bytes.as_ptr()))
    }
    unsafe fn of_datum(datum: Datum) -> Self {
        let bytes = unsafe { std::slice::from_raw_parts(datum.cast_mut_ptr::<u8>(), 16) };
        let key = u64::from_be_bytes(bytes[..8].try_into().unwrap());
        let tid = u64::from_be_bytes(bytes[8..].try_into().unwrap());
        (key, super::tid::tid_of_order(tid))
    }
}

/// A byte string, sorted in byte order (as a `bytea`: `memcmp`, then the shorter first). It holds
/// the value with its 4-byte varlena header.
pub(crate) struct Bytes(Vec<u8>);

impl Bytes {
    /// The byte string of `parts` one after the other.
    pub fn new(parts: &[&[u8]]) -> Bytes {
        let len = pg_sys::VARHDRSZ + parts.iter().map(|part| part.len()).sum::<usize>();
        // (SET_VARSIZE_4B)
        let header = if cfg!(target_endian = "big") { len as u32 & 0x3FFF_FFFF } else { (len as u32) << 2 };
        let mut value = Vec::with_capacity(len);
        value.extend_from_slice(&header.to_ne_bytes());
        for part in parts {
            value.extend_from_slice(part);
        }
        Bytes(value)
    }

    /// The bytes (without the header).
    pub fn bytes(&self) -> &[u8] {
        &self.0[pg_sys::VARHDRSZ..]
    }
}

impl Item for Bytes {
    const TYPE: (pg_sys::Oid, u32) = (pg_sys::BYTEAOID, pg_sys::ByteaLessOperator);
    fn with_datum(&self, put: &mut dyn FnMut(Datum)) {
        put(Datum::from(self.0.as_ptr()))
    }
    unsafe fn of_datum(datum: Datum) -> Self {
        unsafe {
            let value = datum.cast_mut_ptr::<pg_sys::varlena>();
            let bytes = std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(value).cast::<u8>(),
                pgrx::varlena::varsize_any_exhdr(value),
            );
            Bytes::new(&[bytes])
        }
    }
}

impl<T: Item> Sort<T> {
    /// An empty sort that keeps to `work_mem_kb` kilobytes (at least 64, tuplesort's least).
    pub fn new(work_mem_kb: usize) -> Sort<T> {
        let (datum_type, less) = T::TYPE;
        let work_mem = work_mem_kb.clamp(64, i32::MAX as usize) as i32;
        let state = unsafe {
            pg_sys::tuplesort_begin_datum(
                datum_type,
                pg_sys::Oid::from(less),
                pg_sys::InvalidOid,
                false,
                work_mem,
                std::ptr::null_mut(),
                pg_sys::TUPLESORT_NONE as i32,
            )
        };
        Sort { state, items: 0, sorted: false, _items: std::marker::PhantomData }
    }

    /// Adds `item` (before [`Sort::sort`]).
    pub fn put(&mut self, item: T) {
        debug_assert!(!self.sorted);
        let state = self.state;
        item.with_datum(&mut |datum| unsafe { pg_sys::tuplesort_putdatum(state, datum, false) });
        self.items += 1;
    }

    /// The items added.
    pub fn len(&self) -> u64 {
        self.items
    }

    /// Sorts the items added; [`Sort::next`] then returns them in order.
    pub fn sort(&mut self) {
        if !self.sorted {
            unsafe { pg_sys::tuplesort_performsort(self.state) };
            self.sorted = true;
        }
    }

    /// The next item in order (after [`Sort::sort`]), or `None` after the last.
    pub fn next(&mut self) -> Option<T> {
        debug_assert!(self.sorted);
        let mut datum = Datum::from(0);
        let mut is_null = false;
        unsafe {
            if !super::compat::tuplesort_getdatum(self.state, &mut datum, &mut is_null) {
                return None;
            }
            let item = T::of_datum(datum);
            // (15 hands a copy of a by-reference datum to the caller)
            #[cfg(feature = "pg15")]
            if T::TYPE.0 != pg_sys::INT8OID {
                pg_sys::pfree(datum.cast_mut_ptr());
            }
            Some(item)
        }
    }
}

impl<T: Item> Drop for Sort<T> {
    fn drop(&mut self) {
        // After an error the transaction's end frees the sort and its files.
        if !std::thread::panicking() {
            unsafe { pg_sys::tuplesort_end(self.state) };
        }
    }
}
