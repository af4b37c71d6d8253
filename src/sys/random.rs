//! Fresh random bytes from the kernel (getrandom(2)), for the two-node test's nonces: the
//! standard library has no public interface to it, and a nonce must never repeat.

/// Fills `buf` from the kernel's random source (blocking only until it is seeded at boot).
pub fn fill(buf: &mut [u8]) -> std::io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        // SAFETY: the pointer and length describe the unfilled part of `buf`.
        let r = unsafe { libc::getrandom(buf[off..].as_mut_ptr().cast(), buf.len() - off, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        off += r as usize;
    }
    Ok(())
}
