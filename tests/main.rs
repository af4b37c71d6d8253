//! The integration tests: one test binary (`autotests = false` in Cargo.toml), one module per
//! topic, as ripgrep lays its tests out. One binary links the crate and the dev-dependencies
//! once instead of once per file, and the helpers in `common/` (the fixtures, the command
//! builder) are compiled once and shared, including the caches they keep for the whole run (the
//! generated fixtures, the stand-in libraries).
//!
//! A new topic is a file `tests/<topic>.rs` and a `mod <topic>;` line here. Its snapshots are
//! `tests/snapshots/integration__<topic>__<name>.snap` (insta names them after the module path).

mod common;

mod broken;
mod capture;
mod cli;
mod cloud;
mod codes;
mod fixes;
mod fixscript;
mod fixtures;
mod fleet;
mod formats;
mod gdr_test;
mod gdr_test_efa;
mod gpu_runtime;
mod grace;
mod grace_acs;
mod hostile;
mod hostile_inputs;
mod hostile_peers;
mod hostile_recent;
mod io;
mod jobs;
mod kernel_log;
mod layers;
mod link_health;
mod nccl_explain;
mod nccl_transport;
mod nccl_verify;
mod nccl_view;
mod open_modules;
mod pciutils;
mod qos;
mod rdma_access;
mod roce_lossless;
mod span;
mod topo;
mod topo_picture;
mod twonode;
mod variants;
mod verbs_layout;
mod verdict;
