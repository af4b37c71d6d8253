//! Counters as sysfs prints them. One decimal number a file: an RDMA port's PMA counters
//! (`ports/N/counters/`), its transport counters (`ports/N/hw_counters/`), a netdev's
//! `carrier_changes` and `statistics/`. And PCIe AER's tables, one "Name count" line an error
//! type, `TOTAL_ERR_*` last (`aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`).
//! kernel: drivers/infiniband/core/sysfs.c (show_pma_counter, hw_stat_port_show),
//! net/core/net-sysfs.c (carrier_changes_show, netstat_show), drivers/pci/pcie/aer.c
//! (aer_stats_dev_attr).

/// `12\n` -> 12. A counter is a whole number; anything else (an empty file, `N/A`, a negative
/// number) is not one.
pub fn counter(s: &str) -> Option<u64> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// An AER table: each error type's count as the kernel names it ("RxErr", "BadTLP",
/// "CmpltTO", "ACSViol", ...), and the `TOTAL_ERR_*` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AerTable {
    pub types: Vec<(String, u64)>,
    pub total: u64,
}

impl AerTable {
    /// The error types with a count, as "BadTLP 3, RxErr 1" (most first), for a message.
    pub fn nonzero(&self) -> String {
        let mut t: Vec<&(String, u64)> = self.types.iter().filter(|(_, n)| *n > 0).collect();
        t.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        t.iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The count of each type that grew since `before`, as "BadTLP +2".
    pub fn growth(&self, before: &AerTable) -> String {
        self.types
            .iter()
            .filter_map(|(name, n)| {
                let was = before
                    .types
                    .iter()
                    .find(|(b, _)| b == name)
                    .map_or(0, |(_, v)| *v);
                (*n > was).then(|| format!("{name} +{}", n - was))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The most lines an AER statistics table is taken to have.
pub const MAX_AER_TYPES: usize = 128;

/// One of the AER files. Without a `TOTAL_ERR_` line (a kernel that prints only the types),
/// the total is the sum of the types. `None` when a line is not "name count".
pub fn aer_table(s: &str) -> Option<AerTable> {
    let mut table = AerTable::default();
    let mut total = None;
    for (i, line) in s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        // The kernel's tables have a line per error type, about 20 (drivers/pci/pcie/aer.c):
        // hundreds is not a table (issue 41: 50,000 made the growth text quadratic).
        if i >= MAX_AER_TYPES {
            return None;
        }
        let (name, count) = line.rsplit_once(char::is_whitespace)?;
        let (name, count) = (name.trim(), counter(count)?);
        if name.is_empty() || name.len() > 64 {
            return None;
        }
        if name.starts_with("TOTAL_ERR_") {
            total = Some(count);
        } else {
            table.types.push((name.to_owned(), count));
        }
    }
    table.total = total.unwrap_or_else(|| {
        table
            .types
            .iter()
            .fold(0u64, |a, (_, n)| a.saturating_add(*n))
    });
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters() {
        assert_eq!(counter("0\n"), Some(0));
        assert_eq!(counter("18446744073709551615\n"), Some(u64::MAX));
        assert_eq!(counter("18446744073709551616\n"), None);
        assert_eq!(counter("-1\n"), None);
        assert_eq!(counter(""), None);
        assert_eq!(counter("N/A"), None);
    }

    #[test]
    fn aer_tables() {
        // As a 6.1 kernel prints aer_dev_correctable (drivers/pci/pcie/aer.c).
        let t = aer_table(
            "RxErr 0\nBadTLP 3\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\n\
             CorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 4\n",
        )
        .unwrap();
        assert_eq!(t.total, 4);
        assert_eq!(t.types.len(), 8);
        assert_eq!(t.nonzero(), "BadTLP 3, BadDLLP 1");
        let before = aer_table("RxErr 0\nBadTLP 1\nTOTAL_ERR_COR 1\n").unwrap();
        assert_eq!(t.growth(&before), "BadTLP +2, BadDLLP +1");
        // No total line: the sum.
        assert_eq!(aer_table("Undefined 0\nDLP 2\n").unwrap().total, 2);
        assert_eq!(aer_table("").unwrap().total, 0);
        assert_eq!(aer_table("garbage\n"), None);
        assert_eq!(aer_table("BadTLP -1\n"), None);
    }
}
