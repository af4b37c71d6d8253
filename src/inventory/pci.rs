//! PCI functions and which of them are GPUs.

use super::{Fact, Problem};
use crate::config::Config;
use crate::model::health::Aer;
use crate::parse::counters::aer_table;
use crate::parse::pci::{self as pp, Bdf, PortType};
use crate::parse::{hex_u16, hex_u32, int};
use crate::root::Root;
use std::collections::BTreeMap;

pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

pub const VENDOR_NVIDIA: u16 = 0x10de;
pub const VENDOR_AMD: u16 = 0x1002;

#[derive(Debug, Clone)]
pub struct PciFunction {
    pub bdf: Bdf,
    /// The real sysfs directory: `/sys/devices/pci0000:17/0000:17:01.0/.../0000:1a:00.0`.
    pub path: String,
    pub vendor: u16,
    pub device: u16,
    pub class: u32,
    /// The bound driver's name, from the `driver` link. Not read for bridges and system
    /// peripherals (hundreds of uncore functions on a large node) unless the config declares
    /// them accelerators: no check looks at their drivers.
    pub driver: Option<String>,
    /// Read for GPUs, RDMA NICs and the bridges above them only.
    pub detail: Option<PciDetail>,
}

impl PciFunction {
    pub fn ids(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor, self.device)
    }

    pub fn driver_path(&self) -> String {
        format!("{}/driver", self.path)
    }

    /// When the function does not answer config reads (its config space reads all ones, see
    /// [`pp::not_responding`]): the evidence, the config bytes and the vendor that sysfs still
    /// names (the identity came from the `vendor` file, since the header was unusable). `None`
    /// when it answers or its config space was not read.
    pub fn not_responding(&self) -> Option<Vec<crate::model::Evidence>> {
        let d = self.detail.as_ref()?;
        let config = d.config.as_deref().ok()?;
        pp::not_responding(config).then(|| {
            vec![
                crate::model::Evidence {
                    path: d.config_path.clone(),
                    value: pp::shown_bytes(config),
                },
                crate::model::Evidence {
                    path: format!("{}/vendor", self.path),
                    value: format!("0x{:04x}", self.vendor),
                },
            ]
        })
    }
}

#[derive(Debug, Clone)]
pub struct Link {
    pub current_speed: Fact<f64>,
    pub current_width: Fact<u32>,
    pub max_speed: Fact<f64>,
    pub max_width: Fact<u32>,
}

#[derive(Debug, Clone)]
pub struct PciDetail {
    pub numa_node: Fact<i32>,
    pub local_cpulist: Option<String>,
    pub link: Link,
    /// Configuration space as far as this process could read it and the inventory asked for
    /// it ([`ConfigSpan`]): 64 bytes unprivileged; as root 256 (an endpoint) or 4096 (a bridge,
    /// or any function of a Grace system).
    pub config: Result<Vec<u8>, crate::root::ReadError>,
    pub config_path: String,
    pub port_type: Option<PortType>,
    /// The `iommu_group` link's target number.
    pub iommu_group: Option<u32>,
    /// AER statistics: the errors this function saw on its link (the link-health check).
    pub aer: Aer,
    /// Attributes present but unreadable or absurd.
    pub problems: Vec<Problem>,
}

/// How much of a function's config space the checks use, so how much is read. A GPU's config
/// space on a cloud VM is passed through by the hypervisor one trapped access at a time: 0.2 ms
/// for 64 bytes, 0.8 ms for 256, 19 ms for 4 KiB on an H200 VM (BENCHMARKS.md), so the extended
/// space is read only where a check reads an extended capability: ACS on the bridges of a path
/// (acs, iommu), and every rdma_topo function of a Grace system (ACS, and ATS on its NICs).
/// GPUs and NICs elsewhere are judged on the standard header and the PCI Express capability,
/// both in the first 256 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSpan {
    Standard,
    Extended,
}

impl ConfigSpan {
    pub fn bytes(self) -> u64 {
        match self {
            ConfigSpan::Standard => 256,
            ConfigSpan::Extended => 4096,
        }
    }
}

