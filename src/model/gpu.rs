//! What the GPU vendors' own libraries said about the GPUs, as plain data. The probe child
//! writes it as JSON, the parent reads it back, and the report shows it: every field here is
//! documented in docs/report-json.md (`inventory.gpu_runtime`).

use crate::parse::pci::Bdf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One run of the probe. A library the probe was not asked to load is `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Probe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml: Option<Lib<Nvml>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Lib<Cuda>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<Lib<Hip>>,
    /// `NAME=value` of variables that hide GPUs from CUDA or ROCm (`CUDA_VISIBLE_DEVICES`...):
    /// set in gdrdoctor's environment, removed from the probe's so that it sees every GPU.
    #[serde(default)]
    pub cleared_env: Vec<String>,
    /// Parts of the probe that gave no answer (hung, crashed, or could not use their library
    /// while the others could): NVML, or one GPU's worker. The rest of the probe stands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<ProbeFailure>,
}

/// A part of the probe without an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeFailure {
    /// `nvml`, or the GPU's PCI address (its worker).
    pub part: String,
    pub error: String,
}

impl Probe {
    /// Why the probe has no answer for this GPU, if it has none.
    pub fn failure(&self, gpu: crate::parse::pci::Bdf) -> Option<&str> {
        self.failed
            .iter()
            .find(|f| crate::parse::pci::Bdf::parse(&f.part) == Some(gpu))
            .map(|f| f.error.as_str())
    }
}

/// A library the probe loaded, or why it could not use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Lib<T> {
    /// Loaded and initialised; what it said.
    Ready(T),
    /// No file by any of these names could be loaded; `message` is the loader's last word.
    NotFound { tried: Vec<String>, message: String },
    /// Loaded, but a function gdrdoctor needs is not exported: an older library.
    MissingSymbol { library: String, symbol: String },
    /// A call failed before any GPU could be asked anything (`cuInit`, `nvmlInit_v2`).
    Failed {
        library: String,
        call: String,
        code: i64,
        /// The library's name for the code: `CUDA_ERROR_NO_DEVICE`, `NVML_ERROR_DRIVER_NOT_LOADED`.
        error: String,
    },
}

impl<T> Lib<T> {
    pub fn ready(&self) -> Option<&T> {
        match self {
            Lib::Ready(t) => Some(t),
            _ => None,
        }
    }

    /// Why the library cannot be used, in one line (`cannot load libcuda.so.1: ...`);
    /// `ready` when it can.
    pub fn reason(&self) -> String {
        match self {
            Lib::Ready(_) => "ready".into(),
            Lib::NotFound { tried, message } => {
                format!("cannot load {}: {message}", tried.join(", "))
            }
            Lib::MissingSymbol { library, symbol } => format!("{library} does not export {symbol}"),
            Lib::Failed { call, error, .. } => format!("{call} failed with {error}"),
        }
    }
}

impl Lib<()> {
    /// Why a library cannot be used, as the state of a library with facts of another kind.
    /// (`Ready(())` is never an error; it would read as a failed call rather than a pass.)
    pub fn cast<T>(self) -> Lib<T> {
        match self {
            Lib::Ready(()) => Lib::Failed {
                library: String::new(),
                call: "(none)".into(),
                code: 0,
                error: "no facts recorded".into(),
            },
            Lib::NotFound { tried, message } => Lib::NotFound { tried, message },
            Lib::MissingSymbol { library, symbol } => Lib::MissingSymbol { library, symbol },
            Lib::Failed {
                library,
                call,
                code,
                error,
            } => Lib::Failed {
                library,
                call,
                code,
                error,
            },
        }
    }
}

/// NVML (libnvidia-ml.so.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nvml {
    /// The file the loader mapped (from /proc/self/maps), else the name asked for.
    pub library: String,
    pub driver_version: Option<String>,
    /// `12080` for CUDA 12.8: the newest CUDA the driver supports.
    pub cuda_driver_version: Option<i32>,
    pub devices: Vec<NvmlDevice>,
    /// Calls that failed for the whole library (`nvmlDeviceGetCount_v2`...).
    #[serde(default)]
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvmlDevice {
    pub index: u32,
    /// As NVML gives it: `00000000:3B:00.0`; null when the handle could not be had.
    pub bus_id: Option<String>,
    pub name: Option<String>,
    pub bar1_total: Option<u64>,
    pub bar1_used: Option<u64>,
    /// Active NVLinks: one entry per link.
    #[serde(default)]
    pub nvlinks: Vec<NvLink>,
    /// The numbers of the NVLinks this GPU has that are not active (`nvmlDeviceGetNvLinkState`
    /// says disabled): down, untrained, or never cabled (a PCIe card without its bridge). Links
    /// the GPU does not have are in neither list.
    #[serde(default)]
    pub nvlinks_down: Vec<u32>,
    /// `nvmlDeviceGetPersistenceMode`: whether the driver keeps the GPU initialised with no
    /// client. Null when the call failed (`errors` says why) or was not asked.
    #[serde(default)]
    pub persistence_mode: Option<bool>,
    /// NVML's fabric state (NVSwitch systems: has Fabric Manager set this GPU up?). Null when
    /// the library lacks the call (drivers before R525), or it failed (`errors` says why).
    #[serde(default)]
    pub fabric: Option<Fabric>,
    /// NVLink-C2C to the CPU (Grace: GH200, GB200, GB300), as NCCL asks NVML for it
    /// (`nvmlDeviceGetFieldValues`: `NVML_FI_DEV_C2C_LINK_COUNT`, then each link's
    /// `NVML_FI_DEV_C2C_LINK_GET_STATUS` and `..._GET_MAX_BW`; NVIDIA/nccl src/graph/xml.cc
    /// `ncclTopoGetXmlFromGpu`). Null when not asked, not supported (no C2C), or the call
    /// failed (`errors` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2c: Option<C2c>,
    /// What failed for this device (`nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_GPU_IS_LOST`).
    #[serde(default)]
    pub errors: Vec<String>,
}

/// `nvmlDeviceGetGpuFabricInfoV` (else `nvmlDeviceGetGpuFabricInfo`): where the GPU's NVLink
/// fabric stands. On an NVSwitch system the Fabric Manager registers every GPU with the
/// switches; until it has, NCCL's NVLink transport hangs or falls back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fabric {
    pub state: FabricState,
    /// The registration's result, as NVML names an `nvmlReturn_t` (`NVML_SUCCESS`); it means
    /// something only once the state is `completed`.
    pub status: String,
    /// The call that answered.
    pub call: String,
}

/// The GPU's NVLink-C2C links as NVML reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct C2c {
    /// `NVML_FI_DEV_C2C_LINK_COUNT`.
    pub links: u32,
    /// The links whose status (`NVML_FI_DEV_C2C_LINK_GET_STATUS`) is 1, up: NCCL joins the GPU
    /// to its CPU by C2C when there is one.
    pub active: u32,
    /// `NVML_FI_DEV_C2C_LINK_GET_MAX_BW` of an active link, MB/s as NVML gives it.
    pub max_bw: Option<u32>,
}

/// `NVML_GPU_FABRIC_STATE_*` in nvml.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FabricState {
    /// The GPU is not part of an NVLink fabric (no NVSwitch), or the call is not supported on
    /// it: nothing to wait for.
    NotSupported,
    NotStarted,
    InProgress,
    Completed,
    /// A value this gdrdoctor does not know (a newer driver).
    #[serde(other)]
    Unknown,
}

impl FabricState {
    /// As nvidia-smi -q prints it (`Fabric / State`).
    pub fn as_smi(self) -> &'static str {
        match self {
            FabricState::NotSupported => "N/A",
            FabricState::NotStarted => "Not Started",
            FabricState::InProgress => "In Progress",
            FabricState::Completed => "Completed",
            FabricState::Unknown => "Unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    /// `gpu`, `switch`, `ibmnpu` or `unknown`.
    pub remote_type: String,
    pub remote_bus_id: Option<String>,
}

/// The CUDA driver API (libcuda.so.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cuda {
    pub library: String,
    /// `cuDriverGetVersion`: `12080` for 12.8.
    pub driver_version: i32,
    /// `cuMemGetHandleForAddressRange` is exported (CUDA 11.7+): the dma-buf export call.
    pub dmabuf_export_symbol: bool,
    pub devices: Vec<CudaDevice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaDevice {
    pub ordinal: i32,
    /// `0000:3B:00.0`, as `cuDeviceGetPCIBusId` gives it.
    pub bus_id: Option<String>,
    pub name: Option<String>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (116).
    pub gdr_supported: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` (124).
    pub dmabuf_supported: Option<bool>,
    pub export: Export,
    #[serde(default)]
    pub errors: Vec<String>,
}

