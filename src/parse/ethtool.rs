//! What the ethtool ioctl answers, from the kernel's structs as bytes (include/uapi/linux/
//! ethtool.h; src/sys/ethtool makes the calls): the pause parameters (`struct
//! ethtool_pauseparam`) and the driver's statistics, names (`struct ethtool_gstrings`) and
//! values (`struct ethtool_stats`) paired as `ethtool -S` prints them. Integers are in the
//! host's byte order. Every count is checked against the bytes there and against a limit
//! before anything is sized by it.

use serde::{Deserialize, Serialize};

/// The commands, as the kernel echoes them in the struct's first word.
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
/// `ETH_SS_STATS`.
const ETH_SS_STATS: u32 = 1;
/// `ETH_GSTRING_LEN`.
const GSTRING_LEN: usize = 32;

/// 802.3x global pause (`ethtool -a`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    /// Pause negotiated with the link partner.
    pub autoneg: bool,
    /// Pause frames received are honoured.
    pub rx: bool,
    /// Pause frames are sent.
    pub tx: bool,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `struct ethtool_pauseparam`: cmd, autoneg, rx_pause, tx_pause (u32 each; non-zero is on).
pub fn pause(raw: &[u8]) -> Result<Pause, String> {
    if raw.len() < 16 {
        return Err(format!(
            "{} bytes; struct ethtool_pauseparam has 16",
            raw.len()
        ));
    }
    let cmd = u32_at(raw, 0);
    if cmd != ETHTOOL_GPAUSEPARAM {
        return Err(format!("command {cmd:#x}, not ETHTOOL_GPAUSEPARAM"));
    }
    Ok(Pause {
        autoneg: u32_at(raw, 4) != 0,
        rx: u32_at(raw, 8) != 0,
        tx: u32_at(raw, 12) != 0,
    })
}

/// `struct ethtool_gstrings` for `ETH_SS_STATS`: cmd, string_set, len, then `len` names of 32
/// bytes, each up to its first NUL (a name of 32 has none). At most `max` names.
pub fn stat_names(raw: &[u8], max: usize) -> Result<Vec<String>, String> {
    if raw.len() < 12 {
        return Err(format!(
            "{} bytes; struct ethtool_gstrings' header has 12",
            raw.len()
        ));
    }
    let (cmd, set, len) = (u32_at(raw, 0), u32_at(raw, 4), u32_at(raw, 8) as usize);
    if cmd != ETHTOOL_GSTRINGS || set != ETH_SS_STATS {
        return Err(format!(
            "command {cmd:#x} on string set {set}, not ETHTOOL_GSTRINGS on ETH_SS_STATS"
        ));
    }
    if len > max {
        return Err(format!("{len} names, more than the {max} read"));
    }
    let data = &raw[12..];
    if data.len() / GSTRING_LEN < len {
        return Err(format!(
            "{len} names claimed, {} bytes for them (32 each)",
            data.len()
        ));
    }
    Ok(data
        .chunks_exact(GSTRING_LEN)
        .take(len)
        .map(|c| {
            let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
            String::from_utf8_lossy(&c[..end]).into_owned()
        })
        .collect())
}

