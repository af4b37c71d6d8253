//! `--format prometheus`: the text exposition format, for node_exporter's textfile collector
//! (`--textfile-dir`) or any scraper. Gauges only; no sample timestamps (the textfile collector
//! refuses them); `gdrdoctor_last_run_timestamp_seconds` tells a stale file from a fresh one.

use super::{GdrSummary, Report};
use crate::model::{Action, Status};
use std::fmt::Write as _;

/// When the run started and how long it took: not part of the report (which is the same for
/// the same node), but what an alert on a stale or slow check needs.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub started_unix_s: f64,
    pub duration_s: f64,
}

/// The report as Prometheus gauges: the verdict, each check's status and findings, the node's
/// counts, the GDR write test's pairs when it ran, and the run's time when given.
pub fn render(report: &Report, run: Option<Run>) -> String {
    let mut m = Metrics::default();
    verdict(&mut m, report);
    checks(&mut m, report);
    actions(&mut m, report);
    link_ports(&mut m, report);
    growth(&mut m, report);
    m.family("gdrdoctor_gpus", "GPUs found in sysfs.");
    m.sample("gdrdoctor_gpus", &[], report.node.gpus as f64);
    m.family("gdrdoctor_rdma_devices", "RDMA devices found in sysfs.");
    m.sample(
        "gdrdoctor_rdma_devices",
        &[],
        report.node.rdma_devices as f64,
    );

    if let Some(pairs) = &report.inventory.gdr_test {
        gdr_pairs(&mut m, pairs);
    }
    if let Some(run) = run {
        run_time(&mut m, run);
    }
    m.out
}

/// Whether the node is ready and verified, and which gdrdoctor judged which node.
fn verdict(m: &mut Metrics, report: &Report) {
    let v = &report.verdict;
    m.family(
        "gdrdoctor_ready",
        "1 when the node is ready for GPUDirect RDMA (some check passed and none failed; with --strict nothing warned or was unknown).",
    );
    m.sample("gdrdoctor_ready", &[], bool_value(v.ready));
    m.family(
        "gdrdoctor_verified",
        "1 when some check judged the node and none ended unknown (0 when nothing was verified).",
    );
    m.sample("gdrdoctor_verified", &[], bool_value(v.verified));
    m.family(
        "gdrdoctor_info",
        "Always 1; labels say which gdrdoctor judged which node.",
    );
    m.sample(
        "gdrdoctor_info",
        &[
            ("version", report.gdrdoctor_version),
            ("kernel", report.node.kernel.as_deref().unwrap_or("")),
            ("product", report.node.product.as_deref().unwrap_or("")),
            ("root", &report.root.path),
        ],
        1.0,
    );
}

/// One series per check and status, and the findings counted per check, code and status.
fn checks(m: &mut Metrics, report: &Report) {
    m.family(
        "gdrdoctor_check_status",
        "One series per check and status: 1 for the check's status, 0 for the others.",
    );
    for c in &report.checks {
        for s in Status::ALL {
            m.sample(
                "gdrdoctor_check_status",
                &[("check", c.id), ("status", s.as_str())],
                bool_value(c.status == s),
            );
        }
    }
    m.family(
        "gdrdoctor_findings",
        "Findings per check, code and status (every finding, passes included).",
    );
    let mut counted: Vec<(&str, &str, Status, usize)> = Vec::new();
    for c in &report.checks {
        for f in &c.findings {
            match counted
                .iter_mut()
                .find(|(ch, code, s, _)| *ch == c.id && *code == f.code && *s == f.status)
            {
                Some(entry) => entry.3 += 1,
                None => counted.push((c.id, f.code, f.status, 1)),
            }
        }
    }
    for (check, code, status, n) in counted {
        m.sample(
            "gdrdoctor_findings",
            &[
                ("check", check),
                ("code", code),
                ("status", status.as_str()),
            ],
            n as f64,
        );
    }
}

