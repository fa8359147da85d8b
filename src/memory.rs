//! Rust vectors that grow with the rows of a statement (an index's entries, the matches of a
//! lookup, the rows the near-duplicate constraint remembers and rechecks). A failed Rust
//! allocation aborts the backend, and the postmaster then restarts every backend of the cluster:
//! every such vector grows here instead, with `try_reserve`, and memory the system refuses is
//! either `None` (the caller has a path that needs less, or raises in its own words) or an ERROR
//! 53200 (out_of_memory) that ends the statement alone. Sorts of many items check for interrupts
//! between their pieces.
//!
//! - `None` when memory is refused: [`vec_with_room`], [`push`], [`reserve`].
//! - ERROR 53200 in the words of the index ([`index_out_of_memory`]): [`reserve_entries`],
//!   [`reserve_entries_exact`], [`push_entry`], [`entries_with_room`].
//! - ERROR 53200 in the words of the near-duplicate constraint: [`constraint_out_of_memory`].

use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

/// An empty vector with room for `n` items, or `None` when memory runs out (the core's
/// `vec_with_room`, as an `Option` for callers with a path that needs less).
pub(crate) fn vec_with_room<T>(n: usize) -> Option<Vec<T>> {
    simhash_core::pairs::vec_with_room(n).ok()
}

/// `vec.push(item)` (growing it as `push` would), or `None` when memory runs out.
pub(crate) fn push<T>(vec: &mut Vec<T>, item: T) -> Option<()> {
    simhash_core::pairs::push(vec, item).ok()
}

/// `vec.reserve(more)`, or `None` when memory runs out.
pub(crate) fn reserve<T>(vec: &mut Vec<T>, more: usize) -> Option<()> {
    vec.try_reserve(more).ok()
}

/// ERROR 53200 (out_of_memory) with `message` and `hint`.
#[track_caller]
pub(crate) fn out_of_memory(message: String, hint: &str) -> ! {
    raise(PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, message, None, Some(hint.into()))
}

/// ERROR 53200 of the near-duplicate constraint: out of memory for `what` (e.g. "the deferred
/// near-duplicate check of 1000000 rows of relation \"t\"").
#[track_caller]
pub(crate) fn constraint_out_of_memory(what: &str) -> ! {
    out_of_memory(
        format!("out of memory for {what}"),
        "The near-duplicate constraint keeps every row a transaction writes until COMMIT: write the rows \
         in several transactions, or give the server more memory.",
    )
}

/// ERROR 53200 of a simhash index: out of memory for `more` entries of type `T` beside `held`.
#[track_caller]
pub(crate) fn index_out_of_memory<T>(more: usize, held: usize) -> ! {
    out_of_memory(
        format!(
            "out of memory for {more} more entries of a simhash index ({} bytes each, {held} held)",
            std::mem::size_of::<T>(),
        ),
        "A build or a check of a simhash index holds every row's entry in memory, and a radius \
         lookup every match: give the server more memory, or use a smaller radius.",
    )
}

/// `vec.reserve(more)`, or [`index_out_of_memory`].
#[track_caller]
pub(crate) fn reserve_entries<T>(vec: &mut Vec<T>, more: usize) {
    if vec.try_reserve(more).is_err() {
        index_out_of_memory::<T>(more, vec.len());
    }
}

/// `vec.reserve_exact(more)`, or [`index_out_of_memory`].
#[track_caller]
pub(crate) fn reserve_entries_exact<T>(vec: &mut Vec<T>, more: usize) {
    if vec.try_reserve_exact(more).is_err() {
        index_out_of_memory::<T>(more, vec.len());
    }
}

/// `vec.push(item)`, or [`index_out_of_memory`].
#[track_caller]
pub(crate) fn push_entry<T>(vec: &mut Vec<T>, item: T) {
    if vec.len() == vec.capacity() {
        reserve_entries(vec, vec.len().max(1024));
    }
    vec.push(item);
}

/// An empty vector with room for `n` entries, or [`index_out_of_memory`].
#[track_caller]
pub(crate) fn entries_with_room<T>(n: usize) -> Vec<T> {
    let mut v = Vec::new();
    reserve_entries_exact(&mut v, n);
    v
}

/// Elements that [`sort_interruptibly`] sorts in one go (about 30 ms for 16-byte keys).
const SORTED_AT_ONCE: usize = 1 << 20;

/// `items.sort_unstable_by_key(key)`, in pieces of at most [`SORTED_AT_ONCE`] elements with a
/// check for interrupts between them (a sort of ten million entries takes a third of a second,
/// more for a hundred million): see [`sort_interruptibly_by`].
pub(crate) fn sort_interruptibly<T, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K + Copy) {
    sort_interruptibly_by(items, SORTED_AT_ONCE, &|a, b| key(a).cmp(&key(b)));
}

/// `items.sort_unstable_by(compare)`, in pieces of at most `at_once` elements with a check for
/// interrupts between them and while each slice beyond that is split around a pivot
/// (`simhash_core::interrupt::sort_in_pieces`).
pub(crate) fn sort_interruptibly_by<T>(
    items: &mut [T],
    at_once: usize,
    compare: &impl Fn(&T, &T) -> std::cmp::Ordering,
) {
    simhash_core::interrupt::sort_in_pieces(items, compare, at_once, crate::fingerprint::text::INTERRUPTS);
}
