//! Times the in-memory build of an index of codes (`simhash_core::code_build`): the order of the
//! code store, then each indexed segment's values (read through that order) and entries.
//!
//!   cargo run --release -p simhash-core --example code_build_timing [FILE [SEGMENTS]]
//!
//! FILE: the codes of a `bit(n)` column in COPY's binary format (`COPY (SELECT code FROM t) TO
//! 'FILE' (FORMAT binary)`), in the table's order; without it, 1M clustered 1,024-bit codes
//! (1,000 random centres, each bit flipped with probability 1/16). SEGMENTS: the segments indexed
//! (default 256: all, as the index's default).
use std::time::Instant;

use simhash_core::code_build::{entries_of_values, segment_values, store_order};
use simhash_core::code_index::Layout;
use simhash_core::Interrupt;

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// (bits, flat codes) from COPY's binary format of one `bit` column.
fn read_copy(path: &str) -> (u32, Vec<u8>) {
    let data = std::fs::read(path).expect("the file");
    let header_extension = u32::from_be_bytes(data[15..19].try_into().unwrap()) as usize;
    let mut at = 19 + header_extension;
    let (mut bits, mut codes) = (0u32, Vec::new());
    loop {
        let fields = i16::from_be_bytes(data[at..at + 2].try_into().unwrap());
        at += 2;
        if fields == -1 {
            break;
        }
        let len = i32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        bits = u32::from_be_bytes(data[at + 4..at + 8].try_into().unwrap());
        codes.extend_from_slice(&data[at + 8..at + 4 + len]);
        at += 4 + len;
    }
    (bits, codes)
}

fn clustered(rows: usize, bits: u32) -> Vec<u8> {
    let code_bytes = bits.div_ceil(8) as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let centres: Vec<u8> = (0..1000 * code_bytes).map(|_| xorshift(&mut state) as u8).collect();
    let mut codes = Vec::with_capacity(rows * code_bytes);
    for row in 0..rows {
        let c = row % 1000;
        for b in 0..code_bytes {
            let mut flips = 0u8;
            for bit in 0..8 {
                if xorshift(&mut state).is_multiple_of(16) {
                    flips |= 1 << bit;
                }
            }
            codes.push(centres[c * code_bytes + b] ^ flips);
        }
    }
    codes
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bits, codes) = match args.get(1) {
        Some(path) if path != "-" => read_copy(path),
        _ => (1024, clustered(1_000_000, 1024)),
    };
    let segments: u32 = args.get(2).map_or(256, |s| s.parse().expect("a number"));
    let code_bytes = bits.div_ceil(8) as usize;
    let rows = codes.len() / code_bytes;
    let layout = Layout::for_table(bits, rows as u64, segments).unwrap();
    println!("{rows} rows of {bits} bits, {} of {} segments indexed", layout.indexed, layout.plan.count);
    let tids: Vec<u64> = (0..rows as u64).collect();
    let t = Instant::now();
    let (mut keys, mut order) = (vec![0u64; rows], vec![0u32; rows]);
    store_order(&codes, code_bytes, &tids, |&t| t, &mut keys, &mut order, Interrupt::NEVER);
    println!("code store order: {:.3} s", t.elapsed().as_secs_f64());
    let group: usize = args.get(3).map_or(8, |s| s.parse().expect("a number"));
    let (mut values, mut entries) = (vec![0u32; rows * group], vec![0u64; rows]);
    let (mut in_values, mut in_entries) = (0.0, 0.0);
    let mut check = 0u64;
    let (mut long_rows, mut longest) = (0usize, 0usize);
    let mut first = 0;
    while first < layout.indexed {
        let n = (layout.indexed - first).min(group as u32) as usize;
        let t = Instant::now();
        segment_values(&layout, first, &codes, code_bytes, Some(&order), &mut values[..n * rows], Interrupt::NEVER);
        in_values += t.elapsed().as_secs_f64();
        let t = Instant::now();
        for (g, values) in (first..).zip(values.chunks_exact(rows).take(n)) {
            let directory = entries_of_values(&layout, g, values, &mut entries, Interrupt::NEVER).unwrap();
            check = check.wrapping_add(entries[rows / 2]).wrapping_add(u64::from(directory[1]));
            for run in directory.windows(2) {
                let len = (run[1] - run[0]) as usize;
                long_rows += if len > 32 { len } else { 0 };
                longest = longest.max(len);
            }
        }
        in_entries += t.elapsed().as_secs_f64();
        first += n as u32;
    }
    println!("segments in groups of {group}: values {in_values:.3} s, entries {in_entries:.3} s ({check}); rows in runs over 32: {long_rows}, longest {longest}");
}