/// The dma-buf export probe on one GPU: allocate, export, close, free.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Export {
    /// A dma-buf fd came back for `bytes` of device memory; `fd_target` is what the fd is
    /// (`anon_inode:dmabuf`, or `/dmabuf:` on newer kernels).
    Exported { bytes: u64, fd_target: String },
    /// The step that failed (`cuMemAlloc_v2`, `cuMemGetHandleForAddressRange`...) and its error.
    Failed { call: String, error: String },
    /// Not attempted: the reason (the driver says it cannot, a symbol is missing).
    NotTried { reason: String },
}

/// HIP (libamdhip64) for the devices, HSA (libhsa-runtime64) for the dma-buf export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hip {
    pub library: String,
    /// `hipDriverGetVersion`.
    pub driver_version: Option<i32>,
    /// libhsa-runtime64, which exports `hsa_amd_portable_export_dmabuf`; `Ready` holds its path.
    pub hsa: Lib<HsaLib>,
    pub devices: Vec<HipDevice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HsaLib {
    pub library: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HipDevice {
    pub ordinal: i32,
    /// `0000:c1:00.0`, as `hipDeviceGetPCIBusId` gives it.
    pub bus_id: Option<String>,
    pub name: Option<String>,
    pub export: Export,
    #[serde(default)]
    pub errors: Vec<String>,
}

/// Variables that hide GPUs from CUDA and ROCm; the probe removes them.
pub const HIDING_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
];

