//! Pure parsers: text or bytes in, typed values out. No I/O here; each parser names the kernel
//! code that prints what it reads, and its tests feed it real captured text.

pub mod acs;
pub mod counters;
pub mod cpulist;
pub mod dcbnl;
pub mod ethtool;
pub mod kernel;
pub mod kmsg;
pub mod nccl_conf;
pub mod nccl_dump;
pub mod nccl_log;
pub mod nccl_release;
pub mod nccl_topo;
pub mod pci;
pub mod rdma;
pub mod slurm;
pub mod time;
pub mod vpd;

/// `0x10de` or `10de` (sysfs writes hex with `0x`; configs may not).
pub fn hex_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

pub fn hex_u16(s: &str) -> Option<u16> {
    hex_u32(s).and_then(|v| u16::try_from(v).ok())
}

/// A decimal integer as sysfs prints it (`numa_node`, `mtu`, `current_link_width`).
pub fn int<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex() {
        assert_eq!(hex_u16("0x10de"), Some(0x10de));
        assert_eq!(hex_u16("10DE"), Some(0x10de));
        assert_eq!(hex_u32("0x030200"), Some(0x030200));
        assert_eq!(hex_u16("0x123456"), None);
        assert_eq!(hex_u16("0x"), None);
        assert_eq!(hex_u16("banana"), None);
        assert_eq!(hex_u32("0x1234567890"), None);
    }
}

/// A size as an operator writes it: `256 GiB`, `32 MiB`, `4 KiB`, `100 bytes`; exact when it
/// is a whole number of the unit, else to one decimal.
pub fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size {
            return if n % size == 0 {
                format!("{} {unit}", n / size)
            } else {
                format!("{:.1} {unit}", n as f64 / size as f64)
            };
        }
    }
    format!("{n} bytes")
}

#[cfg(test)]
mod bytes_tests {
    #[test]
    fn sizes() {
        assert_eq!(super::bytes(256 << 30), "256 GiB");
        assert_eq!(super::bytes(3 << 19), "1.5 MiB");
        assert_eq!(super::bytes(0), "0 bytes");
        assert_eq!(super::bytes(1 << 40), "1 TiB");
    }
}