/// What the node needs (docs/actions.md): per action, the warn and fail findings that ask for
/// it. One series per action, 0 included, so that `gdrdoctor_action{action="replace-part"} > 0`
/// selects the nodes for a technician and an absent series never reads as "nothing".
fn actions(m: &mut Metrics, report: &Report) {
    m.family(
        "gdrdoctor_action",
        "Warn and fail findings per action they ask of the node (none, fix-in-place, reset-gpu, reboot, replace-part, provider; docs/actions.md).",
    );
    let asked: Vec<Action> = report
        .checks
        .iter()
        .flat_map(|c| &c.findings)
        .filter(|f| matches!(f.status, Status::Warn | Status::Fail))
        .filter_map(|f| f.action)
        .collect();
    for a in Action::ALL {
        m.sample(
            "gdrdoctor_action",
            &[("action", a.as_str())],
            asked.iter().filter(|x| **x == a).count() as f64,
        );
    }
}

/// link-health's judgement of each RDMA port (its finding's code and status), so an alert can
/// name the port that flaps. The counters themselves are node_exporter's (its infiniband and
/// netclass collectors); this is what gdrdoctor made of them.
fn link_ports(m: &mut Metrics, report: &Report) {
    let Some(check) = report.checks.iter().find(|c| c.id == "link-health") else {
        return;
    };
    let ports: Vec<(&str, &str, &str, Status)> = check
        .findings
        .iter()
        .filter_map(|f| {
            let (device, port) = f.subject.split_once(" port ")?;
            Some((device, port, f.code, f.status))
        })
        .collect();
    if ports.is_empty() {
        return;
    }
    m.family(
        "gdrdoctor_link_port",
        "link-health per RDMA port: 1 for the port's finding (code and status: link-quiet, link-flapping, link-history, ...).",
    );
    for (device, port, code, status) in ports {
        m.sample(
            "gdrdoctor_link_port",
            &[
                ("device", device),
                ("port", port),
                ("code", code),
                ("status", status.as_str()),
            ],
            1.0,
        );
    }
}

/// What grew in the sample window or since the last run (`--baseline`): the span, and each
/// counter that moved by how much. The counters' values are node_exporter's; these are the
/// deltas gdrdoctor judged.
fn growth(m: &mut Metrics, report: &Report) {
    // `--baseline`: whether the next run has this one's reading to judge growth against (a
    // timer that only reads metrics learns it here; issue 41).
    if let Some(written) = report.inventory.baseline_written {
        m.family(
            "gdrdoctor_baseline_written",
            "1 when this run's reading was kept for the next (--baseline FILE), 0 when it could not be: the next run cannot judge what grew.",
        );
        m.sample(
            "gdrdoctor_baseline_written",
            &[],
            if written { 1.0 } else { 0.0 },
        );
    }
    let Some(s) = report.inventory.sample.as_ref() else {
        return;
    };
    m.family(
        "gdrdoctor_sample_seconds",
        "The span link-health and kernel-log judged growth over: a --sample window, or the time since the last run (--baseline).",
    );
    m.sample("gdrdoctor_sample_seconds", &[("kind", s.kind)], s.seconds);
    if !s.ports.is_empty() {
        m.family(
            "gdrdoctor_link_growth",
            "How much an RDMA port's error, flap or retry counter grew over gdrdoctor_sample_seconds (only counters that grew).",
        );
        for g in &s.ports {
            let port = g.port.to_string();
            m.sample(
                "gdrdoctor_link_growth",
                &[
                    ("device", g.device.as_str()),
                    ("port", port.as_str()),
                    ("counter", g.counter),
                ],
                (g.after - g.before) as f64,
            );
        }
    }
    if !s.aer.is_empty() {
        m.family(
            "gdrdoctor_aer_growth",
            "How many PCIe AER errors a function of a GPU-NIC path counted over gdrdoctor_sample_seconds (only those that grew).",
        );
        for g in &s.aer {
            let bdf = g.bdf.to_string();
            m.sample(
                "gdrdoctor_aer_growth",
                &[("bdf", bdf.as_str()), ("severity", g.severity)],
                (g.after - g.before) as f64,
            );
        }
    }
}

