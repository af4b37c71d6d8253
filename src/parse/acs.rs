//! ACS settings as the kernel's `pci=config_acs=` parameter and rdma-core's
//! `kernel-boot/rdma_topo` write them: seven characters, bit 6 (Direct Translated P2P) first and
//! bit 0 (Source Validation) last, each `0` (force off), `1` (force on) or `x` (left as it is).
//!
//! The syntax is the kernel's (Documentation/admin-guide/kernel-parameters.txt, `config_acs=`,
//! Linux 6.11, 47c8846a49ba "PCI: Extend ACS configurability"; drivers/pci/pci.c
//! `__pci_config_acs` reads the flags right to left, so a shorter string names the low bits
//! only): `<flags>@<pci_dev>[;<flags>@<pci_dev>...]`, where `<pci_dev>` is
//! `[<domain>:]<bus>:<dev>.<fn>` or `pci:<vendor>:<device>[:<subvendor>:<subdevice>]`.

use super::pci::Bdf;
use std::fmt;

/// The bits an ACS setting forces on (`set`) and off (`clear`); the others are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcsFlags {
    pub set: u16,
    pub clear: u16,
}

/// The bits the kernel lets `config_acs` name (SV TB RR CR UF EC DT): `pci.c` refuses others.
const ACS_CONFIGURABLE: u16 = 0x7f;

impl AcsFlags {
    /// `xx110x1`: one to seven of `0`, `1`, `x`/`X`, the last character bit 0. Anything else
    /// is not a setting (the kernel logs "Invalid ACS flags" and ignores it).
    pub fn parse(s: &str) -> Option<AcsFlags> {
        if s.is_empty() || s.len() > 7 {
            return None;
        }
        let mut flags = AcsFlags { set: 0, clear: 0 };
        for (bit, c) in s.bytes().rev().enumerate() {
            match c {
                b'1' => flags.set |= 1 << bit,
                b'0' => flags.clear |= 1 << bit,
                b'x' | b'X' => {}
                _ => return None,
            }
        }
        Some(flags)
    }

    /// The bits the setting decides: only these are compared (rdma_topo `combine_acs`).
    pub fn mask(self) -> u16 {
        self.set | self.clear
    }

    /// `control` with the forced bits forced: what the kernel writes at boot for a listed port,
    /// and what rdma_topo's `setpci-acs` writes at run time.
    pub fn apply(self, control: u16) -> u16 {
        (control | self.set) & !self.clear
    }

    /// Whether `control` already has every forced bit as forced.
    pub fn holds(self, control: u16) -> bool {
        self.apply(control) == control
    }
}

impl fmt::Display for AcsFlags {
    /// Always seven characters, as rdma_topo writes them: `xx111x1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for bit in (0..7).rev() {
            let c = if self.set & (1 << bit) != 0 {
                '1'
            } else if self.clear & (1 << bit) != 0 {
                '0'
            } else {
                'x'
            };
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Which device a `config_acs` entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcsDevice {
    /// `0008:02:00.0` (or `02:00.0`, domain 0).
    Bdf(Bdf),
    /// `pci:15b3:197c`: every function of that vendor and device.
    Ids { vendor: u16, device: u16 },
    /// A form this parser does not resolve (a path `00:1c.0/00.0`, subsystem IDs): shown as
    /// written, matched to nothing.
    Other(String),
}

/// One `<flags>@<pci_dev>` entry of `config_acs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcsEntry {
    /// `None`: flags the kernel would refuse.
    pub flags: Option<AcsFlags>,
    pub device: AcsDevice,
    /// The entry as written.
    pub text: String,
}

impl AcsEntry {
    /// Whether the entry names the function at `bdf` with these IDs.
    pub fn names(&self, bdf: Bdf, vendor: u16, device: u16) -> bool {
        match &self.device {
            AcsDevice::Bdf(b) => *b == bdf,
            AcsDevice::Ids {
                vendor: v,
                device: d,
            } => *v == vendor && *d == device,
            AcsDevice::Other(_) => false,
        }
    }
}

