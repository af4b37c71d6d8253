//! The two-node write test's report (crate::model::twonode::Report) in the report formats:
//! human, JSON (the report itself: schema `gdrdoctor.two-node`), JUnit (one testcase per rail
//! per direction), Prometheus, and the one-line reason.

use super::junit::attr;
use super::prometheus::escape_label;
use crate::model::twonode::{Direction, RailResult, Report};
use std::fmt::Write as _;

/// One report as an object; a ring's two (this node as listener and as connector) as an array.
pub fn json(reports: &[Report]) -> String {
    let text = match reports {
        [one] => serde_json::to_string_pretty(one),
        many => serde_json::to_string_pretty(many),
    };
    text.unwrap_or_default() + "\n"
}

fn figures(d: &Direction) -> String {
    let mut s = Vec::new();
    if let Some(b) = d.verified_bytes {
        s.push(format!("{} verified", crate::parse::bytes(b)));
    }
    if let Some(g) = d.gbps {
        s.push(format!("{g:.2} Gb/s"));
    }
    if let Some(l) = d.latency_us {
        s.push(format!("{l:.1} µs per WRITE"));
    }
    s.join(", ")
}

/// What the buffers were on each side: `GPU ... via dmabuf -> host memory via host`.
fn memory(r: &RailResult) -> String {
    format!(
        "this node's {} ({}), the peer's {}",
        r.local.subject,
        r.setup.path.as_deref().unwrap_or("not registered"),
        r.peer_path.as_deref().unwrap_or("not registered")
    )
}

pub fn human(reports: &[Report]) -> String {
    reports.iter().map(human_one).collect::<Vec<_>>().join("\n")
}

/// Most of what a two-node report holds came from the other node (its host name, its rails'
/// names, its failure messages, a `refused` reason): every string goes through the one
/// sanitizer, so that a peer cannot forge a line (`\nready: ...`) or drive the terminal.
fn human_one(r: &Report) -> String {
    use crate::sanitize::text as t;
    let mut o = String::new();
    let peer = r.peer.as_deref().unwrap_or("the peer");
    let _ = writeln!(
        o,
        "gdrdoctor two-node write test: {} ({}) with {}{}",
        t(&r.host),
        match r.role {
            crate::model::twonode::Role::Listener => "listener",
            crate::model::twonode::Role::Connector => "connector",
        },
        t(peer),
        r.peer_addr
            .as_deref()
            .map(|a| format!(" at {}", t(a)))
            .unwrap_or_default()
    );
    for rail in &r.rails {
        let _ = writeln!(
            o,
            "rail {}: {} <-> {}{}",
            rail.index,
            t(&rail.outgoing.from),
            t(&rail.outgoing.to),
            rail.path_mtu
                .map(|m| format!(", path MTU {m}"))
                .unwrap_or_default()
        );
        if rail.setup.path.is_some() || rail.peer_path.is_some() {
            let _ = writeln!(o, "  memory: {}", t(&memory(rail)));
        }
        for (word, d) in [("out", &rail.outgoing), ("in ", &rail.incoming)] {
            match &d.failure {
                None => {
                    let _ = writeln!(
                        o,
                        "  {word} PASS {} -> {}: {}",
                        t(&d.from),
                        t(&d.to),
                        figures(d)
                    );
                }
                Some(f) => {
                    let _ = writeln!(
                        o,
                        "  {word} FAIL {} -> {}: {}: {}",
                        t(&d.from),
                        t(&d.to),
                        t(&f.step),
                        t(&f.message)
                    );
                }
            }
        }
        for n in &rail.notes {
            let _ = writeln!(o, "  note: {}", t(n));
        }
    }
    if let Some(e) = &r.error {
        let _ = writeln!(o, "error: {}", t(e));
    }
    let _ = writeln!(
        o,
        "{}",
        match r.exit_code() {
            0 => format!("ready: {} rail(s) pass both ways", r.rails.len()),
            1 => format!(
                "not ready: {} of {} rail(s) fail",
                r.rails.iter().filter(|x| !x.passed()).count(),
                r.rails.len()
            ),
            _ => "could not run".into(),
        }
    );
    o
}

/// `gdrdoctor: two-node ready` or `gdrdoctor: two-node rail 0 out, rail 1 in`.
pub fn reason(reports: &[Report]) -> String {
    reports.iter().map(reason_one).collect()
}

