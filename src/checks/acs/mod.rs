//! `acs`: no bridge on the PCIe path between a GPU and its nearest NIC redirects peer-to-peer
//! traffic up to the root complex (ACS Request/Completion Redirect, Egress Control). The pairs
//! are those NCCL uses, as `pcie-placement` judges them (`effective::judge`: among the NICs
//! NCCL_IB_HCA selects, nearest on NCCL's tree); the bridges are those of their sysfs paths.

mod data_direct;
mod fix;
mod grace;

use super::Rule;
use super::{Check, Context, Meta, sh};
use crate::inventory::Inventory;
use crate::inventory::pci::PciDetail;
use crate::model::Action;
use crate::model::{Code, Finding, Fix};
use crate::parse::pci::{self as pp, Bdf, acs, acs_flags, extended_readable};
use std::collections::BTreeMap;

pub struct Acs;

const CLEAR: Code = Code {
    id: "acs-clear",
    summary: "the bridge has ACS but no redirect or egress control enabled",
};

const ABSENT: Code = Code {
    id: "acs-absent",
    summary: "the bridge has no ACS capability: nothing redirects",
};

const REDIRECT_ON_PATH: Code = Code {
    id: "acs-redirect-on-path",
    summary: "a bridge between a GPU and its NIC redirects peer-to-peer traffic to the root complex",
};

const UNKNOWN: Code = Code {
    id: "acs-unknown",
    summary: "the bridge's ACS state could not be read (extended config space needs root)",
};

const BRIDGE_NOT_RESPONDING: Code = Code {
    id: "acs-bridge-not-responding",
    summary: "the bridge's config space reads all ones (vendor ID 0xffff): it does not answer, so its ACS state cannot be read",
};

const NO_PATH: Code = Code {
    id: "acs-no-path",
    summary: "no GPU-NIC pair, or no bridge between them, so no ACS to judge",
};

