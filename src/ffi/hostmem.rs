//! Page-aligned host memory for RDMA: registered with the NIC, written by it, and read back.

use std::alloc::{Layout, alloc_zeroed, dealloc};

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

    pub fn as_mut_ptr(&mut self) -> *mut std::ffi::c_void {
        self.ptr.cast()
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// The bytes, as last written by us or by the NIC. Reads are volatile-free: the NIC's
    /// writes are complete (their completion was polled) before anyone looks.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` owns `layout.size()` initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
