//! Libraries loaded at run time, never linked: a fresh node has none of them, and gdrdoctor
//! must still start there and say so. With `sys/` (the system calls the standard library
//! lacks), the only code allowed `unsafe`.
//!
//! Every function pointer is looked up before anything is called, so a missing symbol is a
//! finding (an older library), never a crash.

/// Looks up one required symbol in a `Library` for a function-pointer field, or returns
/// `Err(name)` from the enclosing function: which symbol is missing is the finding.
macro_rules! required {
    ($lib:expr, $name:literal) => {
        // SAFETY: the type at the use site (the struct field) matches the prototype in the
        // vendor's header (cuda.h, hip_runtime_api.h, hsa_ext_amd.h).
        match unsafe { $lib.get(concat!($name, "\0").as_bytes()) } {
            Ok(sym) => *sym,
            Err(_) => return Err($name),
        }
    };
}

/// Looks up one optional symbol: `None` when the library is older than it.
macro_rules! optional {
    ($lib:expr, $name:literal) => {
        // SAFETY: as in `required!`.
        unsafe { $lib.get(concat!($name, "\0").as_bytes()) }
            .ok()
            .map(|s| *s)
    };
}

pub mod cuda;
pub mod efa;
pub mod gpu;
pub mod hip;
pub mod hostmem;
pub mod ibverbs;
pub mod nccl;
pub mod nvml;
pub mod udmabuf;
pub mod verbs;

use libloading::Library;
use std::ffi::{CStr, c_void};

/// A library that loaded, and the file it came from.
pub(crate) struct Loaded {
    pub lib: Library,
    /// The path the loader found (dladdr), or the name asked for.
    pub path: String,
}

/// Names to try for a library: only `$env` when it is set (a site with the library in an odd
/// place, and the tests' stand-ins), else the defaults in order.
pub(crate) fn candidates(env: &str, defaults: &[&str]) -> Vec<String> {
    match std::env::var_os(env) {
        Some(v) if !v.is_empty() => vec![v.to_string_lossy().into_owned()],
        _ => defaults.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// Loads the first candidate that loads. `probe_symbol` is any symbol the library must export,
/// used to learn the file's path. On failure: every name tried and the loader's last message.
pub(crate) fn open(names: &[String], probe_symbol: &[u8]) -> Result<Loaded, (Vec<String>, String)> {
    let mut last = String::from("no library names to try");
    for name in names {
        // SAFETY: loading a GPU vendor library runs its constructors, which set up only their
        // own state. gdrdoctor loads them only in the probe child (see crate::probe::gpu), so even a
        // constructor that misbehaves cannot take the report down with it.
        match unsafe { Library::new(name) } {
            Ok(lib) => {
                let path = symbol_file(&lib, probe_symbol).unwrap_or_else(|| name.clone());
                return Ok(Loaded { lib, path });
            }
            Err(e) => last = chain(&e),
        }
    }
    Err((names.to_vec(), last))
}

/// The file of a library already loaded in this process whose file name starts with `stem`
/// (`libamdhip64`), from the loader's own list (dl_iterate_phdr). RCCL brings its own HIP (a
/// PyTorch wheel's RCCL finds the wheel's libamdhip64 through its RPATH): the child must use that
/// one, since two HIP runtimes in one process would each claim the GPUs.
pub(crate) fn loaded(stem: &str) -> Option<String> {
    struct Search<'a> {
        stem: &'a str,
        found: Option<String>,
    }
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Search` passed below, alive for the whole walk; `info` and
        // its name are the loader's, valid during the callback.
        let search = unsafe { &mut *data.cast::<Search>() };
        let name = unsafe { (*info).dlpi_name };
        if name.is_null() {
            return 0;
        }
        let path = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let file = path.rsplit('/').next().unwrap_or_default();
        if file.starts_with(search.stem) {
            search.found = Some(path.into_owned());
            return 1;
        }
        0
    }
    let mut search = Search { stem, found: None };
    // SAFETY: the callback only reads what the loader hands it and writes `search`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut search as *mut Search).cast()) };
    search.found
}

/// The file a symbol of `lib` lives in, from the loader's own records.
fn symbol_file(lib: &Library, symbol: &[u8]) -> Option<String> {
    // SAFETY: only the symbol's address is taken; it is never called.
    let sym = unsafe { lib.get::<*const c_void>(symbol) }.ok()?;
    let addr: *const c_void = *sym;
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; `info` is a valid out-pointer and
    // dli_fname, when set, is a NUL-terminated string owned by the loader.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    Some(
        unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// libloading's message is "dlopen failed"; the loader's own words are in the source.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Copies a C string the library wrote into a buffer of ours, up to its NUL.
pub(crate) fn buffer_text(buf: &[u8]) -> Option<String> {
    let end = buf.iter().position(|&b| b == 0)?;
    let s = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!s.is_empty()).then_some(s)
}

/// What a dma-buf fd refers to, from /proc/self/fd: `anon_inode:dmabuf` (older kernels) or
/// `/dmabuf:` (newer ones). Proves the fd is a dma-buf, not merely a number.
pub(crate) fn fd_target(fd: i32) -> String {
    match crate::root::Root::live().read_link(&format!("/proc/self/fd/{fd}")) {
        Ok(t) => t,
        Err(e) => format!("<{}>", e.reason()),
    }
}

/// Closes an fd the library handed us.
pub(crate) fn close_fd(fd: i32) {
    // SAFETY: `fd` was returned to us by the export call and is closed exactly once.
    unsafe { libc::close(fd) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_loaded_library_is_found_by_its_name() {
        // The C library is in every process; nothing is named like this.
        let libc = super::loaded("libc.so").or_else(|| super::loaded("libc-"));
        assert!(libc.is_some_and(|p| p.contains("libc")));
        assert_eq!(super::loaded("libgdrdoctor-never-loaded"), None);
    }
}
