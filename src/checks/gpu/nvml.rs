//! What NVML says of an NVIDIA GPU beyond its being there, for nodes whose GPUs work together:
//! persistence mode, its NVLinks against those of the other GPUs of its model, and the NVLink
//! fabric of NVSwitch systems (issue 24). Judged from NVML's answer, live or as `capture`
//! recorded it, so a capture gives the same findings as the node.

use crate::inventory::{Gpu, Inventory};
use crate::model::gpu::{FabricState, Nvml, NvmlDevice};
use crate::model::{Evidence, Finding, Fix, FixClass};

/// Adds what the GPU's NVML record says to its facts (when fine) or its problems.
pub(super) fn judge(
    inv: &Inventory,
    g: &Gpu,
    nvml: &Nvml,
    d: &NvmlDevice,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let lib = nvml.library.as_str();
    match d.persistence_mode {
        Some(true) => facts.push("persistence on".into()),
        Some(false) => problems.push(
            Finding::warn(
                super::PERSISTENCE_OFF,
                g.subject(),
                "persistence mode is off: whenever no process holds the GPU, the driver tears its state down, and each CUDA start (every job, every prolog that touches the GPU) initialises it again, which adds a second or more per GPU to job start",
            )
            .evidence(lib, format!("nvmlDeviceGetPersistenceMode (device {}): Disabled", d.index))
            .fix(persistence_fix()),
        ),
        None => {}
    }
    nvlinks(g, nvml, d, facts, evidence, problems);
    c2c(g, lib, d, facts, problems);
    fabric(inv, g, lib, d, facts, evidence, problems);
}

/// NVLink-C2C (Grace superchips), as NCCL reads it from NVML: every link up is a fact; some
/// down halves the GPU's bandwidth to its CPU (a warning); none up and NCCL builds no C2C link
/// for the GPU (src/graph/xml.cc: a `c2c` node only with a link whose status is 1), so the NICs
/// of its CPU are reached over PCIe, PHB to NCCL: no GPUDirect RDMA at its default level (a
/// failure; pcie-placement judges the pair by the PCIe rule then).
fn c2c(g: &Gpu, lib: &str, d: &NvmlDevice, facts: &mut Vec<String>, problems: &mut Vec<Finding>) {
    let Some(c) = d.c2c.filter(|c| c.links > 0) else {
        return;
    };
    let shown = format!(
        "nvmlDeviceGetFieldValues (device {}): C2C_LINK_COUNT {}, {} with C2C_LINK_GET_STATUS 1{}",
        d.index,
        c.links,
        c.active,
        c.max_bw
            .map(|b| format!(", C2C_LINK_GET_MAX_BW {b} MB/s"))
            .unwrap_or_default()
    );
    if c.active == c.links {
        facts.push(format!("{} NVLink-C2C links up", c.links));
        return;
    }
    let fix = Fix::new(
        "Find out why the C2C links are down: a superchip's C2C is on the board, so this is the GPU's or the board's fault (the driver's log, NVIDIA's field diagnostics), not a setting",
        "Read-only commands; a GPU whose C2C links are down needs its node drained for service.",
    )
    .manual("nvidia-smi c2c -s")
    .manual("dmesg | grep -i -e NVRM -e c2c");
    let f = if c.active == 0 {
        Finding::fail(
            super::C2C_DOWN,
            g.subject(),
            format!(
                "none of its {} NVLink-C2C links to its CPU is up: NCCL joins it to the CPU over PCIe only, and the NICs of that CPU are then PHB to NCCL, beyond its default level: no GPUDirect RDMA over C2C",
                c.links
            ),
        )
    } else {
        Finding::warn(
            super::C2C_DOWN,
            g.subject(),
            format!(
                "{} of its {} NVLink-C2C links to its CPU are up: the GPU's bandwidth to its CPU, and to the NICs NCCL reaches over C2C, is cut to {} of {}",
                c.active, c.links, c.active, c.links
            ),
        )
    };
    problems.push(f.evidence(lib, shown).fix(fix));
}

