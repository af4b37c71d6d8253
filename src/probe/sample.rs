//! The sample window (`check --sample SECONDS`): the link-health counters read again once the
//! window has passed since the inventory read them, so growth says what happens now, not what
//! happened since the driver loaded. The runs between the two readings (the GPU probe, the
//! write test) count toward the window; the wait is the only sleep, and `--deadline` bounds it.

use crate::deadline::Deadline;
use crate::inventory::Inventory;
use crate::inventory::pci::read_aer;
use crate::inventory::rdma::read_counters;
use crate::model::health::Sample;
use crate::root::Root;
use std::time::{Duration, Instant};

/// Waits until `window` has passed since `read_at` (the inventory's reading), within what
/// `deadline` leaves, and reads every port's counters and every detailed PCI function's AER
/// tables again.
pub fn take(
    root: &Root,
    inv: &Inventory,
    read_at: Instant,
    window: Duration,
    deadline: &Deadline,
) -> Sample {
    let wait = window.saturating_sub(read_at.elapsed());
    let budget = deadline.budget(wait);
    std::thread::sleep(budget.limit);
    let ports = inv
        .rdma
        .iter()
        .flat_map(|d| {
            d.ports.iter().map(|p| {
                let netdev = p.netdev.as_ref().map(|n| n.name.as_str());
                (d.name.clone(), p.num, read_counters(root, &p.dir, netdev))
            })
        })
        .collect();
    let aer = inv
        .pci
        .values()
        .filter(|f| f.detail.is_some())
        .map(|f| (f.bdf, read_aer(root, &f.path)))
        .collect();
    Sample {
        seconds: read_at.elapsed().as_secs_f64(),
        cut: budget.cut,
        ports,
        aer,
    }
}
