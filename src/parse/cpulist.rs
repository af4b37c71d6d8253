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

/// Whether two lists share a member.
pub fn intersect(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
    a.iter()
        .any(|&(a0, a1)| b.iter().any(|&(b0, b1)| a0 <= b1 && b0 <= a1))
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
    }

    #[test]
    fn formatted() {
        assert_eq!(format(vec![1, 0, 4, 5, 6, 9]), "0-1,4-6,9");
        assert_eq!(format(vec![0]), "0");
        assert_eq!(format(vec![]), "");
    }
}