/// The GDR write test's pairs: whether each passed, what it measured and what it should reach.
fn gdr_pairs(m: &mut Metrics, pairs: &[GdrSummary]) {
    let labelled: Vec<_> = pairs
        .iter()
        .map(|p| {
            let gpu = p.gpu.map(|b| b.to_string()).unwrap_or_default();
            let (nic, port) = match p.nic.as_deref().and_then(|n| n.split_once(" port ")) {
                Some((d, port)) => (d.to_owned(), port.to_owned()),
                None => (p.nic.clone().unwrap_or_default(), String::new()),
            };
            (p, gpu, nic, port, p.memory.as_str())
        })
        .collect();
    m.family(
        "gdrdoctor_gdr_pair_ok",
        "1 when the GDR write test verified the pair's data both ways without a failure.",
    );
    for (p, gpu, nic, port, memory) in &labelled {
        let ok = p
            .result
            .as_ref()
            .is_some_and(|r| r.failure.is_none() && r.verified_bytes.is_some());
        m.sample(
            "gdrdoctor_gdr_pair_ok",
            &[
                ("gpu", gpu),
                ("nic", nic),
                ("port", port),
                ("memory", memory),
            ],
            bool_value(ok),
        );
    }
    m.family(
        "gdrdoctor_gdr_pair_bandwidth_bytes_per_second",
        "RDMA WRITE bandwidth the GDR write test measured, per pair and direction (to_target: into the buffer under test).",
    );
    for (p, gpu, nic, port, memory) in &labelled {
        let Some(bw) = p.result.as_ref().and_then(|r| r.bandwidth.as_ref()) else {
            continue;
        };
        for (direction, gbps) in [
            ("to_target", bw.to_target_gbps),
            ("from_target", bw.from_target_gbps),
        ] {
            m.sample(
                "gdrdoctor_gdr_pair_bandwidth_bytes_per_second",
                &[
                    ("gpu", gpu),
                    ("nic", nic),
                    ("port", port),
                    ("memory", memory),
                    ("direction", direction),
                ],
                gbps * 1e9 / 8.0,
            );
        }
    }
    m.family(
        "gdrdoctor_gdr_pair_expected_bytes_per_second",
        "What the pair's slowest link allows (the bandwidth verdict's reference).",
    );
    for (p, gpu, nic, port, memory) in &labelled {
        if let Some(gbps) = p.expected_gbps {
            m.sample(
                "gdrdoctor_gdr_pair_expected_bytes_per_second",
                &[
                    ("gpu", gpu),
                    ("nic", nic),
                    ("port", port),
                    ("memory", memory),
                ],
                gbps * 1e9 / 8.0,
            );
        }
    }
}

/// When the run started and how long it took.
fn run_time(m: &mut Metrics, run: Run) {
    m.family(
        "gdrdoctor_last_run_timestamp_seconds",
        "When this report's run started (Unix time).",
    );
    m.sample(
        "gdrdoctor_last_run_timestamp_seconds",
        &[],
        run.started_unix_s.floor(),
    );
    m.family(
        "gdrdoctor_run_duration_seconds",
        "How long the run took, GPU probe and GDR write test included.",
    );
    m.sample("gdrdoctor_run_duration_seconds", &[], run.duration_s);
}

fn bool_value(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

#[derive(Default)]
struct Metrics {
    out: String,
}

impl Metrics {
    fn family(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} gauge");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Label values: through the one sanitizer first (crate::sanitize: a dashboard shows them to a
/// person), then backslash, double quote and line feed escaped (the exposition format's rule).
pub fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in crate::sanitize::text(s).chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_values_are_escaped() {
        assert_eq!(super::escape_label("a\"b\\cd"), "a\\\"b\\\\cd");
        // A line feed or an ESC read off a node is shown escaped, then that escape escaped.
        assert_eq!(super::escape_label("c\nd\u{1b}[2J"), "c\\\\nd\\\\u{1b}[2J");
        assert_eq!(super::number(1.0), "1");
        assert_eq!(super::number(0.25), "0.25");
    }
}
