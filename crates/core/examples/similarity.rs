//! The speed of the exact similarity of two texts (`simhash_similarity` in SQL), outside PostgreSQL.
//!
//!   cargo run --release -p simhash-core --example similarity -- N < docs
//!
//! stdin: UTF-8 documents separated by NUL bytes. Each document is compared with the next one
//! (Jaccard of their n-character shingle sets, n = N, default 3), every pair from the texts (the
//! folding, the shingle sets and the merge). stdout: one line, µs per pair and the mean similarity.

use std::io::Read;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).map(|a| a.parse().expect("N is a number")).unwrap_or(3);
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("stdin");
    let docs: Vec<&str> = input
        .split(|&b| b == 0)
        .filter(|d| !d.is_empty())
        .map(|d| std::str::from_utf8(d).expect("documents are UTF-8"))
        .collect();
    simhash_core::fold::fold("预热");
    let mut best = f64::MAX;
    let mut total = 0.0;
    for _ in 0..10 {
        let started = Instant::now();
        total = docs.windows(2).map(|w| simhash_core::shingles::jaccard(w[0], w[1], n).unwrap_or(0.0)).sum::<f64>();
        best = best.min(started.elapsed().as_secs_f64());
    }
    let pairs = docs.len().saturating_sub(1).max(1);
    println!(
        "similarity n={n}: {pairs} pairs, {:.1} µs per pair (best of 10), mean Jaccard {:.3}",
        best * 1e6 / pairs as f64,
        total / pairs as f64
    );
}
