//! GPU facts sysfs gives without any GPU library: the memory aperture peers reach the GPU
//! through (NVIDIA's BAR1, AMD's VRAM BAR), and which AMD GPUs the kernel's KFD (the compute
//! interface ROCm uses) exposes.

use super::{Fact, Problem, list};
use crate::model::gpu::{RECORDED_NVML, Recorded};
use crate::parse::pci::Bdf;
use crate::root::Root;
use std::collections::BTreeMap;

pub const KFD_NODES: &str = "/sys/class/kfd/kfd/topology/nodes";

/// The largest prefetchable memory region of a GPU: the window through which a NIC reads and
/// writes GPU memory (NVIDIA calls it BAR1; AMD's is the VRAM BAR, BAR0). Every GPUDirect RDMA
/// registration is mapped through it, so its size bounds how much GPU memory can be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aperture {
    /// Index of the region in `resource` (the BAR number; a 64-bit BAR takes two).
    pub region: usize,
    pub start: u64,
    pub size: u64,
}

impl Aperture {
    pub fn describe(&self) -> String {
        format!(
            "region {}: {} prefetchable at {:#x}",
            self.region,
            crate::parse::bytes(self.size),
            self.start
        )
    }
}

const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;

/// The `resource` file: one `start end flags` line of hex per region, the line number being the
/// region's (kernel: drivers/pci/pci-sysfs.c resource_show()); unused regions are all zeros.
/// The largest prefetchable memory region, or why the text makes no sense. A line that cannot
/// be a region (not three hex numbers, a start or end of all ones, an end below its start) makes
/// the whole file unknown: skipping it would take another region for BAR1.
pub fn parse_aperture(text: &str) -> Result<Aperture, String> {
    let mut best: Option<Aperture> = None;
    let mut lines = 0;
    for (region, line) in text.lines().enumerate() {
        let bad = |why: &str| {
            Err(format!(
                "line {} (region {region}) {}: {why}",
                region + 1,
                crate::sanitize::quoted(line.trim())
            ))
        };
        let words: Option<Vec<u64>> = line
            .split_whitespace()
            .map(|w| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok())
            .collect();
        let Some(&[start, end, flags]) = words.as_deref() else {
            return bad("not three hex numbers (start end flags)");
        };
        lines += 1;
        // All ones is what a read from a device that is gone gives, never an address a region
        // starts or ends at; an unused region is all zeros.
        if start == u64::MAX || end == u64::MAX {
            return bad("an address of all ones, which no region has");
        }
        if end < start {
            return bad("it ends before it starts");
        }
        if flags & IORESOURCE_MEM == 0 || flags & IORESOURCE_PREFETCH == 0 || end == start {
            continue;
        }
        let size = end - start + 1;
        if best.as_ref().is_none_or(|b| size > b.size) {
            best = Some(Aperture {
                region,
                start,
                size,
            });
        }
    }
    // A file with no lines is not a resource file; one with no prefetchable region is a GPU
    // whose BARs are not assigned (the platform ran out of address space): size 0.
    if lines == 0 {
        return Err("empty: no region at all".into());
    }
    Ok(best.unwrap_or(Aperture {
        region: 0,
        start: 0,
        size: 0,
    }))
}

pub fn aperture(root: &Root, function_path: &str) -> Fact<Aperture> {
    Fact::read(root, format!("{function_path}/resource"), |s| {
        parse_aperture(s).ok()
    })
}

impl Fact<Aperture> {
    /// Why the `resource` text read makes no sense: which line, and what is wrong with it.
    /// `None` when it made sense or could not be read (then [`Fact::problem`] says why).
    pub fn nonsense(&self) -> Option<String> {
        parse_aperture(self.raw.as_deref().ok()?).err()
    }
}

/// The DRM nodes amdgpu made for a GPU: `<device>/drm/{cardN,renderDN}`. ROCm opens the render
/// node; a GPU without one cannot be used for compute.
pub fn drm(root: &Root, function_path: &str) -> Result<Vec<String>, crate::root::ReadError> {
    let mut names = root.read_dir(&format!("{function_path}/drm"))?.names;
    names.sort();
    Ok(names)
}

/// The KFD topology: GPU nodes by PCI address, with the path of each node's `properties`.
#[derive(Debug, Clone, PartialEq)]
pub struct Kfd {
    pub nodes: BTreeMap<Bdf, String>,
}

/// Reads the KFD topology. `Err` when it is absent or unreadable (no amdgpu, or a kernel
/// without CONFIG_HSA_AMD).
pub fn kfd(root: &Root, problems: &mut Vec<Problem>) -> Result<Kfd, Problem> {
    if let Err(e) = root.read_dir(KFD_NODES) {
        return Err(Problem::from_error(&e));
    }
    let mut nodes = BTreeMap::new();
    for node in list(root, KFD_NODES, problems) {
        let path = format!("{KFD_NODES}/{node}/properties");
        match root.read_text(&path) {
            Ok(text) => {
                if let Some(bdf) = kfd_gpu(&text) {
                    nodes.insert(bdf, path);
                }
            }
            Err(e) => problems.push(Problem::from_error(&e)),
        }
    }
    Ok(Kfd { nodes })
}

