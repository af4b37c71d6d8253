//! gdrdoctor: is this GPU node ready for GPUDirect RDMA, and if not, what fixes it.
//!
//! Data flows one way: [`root::Root`] (the only file access) -> [`inventory::Inventory`] (typed
//! facts) -> [`checks`] (findings) -> [`report`] (formats). Live and captured roots take the same
//! path, so a capture analysed offline gives the report the node itself would.

// `unsafe` only where an allow below says why: nowhere else can it appear unnoticed.
#![deny(unsafe_code)]

// First: its macros (`out!`, `outln!`, `errln!`) are used by the commands below.
#[macro_use]
pub mod stdio;

pub mod archive;
pub mod capture;
pub mod checks;
pub mod child;
pub mod cli;
pub mod commands;
pub mod config;
pub mod deadline;
pub mod edit;
// Run-time loaded libraries (libibverbs, CUDA, HIP, NCCL, NVML): calls across the C ABI, each
// `unsafe` block with its `// SAFETY:` line.
#[allow(unsafe_code)]
pub mod ffi;
pub mod fixscript;
pub mod fleet;
pub mod gdr;
pub mod input;
pub mod inventory;
pub mod jobs;
pub mod model;
pub mod nccl;
pub mod output;
pub mod parse;
pub mod placement;
pub mod probe;
pub mod report;
pub mod root;
pub mod sanitize;
// The system calls the standard library lacks (fcntl, prctl, _exit, malloc_trim, getrandom,
// a netlink socket, the ethtool ioctl), each behind a safe function.
#[allow(unsafe_code)]
pub mod sys;
pub mod trace;

/// The fixtures for the unit tests: the same helper the integration tests use (the synthetic
/// fixtures are generated into the build directory, not committed).
#[cfg(test)]
#[path = "../tests/common/fixtures.rs"]
pub(crate) mod test_fixtures;
