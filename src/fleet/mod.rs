//! `gdrdoctor fleet CAPTURE...`: many captures, one view. Each capture is checked as
//! `check --root` would (in parallel, in memory for `.tar.gz` ones); the result per node is
//! written out as it comes, in the order given, and only small per-model tallies are kept, so
//! memory grows with the number of captures only by their list ([`Captures`]: a name and 16
//! bytes each). What no single report can say comes from the
//! tallies: nodes of one model that differ from their siblings (GID index, RoCE version, driver,
//! firmware, kernel, placement, peermem).
//!
//! [`expand`] turns the arguments into inputs, [`run`] analyses the captures ([`analyse`]) on
//! worker threads and hands each result on in order, [`Tally`] keeps the totals, [`render`]
//! writes the report, [`two_node`] reads and judges the two-node test's reports among them.

mod analyse;
mod expand;
mod pictures;
mod render;
mod run;
mod tally;
pub mod two_node;

pub use analyse::analyse;
pub use expand::{Captures, expand};
pub use pictures::{PictureWriter, Pictures, slug};
pub use render::{CSV_HEADER, write_header, write_node, write_summary};
pub use run::run;
pub use tally::{CrossFinding, Seen, Tally};

use crate::model::Status;
use serde::Serialize;
use std::collections::BTreeMap;

/// One node, as the fleet view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    pub capture: String,
    pub hostname: Option<String>,
    pub product: Option<String>,
    pub board: Option<String>,
    pub kernel: Option<String>,
    /// The GPU driver: `nvidia 580.159.04 (open)`, `amdgpu`.
    pub gpu_driver: Option<String>,
    /// NIC firmware versions, distinct, sorted (`mlx5 28.39.1002`).
    pub nic_firmware: Vec<String>,
    pub gpus: usize,
    pub rdma_devices: usize,
    pub ready: bool,
    pub exit_code: u8,
    /// The checks that make it not ready, with their codes: `acs (acs-redirect-on-path)`.
    pub blocking: Vec<String>,
    /// Every warning, failure and unknown: code -> status.
    pub problems: BTreeMap<String, Status>,
    /// The RoCE v2 GID indices its RoCE ports use (`3`), `none` where a port has none.
    pub gid_indices: Vec<String>,
    /// `v2`, `v1-only`, `none` (no RoCE v2 GID on some RoCE port), or null without RoCE.
    pub roce: Option<String>,
    /// The GPU x NIC levels, row by row (`PIX PIX NODE ...|...`): equal placement, equal string.
    pub placement: Option<String>,
    /// `registered`, `loaded-unregistered`, `absent`.
    pub peermem: String,
    /// The settings NCCL reads on the node that change GPUDirect RDMA, effective values only
    /// (`NCCL_IB_HCA` -> `=mlx5_0`); `NCCL_TOPO_FILE` with its content's digest, so that two
    /// files of one name but different content differ. The GID index is compared as
    /// `gid_indices`, where a pin counts (issue 16).
    pub nccl: BTreeMap<String, String>,
    /// The path the peer-memory check found: `dmabuf`, `peermem`, `none`, `unknown`.
    pub gdr_path: String,
    /// The QoS of the RoCE ports NCCL uses (`trust dscp, PFC on 3`), each distinct one; null
    /// without a RoCE port (issue 28).
    pub roce_qos: Option<String>,
    /// The RDMA ports whose link counters grew in the capture's recorded sample window
    /// (`capture --sample`), worst first; empty without a second reading.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkGrowth>,
    /// The picture of its PCIe tree (`topo --format svg`), when `--pictures` asked for it and
    /// this capture may be the first of its model (see `Pictures`). Not part of the JSON.
    #[serde(skip)]
    pub picture: Option<String>,
}

/// An RDMA port whose counters grew in a node's sample window: what the fleet ranks by.
#[derive(Debug, Clone, Serialize)]
pub struct LinkGrowth {
    /// `mlx5_2 port 1`.
    pub port: String,
    /// What the worst counter that grew says: `flaps`, `errors`, `retries`.
    pub kind: &'static str,
    /// The growth of every counter that grew, summed.
    pub grew: u64,
    /// `link_downed +2, carrier_changes +4`.
    pub counters: String,
    /// The window's length, in seconds.
    pub seconds: f64,
}

impl LinkGrowth {
    /// Worst first: flaps before errors before retries, then the most growth.
    pub fn rank(&self) -> (u8, std::cmp::Reverse<u64>) {
        let kind = match self.kind {
            "flaps" => 0,
            "errors" => 1,
            _ => 2,
        };
        (kind, std::cmp::Reverse(self.grew))
    }
}

/// The model a node is grouped by: its DMI product name.
fn model_of(product: Option<&str>) -> String {
    product.unwrap_or("(model unknown)").to_owned()
}

/// A capture that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    pub capture: String,
    pub reason: String,
}
