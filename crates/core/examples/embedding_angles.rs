//! The statistical check of the random-hyperplane SimHash at scale (bench/embed.sh runs it): for
//! N random pairs of vectors, the mean of Hamming / b against the mean of angle / π, for
//! b = 64, 256 and 1,024 (one 1,024-bit code per vector: the shorter codes are its prefixes).
//!
//! Two sets of pairs, d = 128: `isotropic` (u standard normal, w = u + t z with z standard normal
//! and t uniform in [0, 3]: angles from 0 to about 72 degrees) and `anisotropic` (the same, plus a
//! common offset of 1 on every coordinate, as embeddings that share a mean direction; the planes'
//! isotropy matters there).
//!
//!     cargo run --release -p simhash-core --example embedding_angles -- [pairs] [seed]

use simhash_core::hyperplanes::{Planes, LANES};
use simhash_core::test_values::Lcg;
use simhash_core::Interrupt;

fn angle_over_pi(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (*x as f64, *y as f64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    (ab / (aa * bb).sqrt()).clamp(-1.0, 1.0).acos() / std::f64::consts::PI
}

fn hamming_prefix(a: &[u8], b: &[u8], bits: usize) -> u32 {
    a[..bits / 8].iter().zip(&b[..bits / 8]).map(|(x, y)| (x ^ y).count_ones()).sum()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pairs: usize = args.get(1).map_or(100_000, |s| s.parse().expect("pairs"));
    let seed: u64 = args.get(2).map_or(0, |s| s.parse().expect("seed"));
    let dims = 128;
    let planes = Planes::new(seed, dims, 1024, Interrupt::NEVER).expect("memory for the planes");
    assert!(planes.bits() >= 1024 && 1024 % LANES == 0);
    let bit_lengths = [64usize, 256, 1024];
    println!("{pairs} pairs, d = {dims}, plane seed {seed}");
    println!("| pairs | b | mean Hamming / b | mean angle / pi | difference | relative |");
    println!("|---|---|---|---|---|---|");
    for (name, offset) in [("isotropic", 0.0), ("anisotropic", 1.0)] {
        let mut rng = Lcg(0x5eed ^ offset as u64);
        let mut truth = 0.0f64;
        let mut sums = [0u64; 3];
        for _ in 0..pairs {
            let t = 3.0 * rng.uniform();
            let u: Vec<f64> = (0..dims).map(|_| rng.normal()).collect();
            let a: Vec<f32> = u.iter().map(|x| (x + offset) as f32).collect();
            let b: Vec<f32> = u.iter().map(|x| (x + offset + t * rng.normal()) as f32).collect();
            truth += angle_over_pi(&a, &b);
            let (ca, cb) =
                (planes.code(&a, 1024, Interrupt::NEVER).unwrap(), planes.code(&b, 1024, Interrupt::NEVER).unwrap());
            for (sum, bits) in sums.iter_mut().zip(bit_lengths) {
                *sum += hamming_prefix(&ca, &cb, bits) as u64;
            }
        }
        let truth = truth / pairs as f64;
        for (sum, bits) in sums.iter().zip(bit_lengths) {
            let mean = *sum as f64 / bits as f64 / pairs as f64;
            println!(
                "| {name} | {bits} | {mean:.5} | {truth:.5} | {:+.5} | {:+.2} % |",
                mean - truth,
                100.0 * (mean - truth) / truth
            );
        }
    }
}
