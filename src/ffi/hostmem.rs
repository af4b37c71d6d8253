//! Page-aligned host memory for RDMA: registered with the NIC, written by it, and read back.

use std::alloc::{Layout, alloc_zeroed, dealloc};

/// Host memory the NIC reads and writes. No reference into it is ever handed out (the NIC
/// writes it behind any reference's back): it is written and read by copies only.
pub struct HostBuffer {
    ptr: *mut u8,
    layout: Layout,
}

impl HostBuffer {
    pub fn new(len: usize) -> Result<HostBuffer, String> {
        let layout = Layout::from_size_align(len.max(1), 4096).map_err(|e| e.to_string())?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(format!("cannot allocate {len} bytes of host memory"));
        }
        Ok(HostBuffer { ptr, layout })
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// Copies `data` to the start of the buffer (as much of it as fits).
    pub fn write(&self, data: &[u8]) {
        let n = data.len().min(self.len());
        // SAFETY: `ptr` owns `len()` bytes, and no reference into them exists to alias.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr, n) };
    }

    /// Copies the start of the buffer, as last written by us or by the NIC, into `out`. The
    /// NIC's writes are complete (their completion was polled) before anyone looks.
    pub fn read(&self, out: &mut [u8]) {
        let n = out.len().min(self.len());
        // SAFETY: as in `write`; `out` is memory of the caller's, never ours.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr(), n) };
    }
}

impl super::ibverbs::sealed::Sealed for HostBuffer {}

// SAFETY (of the registration that relies on it): the allocation lives, unmoved, until drop.
impl super::ibverbs::Registrable for HostBuffer {
    fn addr(&self) -> u64 {
        HostBuffer::addr(self)
    }
    fn size(&self) -> usize {
        self.len()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
