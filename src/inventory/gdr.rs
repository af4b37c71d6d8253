//! What the GDR write test found, as the inventory holds it: facts about the node that the test
//! (src/gdr) learned by moving bytes, for the `gdr-test` check and the reports. The test fills
//! these in; nothing here knows how it runs.

// The pair's own types are model types, named here as the inventory has always named them.
use crate::model::Level;
pub use crate::model::gdr::{
    Bandwidth, Failure, FailureKind, Memory, PairResult, PortInfo, Registration,
};
use crate::parse::pci::Bdf;

/// Whether the GDR write test ran, and what it found.
#[derive(Debug, Clone)]
pub enum GdrTest {
    Skipped(String),
    Ran {
        outcomes: Vec<GdrOutcome>,
        not_planned: Vec<NotPlanned>,
    },
}

/// One pair: what was tested, and what its child said (or why it said nothing).
#[derive(Debug, Clone)]
pub struct GdrOutcome {
    pub gpu: Option<Bdf>,
    /// How reports name the GPU (`GPU 0000:3b:00.0 (NVIDIA H100)`) or the buffer (`host memory`).
    pub subject: String,
    /// `mlx5_0 port 1`.
    pub nic: Option<String>,
    /// The RDMA device's name alone (`mlx5_0`), for the fixes' commands.
    pub nic_device: Option<String>,
    pub memory: Memory,
    pub level: Option<Level>,
    pub expected: Option<Expected>,
    /// A software RDMA device (rxe, siw): its bandwidth is the CPU's, not judged.
    pub software: bool,
    pub result: Result<PairResult, String>,
    /// `--deadline` shortened this pair's time limit (or left none): a timeout then says
    /// nothing about the pair.
    pub cut_short: bool,
}

/// The rate a pair should reach, and what limits it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub gbps: f64,
    pub limited_by: String,
}

/// Why there is nothing to run for a GPU.
#[derive(Debug, Clone)]
pub struct NotPlanned {
    pub subject: String,
    pub reason: String,
}