const CODES: &[Code] = &[
    CLEAR,
    ABSENT,
    REDIRECT_ON_PATH,
    UNKNOWN,
    BRIDGE_NOT_RESPONDING,
    NO_PATH,
    grace::AS_REQUIRED,
    grace::NOT_AS_REQUIRED,
    grace::UNRECOGNISED,
    grace::GROUPS_AS_REQUIRED,
    grace::DMA_GPU_GROUPS_DIFFER,
    grace::NUMA_GROUP_SHARED,
    grace::GROUP_MISSING,
    grace::ATS_OFF,
    grace::ATS_ON,
    data_direct::FOUND,
    data_direct::OFF,
    data_direct::NO_LIBMLX5,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(CLEAR, Action::None),
    Rule::new(ABSENT, Action::None),
    Rule::new(REDIRECT_ON_PATH, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(UNKNOWN, Action::None),
    Rule::new(BRIDGE_NOT_RESPONDING, Action::Reboot).in_vm(Action::Provider),
    Rule::new(NO_PATH, Action::None),
    Rule::new(grace::AS_REQUIRED, Action::None),
    Rule::new(grace::NOT_AS_REQUIRED, Action::Reboot).in_vm(Action::Provider),
    Rule::new(grace::UNRECOGNISED, Action::None),
    Rule::new(grace::GROUPS_AS_REQUIRED, Action::None),
    Rule::new(grace::DMA_GPU_GROUPS_DIFFER, Action::Reboot).in_vm(Action::Provider),
    Rule::new(grace::NUMA_GROUP_SHARED, Action::Reboot).in_vm(Action::Provider),
    Rule::new(grace::GROUP_MISSING, Action::Reboot).in_vm(Action::Provider),
    Rule::new(grace::ATS_OFF, Action::None),
    Rule::new(grace::ATS_ON, Action::Reboot).in_vm(Action::Provider),
    Rule::new(data_direct::FOUND, Action::None),
    Rule::new(data_direct::OFF, Action::FixInPlace),
    Rule::new(data_direct::NO_LIBMLX5, Action::FixInPlace),
];

const META: Meta = Meta {
    id: "acs",
    title: "No ACS redirect on the GPU-NIC paths",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/acs/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for Acs {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn summary(&self, cx: &Context, passed: &[&Finding]) -> String {
        match &cx.inv.grace {
            Some(g) => grace::summary(g, passed),
            None => super::summarize(passed),
        }
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        // A Grace or Vera system is judged as rdma-core's rdma_topo models it: its ports against
        // the values NVIDIA requires, not against "no redirect" (which would clear the isolation
        // and the Data Direct setup NVIDIA's platform needs).
        if let Some(g) = &inv.grace {
            return grace::run(inv, g);
        }
        // Bridge -> the GPU-NIC pairs whose path crosses it.
        let mut bridges: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
        let judged = crate::nccl::effective::judge(inv, cx.config);
        for (gpu, nic, r) in judged.paths() {
            for b in &r.bridges {
                bridges
                    .entry(*b)
                    .or_default()
                    .push(format!("GPU {gpu} - {}", inv.rdma[nic].name));
            }
        }
        if bridges.is_empty() {
            let paired = judged.paths().next().is_some();
            let (message, prerequisites): (&str, &[&'static str]) = if paired {
                ("no bridge between any GPU and its nearest NIC", &[])
            } else {
                (
                    "no GPU-NIC pair to look between (see pcie-placement)",
                    &["pcie-placement"],
                )
            };
            return vec![
                Finding::skip(NO_PATH, "node", message)
                    .evidence(
                        crate::inventory::pci::PCI_DEVICES,
                        format!("{} GPUs, {} RDMA devices", inv.gpus.len(), inv.rdma.len()),
                    )
                    .prerequisites(prerequisites),
            ];
        }
        let redirecting: Vec<Bdf> = bridges
            .keys()
            .copied()
            .filter(|b| redirecting(inv, *b).is_some())
            .collect();
        let judged: Vec<Finding> = bridges
            .iter()
            .map(|(b, pairs)| judge(inv, *b, pairs, &redirecting))
            .collect();
        // Problems one by one; the bridges that are fine, one line per kind of fine.
        let (fine, mut out): (Vec<Finding>, Vec<Finding>) = judged
            .into_iter()
            .partition(|f| f.status == crate::model::Status::Pass);
        for code in [CLEAR, ABSENT] {
            let group: Vec<&Finding> = fine.iter().filter(|f| f.code == code.id).collect();
            if group.is_empty() {
                continue;
            }
            let names: Vec<&str> = group
                .iter()
                .map(|f| f.subject.trim_start_matches("bridge "))
                .collect();
            let what = if code == CLEAR {
                "ACS present, no redirect"
            } else {
                "no ACS capability"
            };
            out.push(
                Finding::pass(
                    code,
                    "GPU-NIC paths",
                    format!(
                        "{} bridge{} ({}): {what}",
                        names.len(),
                        if names.len() == 1 { "" } else { "s" },
                        names.join(", ")
                    ),
                )
                .with(group.iter().flat_map(|f| f.evidence.iter().cloned())),
            );
        }
        out
    }
}

fn state(inv: &Inventory, b: Bdf) -> Option<crate::parse::pci::Acs> {
    acs(inv.function(b)?.detail.as_ref()?.config_bytes())
}

/// The bridge's ACS capability when it redirects peer-to-peer traffic, as this check judges
/// it (on a GPU-NIC path, `acs-redirect-on-path`); `None` when it does not, or when its state is
/// unknown. The pictures of the tree (`topo --format svg|dot`) mark bridges with it. A port of
/// a Grace or Vera system is never one: its redirect bits are what NVIDIA requires there
/// (rdma_topo's values, judged by the check against them), not a fault to draw.
pub fn redirecting(inv: &Inventory, b: Bdf) -> Option<crate::parse::pci::Acs> {
    if inv.grace.as_ref().is_some_and(|g| g.port(b).is_some()) {
        return None;
    }
    state(inv, b).filter(|s| s.redirects())
}

/// The redirecting bits set in an ACS Control value, by lspci's names.
/// ReqRedir, CmpltRedir and EgressCtrl: the ACS control bits that send peer-to-peer traffic
/// up to the root complex.
pub const REDIRECT_MASK: u16 = (1 << 2) | (1 << 3) | (1 << 5);

pub fn redirect_bits(control: u16) -> Vec<&'static str> {
    ["ReqRedir", "CmpltRedir", "EgressCtrl"]
        .into_iter()
        .zip([2, 3, 5])
        .filter(|(_, bit)| control & (1 << bit) != 0)
        .map(|(n, _)| n)
        .collect()
}

/// A bridge's ACS as read: its capability, none, or why it cannot be judged (a finding on
/// `subject`, its message opened by `context`: what the bridge is to the check).
pub(super) enum Read<'a> {
    Acs(pp::Acs, &'a PciDetail),
    Absent(&'a PciDetail),
    Cannot(Finding),
}

pub(super) fn read<'a>(inv: &'a Inventory, b: Bdf, subject: &str, context: &str) -> Read<'a> {
    let Some(d) = inv.function(b).and_then(|f| f.detail.as_ref()) else {
        return Read::Cannot(
            Finding::unknown(UNKNOWN, subject, format!("{context}: not in the inventory"))
                .evidence(
                    crate::inventory::pci::PCI_DEVICES,
                    format!("<{b} unidentified>"),
                ),
        );
    };
    // All ones is what a read of a bridge that does not answer returns: no ACS capability would
    // be found in it, and that must not read as "nothing redirects". Checked before the length,
    // since 64 bytes of 0xff are no more an answer than 4096.
    if let Some(dead) = inv.function(b).and_then(|f| f.not_responding()) {
        return Read::Cannot(Finding::unknown(
            BRIDGE_NOT_RESPONDING,
            subject,
            format!("{context}: its config space reads all ones (vendor ID 0xffff): the bridge does not answer on the PCIe bus, so its ACS state cannot be read; the devices below it are unreachable too"),
        )
        .with(dead));
    }
    let config = match &d.config {
        Ok(c) => c,
        Err(e) => {
            return Read::Cannot(
                Finding::unknown(
                    UNKNOWN,
                    subject,
                    format!("{context}: cannot read its config space: {e}"),
                )
                .evidence(d.config_path.clone(), format!("<{}>", e.reason())),
            );
        }
    };
    if !extended_readable(config) {
        let why = if config.len() <= 64 {
            "needs root: this process could read only the first 64 bytes of config space, and ACS lives in the extended space".to_owned()
        } else {
            format!(
                "its extended config space is not readable ({} bytes: no extended config access on this platform)",
                config.len()
            )
        };
        return Read::Cannot(
            Finding::unknown(
                UNKNOWN,
                subject,
                format!("{context}: ACS state unknown, {why}"),
            )
            .evidence(
                d.config_path.clone(),
                format!("{} bytes readable", config.len()),
            ),
        );
    }
    match acs(config) {
        Some(a) => Read::Acs(a, d),
        None => Read::Absent(d),
    }
}

/// The evidence of an ACS Control read: the config file at the register's offset, the value
/// with lspci's names.
pub(super) fn control_evidence(d: &PciDetail, a: &pp::Acs) -> (String, String) {
    (
        format!("{} @{:#x}", d.config_path, a.control_offset()),
        format!("{:#06x} ({})", a.control, acs_flags(a.control)),
    )
}

fn judge(inv: &Inventory, b: Bdf, pairs: &[String], redirecting: &[Bdf]) -> Finding {
    let subject = format!("bridge {b}");
    let on = pairs.join(", ");
    let (a, d) = match read(inv, b, &subject, &format!("on the path of {on}")) {
        Read::Acs(a, d) => (a, d),
        Read::Cannot(f) => return f,
        Read::Absent(d) => {
            return Finding::pass(
                ABSENT,
                subject,
                format!("on the path of {on}: no ACS capability, so nothing redirects"),
            )
            .evidence(
                d.config_path.clone(),
                "no ACS extended capability (ID 0x000d)",
            );
        }
    };
    let (evidence_path, value) = control_evidence(d, &a);
    if !a.redirects() {
        return Finding::pass(
            CLEAR,
            subject,
            format!(
                "on the path of {on}: ACSCtl {:#06x}, no redirect",
                a.control
            ),
        )
        .evidence(evidence_path, value);
    }
    // One boot-time unit for every redirecting bridge on the node, so that each finding's fix
    // writes the same file. (A `pci=disable_acs_redir=a;b` kernel parameter would do too, but
    // grub reads `;` as a command separator.)
    // setpci's VALUE:MASK form writes only the masked bits: ReqRedir, CmpltRedir and
    // EgressCtrl cleared, SrcValid, TransBlocking and UpstreamFwd left as they are (issue 39:
    // `=0000` cleared them too).
    let mut unit: Vec<String> = [
        "[Unit]",
        "Description=Clear PCIe ACS redirect for GPUDirect RDMA (gdrdoctor)",
        "[Service]",
        "Type=oneshot",
    ]
    .map(String::from)
    .to_vec();
    unit.extend(redirecting.iter().map(|r| {
        format!("ExecStart=/usr/bin/setpci -s {r} ECAP_ACS+0x6.w=0000:{REDIRECT_MASK:04x}")
    }));
    unit.extend(["[Install]", "WantedBy=multi-user.target"].map(String::from));
    let fix = Fix::new(
        format!("Clear ACS redirect on {b} now, and at every boot with a oneshot unit (or in the BIOS; Linux 6.11+ also takes pci=config_acs=)"),
        "ACS is an isolation feature: on a host that assigns devices to VMs, clearing it merges their isolation domains. setpci's change is lost at reboot or hotplug.",
    )
    .guarded(
        crate::model::FixClass::Runtime,
        format!(
            "setpci -s {} ECAP_ACS+0x6.w=0000:{REDIRECT_MASK:04x}",
            sh(&b.to_string())
        ),
        format!(
            "[ $((0x$(setpci -s {} ECAP_ACS+0x6.w) & {REDIRECT_MASK:#06x})) -eq 0 ]",
            sh(&b.to_string())
        ),
    )
    .edit(crate::model::edit::Edit::Write {
        file: "/etc/systemd/system/gdrdoctor-acs.service".into(),
        lines: unit,
    })
    .guarded(
        crate::model::FixClass::Persistent,
        "systemctl daemon-reload && systemctl enable gdrdoctor-acs.service",
        "systemctl is-enabled --quiet gdrdoctor-acs.service",
    )
    .manual("# BIOS: disable ACS / enable PCIe peer-to-peer on the root ports and switches (vendor menus vary)");
    Finding::fail(
        REDIRECT_ON_PATH,
        subject,
        format!(
            "on the path of {on}: ACSCtl {:#06x} has {} set, so peer-to-peer traffic between the GPU and the NIC is sent up to the root complex: GDR slows down or fails (perftest#241, nccl#304)",
            a.control,
            redirect_bits(a.control).join(", ")
        ),
    )
    .evidence(evidence_path, value)
    .fix(fix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn inventory(name: &str) -> Inventory {
        let root = crate::root::Root::captured(&crate::test_fixtures::fixture_path(name)).unwrap();
        Inventory::load(&root, &Config::default())
    }

    /// The pictures mark what `redirecting` returns: a Grace port holding ReqRedir and CmpltRedir
    /// as NVIDIA requires is not a redirect to draw; elsewhere the rule stands.
    #[test]
    fn grace_ports_are_not_drawn_as_redirects() {
        let inv = inventory("gb300-acs-kernel-default");
        for b in [
            "0008:00:00.0",
            "0008:02:00.0",
            "0008:02:01.0",
            "0000:02:00.0",
        ] {
            let b = Bdf::parse(b).unwrap();
            assert!(state(&inv, b).is_some_and(|s| s.redirects()), "{b}");
            assert!(redirecting(&inv, b).is_none(), "{b}");
        }
        let inv = inventory("acs-redirect-on-path");
        assert!(inv.grace.is_none());
        assert!(inv.pci.keys().any(|b| redirecting(&inv, *b).is_some()));
    }
}
