//! PCI addresses, link attributes and configuration space.

use serde::Serialize;
use std::fmt;

/// A PCI function address, `DDDD:BB:DD.F`, always shown the way sysfs names it (lower case,
/// 4-digit domain). NVML's `00000000:3B:00.0` parses to the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl Bdf {
    pub fn parse(s: &str) -> Option<Bdf> {
        let (domain, rest) = s.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |t: &str, max_len: usize| {
            (!t.is_empty() && t.len() <= max_len && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(t, 16).ok())
                .flatten()
        };
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return None;
        }
        Some(Bdf {
            domain: hex(domain, 8)?,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The functions on a device's sysfs path, top down: `/sys/devices/pci0000:17/0000:17:01.0/
/// 0000:18:00.0` gives `[17:01.0, 18:00.0]`. Components that are not addresses are skipped.
pub fn path_functions(path: &str) -> Vec<Bdf> {
    path.split('/').filter_map(Bdf::parse).collect()
}

/// `32.0 GT/s PCIe` -> 32.0. `Unknown` (seen on QEMU's switch downstream ports) -> None.
/// kernel: drivers/pci/pci-sysfs.c current_link_speed_show(), pci_speed_string().
pub fn link_speed_gts(s: &str) -> Option<f64> {
    let num = s.split_whitespace().next()?;
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v > 0.0 && v < 1000.0).then_some(v)
}

/// The PCIe generation a transfer rate belongs to (2.5 GT/s = Gen1 ... 64 GT/s = Gen6).
pub fn pcie_generation(gts: f64) -> Option<u8> {
    const GENS: [(f64, u8); 6] = [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ];
    GENS.iter()
        .find(|(rate, _)| (rate - gts).abs() < 0.01)
        .map(|&(_, g)| g)
}

/// What a PCI class code says, for the classes gdrdoctor cares about.
pub fn class_name(class: u32) -> &'static str {
    match class >> 8 {
        0x0300 => "VGA controller",
        0x0302 => "3D controller",
        0x0380 => "display controller",
        0x0200 => "Ethernet controller",
        0x0207 => "InfiniBand controller",
        0x0600 => "host bridge",
        0x0604 => "PCI bridge",
        0x0680 => "bridge",
        0x1200 => "processing accelerator",
        0x0108 => "NVMe controller",
        _ => match class >> 16 {
            0x01 => "storage controller",
            0x02 => "network controller",
            0x03 => "display controller",
            0x06 => "bridge",
            0x08 => "system peripheral",
            0x0c => "serial bus controller",
            0x12 => "processing accelerator",
            _ => "device",
        },
    }
}

/// The type-0/1 configuration header fields gdrdoctor reads (the first 64 bytes, which any user
/// may read from sysfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub vendor: u16,
    pub device: u16,
    /// 24 bits: base class, subclass, programming interface.
    pub class: u32,
    pub header_type: u8,
}

pub fn header(config: &[u8]) -> Option<Header> {
    if config.len() < 64 {
        return None;
    }
    let vendor = u16::from_le_bytes([config[0], config[1]]);
    if vendor == 0xffff || vendor == 0 {
        return None;
    }
    Some(Header {
        vendor,
        device: u16::from_le_bytes([config[2], config[3]]),
        class: u32::from_le_bytes([config[9], config[10], config[11], 0]),
        header_type: config[0x0e] & 0x7f,
    })
}

/// Vendor, device and class from a function's sysfs `uevent` (`PCI_ID=10DE:2335`,
/// `PCI_CLASS=30200`): the kernel's own record of the identity, the same values as its `vendor`,
/// `device` and `class` files, in one read and without touching the device. `None` unless all
/// three are there and well formed.
pub fn uevent_identity(text: &str) -> Option<(u16, u16, u32)> {
    let (mut id, mut class) = (None, None);
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("PCI_ID=") {
            let (vendor, device) = v.split_once(':')?;
            id = Some((hex4(vendor)?, hex4(device)?));
        } else if let Some(v) = line.strip_prefix("PCI_CLASS=") {
            let ok = !v.is_empty() && v.len() <= 6 && v.bytes().all(|b| b.is_ascii_hexdigit());
            class = Some(u32::from_str_radix(v, 16).ok().filter(|_| ok)?);
        }
    }
    let (vendor, device) = id?;
    Some((vendor, device, class?))
}