fn reason_one(r: &Report) -> String {
    if let Some(e) = &r.error_class {
        return format!("gdrdoctor: two-node {e}\n");
    }
    let bad: Vec<String> = r
        .rails
        .iter()
        .flat_map(|x| {
            [("out", &x.outgoing), ("in", &x.incoming)]
                .into_iter()
                .filter(|(_, d)| !d.passed())
                .map(move |(w, _)| format!("rail {} {w}", x.index))
        })
        .collect();
    if bad.is_empty() && !r.rails.is_empty() {
        "gdrdoctor: two-node ready\n".into()
    } else if r.rails.is_empty() {
        "gdrdoctor: two-node no-rails\n".into()
    } else {
        format!("gdrdoctor: two-node {}\n", bad.join(", "))
    }
}

/// One testsuite per session, one testcase per rail per direction, named `rail N out|in`.
pub fn junit(reports: &[Report]) -> String {
    let (mut suites, mut all) = (String::new(), (0, 0, 0));
    for r in reports {
        let (text, t, f, e) = suite(r);
        suites.push_str(&text);
        all = (all.0 + t, all.1 + f, all.2 + e);
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"gdrdoctor\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n{suites}</testsuites>\n",
        all.0, all.1, all.2
    )
}

fn suite(r: &Report) -> (String, usize, usize, usize) {
    let mut cases = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for rail in &r.rails {
        for (w, d) in [("out", &rail.outgoing), ("in", &rail.incoming)] {
            tests += 1;
            let name = format!("rail {} {w}: {} -> {}", rail.index, d.from, d.to);
            let body = match &d.failure {
                Some(f) => {
                    failures += 1;
                    format!(
                        "<failure message=\"{}\" type=\"{}\"/>",
                        attr(&format!("{}: {}", f.step, f.message)),
                        attr(
                            &serde_json::to_value(f.kind)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default()
                        )
                    )
                }
                None => format!("<system-out>{}</system-out>", attr(&figures(d))),
            };
            let _ = writeln!(
                cases,
                "    <testcase classname=\"gdrdoctor.two-node\" name=\"{}\">\n      {body}\n    </testcase>",
                attr(&name)
            );
        }
    }
    if let Some(e) = &r.error {
        tests += 1;
        errors += 1;
        let _ = writeln!(
            cases,
            "    <testcase classname=\"gdrdoctor.two-node\" name=\"control connection\">\n      <error message=\"{}\" type=\"{}\"/>\n    </testcase>",
            attr(e),
            attr(r.error_class.as_deref().unwrap_or(""))
        );
    }
    let text = format!(
        "  <testsuite name=\"gdrdoctor.two-node\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" hostname=\"{}\">\n    <properties>\n      <property name=\"peer\" value=\"{}\"/>\n    </properties>\n{cases}  </testsuite>\n",
        attr(&r.host),
        attr(r.peer.as_deref().unwrap_or(""))
    );
    (text, tests, failures, errors)
}

