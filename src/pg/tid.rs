//! Table positions (TIDs).

use pgrx::itemptr::item_pointer_get_both;
use pgrx::pg_sys;

/// Table order: block, then line pointer.
pub(crate) fn tid_order(tid: &pg_sys::ItemPointerData) -> u64 {
    let (block, offset) = item_pointer_get_both(*tid);
    (u64::from(block) << 16) | u64::from(offset)
}