/// The value of `config_acs=` (quotes already dropped, as the kernel's `next_arg` drops them):
/// its entries, in order. Bounded: at most 256 entries are read.
pub fn config_acs(value: &str) -> Vec<AcsEntry> {
    value
        .split(';')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .take(256)
        .map(|text| {
            let (flags, dev) = text.split_once('@').unwrap_or(("", text));
            let flags = AcsFlags::parse(flags).filter(|f| f.mask() & !ACS_CONFIGURABLE == 0);
            let device = match dev.strip_prefix("pci:") {
                Some(ids) => {
                    let mut parts = ids.split(':');
                    match (
                        parts.next().and_then(super::hex_u16),
                        parts.next().and_then(super::hex_u16),
                        parts.next(),
                    ) {
                        (Some(vendor), Some(device), None) => AcsDevice::Ids { vendor, device },
                        _ => AcsDevice::Other(dev.to_owned()),
                    }
                }
                None => match Bdf::parse(dev).or_else(|| Bdf::parse(&format!("0000:{dev}"))) {
                    Some(b) => AcsDevice::Bdf(b),
                    None => AcsDevice::Other(dev.to_owned()),
                },
            };
            AcsEntry {
                flags,
                device,
                text: text.to_owned(),
            }
        })
        .collect()
}

/// The `config_acs` value among the options of one `pci=` parameter (`realloc=off,config_acs=...`):
/// the kernel's `pci_setup` splits them on commas.
pub fn config_acs_option(pci_value: &str) -> Option<&str> {
    pci_value
        .split(',')
        .filter_map(|o| o.strip_prefix("config_acs="))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_as_rdma_topo_writes_them() {
        // rdma_topo's values (compute_acs) and what they force.
        let cases = [
            ("xx111x1", 0x1d, 0x00),
            ("xx111x0", 0x1c, 0x01),
            ("xx110x1", 0x19, 0x04),
            ("xx101x1", 0x15, 0x08),
            ("1x111x1", 0x5d, 0x00),
            ("xx000x0", 0x00, 0x1d),
        ];
        for (s, set, clear) in cases {
            let f = AcsFlags::parse(s).unwrap();
            assert_eq!((f.set, f.clear), (set, clear), "{s}");
            assert_eq!(f.mask() & 0x1d, 0x1d, "{s}");
            assert_eq!(f.to_string(), s);
        }
        // The kernel's own example: three characters name bits 2..0.
        let short = AcsFlags::parse("10x").unwrap();
        assert_eq!((short.set, short.clear), (0x4, 0x2));
        assert_eq!(short.to_string(), "xxxx10x");
        for bad in ["", "xx111x1x", "xx1a1x1", "-1"] {
            assert!(AcsFlags::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn compared_under_the_mask_and_forced() {
        let dma_dsp = AcsFlags::parse("xx110x1").unwrap();
        // The kernel default 0x001d has ReqRedir on: not what the DMA function's port wants.
        assert!(!dma_dsp.holds(0x001d));
        assert_eq!(dma_dsp.apply(0x001d), 0x0019);
        // TransBlk and EgressCtrl are not compared: 0x003b (+TB +EC) holds.
        assert!(dma_dsp.holds(0x0019 | 0x02 | 0x20));
        let root = AcsFlags::parse("xx111x0").unwrap();
        assert!(root.holds(0x001c));
        assert!(!root.holds(0x001d));
        assert_eq!(root.apply(0x005d), 0x005c);
    }

    #[test]
    fn config_acs_entries() {
        let e = config_acs(
            "xx111x0@0008:00:00.0;xx110x1@0008:02:00.0; 10x@pci:15b3:197c;1x@1c.0/00.0;zz@02:01.0;",
        );
        assert_eq!(e.len(), 5);
        assert_eq!(
            e[0].device,
            AcsDevice::Bdf(Bdf::parse("0008:00:00.0").unwrap())
        );
        assert_eq!(e[0].flags, AcsFlags::parse("xx111x0"));
        assert!(e[1].names(Bdf::parse("0008:02:00.0").unwrap(), 0x15b3, 0x197c));
        assert!(e[2].names(Bdf::parse("0009:02:01.0").unwrap(), 0x15b3, 0x197c));
        assert_eq!(e[3].device, AcsDevice::Other("1c.0/00.0".into()));
        assert_eq!(e[4].flags, None);
        assert_eq!(
            e[4].device,
            AcsDevice::Bdf(Bdf::parse("0000:02:01.0").unwrap())
        );
        assert_eq!(
            config_acs_option("realloc=off,config_acs=xx111x0@0008:00:00.0"),
            Some("xx111x0@0008:00:00.0")
        );
        assert_eq!(config_acs_option("realloc=off"), None);
        // A hostile value: long, odd bytes; bounded and never a panic.
        let junk = "@;".repeat(10_000) + "\u{1b}[2J";
        assert!(config_acs(&junk).len() <= 256);
    }
}
