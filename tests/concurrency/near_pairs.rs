// Brute-force near pairs for tests/concurrency/dedup.sh: every pair of fingerprints within k bits,
// found by comparing each row with every other (no index, no pigeonhole, no PostgreSQL), so that
// the test's check does not share a route with the index or the lookup under test.
//
//   near_pairs K STORED              pairs within K among the rows of STORED: "id_a<TAB>id_b"
//   near_pairs K STORED QUERIES      pairs within K of a row of QUERIES and one of STORED:
//                                    "query_id<TAB>stored_id"
//
// Files hold "id<TAB>fingerprint as a signed 64-bit integer" lines (psql's \copy of id, fp::bigint).
// Built by the test with rustc alone (std only).
use std::io::{BufRead, BufReader, BufWriter, Write};

fn read_rows(path: &str) -> (Vec<i64>, Vec<u64>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut ids, mut fps) = (Vec::new(), Vec::new());
    for line in BufReader::new(file).lines() {
        let line = line.expect("read");
        let (id, fp) = line.split_once('\t').unwrap_or_else(|| panic!("{path}: bad line {line:?}"));
        ids.push(id.parse::<i64>().expect("id"));
        fps.push(fp.parse::<i64>().expect("fingerprint") as u64);
    }
    (ids, fps)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 && args.len() != 4 {
        eprintln!("usage: near_pairs K STORED [QUERIES]");
        std::process::exit(2);
    }
    let k: u32 = args[1].parse().expect("K");
    let (ids, fps) = read_rows(&args[2]);
    let queries = args.get(3).map(|path| read_rows(path));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    // Rows of the outer loop: every stored row (pairs among them, each with the rows after it), or
    // every query row (against all stored rows). Dealt out to the threads round robin, so that the
    // shrinking inner loops of the first case are shared evenly.
    let outer = queries.as_ref().map_or(fps.len(), |(_, q)| q.len());
    let found: Vec<Vec<(i64, i64)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (ids, fps, queries) = (&ids, &fps, &queries);
                scope.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..outer).step_by(threads) {
                        match queries {
                            None => {
                                let a = fps[i];
                                for (j, &b) in fps.iter().enumerate().skip(i + 1) {
                                    if (a ^ b).count_ones() <= k {
                                        out.push((ids[i].min(ids[j]), ids[i].max(ids[j])));
                                    }
                                }
                            }
                            Some((query_ids, query_fps)) => {
                                let a = query_fps[i];
                                for (j, &b) in fps.iter().enumerate() {
                                    if (a ^ b).count_ones() <= k {
                                        out.push((query_ids[i], ids[j]));
                                    }
                                }
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).collect()
    });
    let mut out = BufWriter::new(std::io::stdout().lock());
    for (a, b) in found.into_iter().flatten() {
        writeln!(out, "{a}\t{b}").expect("write");
    }
}
