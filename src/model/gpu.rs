//! What the GPU vendors' own libraries said about the GPUs, as plain data. The probe child
//! writes it as JSON, the parent reads it back, and the report shows it: every field here is
//! documented in docs/report-json.md (`inventory.gpu_runtime`).

use serde::{Deserialize, Serialize};

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
