//! The algorithm behind the `simhash` PostgreSQL extension, with no PostgreSQL in it.
//!
//! Text -> weighted features ([`features`]) -> FNV-1a-64 hashes and Charikar's weighted bit vote
//! ([`fingerprint`]) -> a 64-bit fingerprint; fingerprints compare by Hamming distance and split into
//! four 16-bit segments for pigeonhole lookups ([`distance`]); [`text_format`] is the literal syntax.
//! Every function here is deterministic and total: user input yields `Result`, never a panic.
//!
//! The modules:
//! - text: [`fold`] (the normal form fingerprints compare), [`features`] (text to weighted
//!   features), [`shingles`] (character n-grams, `minhash64` and `simhash_ngrams`), [`modes`] (the
//!   fingerprint modes by name);
//! - fingerprints: [`fingerprint`] (the weighted bit vote), [`distance`] (Hamming distance,
//!   segments), [`text_format`] (the literal syntax);
//! - lookups: [`probes`] (the candidate probes of a radius, per segment), [`buckets`] (the index's
//!   bucket layout and why a lookup is exact), [`dense`] (the index's built part), [`nearest`]
//!   (nearest-first order over the buckets), [`cost`] (the radius scan's cost, the recheck's
//!   choice);
//! - pairs: [`pairs`] (all pairs in memory, permuted tables), [`bucket_pairs`] (all pairs through
//!   an index's buckets), [`keyed_pairs`] (pairs spread over machines by key), [`verified_groups`]
//!   (the groups of verified pairs, verifying only pairs that would join two groups);
//! - the constraint: [`dedup`] (its limits and the in-memory set of its recheck), [`bit_deal`]
//!   (moving lean bits apart in its in-memory sets);
//! - embeddings: [`hyperplanes`] (random-hyperplane SimHash of a vector, the cosine -> radius map);
//! - codes of any length: [`multi_index`] (multi-index hashing of `bit(n)` codes: segments of
//!   about log2(rows) bits, the radii of the generalised pigeonhole, probes, distance),
//!   [`code_index`] (the layout of an index of them), [`code_build`] (its build in memory);
//! - [`interrupt`] (stopping a long computation on the caller's request), [`text_memory`] (the
//!   memory a text function needs, to refuse a text before it is allocated).

pub mod bit_deal;
pub mod bucket_pairs;
pub mod buckets;
pub mod code_build;
pub mod code_dedup;
pub mod code_index;
pub mod code_keyed_pairs;
pub mod code_runs;
pub mod cost;
pub mod dedup;
pub mod dense;
pub mod distance;
pub mod features;
pub mod fingerprint;
pub mod fold;
pub mod hyperplanes;
pub mod interrupt;
pub mod keyed_pairs;
pub mod modes;
pub mod multi_index;
pub mod nearest;
pub mod pairs;
pub mod probes;
pub mod shingles;
#[doc(hidden)]
pub mod test_values;
pub mod text_format;
pub mod text_memory;
pub mod verified_groups;

pub use distance::{hamming, segment, SEGMENTS, SEGMENT_BITS};
pub use features::{simhash_text, text_features};
pub use fingerprint::{feature_hash, weighted_vote};
pub use interrupt::Interrupt;
pub use text_format::{format_hex, parse_fingerprint, ParseError};
