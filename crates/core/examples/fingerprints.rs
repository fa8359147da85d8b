//! Fingerprints of documents read from stdin, for the quality harness (`bench/quality`) and for
//! measuring the algorithm's speed outside PostgreSQL.
//!
//!   cargo run --release -p simhash-core --example fingerprints -- MODE < docs
//!
//! stdin: UTF-8 documents separated by NUL bytes. stdout: one line per document, the fingerprint in
//! 16 hex digits, or an empty line when the mode gives none (NULL in SQL). stderr: MB/s.
//! MODE is one of the names printed by `--help`.

use std::io::{Read, Write};
use std::time::Instant;

fn main() {
    let modes = simhash_core::modes::names();
    let mode = std::env::args().nth(1).unwrap_or_default();
    let Some(fingerprint) = simhash_core::modes::by_name(&mode) else {
        eprintln!("usage: fingerprints MODE < NUL-separated documents\nmodes: {}", modes.join(", "));
        std::process::exit(2);
    };
    let mut input = Vec::new();
    std::io::stdin().read_to_end(&mut input).expect("stdin");
    let docs: Vec<&str> =
        input.split(|&b| b == 0).map(|d| std::str::from_utf8(d).expect("documents are UTF-8")).collect();
    let docs = if docs.last() == Some(&"") { &docs[..docs.len() - 1] } else { &docs[..] };
    simhash_core::features::preload();
    let started = Instant::now();
    let results: Vec<Option<u64>> = docs.iter().map(|d| fingerprint(d)).collect();
    let seconds = started.elapsed().as_secs_f64();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for r in results {
        match r {
            Some(fp) => writeln!(out, "{}", simhash_core::format_hex(fp)),
            None => writeln!(out),
        }
        .expect("stdout");
    }
    let bytes: usize = docs.iter().map(|d| d.len()).sum();
    eprintln!(
        "{mode}: {} documents, {:.1} MB in {seconds:.3} s: {:.2} MB/s",
        docs.len(),
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / seconds
    );
}