/// The buffer each export probe allocates: one 2 MiB page, the granularity both vendors align
/// device allocations to, so the exported range is page-aligned as the export calls require.
pub const PROBE_BYTES: u64 = 2 << 20;

/// What the GPU probe found: the libraries' answer (live), NVML's answer as a capture recorded
/// it (offline), or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Runtime {
    /// The probe did not run.
    Skipped { reason: SkipReason },
    /// The probe ran; what the libraries said.
    Probed(Box<Probe>),
    /// A captured root whose capture recorded NVML's answer on the node ([`RECORDED_NVML`]):
    /// NVML's part of the probe as it was then. CUDA and HIP are not asked offline.
    Recorded(Box<Recorded>),
    /// The probe ran and gave no answer: it hung, crashed, or wrote something unreadable.
    Failed { error: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// A captured root: its GPUs are elsewhere.
    Offline,
    /// `--no-gpu-probe`, or a command that does not need it.
    Disabled,
    /// No NVIDIA or AMD GPU on the bus: nothing to ask.
    NoGpu,
}

impl SkipReason {
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::Offline => "a captured root, whose GPUs are elsewhere",
            SkipReason::Disabled => "--no-gpu-probe",
            SkipReason::NoGpu => "no NVIDIA or AMD GPU on the PCI bus",
        }
    }
}

impl Runtime {
    /// What the libraries answered: live, or NVML's answer as a capture recorded it.
    pub fn probe(&self) -> Option<&Probe> {
        match self {
            Runtime::Probed(p) => Some(p),
            Runtime::Recorded(r) => Some(&r.probe),
            _ => None,
        }
    }

