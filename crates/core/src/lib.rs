//! The algorithm behind the `simhash` PostgreSQL extension, with no PostgreSQL in it.
//!
//! Text -> weighted features ([`features`]) -> FNV-1a-64 hashes and Charikar's weighted bit vote
//! ([`fingerprint`]) -> a 64-bit fingerprint; fingerprints compare by Hamming distance and split into
//! four 16-bit segments for pigeonhole lookups ([`distance`]); [`text_format`] is the literal syntax.
//! Every function here is deterministic and total: user input yields `Result`, never a panic.

pub mod bucket_pairs;
pub mod buckets;
pub mod cost;
pub mod dedup;
pub mod dense;
pub mod distance;
pub mod features;
pub mod fingerprint;
pub mod fold;
pub mod interrupt;
pub mod keyed_pairs;
pub mod modes;
pub mod nearest;
pub mod pairs;
pub mod probes;
pub mod shingles;
pub mod text_format;

pub use distance::{hamming, segment, SEGMENTS, SEGMENT_BITS};
pub use features::{simhash_text, text_features};
pub use fingerprint::{feature_hash, weighted_vote};
pub use interrupt::Interrupt;
pub use text_format::{format_hex, parse_fingerprint, ParseError};
