//! The few system calls the standard library does not offer, each behind a safe function:
//! descriptor flags (`fd`), a child's death with its parent and an exit without teardown
//! (`process`), the C allocator's trim (`malloc`), and getrandom(2) (`random`). With `ffi/`,
//! the only code allowed `unsafe` (see the crate root); it imports nothing of the crate, so the
//! I/O plumbing at the bottom of the house (`child`, `input`, `output`, `stdio`, `archive`) can
//! use it.

pub mod fd;
pub mod malloc;
pub mod process;
pub mod random;
