//! The `simhash64` type and the functions that make and compare fingerprints.
//!
//! How a fingerprint is computed (`simhash(text)`; the algorithm is `simhash_core`, with no
//! PostgreSQL in it):
//!
//! 1. The text arrives as bytes in the server encoding and is read as UTF-8 (`text::text_as_utf8`:
//!    as is in a UTF8 database, converted otherwise), so a text has the same fingerprint in every
//!    database.
//! 2. It is folded (`simhash_core::fold`): NFKC, lower case, one space per run of whitespace, and
//!    Chinese in one script and vocabulary (OpenCC's tables).
//! 3. jieba-rs segments it and weighs its keywords by TF-IDF; the 20 heaviest vote
//!    (`simhash_core::features`), each weight scaled by 2^24 and rounded to an integer.
//! 4. Each keyword is hashed with FNV-1a-64 and votes on every bit, Charikar's weighted vote
//!    (`simhash_core::fingerprint`): bit i is 1 where the weights of the keywords with bit i set
//!    outweigh the others.
//!
//! The other modes replace steps 3-4: `simhash_ngrams` votes the set of character n-grams,
//! `minhash64` takes a 1-bit MinHash of it (`simhash_core::shingles`), and the user's own features
//! vote with their weights (`features`). `similarity` computes the exact Jaccard similarity of the
//! same n-gram sets, for verifying candidates. A backend memo (`text`) fingerprints a query text
//! once however many places the planner rewrite copied the call to.
//!
//! Files: `simhash64` the type (I/O, comparison, casts), `text` the text -> fingerprint functions and
//! `hamming`, `features` custom features and `simhash_features`, `similarity` the exact similarity,
//! `memory` the bound on what one call may allocate (`simhash.max_text_memory`).

pub(crate) mod embedding;
pub(crate) mod features;
pub(crate) mod memory;
pub(crate) mod simhash64;
pub(crate) mod similarity;
pub(crate) mod text;