/// A KFD node's `properties` (`key value` lines): the PCI address of a GPU node; CPU nodes
/// (`simd_count 0`) have none. `location_id` is the bus/devfn word, `domain` the PCI domain.
pub fn kfd_gpu(properties: &str) -> Option<Bdf> {
    let get = |key: &str| {
        properties.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    if get("simd_count")? == 0 {
        return None;
    }
    let location = get("location_id")?;
    let domain = get("domain").unwrap_or(0);
    Some(Bdf {
        domain: u32::try_from(domain).ok()?,
        bus: u8::try_from(location >> 8).ok()?,
        device: ((location >> 3) & 0x1f) as u8,
        function: (location & 7) as u8,
    })
}

/// NVML's answer as `gdrdoctor capture` recorded it on the node ([`RECORDED_NVML`]), on a
/// captured root; `None` when the capture has none (older captures, AMD-only nodes). A file
/// that cannot be read or is not such an answer is a problem naming it, and counts as none.
pub fn recorded_nvml(root: &Root, problems: &mut Vec<Problem>) -> Option<Recorded> {
    let bytes = match root.read(RECORDED_NVML) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return None,
        Err(e) => {
            problems.push(Problem::from_error(&e));
            return None;
        }
    };
    match Recorded::parse(RECORDED_NVML, &bytes) {
        Ok(r) => Some(r),
        Err(e) => {
            problems.push(Problem {
                path: RECORDED_NVML.to_owned(),
                message: format!(
                    "not NVML's answer as `gdrdoctor capture` writes it ({})",
                    crate::sanitize::quoted(&e)
                ),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H200's `resource` from the real capture: a 16 MiB BAR0, the 256 GiB BAR1 (region 2,
    /// since BAR0 is 64-bit) and a 32 MiB BAR3.
    #[test]
    fn h200_bar1_is_region_2() {
        let text = "0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n\
                    0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                    0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n";
        let a = parse_aperture(text).unwrap();
        assert_eq!(a.region, 2);
        assert_eq!(a.size, 256 << 30);
        assert_eq!(
            a.describe(),
            "region 2: 256 GiB prefetchable at 0x100000000000"
        );
    }

    #[test]
    fn non_prefetchable_and_garbage() {
        // A 256 MiB non-prefetchable region does not count; nothing prefetchable: size 0.
        let text = "0x00000000f0000000 0x00000000ffffffff 0x0000000000040200\n";
        assert_eq!(parse_aperture(text).unwrap().size, 0);
        assert!(parse_aperture("").is_err());
        assert!(parse_aperture("zzz yyy xxx\n").is_err());
        assert!(parse_aperture("0x1 0x2\n").is_err());
        assert!(parse_aperture("0x1 0x2 0x3 0x4\n").is_err());
    }

    /// The H100's `resource` (fixtures/healthy-8gpu-roce, GPU 0000:18:00.0) with its BAR1 line
    /// broken: skipping the line would take the 32 MiB region 3 for BAR1. The file is unknown,
    /// naming the line, instead.
    #[test]
    fn a_line_that_cannot_be_a_region_makes_the_file_unknown() {
        let lines = [
            "0x00000000a8000000 0x00000000a8ffffff 0x0000000000040200",
            "0x0002180000000000 0x0002181fffffffff 0x000000000014220c",
            "0x0000000000000000 0x0000000000000000 0x0000000000000000",
            "0x0002182000000000 0x0002182001ffffff 0x000000000014220c",
            "0x0000000000000000 0x0000000000000000 0x0000000000000000",
        ];
        let good = parse_aperture(&lines.join("\n")).unwrap();
        assert_eq!((good.region, good.size), (1, 128 << 30));
        for (line, why) in [
            (
                "0xffffffffffffffff 0x0002181fffffffff 0x000000000014220c",
                "an address of all ones",
            ),
            (
                "0x0000000000000000 0xffffffffffffffff 0x000000000014220c",
                "an address of all ones",
            ),
            (
                "0x0002181fffffffff 0x0002180000000000 0x000000000014220c",
                "it ends before it starts",
            ),
            (
                "0x0002180000000000 0x0002181fffffffff",
                "not three hex numbers",
            ),
        ] {
            let mut broken = lines;
            broken[1] = line;
            let e = parse_aperture(&broken.join("\n")).unwrap_err();
            assert!(e.starts_with("line 2 (region 1) \""), "{e}");
            assert!(e.contains(line) && e.contains(why), "{e}");
        }
    }

    #[test]
    fn kfd_properties() {
        // location_id 0xc100 = bus c1, device 0, function 0; as in an MI300X's node.
        let gpu = "cpu_cores_count 0\nsimd_count 1216\nlocation_id 49408\ndomain 0\n";
        assert_eq!(kfd_gpu(gpu).unwrap().to_string(), "0000:c1:00.0");
        let cpu = "cpu_cores_count 64\nsimd_count 0\nlocation_id 0\ndomain 0\n";
        assert_eq!(kfd_gpu(cpu), None);
        assert_eq!(kfd_gpu("garbage"), None);
        let f = "simd_count 4\nlocation_id 49419\ndomain 2\n";
        assert_eq!(kfd_gpu(f).unwrap().to_string(), "0002:c1:01.3");
    }
}
