//! libibverbs, loaded with dlopen: just enough to tell whether the library and a provider for
//! each RDMA device load, and whether `ibv_reg_dmabuf_mr` (rdma-core >= 34) exists.

use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_void};

use super::chain;
use crate::model::access::{ListError, SONAME, Verbs};

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;

/// Loads the library and looks up symbols, without asking for devices.
pub fn load_only() -> Verbs {
    load(false)
}

/// Loads the library and lists the devices its providers claim.
pub fn probe() -> Verbs {
    load(true)
}

fn load(list: bool) -> Verbs {
    // SAFETY: loading libibverbs runs its constructors, which only initialise its own state
    // (rdma-core does not spawn threads or touch ours at load time).
    let lib = match unsafe { Library::new(SONAME) } {
        Ok(lib) => lib,
        Err(e) => {
            return Verbs {
                library: Err(chain(&e)),
                reg_dmabuf_mr: false,
                devices: None,
            };
        }
    };
    // SAFETY: only the symbol's presence is tested; the pointer is never called.
    let reg_dmabuf_mr = unsafe { lib.get::<*const c_void>(b"ibv_reg_dmabuf_mr\0") }.is_ok();
    let devices = list.then(|| device_names(&lib));
    // Keep the library (and the providers it loaded) mapped: unloading rdma-core providers
    // at exit has crashed processes before, and the probe runs once.
    std::mem::forget(lib);
    Verbs {
        library: Ok(()),
        reg_dmabuf_mr,
        devices,
    }
}

fn device_names(lib: &Library) -> Result<Vec<String>, ListError> {
    // SAFETY: the signatures match <infiniband/verbs.h>: struct ibv_device **
    // ibv_get_device_list(int *num_devices); void ibv_free_device_list(struct ibv_device **);
    // const char *ibv_get_device_name(struct ibv_device *). `ibv_device` stays opaque here.
    let (get, free, name) = unsafe {
        (
            lib.get::<GetDeviceList>(b"ibv_get_device_list\0")
                .map_err(|e| ListError::Other(chain(&e)))?,
            lib.get::<FreeDeviceList>(b"ibv_free_device_list\0")
                .map_err(|e| ListError::Other(chain(&e)))?,
            lib.get::<GetDeviceName>(b"ibv_get_device_name\0")
                .map_err(|e| ListError::Other(chain(&e)))?,
        )
    };
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer; a null return means failure with errno set.
    let list = unsafe { get(&mut n) };
    if list.is_null() {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENOSYS) => ListError::NoVerbsSubsystem,
            _ => ListError::Other(format!("ibv_get_device_list failed: {err}")),
        });
    }
    let mut names = Vec::new();
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: the list holds `n` valid device pointers until it is freed below.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: ibv_get_device_name returns a NUL-terminated name owned by the device, valid
        // until the list is freed; it is copied out first.
        let ptr = unsafe { name(dev) };
        if !ptr.is_null() {
            names.push(
                unsafe { CStr::from_ptr(ptr) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    // SAFETY: `list` came from ibv_get_device_list and is freed exactly once.
    unsafe { free(list) };
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the real probe on this machine: with libibverbs installed it must list devices
    /// (possibly none) without crashing; without it, say why and list nothing.
    #[test]
    fn probe_this_machine() {
        let p = probe();
        match &p.library {
            Ok(()) => {
                match &p.devices {
                    Some(Ok(devices)) => {
                        assert!(devices.iter().all(|d| !d.is_empty()), "{devices:?}")
                    }
                    // A machine without an RDMA subsystem (this development VM, seen).
                    Some(Err(ListError::NoVerbsSubsystem)) => {
                        assert!(!std::path::Path::new("/sys/class/infiniband_verbs").exists())
                    }
                    other => panic!("device list failed: {other:?}"),
                }
            }
            Err(e) => {
                assert!(e.contains(SONAME), "{e}");
                assert_eq!(p.devices, None);
                assert!(!p.reg_dmabuf_mr);
            }
        }
        assert_eq!(load_only().devices, None);
    }
}
