//! CPU and node lists as the kernel prints them (`bitmap_print_to_pagebuf` in lib/bitmap.c with
//! the list format): `0-31,64-95`, `7`, or an empty line for an empty set.

/// Inclusive ranges, in the order written. `None` for anything that is not a list (a range
/// written backwards, a number out of range, stray text); an empty line is the empty set.
pub fn parse(s: &str) -> Option<Vec<(u32, u32)>> {
    let s = s.trim();
    if s.is_empty() {
        return Some(Vec::new());
    }
    // A kernel list has at most one entry per CPU; a longer one is not from the kernel.
    if s.len() > 64 * 1024 {
        return None;
    }
    s.split(',')
        .map(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b) = (super::int::<u32>(a)?, super::int::<u32>(b)?);
            (a <= b).then_some((a, b))
        })
        .collect()
}

/// Whether two lists share a member: both sorted by their first CPU, then one sweep (a list
/// may hold 10,000 ranges; comparing every pair took seconds per device and NUMA node).
pub fn intersect(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    let (mut i, mut j) = (0, 0);
    while let (Some(&(a0, a1)), Some(&(b0, b1))) = (a.get(i), b.get(j)) {
        if a0 <= b1 && b0 <= a1 {
            return true;
        }
        // The range that ends first meets nothing further on in the other list: every later
        // range there starts no earlier than the one it just missed.
        if a1 < b1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// Numbers written back as a kernel list: sorted, runs joined (`0-1,4`).
pub fn format(mut ids: Vec<u32>) -> String {
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end + 1 {
            i += 1;
            end = ids[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_lists() {
        assert_eq!(parse("0-31,64-95\n"), Some(vec![(0, 31), (64, 95)]));
        assert_eq!(parse("7"), Some(vec![(7, 7)]));
        assert_eq!(parse("\n"), Some(vec![]));
        assert_eq!(parse("3-1"), None);
        assert_eq!(parse("0-x"), None);
        assert_eq!(parse("0,,1"), None);
        assert_eq!(parse("99999999999"), None);
    }

    #[test]
    fn intersections() {
        let a = parse("0-31,64-95").unwrap();
        assert!(intersect(&a, &parse("90-100").unwrap()));
        assert!(!intersect(&a, &parse("32-63,96-127").unwrap()));
        assert!(!intersect(&a, &[]));
        // Ranges that overlap within one list, in any order.
        assert!(intersect(&[(0, 1), (0, 100)], &[(50, 50)]));
        assert!(intersect(&[(30, 30), (10, 20)], &[(25, 26), (0, 40)]));
        assert!(!intersect(&[(5, 9), (0, 3)], &[(4, 4), (10, 12)]));
    }

    /// Two lists of the longest a kernel file can hold (64 KiB: some 10,000 single CPUs of five digits),
    /// disjoint: the answer in one sorted sweep. Each GPU and NIC of a capture whose
    /// `numa_node` is -1 is matched against every NUMA node this way, so a pairwise comparison
    /// of the ranges (100 million per pair here) made a hostile capture take minutes.
    #[test]
    fn long_lists_intersect_in_one_sweep() {
        let evens: Vec<String> = (0..10_000u32).map(|i| (2 * i).to_string()).collect();
        let odds: Vec<String> = (0..10_000u32).map(|i| (2 * i + 1).to_string()).collect();
        let (a, b) = (
            parse(&evens.join(",")).unwrap(),
            parse(&odds.join(",")).unwrap(),
        );
        let t0 = std::time::Instant::now();
        for _ in 0..10 {
            assert!(!intersect(&a, &b));
        }
        assert!(intersect(&a, &parse("19998-30000").unwrap()));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn formatted() {
        assert_eq!(format(vec![1, 0, 4, 5, 6, 9]), "0-1,4-6,9");
        assert_eq!(format(vec![0]), "0");
        assert_eq!(format(vec![]), "");
    }
}
