//! A short-lived memory context for work whose PostgreSQL allocations must not outlive it.
//!
//! `amrescan` runs in the executor's per-query context: what it allocates there (a detoasted copy
//! of a scan key's code, say) lives until the end of the query. An inner index scan of a nested
//! loop is rescanned once per outer row, so such allocations grew with the outer rows (3.2 MB, then
//! 6.9 MB 0.75 s later, during a self-join of 400,000 codes). Work that copies what it keeps into
//! Rust values runs in a [`Scratch`] context instead, deleted when the work ends.

use pgrx::pg_sys;

/// A memory context made current for the lifetime of the value, then deleted (also when an ERROR
/// unwinds through it).
pub(crate) struct Scratch {
    context: pg_sys::MemoryContext,
    previous: pg_sys::MemoryContext,
}

impl Scratch {
    /// A new child of the current context, made current.
    ///
    /// # Safety
    ///
    /// In a backend. Nothing allocated while it is current may be used after it is dropped.
    pub(crate) unsafe fn new() -> Scratch {
        unsafe {
            let context = pg_sys::AllocSetContextCreateExtended(
                pg_sys::CurrentMemoryContext,
                c"simhash scratch".as_ptr(),
                pg_sys::ALLOCSET_SMALL_MINSIZE as usize,
                pg_sys::ALLOCSET_SMALL_INITSIZE as usize,
                pg_sys::ALLOCSET_SMALL_MAXSIZE as usize,
            );
            let previous = pg_sys::MemoryContextSwitchTo(context);
            Scratch { context, previous }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        unsafe {
            pg_sys::MemoryContextSwitchTo(self.previous);
            pg_sys::MemoryContextDelete(self.context);
        }
    }
}