    /// NVLinks between two GPUs, by PCI address (both ways), as NVML reported them ([`nvlinks`]);
    /// none without NVML's answer. The matrix and the pictures both read it.
    pub fn nvlinks(&self) -> NvLinks {
        self.probe().map(nvlinks).unwrap_or_default()
    }
}

/// Where `gdrdoctor capture` puts NVML's answer inside the captured tree: a top-level name of
/// gdrdoctor's own, which no node has, read only from captured roots (never from `/`).
pub const RECORDED_NVML: &str = "/gdrdoctor/nvml.json";

/// NVML's answer as `capture` recorded it: the NVML-only probe child's JSON ([`Probe`], with
/// `nvml` and any `failed` part of NVML), written at [`RECORDED_NVML`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// The file in the capture.
    pub path: String,
    #[serde(flatten)]
    pub probe: Probe,
}

impl Recorded {
    /// The recorded JSON, as the capture wrote it; only NVML's part is kept (a capture never
    /// records CUDA or HIP: they are not asked offline).
    pub fn parse(path: &str, text: &[u8]) -> Result<Recorded, String> {
        let mut probe: Probe = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        probe.cuda = None;
        probe.hip = None;
        probe.failed.retain(|f| f.part == "nvml");
        Ok(Recorded {
            path: path.to_owned(),
            probe,
        })
    }

    /// What `capture` writes: NVML's part of a probe, one JSON document and a newline.
    pub fn text(nvml: &Runtime) -> Option<String> {
        let probe = match nvml {
            Runtime::Probed(p) => Probe {
                nvml: p.nvml.clone(),
                cuda: None,
                hip: None,
                cleared_env: p.cleared_env.clone(),
                failed: p
                    .failed
                    .iter()
                    .filter(|f| f.part == "nvml")
                    .cloned()
                    .collect(),
            },
            // No answer at all: recorded as NVML's failure, as the live check reports it.
            Runtime::Failed { error } => Probe {
                failed: vec![ProbeFailure {
                    part: "nvml".into(),
                    error: error.clone(),
                }],
                ..Probe::default()
            },
            Runtime::Skipped { .. } | Runtime::Recorded(_) => return None,
        };
        serde_json::to_string_pretty(&probe).ok().map(|t| t + "\n")
    }
}

/// NVML and CUDA bus ids (`00000000:3B:00.0`, `0000:3B:00.0`) as sysfs addresses.
pub fn bdf(bus_id: Option<&String>) -> Option<Bdf> {
    bus_id.and_then(|s| Bdf::parse(s.trim()))
}

/// NVLink counts between GPU pairs, as `nvidia-smi topo -m` shows them (`NV18`): links from one
/// GPU straight to the other, or, through NVSwitches, the smaller of the two GPUs' switch links
/// (every switch-attached GPU reaches every other across the switch fabric). Kept as NVML gave
/// them, per link and per GPU, never per pair: a recorded answer of thousands of devices would
/// otherwise hold millions of pairs (issue 41: 4,600 devices took 880 MB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvLinks {
    /// Links from one GPU straight to another, both ways.
    direct: BTreeMap<(Bdf, Bdf), u32>,
    /// Each GPU's links to NVSwitches.
    switch: BTreeMap<Bdf, u32>,
}

impl NvLinks {
    /// Direct links only, per ordered pair (as each GPU counts its own): for tests and the
    /// pictures' callers that know the pairs.
    pub fn from_direct(pairs: impl IntoIterator<Item = ((Bdf, Bdf), u32)>) -> NvLinks {
        NvLinks {
            direct: pairs.into_iter().collect(),
            switch: BTreeMap::new(),
        }
    }

    /// The NVLinks between `a` and `b` (`None`: none).
    pub fn get(&self, a: Bdf, b: Bdf) -> Option<u32> {
        if a == b {
            return None;
        }
        let direct = self.direct.get(&(a, b)).copied().unwrap_or(0);
        let sw = |g| self.switch.get(&g).copied().unwrap_or(0);
        let n = direct + sw(a).min(sw(b));
        (n > 0).then_some(n)
    }