/// `struct ethtool_stats`: cmd, n_stats, then `n_stats` u64 values. At most `max`.
pub fn stat_values(raw: &[u8], max: usize) -> Result<Vec<u64>, String> {
    if raw.len() < 8 {
        return Err(format!(
            "{} bytes; struct ethtool_stats' header has 8",
            raw.len()
        ));
    }
    let (cmd, n) = (u32_at(raw, 0), u32_at(raw, 4) as usize);
    if cmd != ETHTOOL_GSTATS {
        return Err(format!("command {cmd:#x}, not ETHTOOL_GSTATS"));
    }
    if n > max {
        return Err(format!("{n} values, more than the {max} read"));
    }
    let data = &raw[8..];
    if data.len() / 8 < n {
        return Err(format!(
            "{n} values claimed, {} bytes for them (8 each)",
            data.len()
        ));
    }
    Ok(data
        .chunks_exact(8)
        .take(n)
        .map(|c| u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Names and values paired, in the driver's order (`ethtool -S`); a different count of each
/// means the driver's set changed between the two calls.
pub fn stats(names: Vec<String>, values: Vec<u64>) -> Result<Vec<(String, u64)>, String> {
    if names.len() != values.len() {
        return Err(format!(
            "{} names but {} values: the driver's statistics changed while read",
            names.len(),
            values.len()
        ));
    }
    Ok(names.into_iter().zip(values).collect())
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// `ethtool -a` of an mlx5 port with global pause on both ways, autoneg off.
    #[test]
    fn pause_parameters() {
        #[rustfmt::skip]
        let raw: &[u8] = &[
            0x12, 0, 0, 0,   0, 0, 0, 0,   1, 0, 0, 0,   1, 0, 0, 0,
        ];
        assert_eq!(
            pause(raw),
            Ok(Pause {
                autoneg: false,
                rx: true,
                tx: true
            })
        );
        assert!(pause(&raw[..15]).unwrap_err().contains("15 bytes"));
        assert!(
            pause(&words(&[0x1b, 0, 0, 0]))
                .unwrap_err()
                .contains("not ETHTOOL_GPAUSEPARAM")
        );
    }

    fn gstrings(len: u32, names: &[&str]) -> Vec<u8> {
        let mut b = words(&[0x1b, 1, len]);
        for n in names {
            let mut s = n.as_bytes().to_vec();
            s.resize(32, 0);
            b.extend(s);
        }
        b
    }

    /// Names as mlx5's `ethtool -S` has them (drivers/net/ethernet/mellanox/mlx5/core/
    /// en_stats.c): per-priority pause counters and the pause-storm events.
    #[test]
    fn names_and_values() {
        let names = [
            "rx_prio3_pause",
            "tx_prio3_pause",
            "tx_pause_storm_warning_events",
            // 32 bytes exactly: no NUL.
            "rx_prio3_pause_duration_abcdefgh",
        ];
        let n = stat_names(&gstrings(4, &names), 100).unwrap();
        assert_eq!(n, names);
        let mut v = words(&[0x1d, 4]);
        for x in [7u64, 0, 2, u64::MAX] {
            v.extend(x.to_le_bytes());
        }
        let values = stat_values(&v, 100).unwrap();
        assert_eq!(values, vec![7, 0, 2, u64::MAX]);
        let s = stats(n, values).unwrap();
        assert_eq!(s[0], ("rx_prio3_pause".to_string(), 7));
        assert_eq!(s[3].1, u64::MAX);
        // Not valid UTF-8: kept, with the replacement character.
        let odd = stat_names(&gstrings(1, &["rx_\u{ff}"]), 1).unwrap();
        assert_eq!(odd[0], "rx_\u{ff}");
        let mut bad = gstrings(1, &[]);
        bad.extend([b'a', 0xff, 0xfe, 0]);
        bad.resize(12 + 32, 0);
        assert_eq!(stat_names(&bad, 1).unwrap()[0], "a\u{fffd}\u{fffd}");
    }

    /// Counts that lie, counts over the limit, other commands, short headers: errors.
    #[test]
    fn hostile_counts() {
        // A driver claiming a billion names is refused by its count, whatever follows.
        let e = stat_names(&words(&[0x1b, 1, 1_000_000_000]), 65536).unwrap_err();
        assert!(
            e.contains("1000000000 names, more than the 65536 read"),
            "{e}"
        );
        let e = stat_values(&words(&[0x1d, u32::MAX]), 65536).unwrap_err();
        assert!(e.contains("4294967295 values"), "{e}");
        // More claimed than there are bytes for.
        let e = stat_names(&gstrings(3, &["a", "b"]), 10).unwrap_err();
        assert!(e.contains("3 names claimed, 64 bytes"), "{e}");
        let mut v = words(&[0x1d, 2]);
        v.extend(1u64.to_le_bytes());
        v.extend([0, 0, 0]);
        assert!(
            stat_values(&v, 10)
                .unwrap_err()
                .contains("2 values claimed, 11 bytes")
        );
        // Another command or string set.
        assert!(stat_names(&words(&[0x1b, 0, 0]), 10).is_err());
        assert!(stat_values(&words(&[0x1b, 0]), 10).is_err());
        // Short headers.
        for n in 0..12 {
            assert!(stat_names(&gstrings(0, &[])[..n], 10).is_err());
        }
        for n in 0..8 {
            assert!(stat_values(&words(&[0x1d, 0])[..n], 10).is_err());
        }
        // Zero of each is nothing, not an error.
        assert_eq!(stat_names(&gstrings(0, &[]), 10), Ok(vec![]));
        assert_eq!(stat_values(&words(&[0x1d, 0]), 10), Ok(vec![]));
        // A set that changed between the calls.
        let e = stats(vec!["a".into()], vec![1, 2]).unwrap_err();
        assert!(e.contains("changed while read"), "{e}");
    }
}
