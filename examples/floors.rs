//! Floors under issue 43's unmet speed targets: what the least work of each costs on this
//! machine, before any of gdrdoctor's own. BENCHMARKS.md has the numbers.
//!
//! `inflate` (target 4, `fleet`): inflating captures alone, with the decoder gdrdoctor reads
//! them with (flate2 over miniz_oxide, the gzip CRC checked), before any tar header, tree or
//! check.
//!
//! `lines` (target 3, `nccl explain` at 1 GB/s): reading a log as `nccl explain` reads it (a
//! 256 KiB buffer, each newline found) and, tier by tier, the least a reader that finds repeated
//! prefixes and messages again must do per line: find where NCCL's prefix ends and hash the
//! message, look it up in a table of kept messages compared whole, then the prefix too. The
//! tables favour the floor: one slot per key and 64 bytes of it compared, where the reader keeps
//! four ways and whole keys. With a gdrdoctor binary, `nccl explain` runs in the same passes,
//! and `grep -c GDRDMA` always.
//!
//!   cargo run --release --example floors -- inflate bench/out/fleet/seed/*.tar.gz
//!   cargo run --release --example floors -- lines LOG [GDRDOCTOR]   # pin it: taskset -c 0

// A benchmark of the repository's own files, not a node's.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, Read};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.split_first() {
        Some((what, rest)) if what == "inflate" && !rest.is_empty() => inflate(rest),
        Some((what, [log, bin @ ..])) if what == "lines" && bin.len() <= 1 => {
            lines(log, bin.first())
        }
        _ => {
            eprintln!("usage: floors inflate CAPTURE.tar.gz... | floors lines LOG [GDRDOCTOR]");
            std::process::exit(2);
        }
    }
}

fn inflate(paths: &[String]) {
    let files: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}")))
        .collect();
    let rounds = 100;
    let mut buf = vec![0u8; 1 << 16];
    let (mut inflated, mut best) = (0usize, f64::MAX);
    // Five passes of `rounds` over the captures, in memory; the fastest pass counts.
    for _ in 0..5 {
        let start = Instant::now();
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

/// The tiers of [`lines`]: what each adds per line.
const TIERS: [&str; 4] = [
    "read, each newline found",
    "+ the prefix's end found, the message hashed",
    "+ the message looked up (8,192 slots, compared)",
    "+ the prefix looked up too (a second table)",
];

fn lines(log: &str, bin: Option<&String>) {
    let bytes = std::fs::metadata(log)
        .unwrap_or_else(|e| panic!("{log}: {e}"))
        .len();
    let mut runs: Vec<(String, Vec<f64>)> = TIERS.iter().map(|t| (t.to_string(), vec![])).collect();
    runs.push(("grep -c GDRDMA".into(), vec![]));
    if bin.is_some() {
        runs.push(("gdrdoctor nccl explain".into(), vec![]));
    }
    let mut check = None;
    // A warm-up pass (the file into the page cache), then seven timed, interleaved.
    for pass in 0..8 {
        for (i, (_, times)) in runs.iter_mut().enumerate() {
            let start = Instant::now();
            if i < TIERS.len() {
                let seen = read_lines(log, i);
                if *check.get_or_insert(seen.0) != seen.0 {
                    panic!("the tiers counted different lines");
                }
            } else {
                let mut cmd = if i == TIERS.len() {
                    let mut c = std::process::Command::new("grep");
                    c.args(["-c", "GDRDMA", log]);
                    c
                } else {
                    let mut c = std::process::Command::new(bin.unwrap());
                    c.args(["nccl", "explain", log]);
                    c
                };
                // grep's answer is read whole: with it discarded, grep may stop early.
                let out = cmd.output().unwrap_or_else(|e| panic!("{e}"));
                assert!(!out.stdout.is_empty(), "no output from {cmd:?}");
            }
            if pass > 0 {
                times.push(start.elapsed().as_secs_f64());
            }
        }
    }
    println!(
        "{log}: {bytes} bytes, {} lines; 1 GB/s is {:.3} s",
        check.unwrap_or(0),
        bytes as f64 / 1e9
    );
    for (name, mut times) in runs {
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{name:<50} median {median:.3} s (min {:.3})  {:>5.0} MB/s",
            times[0],
            bytes as f64 / 1e6 / median
        );
    }
}

/// Reads `log` as tier `tier` of [`TIERS`]: the lines seen, and the lookups that found a key.
fn read_lines(log: &str, tier: usize) -> (u64, u64) {
    const SLOTS: usize = 8192;
    let file = std::fs::File::open(log).unwrap_or_else(|e| panic!("{log}: {e}"));
    let mut r = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut tables = [Table::new(SLOTS), Table::new(SLOTS)];
    let (mut lines, mut found, mut sum) = (0u64, 0u64, 0u64);
    loop {
        let buf = r.fill_buf().unwrap_or_else(|e| panic!("{log}: {e}"));
        if buf.is_empty() {
            break;
        }
        let len = buf.len();
        let mut pos = 0;
        // A line cut by the buffer's end is left out: the floor needs no carry.
        while let Some(i) = memchr::memchr(b'\n', &buf[pos..]) {
            let line = &buf[pos..pos + i];
            pos += i + 1;
            lines += 1;
            if tier == 0 {
                continue;
            }
            let at = memchr::memchr(b']', line)
                .map_or(0, |x| x + 2 + "NCCL INFO ".len())
                .min(line.len());
            let (head, message) = line.split_at(at);
            let h = hash(message);
            sum = sum.wrapping_add(h);
            if tier >= 2 {
                found += u64::from(tables[0].find_or_put(h, message));
            }
            if tier >= 3 {
                found += u64::from(tables[1].find_or_put(hash(head), head));
            }
        }
        r.consume(len);
    }
    std::hint::black_box(sum);
    (lines, found)
}

/// One slot per key: its hash and its first 64 bytes.
struct Table {
    tags: Vec<u64>,
    keys: Vec<[u8; 64]>,
}

impl Table {
    fn new(slots: usize) -> Self {
        Table {
            tags: vec![0; slots],
            keys: vec![[0; 64]; slots],
        }
    }

    fn find_or_put(&mut self, hash: u64, key: &[u8]) -> bool {
        let slot = (hash >> 32) as usize & (self.tags.len() - 1);
        let key = &key[..key.len().min(64)];
        if self.tags[slot] == hash && &self.keys[slot][..key.len()] == key {
            return true;
        }
        self.tags[slot] = hash;
        self.keys[slot][..key.len()].copy_from_slice(key);
        false
    }
}

/// foldhash's fast hash (the crate's maps use it): at least as fast as the reader's own, so the
/// floor stays a floor.
fn hash(b: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x51_7c_c1_b7).hash_one(b)
}
