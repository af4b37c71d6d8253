//! What this process may do with RDMA, as the access probe found it on a live root: the verbs
//! device nodes, the locked-memory limit, and whether libibverbs and a provider for every device
//! load (`rdma-access` judges it).

use super::Fact;
use crate::model::ReadError;
use crate::parse::kernel::Limit;

/// The verbs library the probe loads, as the dynamic loader knows it.
pub const SONAME: &str = "libibverbs.so.1";

pub const DEV_INFINIBAND: &str = "/dev/infiniband";
pub const CLASS_VERBS: &str = "/sys/class/infiniband_verbs";

#[derive(Debug)]
pub struct UverbsNode {
    /// `uverbs0`
    pub name: String,
    /// The RDMA device it serves, from `/sys/class/infiniband_verbs/uverbs0/ibdev`.
    pub ibdev: Option<String>,
    /// Opening `/dev/infiniband/uverbs0` read-write.
    pub open: Result<(), ReadError>,
}

#[derive(Debug)]
pub struct Access {
    pub uverbs: Vec<UverbsNode>,
    pub uverbs_error: Option<ReadError>,
    pub rdma_cm: bool,
    pub memlock: Fact<Limit>,
    pub verbs: Verbs,
    /// The rdma-core release and the library file it came from, read off this process's
    /// mappings once libibverbs is loaded: rdma-core names it `libibverbs.so.1.<abi>.<release>.0`.
    pub rdma_core: Option<(u32, String)>,
}

/// What loading libibverbs showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verbs {
    /// `Ok(())` when `libibverbs.so.1` loaded; else the loader's message.
    pub library: Result<(), String>,
    /// The `ibv_reg_dmabuf_mr` symbol (IBVERBS_1.12, rdma-core 34) is exported.
    pub reg_dmabuf_mr: bool,
    /// Devices `ibv_get_device_list` returned (each one has a provider that loaded); `None` when
    /// the list was not asked for.
    pub devices: Option<Result<Vec<String>, ListError>>,
}

/// Why `ibv_get_device_list` returned nothing at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// ENOSYS: libibverbs found no `/sys/class/infiniband_verbs` (ib_uverbs not loaded, or no
    /// RDMA subsystem in this kernel). Seen on a machine without RDMA devices.
    NoVerbsSubsystem,
    Other(String),
}
