//! NVML (libnvidia-ml.so.1) through nvml-wrapper, which loads it with dlopen and turns a
//! missing symbol into an error rather than a crash.

use super::{Loaded, candidates, open};
use crate::gpu::model::{Lib, NvLink, Nvml, NvmlDevice};
use nvml_wrapper::Device;
use nvml_wrapper::error::NvmlError;

pub const ENV: &str = "GDRDOCTOR_LIBNVML";
pub const SONAME: &str = "libnvidia-ml.so.1";

/// The most NVLinks a GPU has (NVML_NVLINK_MAX_LINKS; 18 on H100/H200).
const MAX_LINKS: u32 = 18;

/// NVML's own name for an error, as nvidia-smi and the NVML docs spell it.
pub fn error_name(e: &NvmlError) -> String {
    let name = match e {
        NvmlError::Uninitialized => "NVML_ERROR_UNINITIALIZED",
        NvmlError::InvalidArg => "NVML_ERROR_INVALID_ARGUMENT",
        NvmlError::NotSupported => "NVML_ERROR_NOT_SUPPORTED",
        NvmlError::NoPermission => "NVML_ERROR_NO_PERMISSION",
        NvmlError::NotFound => "NVML_ERROR_NOT_FOUND",
        NvmlError::InsufficientSize(_) => "NVML_ERROR_INSUFFICIENT_SIZE",
        NvmlError::InsufficientPower => "NVML_ERROR_INSUFFICIENT_POWER",
        NvmlError::DriverNotLoaded => "NVML_ERROR_DRIVER_NOT_LOADED",
        NvmlError::Timeout => "NVML_ERROR_TIMEOUT",
        NvmlError::IrqIssue => "NVML_ERROR_IRQ_ISSUE",
        NvmlError::LibraryNotFound => "NVML_ERROR_LIBRARY_NOT_FOUND",
        NvmlError::FunctionNotFound => "NVML_ERROR_FUNCTION_NOT_FOUND",
        NvmlError::CorruptedInfoROM => "NVML_ERROR_CORRUPTED_INFOROM",
        NvmlError::GpuLost => "NVML_ERROR_GPU_IS_LOST",
        NvmlError::ResetRequired => "NVML_ERROR_RESET_REQUIRED",
        NvmlError::OperatingSystem => "NVML_ERROR_OPERATING_SYSTEM",
        NvmlError::LibRmVersionMismatch => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        NvmlError::InUse => "NVML_ERROR_IN_USE",
        NvmlError::InsufficientMemory => "NVML_ERROR_MEMORY",
        NvmlError::NoData => "NVML_ERROR_NO_DATA",
        NvmlError::Unknown => "NVML_ERROR_UNKNOWN",
        other => return other.to_string(),
    };
    name.to_owned()
}

/// Loads NVML, initialises it and reads every device it lists.
pub fn probe() -> Lib<Nvml> {
    let names = candidates(ENV, &[SONAME]);
    // Loaded here first to learn which file it is (and to tell "not found" from the rest);
    // nvml-wrapper then opens the same file, which the loader hands back already mapped.
    let Loaded { lib, path } = match open(&names, b"nvmlInit_v2\0") {
        Ok(l) => l,
        Err((tried, message)) => return Lib::NotFound { tried, message },
    };
    let nvml = match nvml_wrapper::Nvml::builder()
        .lib_path(std::ffi::OsStr::new(&path))
        .init()
    {
        Ok(n) => n,
        Err(NvmlError::FailedToLoadSymbol(message)) => {
            return Lib::MissingSymbol {
                library: path,
                symbol: symbol_in(&message).unwrap_or(message),
            };
        }
        Err(e) => {
            return Lib::Failed {
                library: path,
                call: "nvmlInit_v2".into(),
                code: -1,
                error: error_name(&e),
            };
        }
    };
    std::mem::forget(lib);
    let mut errors = Vec::new();
    let driver_version = nvml
        .sys_driver_version()
        .map_err(|e| errors.push(format!("nvmlSystemGetDriverVersion: {}", error_name(&e))))
        .ok();
    let cuda_driver_version = nvml
        .sys_cuda_driver_version()
        .map_err(|e| {
            errors.push(format!(
                "nvmlSystemGetCudaDriverVersion_v2: {}",
                error_name(&e)
            ))
        })
        .ok();
    let mut devices = Vec::new();
    match nvml.device_count() {
        Ok(n) => {
            for index in 0..n {
                devices.push(match nvml.device_by_index(index) {
                    Ok(d) => device(&nvml, index, &d),
                    Err(e) => NvmlDevice {
                        index,
                        bus_id: None,
                        name: None,
                        bar1_total: None,
                        bar1_used: None,
                        nvlinks: Vec::new(),
                        errors: vec![format!("nvmlDeviceGetHandleByIndex_v2: {}", error_name(&e))],
                    },
                });
            }
        }
        Err(e) => errors.push(format!("nvmlDeviceGetCount_v2: {}", error_name(&e))),
    }
    Lib::Ready(Nvml {
        library: path,
        driver_version,
        cuda_driver_version,
        devices,
        errors,
    })
}