/// Active and inactive NVLinks, against the most any other GPU of the same model has active.
/// A GPU whose model has none active anywhere (PCIe cards, a lone GPU) is not judged.
fn nvlinks(
    g: &Gpu,
    nvml: &Nvml,
    d: &NvmlDevice,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let active: Vec<u32> = d.nvlinks.iter().map(|l| l.link).collect();
    let peers: Vec<&NvmlDevice> = nvml
        .devices
        .iter()
        .filter(|p| p.index != d.index && d.name.is_some() && p.name == d.name)
        .collect();
    let most = peers.iter().map(|p| p.nvlinks.len()).max().unwrap_or(0);
    if active.is_empty() && most == 0 {
        return;
    }
    let model = d.name.as_deref().unwrap_or("GPU");
    let shown = format!(
        "nvmlDeviceGetNvLinkState (device {}): {} active ({}){}{}",
        d.index,
        active.len(),
        ranges(&active),
        if d.nvlinks_down.is_empty() {
            String::new()
        } else {
            format!(", not active: {}", ranges(&d.nvlinks_down))
        },
        if peers.is_empty() {
            String::new()
        } else {
            format!(
                "; the other {model}s: {} active",
                peers
                    .iter()
                    .map(|p| p.nvlinks.len().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    // Only fewer active links than another GPU of its model is a fault. Links that are not
    // active on every GPU of a model alike are how the system is built (an H100 NVL pair's
    // bridges use 12 of its 18 links), and a lone GPU has nothing to be compared with.
    let fewer = active.len() < most;
    if !fewer {
        facts.push(if d.nvlinks_down.is_empty() {
            format!("{} NVLinks up", active.len())
        } else {
            format!(
                "{} NVLinks up ({} not active, {})",
                active.len(),
                d.nvlinks_down.len(),
                if peers.is_empty() {
                    "no other GPU of its model to compare with"
                } else {
                    "no more than on the other GPUs of its model"
                }
            )
        });
        evidence.push(Evidence {
            path: nvml.library.clone(),
            value: shown,
        });
        return;
    }
    let mut what = Vec::new();
    if !d.nvlinks_down.is_empty() {
        what.push(format!(
            "NVLink{} {} {} not active",
            if d.nvlinks_down.len() == 1 { "" } else { "s" },
            ranges(&d.nvlinks_down),
            if d.nvlinks_down.len() == 1 {
                "is"
            } else {
                "are"
            },
        ));
    }
    what.push(format!(
        "{} active where the other {model}s have up to {most}",
        active.len()
    ));
    let message = if active.is_empty() {
        format!(
            "{}: none of its NVLinks is up, so NCCL reaches the other GPUs over PCIe (or, on an NVSwitch system, hangs waiting for the fabric); a PCIe card whose NVLink bridge is missing while the others have theirs shows the same",
            what.join("; ")
        )
    } else {
        format!(
            "{}: NCCL uses the links that are up, so every collective this GPU takes part in runs at its lower NVLink bandwidth ({} of {} links)",
            what.join("; "),
            active.len(),
            most.max(active.len() + d.nvlinks_down.len())
        )
    };
    problems.push(
        Finding::warn(super::NVLINK_DOWN, g.subject(), message)
            .evidence(nvml.library.as_str(), shown)
            .fix(nvlink_fix(g)),
    );
}

fn fabric(
    inv: &Inventory,
    g: &Gpu,
    lib: &str,
    d: &NvmlDevice,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let Some(f) = &d.fabric else { return };
    let shown = format!(
        "{} (device {}): state {}, status {}",
        f.call,
        d.index,
        f.state.as_smi(),
        f.status
    );
    let message = match f.state {
        // Not part of a fabric (no NVSwitch), or a state this gdrdoctor does not know.
        FabricState::NotSupported | FabricState::Unknown => return,
        FabricState::Completed if f.status == "NVML_SUCCESS" => {
            facts.push("fabric Completed".into());
            evidence.push(Evidence {
                path: lib.to_owned(),
                value: shown,
            });
            return;
        }
        FabricState::Completed => format!(
            "its NVLink fabric registration completed with {}: Fabric Manager could not set this GPU up with the NVSwitches, so NCCL cannot use NVLink to reach the other GPUs (it hangs at init or falls back to a slower path)",
            f.status
        ),
        FabricState::NotStarted | FabricState::InProgress => format!(
            "NVML's fabric state is {}: Fabric Manager has not finished registering this GPU with the NVSwitches, and until it has, CUDA has no NVLink peer access: NCCL hangs at init or falls back to a slower path (right after boot this takes up to a minute or two: check again)",
            f.state.as_smi()
        ),
    };
    problems.push(
        Finding::fail(super::FABRIC_NOT_READY, g.subject(), message)
            .evidence(lib, shown)
            .fix(fabric_fix(inv.virtual_pci.is_some())),
    );
}

/// `0-5, 8-17`: link numbers as ranges.
fn ranges(links: &[u32]) -> String {
    let mut sorted = links.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

fn persistence_fix() -> Fix {
    Fix::new(
        "Keep the driver initialised with no process on the GPUs: turn persistence mode on now, and run nvidia-persistenced (NVIDIA's supported way) at every boot",
        "Persistence mode changes nothing a job sees; it keeps each GPU's driver state (and a few MiB of host memory) between jobs.",
    )
    .guarded(
        FixClass::Runtime,
        "nvidia-smi -pm 1",
        "[ \"$(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | sort -u)\" = Enabled ]",
    )
    .guarded(
        FixClass::Persistent,
        "systemctl enable --now nvidia-persistenced",
        // Enabled is not enough: a unit that runs --no-persistence-mode keeps it off.
        "systemctl is-enabled --quiet nvidia-persistenced && [ \"$(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader | sort -u)\" = Enabled ]",
    )
    .manual("# a unit that runs nvidia-persistenced --no-persistence-mode keeps persistence off: remove the flag (systemctl edit nvidia-persistenced)")
}

fn nvlink_fix(g: &Gpu) -> Fix {
    let gpu = g.bdf;
    Fix::new(
        "See which links are down and whether they count errors; reset the GPU so that its links train again; links that stay down after a reset and a reboot need the GPU or its baseboard serviced (RMA)",
        "The nvidia-smi queries only read; a GPU reset needs every process on that GPU stopped (drain the node first), and on an NVSwitch system Fabric Manager must register the GPU again afterwards.",
    )
    .manual(format!("nvidia-smi nvlink -s -i {gpu}   # each link's state and speed"))
    .manual(format!(
        "nvidia-smi nvlink -e -i {gpu}   # each link's error counters (replay, recovery, CRC)"
    ))
    .manual("dmesg | grep -i -E 'nvlink|xid' | tail -30")
    .disruptive(format!(
        "nvidia-smi -r -i {gpu}   # reset this GPU: its links train again (no process may use it)"
    ))
    .manual("nvidia-bug-report.sh   # for the vendor, when links stay down after a reset and a reboot")
}

fn fabric_fix(in_vm: bool) -> Fix {
    if in_vm {
        return Fix::new(
            "These GPUs are passed through to a VM and share the host's NVSwitches: the host's Fabric Manager registers them. Wait for it (right after the VM starts), then ask the provider, or on your own hypervisor check nvidia-fabricmanager there",
            "Nothing here changes the guest.",
        )
        .manual("nvidia-smi -q | grep -A4 Fabric   # State Completed, Status Success on every GPU")
        .manual("systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager -b | tail -50   # on the host");
    }
    Fix::new(
        "Start Fabric Manager (nvidia-fabricmanager, of the same version as the driver) and let it finish; its log says why a GPU was not registered. Blackwell NVL systems also need the NVLink subnet manager (nvlsm) and, across nodes, nvidia-imex",
        "Starting Fabric Manager disturbs no running job; a GPU it failed to register may need a reset or a reboot, which does.",
    )
    .guarded(
        FixClass::Runtime,
        "systemctl start nvidia-fabricmanager",
        "systemctl is-active --quiet nvidia-fabricmanager",
    )
    .guarded(
        FixClass::Persistent,
        "systemctl enable nvidia-fabricmanager",
        "systemctl is-enabled --quiet nvidia-fabricmanager",
    )
    .manual("systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager -b | tail -50")
    .manual("nvidia-smi -q | grep -A4 Fabric   # State Completed, Status Success on every GPU")
    .manual("systemctl status nvlsm nvidia-imex   # Blackwell NVL systems")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_numbers_as_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 4, 5, 8, 9, 10, 17]), "0-5, 8-10, 17");
        assert_eq!(ranges(&[7, 6]), "6-7");
        assert_eq!(ranges(&[3]), "3");
        assert_eq!(ranges(&[]), "none");
    }
}
