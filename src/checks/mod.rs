//! The checks, their registry, and the engine that runs them.
//!
//! A check judges the inventory and returns findings; it never reads files. `ALL` is the
//! registry: its order is the order of `gdrdoctor list` and of every report, from what the rest
//! depends on (GPU driver, peer memory) to what depends on everything (access from a process).

pub mod acs;
mod actions;
mod gdr_test;
mod gpu;
mod gpu_driver;
mod iommu;
mod job_history;
mod kernel_log;
mod link_health;
mod nccl_config;
mod nccl_verify;
mod pcie_link;
mod pcie_placement;
mod peer_memory;
mod rdma_access;
mod rdma_gid;
mod rdma_link;
mod roce_lossless;
pub use roce_lossless::node_summary as roce_qos_summary;

use crate::config::Config;
use crate::inventory::Inventory;
pub use actions::Rule;
pub(crate) use actions::set_actions;

use crate::model::{Code, Finding, Runs, Status};
use serde::Serialize;

/// What a check sees: the node's facts, what the runs above them found, the site's policy, and
/// the results of the checks it reads ([`Check::reads`]).
pub struct Context<'a> {
    pub inv: &'a Inventory,
    pub runs: &'a Runs,
    pub config: &'a Config,
    /// The results of this run that the check reads, as the engine produced them.
    pub earlier: &'a [CheckResult],
}

impl Context<'_> {
    /// The findings of an earlier check, each as the check gave it: a site's severity override
    /// changes how a finding counts in the report, not what the check found.
    pub fn findings_of(&self, id: &str) -> Vec<Finding> {
        self.earlier
            .iter()
            .filter(|r| r.id == id)
            .flat_map(|r| r.findings.iter())
            .map(|f| {
                let mut f = f.clone();
                if let Some(own) = f.original_status.take() {
                    f.status = own;
                }
                f
            })
            .collect()
    }
}

/// What a check is, apart from how it judges: its name, its codes and its manual. One constant
/// per check (`const META: Meta` in its file), so that `gdrdoctor list`, `explain`, `--select`
/// and the reports all read the same values.
#[derive(Debug)]
pub struct Meta {
    /// Stable kebab-case ID, as `--select`, `--skip` and `gdrdoctor explain` take it.
    pub id: &'static str,
    /// One line for `gdrdoctor list` and report headings.
    pub title: &'static str,
    /// Every code this check can emit.
    pub codes: &'static [Code],
    /// What to do with the node when a finding of each code warns, fails or ends unknown: one
    /// rule per code of `codes` (a test holds them to it), docs/actions.md says why.
    pub actions: &'static [Rule],
    /// `checks/<id>/README.md`: what `gdrdoctor explain <id>` prints.
    pub readme: &'static str,
    /// Needs the running system (device nodes, this process's limits, libraries); skipped on a
    /// captured root.
    pub live_only: bool,
    /// The checks whose findings this one judges (earlier in [`ALL`]). The engine hands their
    /// results over in [`Context::earlier`]; one the selection left out runs for it alone,
    /// outside the report. A check never runs another itself.
    pub reads: &'static [&'static str],
}

pub trait Check: Sync {
    /// The check's name, title, codes and manual.
    fn meta(&self) -> &'static Meta;
    /// Judges the node. Always returns at least one finding.
    fn run(&self, cx: &Context) -> Vec<Finding>;
    /// One line for the compact report, about the findings that passed ("8 GPUs: bound to
    /// nvidia 570.133.20", "every GPU has a NIC at PIX"). The default groups identical
    /// messages by the kind of their subject; a check whose passing messages differ per subject
    /// (an IP address, a netdev) says what they share instead.
    fn summary(&self, _cx: &Context, passed: &[&Finding]) -> String {
        summarize(passed)
    }
}

