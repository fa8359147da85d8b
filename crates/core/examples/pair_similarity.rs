//! The exact similarity of pairs of documents read from stdin, for the quality harness
//! (`bench/quality`, its "Verified recipe" section).
//!
//!   cargo run --release -p simhash-core --example pair_similarity < docs
//!
//! stdin: UTF-8 documents separated (or terminated) by NUL bytes, an even number of them; document
//! 2i is compared with document 2i + 1. stdout: one line per pair, `j3 j4 j5 c3`: the Jaccard
//! similarity of the sets of n-character shingles of the folded texts for n = 3, 4 and 5
//! (`simhash_similarity(a, b, n)` in SQL) and the containment for n = 3 (`simhash_containment`),
//! each with 6 decimals, or an empty field when a text has no letter or digit (NULL in SQL).
//! stderr: MB/s (UTF-8 bytes of both texts of every pair over the time of the four overlaps).

use std::io::{Read, Write};
use std::time::Instant;

use simhash_core::shingles::overlap;

fn field(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn main() {
    if std::env::args().len() > 1 {
        eprintln!("usage: pair_similarity < NUL-separated documents (pairs: 0 with 1, 2 with 3, ...)");
        std::process::exit(2);
    }
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("stdin");
    let docs: Vec<&str> =
        input.split(|&b| b == 0).map(|d| std::str::from_utf8(d).expect("documents are UTF-8")).collect();
    // A final NUL terminates the last document rather than starting an empty one.
    let docs = if input.last() == Some(&0) || input.is_empty() { &docs[..docs.len() - 1] } else { &docs[..] };
    if docs.len() % 2 != 0 {
        eprintln!("pair_similarity: {} documents, not an even number", docs.len());
        std::process::exit(2);
    }
    simhash_core::fold::fold("预热"); // loads the conversion tables outside the timing
    let started = Instant::now();
    let results: Vec<[Option<f64>; 4]> = docs
        .chunks_exact(2)
        .map(|pair| {
            let (a, b) = (pair[0], pair[1]);
            let o3 = overlap(a, b, 3);
            [o3.jaccard(), overlap(a, b, 4).jaccard(), overlap(a, b, 5).jaccard(), o3.containment()]
        })
        .collect();
    let seconds = started.elapsed().as_secs_f64();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for [j3, j4, j5, c3] in results {
        writeln!(out, "{} {} {} {}", field(j3), field(j4), field(j5), field(c3)).expect("stdout");
    }
    out.flush().expect("stdout");
    let bytes: usize = docs.iter().map(|d| d.len()).sum();
    eprintln!(
        "pair_similarity: {} pairs, {:.1} MB in {seconds:.3} s: {:.2} MB/s",
        docs.len() / 2,
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / seconds
    );
}