/// nvml-wrapper's message for a missing symbol is the loader's (`.../libnvidia-ml.so.1:
/// undefined symbol: nvmlDeviceGetBAR1MemoryInfo`); the symbol is its last word.
fn symbol_in(message: &str) -> Option<String> {
    let sym = message.rsplit(':').next()?.trim();
    sym.starts_with("nvml").then(|| sym.to_owned())
}

fn device(nvml: &nvml_wrapper::Nvml, index: u32, d: &Device) -> NvmlDevice {
    let mut errors = Vec::new();
    let mut note = |call: &str, e: NvmlError| errors.push(format!("{call}: {}", error_name(&e)));
    let bus_id = match d.pci_info() {
        Ok(p) => Some(p.bus_id),
        Err(e) => {
            note("nvmlDeviceGetPciInfo_v3", e);
            None
        }
    };
    let name = d.name().map_err(|e| note("nvmlDeviceGetName", e)).ok();
    let bar1 = d
        .bar1_memory_info()
        .map_err(|e| note("nvmlDeviceGetBAR1MemoryInfo", e))
        .ok();
    let mut nvlinks = Vec::new();
    for link in 0..MAX_LINKS {
        let l = d.link_wrapper_for(link);
        match l.is_active() {
            Ok(true) => {}
            // Inactive, or a link number past this GPU's last, or no NVLink at all.
            Ok(false) | Err(NvmlError::NotSupported | NvmlError::InvalidArg) => continue,
            Err(e) => {
                note(&format!("nvmlDeviceGetNvLinkState({link})"), e);
                continue;
            }
        }
        let remote_bus_id = l.remote_pci_info().ok().map(|p| p.bus_id);
        nvlinks.push(NvLink {
            link,
            remote_type: remote_type(nvml, d, link),
            remote_bus_id,
        });
    }
    NvmlDevice {
        index,
        bus_id,
        name,
        bar1_total: bar1.as_ref().map(|b| b.total),
        bar1_used: bar1.as_ref().map(|b| b.used),
        nvlinks,
        errors,
    }
}

/// `nvmlDeviceGetNvLinkRemoteDeviceType`, called directly: nvml-wrapper 0.13's wrapper writes
/// the answer into a temporary and always returns `Unknown`.
fn remote_type(nvml: &nvml_wrapper::Nvml, d: &Device, link: u32) -> String {
    // nvmlIntNvLinkDeviceType_t in nvml.h.
    const GPU: u32 = 0;
    const IBMNPU: u32 = 1;
    const SWITCH: u32 = 2;
    const UNKNOWN: u32 = 255;
    let Ok(f) = nvml.lib().nvmlDeviceGetNvLinkRemoteDeviceType.as_ref() else {
        return "unknown".into();
    };
    let mut t: u32 = UNKNOWN;
    // SAFETY: the handle is a live device of this NVML instance; `t` is a valid out-pointer of
    // the type nvml.h declares.
    let code = unsafe { f(d.handle(), link, &mut t) };
    if code != 0 {
        return "unknown".into();
    }
    match t {
        GPU => "gpu",
        IBMNPU => "ibmnpu",
        SWITCH => "switch",
        _ => "unknown",
    }
    .into()
}
