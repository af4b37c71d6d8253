//! `pcie-link`: every GPU and NIC trained its PCIe link at its maximum speed and width.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::pci::PciFunction;
use crate::inventory::{Fact, Inventory};
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::pci::{Bdf, express};

pub struct PcieLink;

const FULL: Code = Code {
    id: "pcie-link-full",
    summary: "the link runs at its maximum speed and width",
};

const NARROW: Code = Code {
    id: "pcie-link-narrow",
    summary: "the link trained narrower than its maximum (x8 of x16): half the bandwidth or less",
};

const SLOW: Code = Code {
    id: "pcie-link-slow",
    summary: "the link runs below its maximum speed (a GPU may do this while idle)",
};

const UNKNOWN: Code = Code {
    id: "pcie-link-unknown",
    summary: "the link's current or maximum state could not be read",
};

const NO_DEVICES: Code = Code {
    id: "pcie-link-no-devices",
    summary: "no GPU or NIC PCI function to judge",
};

const CODES: &[Code] = &[FULL, NARROW, SLOW, UNKNOWN, NO_DEVICES];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(FULL, Action::None),
    Rule::new(NARROW, Action::ReplacePart),
    Rule::new(SLOW, Action::ReplacePart),
    Rule::new(UNKNOWN, Action::None),
    Rule::new(NO_DEVICES, Action::None),
];

const META: Meta = Meta {
    id: "pcie-link",
    title: "GPU and NIC PCIe links at full speed and width",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/pcie-link/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for PcieLink {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let mut devices: Vec<(Bdf, String, bool)> = inv
            .gpus
            .iter()
            .map(|g| (g.bdf, g.subject(), true))
            .collect();
        for d in &inv.rdma {
            if let Some(b) = d.pci.filter(|b| !devices.iter().any(|(x, _, _)| x == b)) {
                devices.push((b, format!("{} ({b})", d.name), false));
            }
        }
        if devices.is_empty() {
            return vec![
                Finding::skip(
                    NO_DEVICES,
                    "node",
                    "no GPU or RDMA NIC (see gpu-driver, rdma-link)",
                )
                .evidence(crate::inventory::pci::PCI_DEVICES, "no GPU or NIC")
                .prerequisites(&["gpu-driver", "rdma-link"]),
            ];
        }
        devices
            .iter()
            .flat_map(|(b, subject, gpu)| judge(inv, *b, subject, *gpu))
            .collect()
    }
}

/// Speed (GT/s) and width: the sysfs attributes, or the PCI Express capability's registers when
/// the attributes are missing (older kernels, some captures).
struct Side {
    speed: Option<f64>,
    width: Option<u32>,
    evidence: Vec<Evidence>,
}

fn side(
    speed: &Fact<f64>,
    width: &Fact<u32>,
    from_config: Option<crate::parse::pci::LinkState>,
    config_path: &str,
) -> Side {
    let mut evidence = vec![speed.evidence(), width.evidence()];
    let (mut s, mut w) = (speed.value().copied(), width.value().copied());
    if let (None, Some(c)) = (s, from_config) {
        s = c.speed_gts;
        evidence.push(Evidence {
            path: config_path.to_owned(),
            value: format!(
                "PCI Express capability: {} GT/s",
                c.speed_gts.map(|x| x.to_string()).unwrap_or("?".into())
            ),
        });
    }
    if let (None, Some(c)) = (w, from_config) {
        w = Some(c.width);
        evidence.push(Evidence {
            path: config_path.to_owned(),
            value: format!("PCI Express capability: x{}", c.width),
        });
    }
    Side {
        speed: s,
        width: w.filter(|w| *w > 0),
        evidence,
    }
}

fn judge(inv: &Inventory, b: Bdf, subject: &str, gpu: bool) -> Vec<Finding> {
    let Some((f, d)) = inv
        .function(b)
        .and_then(|f: &PciFunction| Some((f, f.detail.as_ref()?)))
    else {
        return vec![
            Finding::unknown(UNKNOWN, subject.to_owned(), "not in the inventory")
                .evidence(crate::inventory::pci::PCI_DEVICES, format!("<{b}>")),
        ];
    };
    // The link attribute files come from config reads too; beside a config space of all
    // ones they are stale or contradictory, never a full link.
    if let Some(dead) = f.not_responding() {
        return vec![
            Finding::unknown(
                UNKNOWN,
                subject.to_owned(),
                format!("{}'s config space reads all ones (vendor ID 0xffff): it does not answer on the PCIe bus, so its link state cannot be judged (see {})", f.bdf, if gpu { "gpu" } else { "rdma-link" }),
            )
            .with(dead),
        ];
    }
    let e = express(d.config_bytes());
    let now = side(
        &d.link.current_speed,
        &d.link.current_width,
        e.and_then(|e| e.link_now),
        &d.config_path,
    );
    let max = side(
        &d.link.max_speed,
        &d.link.max_width,
        e.and_then(|e| e.link_max),
        &d.config_path,
    );
    let mut evidence = now.evidence;
    evidence.extend(max.evidence);
    evidence.dedup();
    let (Some(cs), Some(cw), Some(ms), Some(mw)) = (now.speed, now.width, max.speed, max.width)
    else {
        return vec![
            Finding::unknown(
                UNKNOWN,
                subject.to_owned(),
                format!("cannot read {}'s link state", f.bdf),
            )
            .with(evidence),
        ];
    };
    let mut out = Vec::new();
    if cw < mw {
        out.push(
            Finding::warn(NARROW, subject.to_owned(), format!("trained x{cw} of x{mw} ({cs} GT/s): at most {}% of the link's bandwidth, for GDR and everything else", cw * 100 / mw))
                .with(evidence.clone())
                .fix(
                    Fix::new("Reseat the card, check the riser and slot (a x16 card in a x8 slot, a damaged lane), then compare with lspci", "Reseating needs the node drained and powered off.")
                        .manual(format!("lspci -vv -s {} | grep -E 'LnkCap|LnkSta'", f.bdf)),
                ),
        );
    }
    if cs < ms {
        let idle = if gpu {
            "; GPUs lower their link speed when idle, so check again under load (nvidia-smi -q -d PCIE)"
        } else {
            ""
        };
        out.push(
            Finding::warn(SLOW, subject.to_owned(), format!("runs at {cs} GT/s of {ms} GT/s (x{cw}){idle}"))
                .with(evidence.clone())
                .fix(
                    Fix::new("Find why the link trained below its speed: BIOS link speed setting, riser or retimer, the slot's generation", "Read-only commands; a BIOS change needs a reboot.")
                        .manual(format!("lspci -vv -s {} | grep -E 'LnkCap|LnkSta'", f.bdf)),
                ),
        );
    }
    if out.is_empty() {
        out.push(
            Finding::pass(
                FULL,
                subject.to_owned(),
                format!("{cs} GT/s x{cw}, its maximum"),
            )
            .with(evidence),
        );
    }
    out
}