fn hex4(s: &str) -> Option<u16> {
    (s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u16::from_str_radix(s, 16).ok())
        .flatten()
}

/// Whether configuration space says the function does not answer: its vendor ID reads 0xffff.
/// No vendor has that ID; it is what the root complex returns for a read that no device
/// completes (a device that fell off the bus, or is held in reset), so every byte reads 0xff.
/// Holds for 64 bytes (an unprivileged reader's view) as for 4096.
pub fn not_responding(config: &[u8]) -> bool {
    config.len() >= 2 && config[0] == 0xff && config[1] == 0xff
}

/// The bytes behind [`not_responding`], for evidence: `4096 bytes, all 0xff`, or the first
/// bytes when some later byte differs (`256 bytes: ff ff ff ff 00 00 00 00 ...`).
pub fn shown_bytes(config: &[u8]) -> String {
    if !config.is_empty() && config.iter().all(|b| *b == 0xff) {
        return format!("{} bytes, all 0xff (vendor ID 0xffff)", config.len());
    }
    let head: Vec<String> = config.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!(
        "{} bytes: {}{}",
        config.len(),
        head.join(" "),
        if config.len() > 16 { " ..." } else { "" }
    )
}

/// A capability found in configuration space: its ID and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    pub id: u16,
    pub offset: usize,
}

/// The standard capability list (offsets 0x40..0xff). Tolerates loops and offsets out of range:
/// a malformed list ends the walk, it never panics or spins.
pub fn capabilities(config: &[u8]) -> Vec<Cap> {
    let mut caps = Vec::new();
    // Status register bit 4: the capabilities list exists.
    if config.len() < 0x40 || config[6] & 0x10 == 0 {
        return caps;
    }
    let mut offset = usize::from(config[0x34] & 0xfc);
    let mut seen = [false; 256];
    while offset >= 0x40 && offset + 1 < config.len().min(256) && !seen[offset] {
        seen[offset] = true;
        caps.push(Cap {
            id: u16::from(config[offset]),
            offset,
        });
        offset = usize::from(config[offset + 1] & 0xfc);
    }
    caps
}

/// The extended capability list (offsets 0x100..0xfff), when the config space was readable that
/// far (root only: unprivileged readers get 64 bytes).
pub fn extended_capabilities(config: &[u8]) -> Vec<Cap> {
    let mut caps = Vec::new();
    let mut offset = 0x100usize;
    let mut seen = std::collections::HashSet::new();
    while offset >= 0x100 && offset + 4 <= config.len() && seen.insert(offset) {
        let header = u32::from_le_bytes([
            config[offset],
            config[offset + 1],
            config[offset + 2],
            config[offset + 3],
        ]);
        if header == 0 || header == 0xffff_ffff {
            break;
        }
        caps.push(Cap {
            id: (header & 0xffff) as u16,
            offset,
        });
        offset = ((header >> 20) & 0xffc) as usize;
    }
    caps
}

pub const CAP_ID_PCIE: u16 = 0x10;

/// The device/port type from the PCI Express capability (register bits 7:4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortType {
    Endpoint,
    LegacyEndpoint,
    RootPort,
    SwitchUpstream,
    SwitchDownstream,
    PcieToPciBridge,
    PciToPcieBridge,
    RcIntegratedEndpoint,
    RcEventCollector,
    Other(u8),
}