    /// The GPUs joined by NVLink, each with the ones it reaches (directly or across switches),
    /// among `gpus`.
    pub fn peers(&self, gpus: &[Bdf]) -> BTreeMap<Bdf, Vec<Bdf>> {
        let mut out: BTreeMap<Bdf, Vec<Bdf>> = BTreeMap::new();
        for &a in gpus {
            for &b in gpus {
                if self.get(a, b).is_some() {
                    out.entry(a).or_default().push(b);
                }
            }
        }
        out
    }
}

pub fn nvlinks(probe: &Probe) -> NvLinks {
    let mut out = NvLinks::default();
    let Some(nvml) = probe.nvml.as_ref().and_then(|l| l.ready()) else {
        return out;
    };
    for d in &nvml.devices {
        let Some(a) = bdf(d.bus_id.as_ref()) else {
            continue;
        };
        for l in &d.nvlinks {
            if l.remote_type == "switch" {
                *out.switch.entry(a).or_default() += 1;
            } else if let Some(b) = bdf(l.remote_bus_id.as_ref()).filter(|b| *b != a) {
                *out.direct.entry((a, b)).or_default() += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(bus: &str, links: &[(&str, &str)]) -> NvmlDevice {
        NvmlDevice {
            index: 0,
            bus_id: Some(bus.into()),
            name: None,
            bar1_total: None,
            bar1_used: None,
            nvlinks: links
                .iter()
                .enumerate()
                .map(|(i, (t, r))| NvLink {
                    link: i as u32,
                    remote_type: (*t).into(),
                    remote_bus_id: Some((*r).into()),
                })
                .collect(),
            nvlinks_down: vec![],
            persistence_mode: None,
            fabric: None,
            c2c: None,
            errors: vec![],
        }
    }

    fn probe(devices: Vec<NvmlDevice>) -> Probe {
        Probe {
            nvml: Some(Lib::Ready(Nvml {
                library: "x".into(),
                driver_version: None,
                cuda_driver_version: None,
                devices,
                errors: vec![],
            })),
            ..Probe::default()
        }
    }

    #[test]
    fn direct_links_count_per_pair() {
        let a = "00000000:3B:00.0";
        let b = "00000000:5E:00.0";
        let p = probe(vec![
            dev(a, &[("gpu", b), ("gpu", b), ("gpu", b)]),
            dev(b, &[("gpu", a), ("gpu", a), ("gpu", a)]),
        ]);
        let m = nvlinks(&p);
        let (ba, bb) = (Bdf::parse(a).unwrap(), Bdf::parse(b).unwrap());
        assert_eq!(m.get(ba, bb), Some(3));
        assert_eq!(m.get(bb, ba), Some(3));
        assert_eq!(ba.to_string(), "0000:3b:00.0");
    }

    #[test]
    fn switch_links_are_shared_across_the_fabric() {
        let sw = "00000000:05:00.0";
        let links18: Vec<(&str, &str)> = (0..18).map(|_| ("switch", sw)).collect();
        let links12: Vec<(&str, &str)> = (0..12).map(|_| ("switch", sw)).collect();
        let p = probe(vec![
            dev("00000000:18:00.0", &links18),
            dev("00000000:2A:00.0", &links18),
            dev("00000000:3A:00.0", &links12),
            dev("00000000:4A:00.0", &[]),
        ]);
        let m = nvlinks(&p);
        let b = |s: &str| Bdf::parse(s).unwrap();
        assert_eq!(m.get(b("0000:18:00.0"), b("0000:2a:00.0")), Some(18));
        assert_eq!(m.get(b("0000:18:00.0"), b("0000:3a:00.0")), Some(12));
        assert_eq!(m.get(b("0000:18:00.0"), b("0000:4a:00.0")), None);
    }
}