impl PciDetail {
    pub fn load(root: &Root, dir: &str, span: ConfigSpan) -> PciDetail {
        let config_path = format!("{dir}/config");
        let config = root.read_prefix(&config_path, span.bytes());
        let port_type = config.as_deref().ok().and_then(pp::pcie_port_type);
        let numa_node = Fact::read(root, format!("{dir}/numa_node"), |s| {
            int::<i32>(s).filter(|n| (-1..4096).contains(n))
        });
        let local_cpulist = root
            .read_text(&format!("{dir}/local_cpulist"))
            .ok()
            .filter(|s| s.len() < 256);
        let link = Link {
            current_speed: Fact::read(
                root,
                format!("{dir}/current_link_speed"),
                pp::link_speed_gts,
            ),
            current_width: Fact::read(root, format!("{dir}/current_link_width"), |s| {
                int::<u32>(s).filter(|w| *w <= 32)
            }),
            max_speed: Fact::read(root, format!("{dir}/max_link_speed"), pp::link_speed_gts),
            max_width: Fact::read(root, format!("{dir}/max_link_width"), |s| {
                int::<u32>(s).filter(|w| *w <= 32)
            }),
        };
        let mut problems = Vec::new();
        let iommu_group = match link_under(root, &format!("{dir}/iommu_group"), "iommu_groups") {
            Ok(name) => name.and_then(|n| int::<u32>(&n)),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        // Absent attributes are normal (no link files on legacy functions); present nonsense is
        // worth naming. A speed of "Unknown" is what the kernel prints for some ports.
        problems.extend(numa_node.as_problem(true));
        problems.extend(link.current_width.as_problem(true));
        problems.extend(link.max_width.as_problem(true));
        for speed in [&link.current_speed, &link.max_speed] {
            if let (Ok(raw), None) = (&speed.raw, &speed.value) {
                if raw != "Unknown" {
                    problems.push(Problem {
                        path: speed.path.clone(),
                        message: format!("cannot parse {}", crate::sanitize::quoted(raw)),
                    });
                }
            }
        }
        let aer = read_aer(root, "", dir);
        PciDetail {
            aer,
            problems,
            numa_node,
            local_cpulist,
            link,
            config,
            config_path,
            port_type,
            iommu_group,
        }
    }

    /// The config bytes read, empty when unreadable.
    pub fn config_bytes(&self) -> &[u8] {
        self.config.as_deref().unwrap_or(&[])
    }
}

/// Lists every PCI function with its identity, path and driver.
pub fn scan(
    root: &Root,
    config: &Config,
    problems: &mut Vec<Problem>,
) -> (BTreeMap<Bdf, PciFunction>, Vec<Problem>) {
    let mut functions = BTreeMap::new();
    let mut unidentified = Vec::new();
    // Missing here is not "no devices": every Linux node with PCI has this directory, so a root
    // without it is an incomplete capture, and the GPU checks must say unknown.
    let names = match root.read_dir(PCI_DEVICES) {
        Ok(listing) => {
            for bad in &listing.invalid {
                problems.push(Problem {
                    path: format!("{PCI_DEVICES}/{bad}"),
                    message: "name is not UTF-8; ignored".into(),
                });
            }
            listing.names
        }
        Err(e) => {
            unidentified.push(Problem::from_error(&e));
            Vec::new()
        }
    };
    for name in names {
        let entry = format!("{PCI_DEVICES}/{name}");
        let Some(bdf) = Bdf::parse(&name) else {
            // Not a function at all: nothing to identify, but worth a line.
            problems.push(Problem::unsafe_name(entry, "PCI address"));
            continue;
        };
        let path = match root.canonical(&entry) {
            Ok(p) => p,
            Err(e) => {
                unidentified.push(Problem::from_error(&e));
                continue;
            }
        };
        // The last component of the real path must be the function itself.
        if path.rsplit('/').next().and_then(Bdf::parse) != Some(bdf) {
            unidentified.push(Problem {
                path: entry,
                message: format!("links to {path}, not to a directory named {bdf}"),
            });
            continue;
        }
        match identity(root, &path) {
            Ok((vendor, device, class)) => {
                let skip_driver = matches!(class >> 16, 0x06 | 0x08)
                    && !config
                        .accelerators
                        .iter()
                        .any(|a| a.matches(vendor, device, class));
                let driver = if skip_driver {
                    None
                } else {
                    driver_of(root, &path, problems)
                };
                functions.insert(
                    bdf,
                    PciFunction {
                        bdf,
                        path,
                        vendor,
                        device,
                        class,
                        driver,
                        detail: None,
                    },
                );
            }
            Err(p) => unidentified.push(p),
        }
    }
    (functions, unidentified)
}

/// The driver bound to the device in `dir`, from its `driver` link. The link's target must end
/// in `drivers/<name>`; in a capture it may dangle (the drivers directory is rarely copied), so
/// only its text is judged, and a target of any other shape is a problem, not a driver.
pub fn driver_of(root: &Root, dir: &str, problems: &mut Vec<Problem>) -> Option<String> {
    match link_under(root, &format!("{dir}/driver"), "drivers") {
        Ok(name) => name,
        Err(p) => {
            problems.push(p);
            None
        }
    }
}

/// The last component of a link's target when the one before it is `parent`:
/// `../../../bus/pci/drivers/nvidia` under `drivers` -> `nvidia`. No link: `Ok(None)`.
fn link_under(root: &Root, path: &str, parent: &str) -> Result<Option<String>, Problem> {
    let target = match root.read_link(path) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(Problem::from_error(&e)),
    };
    let mut parts = target.trim_end_matches('/').rsplit('/');
    let (name, above) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && name != "."
        && name != "..";
    if above == parent && valid {
        Ok(Some(name.to_owned()))
    } else {
        Err(Problem {
            path: path.to_owned(),
            message: format!(
                "link target {} does not name one of {parent}/",
                crate::sanitize::quoted(&target)
            ),
        })
    }
}