/// What a subject is, for counting: `GPU 0000:3b:00.0 (...)` is a GPU, `mlx5_0 port 1` a port,
/// `mlx5_0 (0000:19:00.0)` a NIC, `bridge 0000:17:01.0` a bridge.
fn kind(subject: &str) -> &'static str {
    let words: Vec<&str> = subject.split_whitespace().collect();
    match words.as_slice() {
        ["GPU", ..] => "GPU",
        ["bridge", ..] => "bridge",
        [_, "port", _] => "port",
        [_, b] if b.starts_with('(') => "NIC",
        _ => "",
    }
}

fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// `8 ports: RoCE, 400 Gb/s` or `6 ports: A; 2 ports: B`: what each passing subject is, counted.
pub(crate) fn grouped(noun: &str, items: impl IntoIterator<Item = String>) -> String {
    let mut groups: Vec<(String, usize)> = Vec::new();
    for item in items {
        match groups.iter_mut().find(|(x, _)| *x == item) {
            Some((_, n)) => *n += 1,
            None => groups.push((item, 1)),
        }
    }
    groups
        .iter()
        .map(|(what, n)| format!("{}: {what}", counted(*n, noun)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The RDMA ports whose findings passed, by their subject (`mlx5_0 port 1`).
pub(crate) fn ports_of<'a>(
    inv: &'a Inventory,
    passed: &[&Finding],
) -> Vec<(&'a crate::inventory::RdmaDevice, &'a crate::inventory::Port)> {
    inv.rdma
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(d, p)| passed.iter().any(|f| f.subject == p.subject(&d.name)))
        .collect()
}

/// Long lists in parentheses (`16 bridges (0000:17:00.0, 0000:17:01.0, ...)`) left out of a
/// one-line summary; the full list is in the finding.
fn shorten(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find(" (") {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let inner = &rest[open + 2..open + close];
        out.push_str(&rest[..open]);
        if inner.matches(", ").count() < 3 || inner.contains('(') {
            out.push_str(&rest[open..open + close + 1]);
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The longest subject, message, fix summary and evidence text a finding keeps: far past any
/// real one (a message of a few lines, an evidence value of a file's line), so that text from a
/// capture or the environment (a megabyte kernel log record, a 900 KB NCCL_IB_HCA) cannot make a
/// report of megabytes or a grouping that takes minutes. Fix commands are kept whole: a cut
/// command would run something else.
pub const MAX_SUBJECT: usize = 512;
pub const MAX_MESSAGE: usize = 16 << 10;
pub const MAX_EVIDENCE: usize = 4 << 10;

fn bound_text(f: &mut Finding) {
    use crate::sanitize::bound;
    bound(&mut f.subject, MAX_SUBJECT);
    bound(&mut f.message, MAX_MESSAGE);
    for e in &mut f.evidence {
        bound(&mut e.path, MAX_EVIDENCE);
        bound(&mut e.value, MAX_EVIDENCE);
    }
    if let Some(fix) = &mut f.fix {
        bound(&mut fix.summary, MAX_EVIDENCE);
    }
}

/// The default [`Check::summary`]: one message for all (`8 GPUs and 8 NICs: 32 GT/s x16, its
/// maximum`), else the subjects counted (`6 ports passed`), a lone finding as it is.
pub fn summarize(passed: &[&Finding]) -> String {
    summarize_as(passed, "passed")
}

/// [`summarize`] of findings that all `ended` so (`passed`, or `skipped` for a check that only
/// skipped: never "9 findings passed" on a skip).
fn summarize_as(passed: &[&Finding], ended: &str) -> String {
    match passed {
        [] => String::new(),
        [one] if one.subject == "node" => one.message.clone(),
        [one] => format!("{}: {}", one.subject, one.message),
        many => {
            let mut kinds: Vec<(&str, usize)> = Vec::new();
            for f in many {
                let k = kind(&f.subject);
                match kinds.iter_mut().find(|(x, _)| *x == k) {
                    Some((_, n)) => *n += 1,
                    None => kinds.push((k, 1)),
                }
            }
            let who = if kinds.iter().any(|(k, _)| k.is_empty()) {
                counted(many.len(), "finding")
            } else {
                kinds
                    .iter()
                    .map(|(k, n)| counted(*n, k))
                    .collect::<Vec<_>>()
                    .join(" and ")
            };
            if many.iter().all(|f| f.message == many[0].message) {
                format!("{who}: {}", many[0].message)
            } else {
                format!("{who} {ended}")
            }
        }
    }
}

pub static ALL: &[&dyn Check] = &[
    &gpu_driver::GpuDriver,
    &gpu::GpuCheck,
    &peer_memory::PeerMemory,
    &pcie_placement::PciePlacement,
    &acs::Acs,
    &pcie_link::PcieLink,
    &iommu::IommuCheck,
    &rdma_link::RdmaLink,
    &rdma_gid::RdmaGid,
    &link_health::LinkHealth,
    &kernel_log::KernelLogCheck,
    &roce_lossless::RoceLossless,
    &nccl_config::NcclConfig,
    &rdma_access::RdmaAccess,
    &gdr_test::GdrTestCheck,
    &nccl_verify::NcclVerifyCheck,
    &job_history::JobHistory,
];

/// NCCL's run held against gdrdoctor's view of the same node (what `nccl-verify` reports and
/// `gdrdoctor nccl verify` prints): the checks `nccl-verify` reads run first, as in a report.
pub fn nccl_verification(
    inv: &Inventory,
    runs: &Runs,
    config: &Config,
    run: &crate::model::nccl::Run,
) -> crate::nccl::compare::Verification {
    let earlier = read_by(&nccl_verify::NcclVerifyCheck, inv, runs, config, &[]);
    let cx = Context {
        inv,
        runs,
        config,
        earlier: &earlier,
    };
    let mut v = nccl_verify::verification(&cx, run);
    set_actions(nccl_verify::NcclVerifyCheck.meta(), inv, &mut v.findings);
    v
}

/// The results `check` reads ([`Check::reads`]): those of this run (`results`), and for one
/// that did not run (left out by the selection), its run now, for `check` alone.
fn read_by(
    check: &dyn Check,
    inv: &Inventory,
    runs: &Runs,
    config: &Config,
    results: &[CheckResult],
) -> Vec<CheckResult> {
    check
        .meta()
        .reads
        .iter()
        .filter_map(|id| {
            if let Some(r) = results.iter().find(|r| r.id == *id && r.skipped.is_none()) {
                return Some(r.clone());
            }
            let c = find(id)?;
            (inv.live || !c.meta().live_only).then(|| {
                let cx = Context {
                    inv,
                    runs,
                    config,
                    earlier: &[],
                };
                run_one(c, &cx)
            })
        })
        .collect()
}

/// Runs one check with the results it reads.
fn run_reading(
    check: &dyn Check,
    inv: &Inventory,
    runs: &Runs,
    config: &Config,
    results: &[CheckResult],
) -> CheckResult {
    let earlier = read_by(check, inv, runs, config, results);
    let cx = Context {
        inv,
        runs,
        config,
        earlier: &earlier,
    };
    run_one(check, &cx)
}

pub fn find(id: &str) -> Option<&'static dyn Check> {
    ALL.iter().copied().find(|c| c.meta().id == id)
}

/// The check that emits a finding code, and the code's description.
pub fn find_code(code: &str) -> Option<(&'static dyn Check, &'static Code)> {
    ALL.iter().find_map(|c| {
        c.meta()
            .codes
            .iter()
            .find(|k| k.id == code)
            .map(|k| (*c, k))
    })
}

/// What `--config` may name: the registry's checks and codes (see `config::Names`).
pub const NAMES: crate::config::Names = crate::config::Names {
    check: |id| find(id).is_some(),
    code: |code| find_code(code).is_some(),
};

/// The finding the engine gives a check that returned none: a bug in gdrdoctor, never a pass.
/// No check declares it; the engine alone emits it.
pub const CHECK_SILENT: Code = Code {
    id: "check-silent",
    summary: "a check produced no finding: a bug in gdrdoctor",
};

pub const NOT_SELECTED: &str = "not selected (--select)";

/// Which checks to run: `--select` (only these), `--skip` and the config's `skip`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub select: Vec<String>,
    pub skip: Vec<String>,
}

impl Selection {
    /// Every ID named must be a check; a typo must not silently run nothing.
    pub fn validate(&self) -> Result<(), String> {
        for id in self.select.iter().chain(&self.skip) {
            if find(id).is_none() {
                let known: Vec<&str> = ALL.iter().map(|c| c.meta().id).collect();
                return Err(format!(
                    "unknown check {id:?}; checks are: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Why a check does not run, if it does not.
    fn excluded(&self, check: &dyn Check, config: &Config) -> Option<String> {
        let id = check.meta().id;
        if !self.select.is_empty() && !self.select.iter().any(|s| s == id) {
            return Some(NOT_SELECTED.into());
        }
        if self.skip.iter().any(|s| s == id) {
            return Some("skipped (--skip)".into());
        }
        if config.skip.iter().any(|s| s == id) {
            return Some("skipped (config: skip)".into());
        }
        None
    }

    /// Whether a check will run at all; the inventory reads live-only facts only when needed.
    pub fn runs(&self, id: &str, config: &Config) -> bool {
        find(id).is_some_and(|c| self.excluded(c, config).is_none())
    }
}

/// One check's outcome in a report.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    /// Why the check did not run, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Left out by `--select`/`--skip` (or the config's `skip`), it ran anyway because these
    /// selected checks skipped for want of what it judges; its verdict counts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prerequisite_of: Vec<&'static str>,
    /// One line on what passed (the compact report's line for a check that passed); for a
    /// check that did not run, why.
    pub summary: String,
    pub findings: Vec<Finding>,
}

/// Runs the selected checks in registry order and applies the config's severity overrides.
///
/// A selected check that skips because another check's finding makes it moot (no RDMA device:
/// nothing for `rdma-gid` to judge) names that check in the finding's `prerequisites`; when
/// the selection left the prerequisite out, it runs anyway, marked `prerequisite_of`, so that
/// `--select rdma-gid` on a node without an RDMA NIC fails on `rdma-link` instead of passing on
/// nothing. Prerequisites of prerequisites follow.
pub fn run(
    inv: &Inventory,
    runs: &Runs,
    config: &Config,
    selection: &Selection,
) -> Vec<CheckResult> {
    let mut results: Vec<CheckResult> = Vec::with_capacity(ALL.len());
    // Left out by the selection (not by being live-only): may still run as a prerequisite.
    let mut left_out: Vec<bool> = Vec::with_capacity(ALL.len());
    for check in ALL {
        let excluded = selection.excluded(*check, config);
        let offline = check.meta().live_only && !inv.live;
        left_out.push(excluded.is_some() && !offline);
        let reason = excluded
            .or_else(|| offline.then(|| "live only: not run on a captured root".to_owned()));
        results.push(match reason {
            Some(reason) => CheckResult {
                id: check.meta().id,
                title: check.meta().title,
                status: Status::Skip,
                summary: reason.clone(),
                skipped: Some(reason),
                prerequisite_of: Vec::new(),
                findings: Vec::new(),
            },
            None => run_reading(*check, inv, runs, config, &results),
        });
    }
    loop {
        let mut wanted: Vec<(usize, &'static str)> = Vec::new();
        for r in results.iter().filter(|r| r.skipped.is_none()) {
            let needs = r
                .findings
                .iter()
                .filter(|f| f.status == Status::Skip)
                .flat_map(|f| f.prerequisites.iter());
            for id in needs {
                if let Some(i) = ALL.iter().position(|c| c.meta().id == *id) {
                    // Each (prerequisite, dependent) once: the loop ends when none is new.
                    if left_out[i] && !results[i].prerequisite_of.contains(&r.id) {
                        wanted.push((i, r.id));
                    }
                }
            }
        }
        if wanted.is_empty() {
            break;
        }
        for (i, by) in wanted {
            if results[i].skipped.is_some() {
                let result = run_reading(ALL[i], inv, runs, config, &results);
                results[i] = result;
            }
            if !results[i].prerequisite_of.contains(&by) {
                results[i].prerequisite_of.push(by);
            }
        }
    }
    // nccl-verify is off by default (it runs NCCL for seconds): a report that did not ask for it
    // leaves it out rather than counting one more skipped check on every node. Named in
    // --select, it stays, saying how to run it.
    let not_asked = matches!(&runs.nccl_verify,
        crate::model::nccl::NcclVerify::NotRun { reason, .. }
            if reason == crate::model::nccl::NcclVerify::NOT_ASKED);
    if not_asked && !selection.select.iter().any(|s| s == "nccl-verify") {
        results.retain(|r| r.id != "nccl-verify");
    }
    results
}

fn run_one(check: &dyn Check, cx: &Context) -> CheckResult {
    let meta = check.meta();
    let mut findings = check.run(cx);
    if findings.is_empty() {
        // A check that says nothing has a bug; never let that read as a pass.
        findings.push(Finding::unknown(
            CHECK_SILENT,
            "gdrdoctor",
            format!("check {} produced no finding", meta.id),
        ));
    }
    for f in &mut findings {
        // Text from the node is bounded before anything reads it (issue 41).
        bound_text(f);
        // A misspelt code no longer compiles, and a check's code constants are private to its
        // file; what this still catches is a constant the check uses but left out of its
        // `CODES` (so `gdrdoctor list`, `--config` and the README test never see it), or a
        // `pub(crate)` code of another check (the comparison's `nccl-verify` codes). Every test
        // run on a fixture goes through here.
        debug_assert!(
            f.code == CHECK_SILENT.id || meta.codes.iter().any(|c| c.id == f.code),
            "{} emits undeclared code {}",
            meta.id,
            f.code
        );
        if let Some(&status) = cx.config.severity.get(f.code) {
            if status != f.status {
                f.original_status = Some(f.status);
                f.status = status;
            }
        }
    }
    // After the overrides: a finding the site made a warning asks what its code asks.
    set_actions(meta, cx.inv, &mut findings);
    let status = findings
        .iter()
        .map(|f| f.status)
        .max()
        .unwrap_or(Status::Unknown);
    // What passed, in a line; a check that only skipped says why.
    let passed: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.status == Status::Pass)
        .collect();
    let summary = if passed.is_empty() {
        // Nothing passed: what the worst findings say (issue 40: a check of warnings alone had
        // an empty summary in JSON), or why it only skipped.
        let worst: Vec<&Finding> = findings.iter().filter(|f| f.status == status).collect();
        let word = match status {
            Status::Skip => "skipped",
            Status::Warn => "warned",
            Status::Fail => "failed",
            Status::Unknown => "unknown",
            Status::Pass => "passed",
        };
        summarize_as(&worst, word)
    } else {
        check.summary(cx, &passed)
    };
    let summary = shorten(&summary);
    CheckResult {
        id: meta.id,
        title: meta.title,
        status,
        summary,
        skipped: None,
        prerequisite_of: Vec::new(),
        findings,
    }
}

/// Shell-quotes a value for a fix command, unless it is plainly safe. Values in fixes come from
/// sysfs, which in a captured root is untrusted.
pub(crate) fn sh(value: &str) -> String {
    crate::model::edit::sh(value)
}

/// What a GPU or NIC whose config space reads all ones needs: the kernel log says why it stopped
/// answering (AER, Xid 79), a remove and rescan may bring it back, a power cycle usually does.
pub(crate) fn not_responding_fix(bdf: crate::parse::pci::Bdf, what: &str) -> crate::model::Fix {
    let bdf = sh(&bdf.to_string());
    crate::model::Fix::new(
        format!("Find out why the {what} stopped answering (PCIe AER errors, NVIDIA Xid 79 'fallen off the bus'), then remove it and rescan the bus; if it does not come back, power-cycle the node, and have it serviced if it recurs"),
        "Removing a device takes it from its driver and from every process using it: drain the node first. A warm reboot often does not revive a device that fell off the bus; a power cycle does.",
    )
    .manual(format!("dmesg | grep -i -E 'aer|xid|fallen off|{bdf}' | tail -30"))
    .disruptive(format!(
        "echo 1 > /sys/bus/pci/devices/{bdf}/remove; echo 1 > /sys/bus/pci/rescan"
    ))
    .manual("# power-cycle the node (from its BMC: ipmitool chassis power cycle) if the device does not come back")
}

/// Kernel command line fix: `gdrdoctor edit kernel-args` (GRUB_CMDLINE_LINUX in either
/// quoting, conflicting words out of GRUB_CMDLINE_LINUX_DEFAULT too, BLS entries,
/// /etc/kernel/cmdline; the original kept), the grub config made again, then a reboot.
pub(crate) fn grub_fix(fix: crate::model::Fix, add: &[&str], remove: &[&str]) -> crate::model::Fix {
    fix.kernel_args(add, remove).disruptive("systemctl reboot")
}

/// The end of every kernel command line fix: regenerate the grub config with whichever tool
/// the distribution has (update-grub also reads the drop-ins of /etc/default/grub.d on Debian
/// and Ubuntu), then reboot.
pub(crate) fn grub_regenerate(fix: crate::model::Fix) -> crate::model::Fix {
    fix.persistent(crate::model::UPDATE_GRUB)
        .disruptive("systemctl reboot")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Issue 40 (2x H200): a check that only skipped, with findings that differ, printed
    /// "SKIP link-health 9 findings passed". Its line says skipped.
    #[test]
    fn a_check_that_only_skipped_never_says_passed() {
        const C: Code = Code {
            id: "x-skip",
            summary: "x",
        };
        let a = Finding::skip(C, "mlx5_0 port 1", "no second reading");
        let b = Finding::skip(C, "bridge 0000:00:01.0", "no AER statistics");
        assert_eq!(
            summarize_as(&[&a, &b], "skipped"),
            "1 port and 1 bridge skipped"
        );
        assert_eq!(summarize(&[&a, &b]), "1 port and 1 bridge passed");
    }

    #[test]
    fn ids_and_codes_are_unique_kebab_case() {
        let mut ids = HashSet::new();
        let mut codes = HashSet::new();
        let kebab = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-')
                && !s.contains("--")
        };
        for c in ALL.iter().map(|c| c.meta()) {
            assert!(kebab(c.id), "{}", c.id);
            assert!(ids.insert(c.id), "duplicate check id {}", c.id);
            assert!(!c.codes.is_empty(), "{} declares no codes", c.id);
            for code in c.codes {
                assert!(kebab(code.id), "{}", code.id);
                assert!(codes.insert(code.id), "duplicate code {}", code.id);
                assert!(!code.summary.is_empty());
            }
        }
        assert!(!codes.contains(CHECK_SILENT.id));
    }

    #[test]
    fn every_check_documents_itself_and_every_code() {
        for c in ALL.iter().map(|c| c.meta()) {
            let readme = c.readme;
            assert!(
                readme.starts_with(&format!("# {}", c.id)),
                "checks/{}/README.md must start with its id",
                c.id
            );
            for code in c.codes {
                assert!(
                    readme.contains(&format!("`{}`", code.id)),
                    "checks/{}/README.md does not document `{}`",
                    c.id,
                    code.id
                );
            }
            for section in ["## What it checks", "## Why it matters", "## Fix"] {
                assert!(
                    readme.contains(section),
                    "checks/{}/README.md lacks {section}",
                    c.id
                );
            }
        }
    }

    /// A check that reads others gets their findings from the engine: those of the report when
    /// they ran (each as the check gave it, a severity override undone), else a run of their
    /// own, outside the report.
    #[test]
    fn reads_are_handed_over_not_rerun() {
        struct Reads;
        const META: Meta = Meta {
            id: "reads",
            title: "",
            codes: &[],
            actions: &[],
            readme: "",
            live_only: false,
            reads: &["rdma-link", "peer-memory"],
        };
        impl Check for Reads {
            fn meta(&self) -> &'static Meta {
                &META
            }
            fn run(&self, _: &Context) -> Vec<Finding> {
                Vec::new()
            }
        }
        let root = crate::root::Root::captured(&crate::test_fixtures::fixture_path(
            "healthy-4gpu-ib-peermem",
        ))
        .unwrap();
        let config = Config::default();
        let inv = Inventory::load(&root, &config);
        let runs = Runs::none(false);
        // Neither ran: both run for the reader alone.
        let fresh = read_by(&Reads, &inv, &runs, &config, &[]);
        let ids: Vec<&str> = fresh.iter().map(|r| r.id).collect();
        assert_eq!(ids, ["rdma-link", "peer-memory"]);
        // rdma-link ran in the report, a site override on it: handed over as the check gave it.
        let mut report = vec![fresh[0].clone()];
        let own = report[0].findings[0].status;
        report[0].findings[0].original_status = Some(own);
        report[0].findings[0].status = Status::Fail;
        report[0].summary = "from the report".into();
        let earlier = read_by(&Reads, &inv, &runs, &config, &report);
        assert_eq!(earlier[0].summary, "from the report");
        let cx = Context {
            inv: &inv,
            runs: &runs,
            config: &config,
            earlier: &earlier,
        };
        let seen = cx.findings_of("rdma-link");
        assert_eq!(seen.len(), report[0].findings.len());
        assert_eq!((seen[0].status, seen[0].original_status), (own, None));
        assert!(!cx.findings_of("peer-memory").is_empty());
        assert!(cx.findings_of("acs").is_empty());
    }

    #[test]
    fn selection_rejects_unknown_ids() {
        assert!(
            Selection {
                select: vec!["iommu".into()],
                skip: vec![]
            }
            .validate()
            .is_ok()
        );
        let e = Selection {
            select: vec![],
            skip: vec!["iommuu".into()],
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("unknown check \"iommuu\""), "{e}");
    }

    /// The kernel command line fix is one edit, then the regeneration and the reboot.
    #[test]
    fn grub_fix_is_an_edit() {
        let fix = grub_fix(
            crate::model::Fix::new("", ""),
            &["iommu=pt"],
            &["iommu.strict=1"],
        );
        let runs: Vec<&str> = fix.commands.iter().map(|c| c.run.as_str()).collect();
        assert_eq!(
            runs[0],
            "gdrdoctor edit kernel-args --add iommu=pt --remove iommu.strict=1"
        );
        assert_eq!(runs[1], crate::model::UPDATE_GRUB);
        assert_eq!(runs[2], "systemctl reboot");
    }

    #[test]
    fn summaries() {
        const X: Code = Code {
            id: "x",
            summary: "",
        };
        let f = |subject: &str, message: &str| Finding::pass(X, subject, message);
        let gpus = [
            f("GPU 0000:18:00.0 (NVIDIA H100)", "32 GT/s x16, its maximum"),
            f("GPU 0000:1a:00.0 (NVIDIA H100)", "32 GT/s x16, its maximum"),
            f("mlx5_0 (0000:19:00.0)", "32 GT/s x16, its maximum"),
        ];
        let refs: Vec<&Finding> = gpus.iter().collect();
        assert_eq!(
            summarize(&refs),
            "2 GPUs and 1 NIC: 32 GT/s x16, its maximum"
        );
        assert_eq!(
            summarize(&refs[..1]),
            "GPU 0000:18:00.0 (NVIDIA H100): 32 GT/s x16, its maximum"
        );
        let ports = [f("mlx5_0 port 1", "a"), f("mlx5_1 port 1", "b")];
        let refs: Vec<&Finding> = ports.iter().collect();
        assert_eq!(summarize(&refs), "2 ports passed");
        assert_eq!(
            shorten("GPU-NIC paths: 4 bridges (a, b, c, d): ACS present (no redirect)"),
            "GPU-NIC paths: 4 bridges: ACS present (no redirect)"
        );
        assert_eq!(
            grouped("port", ["x".to_owned(), "y".into(), "x".into()]),
            "2 ports: x; 1 port: y"
        );
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(sh("0000:3b:00.0"), "0000:3b:00.0");
        assert_eq!(sh("x;rm -rf /"), "'x;rm -rf /'");
        assert_eq!(sh("it's"), r"'it'\''s'");
        assert_eq!(sh(""), "''");
    }
}
