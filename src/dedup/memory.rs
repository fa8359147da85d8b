//! The memory of the near-duplicate constraint that grows with the rows a transaction writes (the
//! values its trigger remembers, the structures of the check at commit): every such allocation is
//! made with `try_reserve`, and one that the operating system refuses is an ERROR 53200
//! (out_of_memory), never the abort of the backend that a failed Rust allocation is.

use pgrx::PgSqlErrorCode;

use crate::pg::errors::raise;

/// ERROR 53200: out of memory for `what` (e.g. "the deferred near-duplicate check of 1000000 rows
/// of relation \"t\"").
#[track_caller]
pub(super) fn out_of_memory(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
        format!("out of memory for {what}"),
        None,
        Some(
            "The near-duplicate constraint keeps every row a transaction writes until COMMIT: write the rows \
             in several transactions, or give the server more memory."
                .into(),
        ),
    )
}

/// An empty vector with room for `n` items, or `None` when memory runs out.
pub(super) fn vec_with_room<T>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

/// `vec.push(item)` (growing it as `push` would), or `None` when memory runs out.
pub(super) fn push<T>(vec: &mut Vec<T>, item: T) -> Option<()> {
    vec.try_reserve(1).ok()?;
    vec.push(item);
    Some(())
}
