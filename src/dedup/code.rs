//! [`Code`]: a binary code the constraint compares (a `bit(n)` or `bit varying` value), as the
//! trigger remembers it for every row a transaction writes. A code of up to [`INLINE_BYTES`] bytes
//! (256 bits) is held in the value itself, with no allocation of its own (40 bytes in all, against
//! a separate allocation per row before: about 72 bytes a `bit(256)` code and a pointer chased at
//! each comparison); a longer one is one allocation, made with `try_reserve` (53200 when it
//! fails), as is each copy of it.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// The longest code held in the value itself.
pub(super) const INLINE_BYTES: usize = 32;

/// A binary code: its length in bits and its bytes (as `bit` stores them: `bits.div_ceil(8)`
/// bytes, the bits past the length zero).
pub(super) enum Code {
    Inline { bits: u32, bytes: [u8; INLINE_BYTES] },
    Allocated { bits: u32, bytes: Box<[u8]> },
}

impl Code {
    /// The code of `bits` bits `bytes` (`bits.div_ceil(8)` of them); an ERROR 53200 when memory
    /// for a long one runs out.
    pub(super) fn new(bits: u32, bytes: &[u8]) -> Code {
        debug_assert_eq!(bytes.len(), (bits as usize).div_ceil(8));
        if bytes.len() <= INLINE_BYTES {
            let mut inline = [0u8; INLINE_BYTES];
            inline[..bytes.len()].copy_from_slice(bytes);
            Code::Inline { bits, bytes: inline }
        } else {
            Code::Allocated { bits, bytes: allocated(bytes) }
        }
    }

    pub(super) fn bits(&self) -> u32 {
        match self {
            Code::Inline { bits, .. } | Code::Allocated { bits, .. } => *bits,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Code::Inline { bits, bytes } => &bytes[..(*bits as usize).div_ceil(8)],
            Code::Allocated { bytes, .. } => bytes,
        }
    }
}

/// A copy of `bytes` in an allocation of its own, or an ERROR 53200 when memory runs out.
fn allocated(bytes: &[u8]) -> Box<[u8]> {
    let mut copy = Vec::new();
    if copy.try_reserve_exact(bytes.len()).is_err() {
        crate::memory::constraint_out_of_memory(&format!(
            "a code of {} bytes of the near-duplicate check",
            bytes.len()
        ));
    }
    copy.extend_from_slice(bytes);
    copy.into_boxed_slice()
}

impl Clone for Code {
    /// (A long code's copy is an allocation: 53200 when it fails.)
    fn clone(&self) -> Code {
        match self {
            Code::Inline { bits, bytes } => Code::Inline { bits: *bits, bytes: *bytes },
            Code::Allocated { bits, bytes } => Code::Allocated { bits: *bits, bytes: allocated(bytes) },
        }
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Code) -> bool {
        self.bits() == other.bits() && self.bytes() == other.bytes()
    }
}

impl Eq for Code {}

impl Ord for Code {
    /// By length, then bytes.
    fn cmp(&self, other: &Code) -> Ordering {
        self.bits().cmp(&other.bits()).then_with(|| self.bytes().cmp(other.bytes()))
    }
}

impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Code) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Code {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.bits().hash(state);
        self.bytes().hash(state);
    }
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Code").field("bits", &self.bits()).field("bytes", &self.bytes()).finish()
    }
}

// (So that a `bit(256)` code stays within the value, at 40 bytes.)
const _: () = assert!(std::mem::size_of::<Code>() == 40);
