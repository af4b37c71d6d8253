//! A dma-buf of host memory: the way to ask a NIC driver whether it registers dma-bufs at all,
//! on a node without a GPU (`gdrdoctor gdr-test --memory host-dmabuf`). From the kernel's udmabuf
//! driver (`/dev/udmabuf`, CONFIG_UDMABUF, as Ubuntu builds it), else a DRM dumb buffer exported
//! with PRIME from the first `/dev/dri/card*` that allows it (any KMS driver, virtio-gpu too).

use std::ffi::c_void;

/// `struct udmabuf_create` (include/uapi/linux/udmabuf.h).
#[repr(C)]
struct Create {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}

/// `_IOW('u', 0x42, struct udmabuf_create)`.
const UDMABUF_CREATE: u64 =
    (1 << 30) | ((std::mem::size_of::<Create>() as u64) << 16) | (0x75 << 8) | 0x42;
const UDMABUF_FLAGS_CLOEXEC: u32 = 1;

pub const DEVICE: &str = "/dev/udmabuf";

pub struct HostDmabuf {
    memfd: i32,
    pub fd: i32,
    ptr: *mut c_void,
    pub len: usize,
    /// The DRM device and dumb-buffer handle, for a buffer that came from DRM.
    drm: Option<(i32, u32)>,
    /// Where the dma-buf came from: `/dev/udmabuf`, `/dev/dri/card0 (PRIME)`.
    pub source: String,
}

fn os(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

impl HostDmabuf {
    /// udmabuf, else DRM PRIME; `Err` lists why each failed. `len`: a multiple of 4 KiB.
    pub fn create(len: usize) -> Result<HostDmabuf, String> {
        let udma = match Self::udmabuf(len) {
            Ok(u) => return Ok(u),
            Err(e) => e,
        };
        let mut why = vec![udma];
        for card in 0..8 {
            match Self::drm_dumb(&format!("/dev/dri/card{card}"), len) {
                Ok(u) => return Ok(u),
                Err(e) if e.contains("No such file") => break,
                Err(e) => why.push(e),
            }
        }
        Err(format!("no dma-buf of host memory: {}", why.join("; ")))
    }

    fn udmabuf(len: usize) -> Result<HostDmabuf, String> {
        // SAFETY: plain system calls on fds we own; every failure path closes what it opened.
        unsafe {
            let memfd = libc::memfd_create(
                c"gdrdoctor-udmabuf".as_ptr(),
                libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC,
            );
            if memfd < 0 {
                return Err(os("memfd_create"));
            }
            let mut u = HostDmabuf {
                memfd,
                fd: -1,
                ptr: std::ptr::null_mut(),
                len,
                drm: None,
                source: DEVICE.into(),
            };
            if libc::ftruncate(memfd, len as libc::off_t) != 0 {
                return Err(os("ftruncate"));
            }
            if libc::fcntl(memfd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) != 0 {
                return Err(os("fcntl(F_SEAL_SHRINK)"));
            }
            let ptr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                memfd,
                0,
            );
            if ptr == libc::MAP_FAILED {
                return Err(os("mmap"));
            }
            u.ptr = ptr;
            let dev = libc::open(c"/dev/udmabuf".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if dev < 0 {
                return Err(os(&format!(
                    "open {DEVICE} (the kernel's udmabuf driver, CONFIG_UDMABUF)"
                )));
            }
            let create = Create {
                memfd: memfd as u32,
                flags: UDMABUF_FLAGS_CLOEXEC,
                offset: 0,
                size: len as u64,
            };
            let fd = libc::ioctl(dev, UDMABUF_CREATE as _, &create);
            let err = os("ioctl(UDMABUF_CREATE)");
            libc::close(dev);
            if fd < 0 {
                return Err(err);
            }
            u.fd = fd;
            Ok(u)
        }
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Copies `data` to the start of the mapping (as much of it as fits). Like host memory
    /// (crate::ffi::hostmem), the mapping is only ever copied to and from: the NIC writes it.
    pub fn write(&self, data: &[u8]) {
        let n = data.len().min(self.len);
        // SAFETY: `ptr` maps `len` bytes for as long as `self` lives; no reference into them
        // exists to alias.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.cast(), n) };
    }

    /// Copies the start of the mapping into `out`.
    pub fn read(&self, out: &mut [u8]) {
        let n = out.len().min(self.len);
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.cast(), out.as_mut_ptr(), n) };
    }
}