/// The PCI Express capability: version, port type, and the link's maximum and current state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Express {
    pub offset: usize,
    pub version: u8,
    pub port_type: PortType,
    /// Link Capabilities (+0x0c): maximum speed and width.
    pub link_max: Option<LinkState>,
    /// Link Status (+0x12): negotiated speed and width.
    pub link_now: Option<LinkState>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkState {
    /// GT/s; `None` for an encoding this parser does not know.
    pub speed_gts: Option<f64>,
    pub width: u32,
}

/// Link speed encodings of Link Capabilities and Link Status (bits 3:0): 1 = 2.5 GT/s ... 6 =
/// 64 GT/s (PCIe 6.0; they index the Supported Link Speeds Vector, which is contiguous).
fn link_speed_code(code: u32) -> Option<f64> {
    [2.5, 5.0, 8.0, 16.0, 32.0, 64.0]
        .get(usize::try_from(code).ok()?.checked_sub(1)?)
        .copied()
}

fn u16_at(config: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*config.get(at)?, *config.get(at + 1)?]))
}

fn u32_at(config: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *config.get(at)?,
        *config.get(at + 1)?,
        *config.get(at + 2)?,
        *config.get(at + 3)?,
    ]))
}

pub fn express(config: &[u8]) -> Option<Express> {
    let cap = capabilities(config)
        .into_iter()
        .find(|c| c.id == CAP_ID_PCIE)?;
    let reg = u16_at(config, cap.offset + 2)?;
    let port_type = match (reg >> 4) & 0xf {
        0 => PortType::Endpoint,
        1 => PortType::LegacyEndpoint,
        4 => PortType::RootPort,
        5 => PortType::SwitchUpstream,
        6 => PortType::SwitchDownstream,
        7 => PortType::PcieToPciBridge,
        8 => PortType::PciToPcieBridge,
        9 => PortType::RcIntegratedEndpoint,
        10 => PortType::RcEventCollector,
        n => PortType::Other(n as u8),
    };
    let link_max = u32_at(config, cap.offset + 0x0c).map(|v| LinkState {
        speed_gts: link_speed_code(v & 0xf),
        width: (v >> 4) & 0x3f,
    });
    let link_now = u16_at(config, cap.offset + 0x12).map(|v| LinkState {
        speed_gts: link_speed_code(u32::from(v & 0xf)),
        width: u32::from((v >> 4) & 0x3f),
    });
    Some(Express {
        offset: cap.offset,
        version: (reg & 0xf) as u8,
        port_type,
        link_max,
        link_now,
    })
}

pub fn pcie_port_type(config: &[u8]) -> Option<PortType> {
    express(config).map(|e| e.port_type)
}

impl PortType {
    /// How lspci names it after "Express (vN)".
    pub fn lspci_name(self) -> &'static str {
        match self {
            PortType::Endpoint => "Endpoint",
            PortType::LegacyEndpoint => "Legacy Endpoint",
            PortType::RootPort => "Root Port",
            PortType::SwitchUpstream => "Upstream Port",
            PortType::SwitchDownstream => "Downstream Port",
            PortType::PcieToPciBridge => "PCI-Express to PCI/PCI-X Bridge",
            PortType::PciToPcieBridge => "PCI/PCI-X to PCI-Express Bridge",
            PortType::RcIntegratedEndpoint => "Root Complex Integrated Endpoint",
            PortType::RcEventCollector => "Root Complex Event Collector",
            PortType::Other(_) => "Unknown type",
        }
    }
}

pub const EXT_CAP_ID_ACS: u16 = 0x000d;
/// Address Translation Services (PCIe Base Specification, 10.5): a ConnectX exposes it only
/// with ATS enabled in its firmware (mlxconfig ATS_ENABLED).
pub const EXT_CAP_ID_ATS: u16 = 0x000f;

/// Whether the extended capability `id` is in the list (`false` too when the extended space
/// was not readable: ask [`extended_readable`] first).
pub fn has_extended(config: &[u8], id: u16) -> bool {
    extended_capabilities(config).iter().any(|c| c.id == id)
}

