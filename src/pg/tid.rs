//! Table positions (TIDs).

use pgrx::itemptr::{item_pointer_get_both, item_pointer_set_all};
use pgrx::pg_sys;

/// Table order: block, then line pointer.
pub(crate) fn tid_order(tid: &pg_sys::ItemPointerData) -> u64 {
    let (block, offset) = item_pointer_get_both(*tid);
    (u64::from(block) << 16) | u64::from(offset)
}

/// The TID of a `tid_order` key.
pub(crate) fn tid_of_order(key: u64) -> pg_sys::ItemPointerData {
    let mut tid = pg_sys::ItemPointerData::default();
    item_pointer_set_all(&mut tid, (key >> 16) as u32, key as u16);
    tid
}