// DRM ioctls (include/uapi/drm/drm.h, drm_mode.h): _IOWR('d', nr, struct).
#[repr(C)]
#[derive(Default)]
struct CreateDumb {
    height: u32,
    width: u32,
    bpp: u32,
    flags: u32,
    handle: u32,
    pitch: u32,
    size: u64,
}
#[repr(C)]
#[derive(Default)]
struct MapDumb {
    handle: u32,
    pad: u32,
    offset: u64,
}
#[repr(C)]
#[derive(Default)]
struct PrimeHandle {
    handle: u32,
    flags: u32,
    fd: i32,
}
const fn iowr_d(nr: u64, size: usize) -> u64 {
    (3 << 30) | ((size as u64) << 16) | (0x64 << 8) | nr
}
const DRM_IOCTL_MODE_CREATE_DUMB: u64 = iowr_d(0xb2, std::mem::size_of::<CreateDumb>());
const DRM_IOCTL_MODE_MAP_DUMB: u64 = iowr_d(0xb3, std::mem::size_of::<MapDumb>());
const DRM_IOCTL_MODE_DESTROY_DUMB: u64 = iowr_d(0xb4, 4);
const DRM_IOCTL_PRIME_HANDLE_TO_FD: u64 = iowr_d(0x2d, std::mem::size_of::<PrimeHandle>());

impl HostDmabuf {
    /// A dumb buffer of `len` bytes (512 pixels of 32 bits per row), exported with PRIME.
    fn drm_dumb(path: &str, len: usize) -> Result<HostDmabuf, String> {
        let c = std::ffi::CString::new(path).map_err(|e| e.to_string())?;
        // SAFETY: ioctls on a DRM fd we own, with structures of the sizes their numbers encode;
        // every failure path releases what was created.
        unsafe {
            let card = libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            if card < 0 {
                return Err(os(&format!("open {path}")));
            }
            let mut create = CreateDumb {
                width: 512,
                bpp: 32,
                height: len.div_ceil(2048) as u32,
                ..CreateDumb::default()
            };
            if libc::ioctl(card, DRM_IOCTL_MODE_CREATE_DUMB as _, &mut create) != 0 {
                let e = os(&format!("{path}: DRM_IOCTL_MODE_CREATE_DUMB"));
                libc::close(card);
                return Err(e);
            }
            let mut u = HostDmabuf {
                memfd: -1,
                fd: -1,
                ptr: std::ptr::null_mut(),
                len,
                drm: Some((card, create.handle)),
                source: format!("{path} (a DRM dumb buffer exported with PRIME)"),
            };
            let mut prime = PrimeHandle {
                handle: create.handle,
                flags: (libc::O_CLOEXEC | libc::O_RDWR) as u32,
                fd: -1,
            };
            if libc::ioctl(card, DRM_IOCTL_PRIME_HANDLE_TO_FD as _, &mut prime) != 0 {
                return Err(os(&format!("{path}: DRM_IOCTL_PRIME_HANDLE_TO_FD")));
            }
            u.fd = prime.fd;
            let mut map = MapDumb {
                handle: create.handle,
                ..MapDumb::default()
            };
            if libc::ioctl(card, DRM_IOCTL_MODE_MAP_DUMB as _, &mut map) != 0 {
                return Err(os(&format!("{path}: DRM_IOCTL_MODE_MAP_DUMB")));
            }
            let ptr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                card,
                map.offset as libc::off_t,
            );
            if ptr == libc::MAP_FAILED {
                return Err(os(&format!("{path}: mmap")));
            }
            u.ptr = ptr;
            Ok(u)
        }
    }
}

impl Drop for HostDmabuf {
    fn drop(&mut self) {
        // SAFETY: each resource was created by `create` and is released once.
        unsafe {
            if self.fd >= 0 {
                libc::close(self.fd);
            }
            if !self.ptr.is_null() {
                libc::munmap(self.ptr, self.len);
            }
            if self.memfd >= 0 {
                libc::close(self.memfd);
            }
            if let Some((card, handle)) = self.drm {
                let mut h = handle;
                libc::ioctl(card, DRM_IOCTL_MODE_DESTROY_DUMB as _, &mut h);
                libc::close(card);
            }
        }
    }
}
