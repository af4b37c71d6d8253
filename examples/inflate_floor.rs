//! The floor under `fleet`'s speed (issue 43, target 4): what inflating captures costs alone,
//! with the decoder gdrdoctor reads them with (flate2 over miniz_oxide, the gzip CRC checked),
//! before any tar header, tree or check. BENCHMARKS.md has the numbers.
//!
//!   cargo run --release --example inflate_floor -- bench/out/fleet/seed/*.tar.gz

// A benchmark of the repository's own capture files, not a node's.
#![allow(clippy::disallowed_methods)]

use std::io::Read;

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: inflate_floor CAPTURE.tar.gz...");
        std::process::exit(2);
    }
    let files: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}")))
        .collect();
    let rounds = 100;
    let mut buf = vec![0u8; 1 << 16];
    let (mut inflated, mut best) = (0usize, f64::MAX);
    // Five passes of `rounds` over the captures, in memory; the fastest pass counts.
    for _ in 0..5 {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            for data in &files {
                let mut gz = flate2::read::GzDecoder::new(&data[..]);
                loop {
                    match gz.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => inflated += n,
                        Err(e) => panic!("not a gzip capture: {e}"),
                    }
                }
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let each = best / (rounds * files.len()) as f64;
    println!(
        "{} captures, {} bytes inflated each on average: {:.3} ms a capture on one core; \
         100,000 captures on 2 cores: {:.1} s",
        files.len(),
        inflated / (5 * rounds * files.len()),
        each * 1e3,
        each * 1e5 / 2.0
    );
}