/// Extended configuration space (offsets 0x100 and up) holds ACS; sysfs gives it only to root, and
/// only on platforms with extended config access (4096-byte `config` files).
pub fn extended_readable(config: &[u8]) -> bool {
    config.len() >= 0x1000
}

/// The ACS capability: where it is, ACS Capability (+4) and ACS Control (+6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acs {
    pub offset: usize,
    pub capability: u16,
    pub control: u16,
}

/// ACS bits in lspci's names (bit 0 first).
pub const ACS_BITS: [&str; 7] = [
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
];
/// ReqRedir, CmpltRedir, EgressCtrl: each sends peer-to-peer traffic up to the root complex.
pub const ACS_REDIRECTS: u16 = (1 << 2) | (1 << 3) | (1 << 5);

impl Acs {
    pub fn redirects(&self) -> bool {
        self.control & ACS_REDIRECTS != 0
    }

    /// Config-space offset of ACS Control, for evidence (`config @0x14e`).
    pub fn control_offset(&self) -> usize {
        self.offset + 6
    }
}

/// `SrcValid+ TransBlk- ReqRedir+ ...`, as lspci prints ACSCap and ACSCtl.
pub fn acs_flags(v: u16) -> String {
    ACS_BITS
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n}{}", if v & (1 << i) != 0 { '+' } else { '-' }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The ACS capability, when the extended space was readable and holds one.
pub fn acs(config: &[u8]) -> Option<Acs> {
    let cap = extended_capabilities(config)
        .into_iter()
        .find(|c| c.id == EXT_CAP_ID_ACS)?;
    Some(Acs {
        offset: cap.offset,
        capability: u16_at(config, cap.offset + 4)?,
        control: u16_at(config, cap.offset + 6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // The first 0x70 bytes of /sys/bus/pci/devices/0000:00:06.0/config on an H200 VM
    // (../shared/data/h200x2-vm-capture.tgz): 10de:2335, class 030200, PCIe cap at 0x60.
    const H200: [u8; 0x70] = [
        0xde, 0x10, 0x35, 0x23, 0x46, 0x05, 0x10, 0x00, 0xa1, 0x00, 0x02, 0x03, 0x00, 0x00, 0x00,
        0x00, //
        0x0c, 0x00, 0x00, 0x02, 0x40, 0x10, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
        0x00, //
        0x0c, 0x00, 0x00, 0x00, 0x40, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xde, 0x10, 0xbf,
        0x18, //
        0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x01, 0x00,
        0x00, //
        0x01, 0x48, 0x13, 0x00, 0x08, 0x00, 0x00, 0x00, 0x05, 0x60, 0x88, 0x03, 0x00, 0x00, 0x00,
        0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, //
        0x10, 0xb0, 0x02, 0x00, 0x21, 0x80, 0x2c, 0x11, 0x34, 0x51, 0x00, 0x00, 0x05, 0x79, 0x45,
        0x00, //
    ];

    #[test]
    fn bdf_forms() {
        let b = Bdf::parse("0000:3b:00.0").unwrap();
        assert_eq!(b.to_string(), "0000:3b:00.0");
        assert_eq!(Bdf::parse("00000000:3B:00.0"), Some(b));
        assert_eq!(Bdf::parse("0000:3b:20.0"), None);
        assert_eq!(Bdf::parse("0000:3b:00.8"), None);
        assert_eq!(Bdf::parse("pci0000:00"), None);
        assert_eq!(Bdf::parse("0000:3b:00.0;rm"), None);
        assert_eq!(Bdf::parse("0000:3b:+0.0"), None);
    }

    #[test]
    fn path_to_functions() {
        let p = "/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0/0000:19:10.0/0000:1a:00.0";
        let f: Vec<String> = path_functions(p).iter().map(|b| b.to_string()).collect();
        assert_eq!(
            f,
            [
                "0000:17:01.0",
                "0000:18:00.0",
                "0000:19:10.0",
                "0000:1a:00.0"
            ]
        );
    }

    #[test]
    fn speeds() {
        assert_eq!(link_speed_gts("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(link_speed_gts("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(link_speed_gts("Unknown"), None);
        assert_eq!(link_speed_gts("NaN GT/s"), None);
        assert_eq!(pcie_generation(32.0), Some(5));
        assert_eq!(pcie_generation(3.0), None);
    }

    #[test]
    fn h200_header_and_caps() {
        let h = header(&H200).unwrap();
        assert_eq!(
            (h.vendor, h.device, h.class, h.header_type),
            (0x10de, 0x2335, 0x030200, 0)
        );
        let caps: Vec<(u16, usize)> = capabilities(&H200)
            .iter()
            .map(|c| (c.id, c.offset))
            .collect();
        assert_eq!(caps, [(0x01, 0x40), (0x05, 0x48), (0x10, 0x60)]);
        assert_eq!(pcie_port_type(&H200), Some(PortType::Endpoint));
        // 64 bytes (what an unprivileged reader gets): header yes, capabilities no.
        assert!(header(&H200[..64]).is_some());
        assert_eq!(pcie_port_type(&H200[..64]), None);
    }

    #[test]
    fn malformed_lists_end() {
        let mut cfg = vec![0u8; 4096];
        cfg[0] = 0x86;
        cfg[1] = 0x80;
        cfg[6] = 0x10;
        cfg[0x34] = 0x40;
        cfg[0x40] = 0x10;
        cfg[0x41] = 0x40; // points at itself
        assert_eq!(capabilities(&cfg).len(), 1);
        cfg[0x41] = 0xfc; // out of the 256-byte window, last byte
        assert_eq!(capabilities(&cfg).len(), 2);
        // Extended list looping back to 0x100.
        cfg[0x100..0x104]
            .copy_from_slice(&(0x000d | (1 << 16) | (0x100 << 20) as u32).to_le_bytes());
        assert_eq!(extended_capabilities(&cfg).len(), 1);
        // Next offset past the end of a 256-byte config.
        assert!(extended_capabilities(&cfg[..256]).is_empty());
        assert!(capabilities(&[]).is_empty());
        assert!(header(&[0xff; 64]).is_none());
    }

    #[test]
    fn identity_from_uevent() {
        let real = "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2335\nPCI_SUBSYS_ID=10DE:18BE\nPCI_SLOT_NAME=0000:00:06.0\n";
        assert_eq!(uevent_identity(real), Some((0x10de, 0x2335, 0x030200)));
        assert_eq!(
            uevent_identity("PCI_CLASS=60400\nPCI_ID=8086:a0bc"),
            Some((0x8086, 0xa0bc, 0x060400))
        );
        for bad in [
            "",
            "PCI_ID=10DE:2335\n",
            "PCI_CLASS=30200\n",
            "PCI_CLASS=1030200\nPCI_ID=10DE:2335",
            "PCI_CLASS=30200\nPCI_ID=10DE2335",
            "PCI_CLASS=30200\nPCI_ID=10DE:+335",
            "PCI_CLASS=-3\nPCI_ID=10DE:2335",
        ] {
            assert_eq!(uevent_identity(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn all_ones_is_not_responding() {
        // What a read of a function that fell off the bus returns, at every length a reader
        // may get; a live header (the H200's) and an unreadable one (empty) are not.
        for len in [64, 256, 4096] {
            let dead = vec![0xffu8; len];
            assert!(not_responding(&dead));
            assert_eq!(
                shown_bytes(&dead),
                format!("{len} bytes, all 0xff (vendor ID 0xffff)")
            );
        }
        assert!(!not_responding(&H200));
        assert!(!not_responding(&[]));
        let mut half = vec![0xffu8; 256];
        half[4] = 0;
        assert!(not_responding(&half));
        assert_eq!(
            shown_bytes(&half),
            "256 bytes: ff ff ff ff 00 ff ff ff ff ff ff ff ff ff ff ff ..."
        );
    }
}