/// `gdrdoctor_two_node_*` gauges, one series per peer, rail and direction.
pub fn prometheus(reports: &[Report]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# HELP gdrdoctor_two_node_ready 1 when every rail passed both ways with this peer.\n# TYPE gdrdoctor_two_node_ready gauge"
    );
    for r in reports {
        let _ = writeln!(
            o,
            "gdrdoctor_two_node_ready{{peer=\"{}\"}} {}",
            escape_label(r.peer.as_deref().unwrap_or("")),
            u8::from(r.exit_code() == 0)
        );
    }
    let mut series = |name: &str, help: &str, value: &dyn Fn(&Direction) -> Option<f64>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for r in reports {
            let peer = escape_label(r.peer.as_deref().unwrap_or(""));
            for rail in &r.rails {
                for (w, d) in [("out", &rail.outgoing), ("in", &rail.incoming)] {
                    if let Some(v) = value(d) {
                        let _ = writeln!(
                            o,
                            "{name}{{peer=\"{peer}\",rail=\"{}\",nic=\"{}\",direction=\"{w}\"}} {v}",
                            rail.index,
                            escape_label(&rail.local.nic.device)
                        );
                    }
                }
            }
        }
    };
    series(
        "gdrdoctor_two_node_pass",
        "1 when the direction passed (data verified), 0 when it failed.",
        &|d| Some(if d.passed() { 1.0 } else { 0.0 }),
    );
    series(
        "gdrdoctor_two_node_bandwidth_gbps",
        "RDMA WRITE bandwidth, Gb/s.",
        &|d| d.gbps,
    );
    series(
        "gdrdoctor_two_node_latency_microseconds",
        "Median time from posting one small WRITE to its completion.",
        &|d| d.latency_us,
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdr::{Failure, FailureKind, Memory, NicSpec, PairResult};
    use crate::model::twonode::{Rail, Role, Settings};

    fn dir(from: &str, to: &str, fail: Option<&str>) -> Direction {
        Direction {
            from: from.into(),
            to: to.into(),
            verified_bytes: fail.is_none().then_some(1 << 20),
            gbps: fail.is_none().then_some(390.5),
            latency_us: fail.is_none().then_some(4.2),
            failure: fail.map(|m| Failure {
                kind: FailureKind::CompletionError,
                step: "RDMA WRITE".into(),
                message: m.into(),
            }),
        }
    }

    fn report() -> Report {
        let rail = |i: usize, dev: &str, fail: Option<&str>| RailResult {
            index: i,
            local: Rail {
                nic: NicSpec {
                    device: dev.into(),
                    port: 1,
                    gid_index: Some(3),
                },
                gpu: Some("0000:3b:00.0".into()),
                memory: Memory::Cuda,
                subject: "GPU 0000:3b:00.0".into(),
            },
            peer: None,
            setup: PairResult {
                path: Some("dmabuf".into()),
                ..PairResult::default()
            },
            peer_path: Some("peermem".into()),
            path_mtu: Some(4096),
            notes: vec![],
            outgoing: dir("a mlx5_0", "b mlx5_0", None),
            incoming: dir("b mlx5_0", "a mlx5_0", fail),
        };
        let mut r = Report::new("a", Role::Connector, Settings::default());
        r.peer = Some("b\"".into());
        r.rails = vec![
            rail(0, "mlx5_0", None),
            rail(1, "mlx5_1", Some("IBV_WC_RETRY_EXC_ERR <&>")),
        ];
        r
    }

    /// The peer's host name, its failure messages and a refused reason are the other node's
    /// words: shown escaped, so that none forges a line or drives the terminal.
    #[test]
    fn the_peers_words_are_shown_escaped() {
        const FORGED: &str = "evil\n\u{1b}[2J\u{1b}[32mready: 8 rail(s) pass both ways\u{202e}";
        let mut r = report();
        r.peer = Some(FORGED.into());
        r.rails[1].incoming.failure.as_mut().unwrap().message = FORGED.into();
        r.rails[1].notes.push(FORGED.into());
        r.error = Some(format!("the peer refused this side: {FORGED}"));
        let (h, j, p) = (human(&[r.clone()]), junit(&[r.clone()]), prometheus(&[r]));
        for text in [&h, &j, &p] {
            assert!(!text.contains(['\u{1b}', '\u{202e}']), "{text}");
            assert!(
                !text
                    .lines()
                    .any(|l| l.starts_with("ready") || l.starts_with("\u{1b}")),
                "{text}"
            );
        }
        assert!(h.contains("with evil\\n\\u{1b}[2J"), "{h}");
        assert!(j.contains("evil\\n\\u{1b}[2J"), "{j}");
    }

    #[test]
    fn junit_has_one_case_per_rail_per_direction() {
        let x = junit(&[report()]);
        let doc = roxmltree::Document::parse(&x).unwrap();
        let cases: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("testcase"))
            .collect();
        assert_eq!(cases.len(), 4, "{x}");
        assert_eq!(
            cases[3].attribute("name"),
            Some("rail 1 in: b mlx5_0 -> a mlx5_0")
        );
        assert_eq!(
            doc.descendants()
                .filter(|n| n.has_tag_name("failure"))
                .count(),
            1
        );
        assert!(x.contains("tests=\"4\" failures=\"1\" errors=\"0\""), "{x}");
    }

    #[test]
    fn prometheus_and_reason_name_rail_and_direction() {
        let p = prometheus(&[report()]);
        assert!(
            p.contains("gdrdoctor_two_node_ready{peer=\"b\\\"\"} 0"),
            "{p}"
        );
        assert!(
            p.contains(
                "gdrdoctor_two_node_pass{peer=\"b\\\"\",rail=\"1\",nic=\"mlx5_1\",direction=\"in\"} 0"
            ),
            "{p}"
        );
        assert!(p.contains("gdrdoctor_two_node_bandwidth_gbps{peer=\"b\\\"\",rail=\"0\",nic=\"mlx5_0\",direction=\"out\"} 390.5"), "{p}");
        assert_eq!(reason(&[report()]), "gdrdoctor: two-node rail 1 in\n");
        let h = human(&[report()]);
        assert!(
            h.contains("in  FAIL b mlx5_0 -> a mlx5_0: RDMA WRITE: IBV_WC_RETRY_EXC_ERR"),
            "{h}"
        );
        assert!(
            h.contains("this node's GPU 0000:3b:00.0 (dmabuf), the peer's peermem"),
            "{h}"
        );
        assert!(h.ends_with("not ready: 1 of 2 rail(s) fail\n"), "{h}");
        let j: serde_json::Value = serde_json::from_str(&json(&[report()])).unwrap();
        assert_eq!(j["schema"], "gdrdoctor.two-node");
    }
}
