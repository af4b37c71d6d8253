//! NVML (libnvidia-ml.so.1) through nvml-wrapper, which loads it with dlopen and turns a
//! missing symbol into an error rather than a crash.

use super::{Loaded, candidates, open};
use crate::model::gpu::{C2c, Fabric, FabricState, Lib, NvLink, Nvml, NvmlDevice};
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
        // Not an NVML code: the library lacks the function (a driver older than the call).
        NvmlError::FailedToLoadSymbol(_) => "not exported by this library (an older driver)",
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
                        nvlinks_down: Vec::new(),
                        persistence_mode: None,
                        fabric: None,
                        c2c: None,
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
    let persistence_mode = d
        .is_in_persistent_mode()
        .map_err(|e| note("nvmlDeviceGetPersistenceMode", e))
        .ok();
    let mut nvlinks = Vec::new();
    let mut nvlinks_down = Vec::new();
    for link in 0..MAX_LINKS {
        let l = d.link_wrapper_for(link);
        match l.is_active() {
            Ok(true) => {}
            // A link the GPU has, not active.
            Ok(false) => {
                nvlinks_down.push(link);
                continue;
            }
            // A link number past this GPU's last, or no NVLink at all.
            Err(NvmlError::NotSupported | NvmlError::InvalidArg) => continue,
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
    let c2c = match c2c(nvml, d) {
        Ok(c) => c,
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let fabric = match fabric(nvml, d) {
        Ok(f) => f,
        Err(e) => {
            errors.push(e);
            None
        }
    };
    NvmlDevice {
        index,
        bus_id,
        name,
        bar1_total: bar1.as_ref().map(|b| b.total),
        bar1_used: bar1.as_ref().map(|b| b.used),
        nvlinks,
        nvlinks_down,
        persistence_mode,
        fabric,
        c2c,
        errors,
    }
}

/// The GPU's NVLink-C2C links, asked as NCCL asks (src/graph/xml.cc `ncclTopoGetXmlFromGpu`,
/// 2.19 to 2.30): the link count, then each link's status and bandwidth, scoped by link.
/// No links (`links: 0`) where NVML has no such field for this GPU (not a C2C GPU, or a driver
/// before the fields existed); `None` only where the library lacks the call.
fn c2c(nvml: &nvml_wrapper::Nvml, d: &Device) -> Result<Option<C2c>, String> {
    use nvml_wrapper::sys_exports::field_id::{
        NVML_FI_DEV_C2C_LINK_COUNT, NVML_FI_DEV_C2C_LINK_GET_MAX_BW,
        NVML_FI_DEV_C2C_LINK_GET_STATUS,
    };
    const NVML_SUCCESS: u32 = 0;
    const NVML_ERROR_NOT_SUPPORTED: u32 = 3;
    let Ok(f) = nvml.lib().nvmlDeviceGetFieldValues.as_ref() else {
        return Ok(None);
    };
    let ask = |values: &mut [nvml_wrapper_sys::bindings::nvmlFieldValue_t]| -> u32 {
        // SAFETY: the handle is a live device of this NVML instance; `values` is a valid array
        // of `nvmlFieldValue_t` of the length passed, each with its field and scope set, as
        // nvml.h's nvmlDeviceGetFieldValues(device, valuesCount, values) takes it.
        unsafe { f(d.handle(), values.len() as i32, values.as_mut_ptr()) }
    };
    let field = |id: u32, scope: u32| {
        // SAFETY: nvmlFieldValue_t is plain data (integers and a union of integers and a
        // double); all zeroes is a valid value of it.
        let mut v: nvml_wrapper_sys::bindings::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
        v.fieldId = id;
        v.scopeId = scope;
        v
    };
    let mut count = [field(NVML_FI_DEV_C2C_LINK_COUNT, 0)];
    let code = ask(&mut count);
    if code != NVML_SUCCESS {
        return Err(format!(
            "nvmlDeviceGetFieldValues(C2C_LINK_COUNT): {}",
            return_name(code)
        ));
    }
    match count[0].nvmlReturn {
        NVML_SUCCESS => {}
        NVML_ERROR_NOT_SUPPORTED => return Ok(Some(C2c::default())),
        other => {
            return Err(format!(
                "nvmlDeviceGetFieldValues(C2C_LINK_COUNT): {}",
                return_name(other)
            ));
        }
    }
    // SAFETY: NVML returned the count as an unsigned int (`uiVal`), as nvml.h documents it.
    let links = unsafe { count[0].value.uiVal }.min(64);
    if links == 0 {
        return Ok(Some(C2c::default()));
    }
    let (mut active, mut max_bw) = (0, None);
    for l in 0..links {
        let mut v = [
            field(NVML_FI_DEV_C2C_LINK_GET_STATUS, l),
            field(NVML_FI_DEV_C2C_LINK_GET_MAX_BW, l),
        ];
        if ask(&mut v) != NVML_SUCCESS || v[0].nvmlReturn != NVML_SUCCESS {
            continue;
        }
        // SAFETY: both fields are unsigned ints (`uiVal`) in nvml.h.
        let (status, bw) = unsafe { (v[0].value.uiVal, v[1].value.uiVal) };
        if status == 1 {
            active += 1;
            if v[1].nvmlReturn == NVML_SUCCESS {
                max_bw = Some(bw);
            }
        }
    }
    Ok(Some(C2c {
        links,
        active,
        max_bw,
    }))
}

/// NVML's name for an `nvmlReturn_t` (`NVML_SUCCESS`, `NVML_ERROR_NOT_SUPPORTED`...).
fn return_name(code: u32) -> String {
    match code {
        0 => "NVML_SUCCESS".into(),
        // Not in nvml-wrapper 0.13's error type; nvml.h's names.
        25 => "NVML_ERROR_ARGUMENT_VERSION_MISMATCH".into(),
        27 => "NVML_ERROR_NOT_READY".into(),
        code => match NvmlError::from(code) {
            NvmlError::UnexpectedVariant(c) => format!("nvmlReturn_t {c}"),
            e => error_name(&e),
        },
    }
}

/// `nvmlGpuFabricInfo_v3_t` in nvml.h (driver R570 and later); `_v2_t` is its first six fields,
/// so one buffer serves both versions.
#[repr(C)]
#[allow(dead_code)] // the driver writes every field; gdrdoctor reads the state and status
struct FabricInfoV {
    version: u32,
    cluster_uuid: [u8; 16],
    status: u32,
    clique_id: u32,
    state: u8,
    health_mask: u32,
    health_summary: u8,
}

/// `nvmlGpuFabricInfo_t` in nvml.h: what `nvmlDeviceGetGpuFabricInfo` (R525 and later) fills.
#[repr(C)]
#[allow(dead_code)] // as above
struct FabricInfo {
    cluster_uuid: [u8; 16],
    status: u32,
    clique_id: u32,
    state: u8,
}

// nvml.h's sizes, which the version words below encode: a wrong layout here would be a wrong
// version sent to the driver, so the build checks them.
const _: () = assert!(std::mem::size_of::<FabricInfoV>() == 40);
const _: () = assert!(std::mem::size_of::<FabricInfo>() == 28);

/// `NVML_STRUCT_VERSION(GpuFabricInfo, 3)`: `sizeof(nvmlGpuFabricInfo_v3_t) | 3 << 24`.
const FABRIC_INFO_V3: u32 = 40 | (3 << 24);
/// `NVML_STRUCT_VERSION(GpuFabricInfo, 2)`: `sizeof(nvmlGpuFabricInfo_v2_t)` is 36.
const FABRIC_INFO_V2: u32 = 36 | (2 << 24);

fn fabric_state(state: u8) -> FabricState {
    // NVML_GPU_FABRIC_STATE_* in nvml.h.
    match state {
        0 => FabricState::NotSupported,
        1 => FabricState::NotStarted,
        2 => FabricState::InProgress,
        3 => FabricState::Completed,
        _ => FabricState::Unknown,
    }
}

/// The GPU's fabric state: `nvmlDeviceGetGpuFabricInfoV` at the newest struct version the
/// driver takes, else `nvmlDeviceGetGpuFabricInfo`. `Ok(None)`: the library has neither call
/// (an older driver: unknown, not a fault). A GPU outside any fabric answers
/// `NVML_ERROR_NOT_SUPPORTED`, recorded as the state `not-supported`.
fn fabric(nvml: &nvml_wrapper::Nvml, d: &Device) -> Result<Option<Fabric>, String> {
    const NOT_SUPPORTED: u32 = 3;
    const VERSION_MISMATCH: u32 = 25;
    let answer = |call: &str, code: u32, state: u8, status: u32| match code {
        0 => Ok(Some(Fabric {
            state: fabric_state(state),
            status: return_name(status),
            call: call.to_owned(),
        })),
        NOT_SUPPORTED => Ok(Some(Fabric {
            state: FabricState::NotSupported,
            status: return_name(code),
            call: call.to_owned(),
        })),
        code => Err(format!("{call}: {}", return_name(code))),
    };
    if let Ok(f) = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref() {
        for version in [FABRIC_INFO_V3, FABRIC_INFO_V2] {
            let mut info = FabricInfoV {
                version,
                cluster_uuid: [0; 16],
                status: 0,
                clique_id: 0,
                state: 0,
                health_mask: 0,
                health_summary: 0,
            };
            // SAFETY: the handle is a live device of this NVML instance; `info` is a buffer of
            // nvml.h's nvmlGpuFabricInfo_v3_t layout (asserted above), large enough for the
            // version it names, which is how the driver knows how much to write.
            let code = unsafe { f(d.handle(), (&raw mut info).cast()) };
            if code == VERSION_MISMATCH {
                continue;
            }
            return answer("nvmlDeviceGetGpuFabricInfoV", code, info.state, info.status);
        }
    }
    let Ok(f) = nvml.lib().nvmlDeviceGetGpuFabricInfo.as_ref() else {
        return Ok(None);
    };
    let mut info = FabricInfo {
        cluster_uuid: [0; 16],
        status: 0,
        clique_id: 0,
        state: 0,
    };
    // SAFETY: as above, with nvml.h's nvmlGpuFabricInfo_t layout, which has no version word.
    let code = unsafe { f(d.handle(), (&raw mut info).cast()) };
    answer("nvmlDeviceGetGpuFabricInfo", code, info.state, info.status)
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