/// Vendor, device and class: from `uevent` (one small read that never touches the device, so
/// the config space is read once, and only for the functions the checks look at), else the
/// config header (a capture without `uevent`), else the sysfs attributes.
fn identity(root: &Root, dir: &str) -> Result<(u16, u16, u32), Problem> {
    if let Some(id) = root
        .read_text_limited(&format!("{dir}/uevent"), 4096)
        .ok()
        .and_then(|t| pp::uevent_identity(&t))
    {
        return Ok(id);
    }
    if let Ok(bytes) = root.read_prefix(&format!("{dir}/config"), 64) {
        if let Some(h) = pp::header(&bytes) {
            return Ok((h.vendor, h.device, h.class));
        }
    }
    let vendor = Fact::read(root, format!("{dir}/vendor"), hex_u16);
    let device = Fact::read(root, format!("{dir}/device"), hex_u16);
    let class = Fact::read(root, format!("{dir}/class"), |s| {
        hex_u32(s).filter(|c| *c <= 0xff_ffff)
    });
    match (vendor.value, device.value, class.value) {
        (Some(v), Some(d), Some(c)) => Ok((v, d, c)),
        _ => {
            let why = [vendor.problem(), device.problem(), class.problem()]
                .into_iter()
                .flatten()
                .next();
            Err(Problem {
                path: dir.to_owned(),
                message: format!("cannot identify PCI function: {}", why.unwrap_or_default()),
            })
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    Nvidia,
    Amd,
    /// Declared in the config (`accelerators:`), vendor unknown to gdrdoctor.
    Other,
}

#[derive(Debug, Clone)]
pub struct Gpu {
    pub bdf: Bdf,
    pub vendor: GpuVendor,
    /// `NVIDIA H200` from the NVIDIA driver, or the config's name for a declared accelerator.
    pub model: Option<String>,
    /// Selected by a config entry rather than by vendor and class.
    pub declared: bool,
    /// NVIDIA and AMD: the prefetchable region peers reach GPU memory through (`resource`).
    pub aperture: Option<super::Fact<super::gpu::Aperture>>,
    /// AMD: the DRM nodes under `<device>/drm` (`card0`, `renderD128`), or why not readable.
    pub drm: Option<Result<Vec<String>, crate::root::ReadError>>,
    /// NVIDIA: `GPU-<uuid>` from the driver's `information` file, only to start this GPU's
    /// worker with `CUDA_VISIBLE_DEVICES` naming it alone. Never reported, never captured.
    pub uuid: Option<String>,
    /// NVLink-C2C to its CPU (Grace superchips): the platform's signature, then NVML's word
    /// where NVML was asked ([`super::c2c`]).
    pub c2c: Option<super::c2c::C2c>,
}

impl Gpu {
    /// How reports name it: `GPU 0000:3b:00.0 (NVIDIA H200)`.
    pub fn subject(&self) -> String {
        match &self.model {
            Some(m) => format!("GPU {} ({m})", self.bdf),
            None => format!("GPU {}", self.bdf),
        }
    }
}

/// NVIDIA and AMD display (0x03), and processing-accelerator (0x12) functions, plus whatever
/// the config declares. Audio functions and NVSwitches (bridge class) of the same vendors are not
/// GPUs; neither is a BMC's VGA of another vendor.
pub fn classify_gpus(
    root: &Root,
    pci: &BTreeMap<Bdf, PciFunction>,
    config: &Config,
    kernel: &super::Kernel,
) -> Vec<Gpu> {
    let mut gpus = Vec::new();
    for f in pci.values() {
        let base = f.class >> 16;
        let declared = config
            .accelerators
            .iter()
            .find(|a| a.matches(f.vendor, f.device, f.class));
        let vendor = match (f.vendor, base) {
            (VENDOR_NVIDIA, 0x03 | 0x12) => GpuVendor::Nvidia,
            (VENDOR_AMD, 0x03 | 0x12) => GpuVendor::Amd,
            _ if declared.is_some() => match f.vendor {
                VENDOR_NVIDIA => GpuVendor::Nvidia,
                VENDOR_AMD => GpuVendor::Amd,
                _ => GpuVendor::Other,
            },
            _ => continue,
        };
        let mut model = declared.and_then(|a| a.name.clone());
        let mut uuid = None;
        if vendor == GpuVendor::Nvidia && kernel.nvidia.value.is_some() {
            let info = format!("/proc/driver/nvidia/gpus/{}/information", f.bdf);
            if let Ok(text) = root.read_text(&info) {
                model = crate::parse::kernel::nvidia_gpu_model(&text)
                    .filter(|m| m.len() < 80)
                    .or(model);
                uuid = crate::parse::kernel::nvidia_gpu_uuid(&text);
            }
        }
        let aperture = matches!(vendor, GpuVendor::Nvidia | GpuVendor::Amd)
            .then(|| super::gpu::aperture(root, &f.path));
        let drm = (vendor == GpuVendor::Amd).then(|| super::gpu::drm(root, &f.path));
        let c2c = (vendor == GpuVendor::Nvidia)
            .then(|| super::c2c::platform(&f.path, f.device))
            .flatten();
        gpus.push(Gpu {
            bdf: f.bdf,
            vendor,
            model,
            declared: declared.is_some(),
            aperture,
            drm,
            uuid,
            c2c,
        });
    }
    gpus
}

/// The function's AER tables (`aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`);
/// absent before Linux 4.19 and on functions without AER. A sample window calls this again:
/// `prefix` is where a capture recorded that reading (empty: the node's own files); either way
/// the facts name the node's own paths.
pub fn read_aer(root: &Root, prefix: &str, dir: &str) -> Aer {
    let table = |name: &str| {
        let path = format!("{dir}/{name}");
        let mut fact = Fact::read_small(
            root,
            format!("{prefix}{path}"),
            super::AER_TABLE_LIMIT,
            aer_table,
        );
        fact.path = path;
        fact
    };
    Aer {
        correctable: table("aer_dev_correctable"),
        nonfatal: table("aer_dev_nonfatal"),
        fatal: table("aer_dev_fatal"),
    }
}
