//! The few system calls the standard library does not offer, each behind a safe function:
//! descriptor flags (`fd`), a child's death with its parent and an exit without teardown
//! (`process`), the C allocator's trim (`malloc`), getrandom(2) (`random`), one rtnetlink
//! request and its reply (`netlink`), the ethtool ioctl (`ethtool`); and the kernel's path
//! limits. With `ffi/`, the only code allowed `unsafe` (see the crate root). It imports
//! nothing of the crate, so the I/O plumbing at the bottom of the house (`child`, `input`,
//! `output`, `stdio`, `archive`, `root`) can use it.

pub mod dir;
pub mod ethtool;
pub mod fd;
pub mod malloc;
pub mod netlink;
pub mod process;
pub mod random;

/// Linux's PATH_MAX and NAME_MAX (include/uapi/linux/limits.h): the longest path or link target
/// one lookup takes, and the longest component. Both the reads of a node (`root`) and the
/// members of a capture archive (`archive`) are held to them.
pub const PATH_MAX: usize = 4096;
pub const NAME_MAX: usize = 255;
