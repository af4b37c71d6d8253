//! The GDR write test's outcomes are model data now (crate::model::gdr); these names stay for
//! the callers not yet moved.

pub use crate::model::gdr::{
    Bandwidth, Expected, Failure, FailureKind, GdrOutcome, GdrTest, Memory, NotPlanned, PairResult,
    PortInfo, Registration,
};
