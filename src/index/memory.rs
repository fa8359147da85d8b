//! Memory of the index's work in Rust vectors: an allocation that fails is an ERROR 53200
//! (out of memory) instead of an abort of the backend, and a sort of many entries checks for
//! interrupts between its pieces.

use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

/// Room for `more` items, or an ERROR (53200) instead of the abort of a failed allocation.
pub(super) fn reserve<T>(vec: &mut Vec<T>, more: usize) {
    if vec.try_reserve(more).is_err() {
        raise(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!(
                "out of memory for {more} more entries of a simhash index ({} bytes each, {} held)",
                std::mem::size_of::<T>(),
                vec.len()
            ),
            None,
            Some(
                "A build or a check of a simhash index holds every row's entry in memory, and a radius \
                 lookup every match: give the server more memory, or use a smaller radius."
                    .into(),
            ),
        );
    }
}

/// Elements that [`sort_interruptibly`] sorts in one go (about 30 ms for 16-byte keys).
const SORTED_AT_ONCE: usize = 1 << 20;

/// `items.sort_unstable_by_key(key)`, in pieces of at most [`SORTED_AT_ONCE`] elements with a
/// check for interrupts between them (a sort of ten million entries takes a third of a second,
/// more for a hundred million): see [`sort_interruptibly_by`].
pub(super) fn sort_interruptibly<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K + Copy) {
    sort_interruptibly_by(items, SORTED_AT_ONCE, &|a, b| key(a).cmp(&key(b)));
}

/// `items.sort_unstable_by(compare)`, in pieces of at most `at_once` elements with a check for
/// interrupts between them: each slice beyond that is split at its median
/// (`select_nth_unstable_by`, linear: 40 ms for ten million entries), and its halves sorted alone.
pub(crate) fn sort_interruptibly_by<T>(
    items: &mut [T],
    at_once: usize,
    compare: &impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    if items.len() <= at_once.max(1) {
        items.sort_unstable_by(compare);
    } else {
        let middle = items.len() / 2;
        items.select_nth_unstable_by(middle, compare);
        pgrx::check_for_interrupts!();
        let (low, high) = items.split_at_mut(middle);
        sort_interruptibly_by(low, at_once, compare);
        sort_interruptibly_by(high, at_once, compare);
    }
    pgrx::check_for_interrupts!();
}

/// `vec.push(item)`, or an ERROR (53200) when memory runs out.
pub(super) fn push<T>(vec: &mut Vec<T>, item: T) {
    if vec.len() == vec.capacity() {
        reserve(vec, vec.len().max(1024));
    }
    vec.push(item);
}
