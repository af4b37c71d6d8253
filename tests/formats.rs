//! The machine formats a scheduler, CI system or monitoring reads (`--format reason | nfd |
//! junit | prometheus`), `--output` / `--textfile-dir`, `--deadline`, and the man page and
//! completions the packages install. Whole outputs are snapshotted; tests/integrations/
//! formats.sh feeds them to the real consumers (promtool, a JUnit parser).
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use std::time::Duration;

/// A failing node.
fn failing() -> &'static str {
    fixture("acs-redirect-on-path")
}

/// A ready node.
fn ready() -> &'static str {
    fixture("healthy-8gpu-roce")
}

/// A node ready but unverified (acs unknown).
fn unverified() -> &'static str {
    fixture("config-unprivileged")
}

fn out(root: &str, format: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["--root", root, "check", "--format", format];
    args.extend(extra);
    let o = gdrdoctor(&args);
    (code(&o), stdout(&o))
}

/// Lines that change from run to run (when, how long).
fn stable(prom: &str) -> String {
    prom.lines()
        .filter(|l| {
            !l.starts_with("gdrdoctor_last_run_timestamp_seconds ")
                && !l.starts_with("gdrdoctor_run_duration_seconds ")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn reason_is_one_line_a_scheduler_can_use() {
    assert_eq!(
        out(failing(), "reason", &[]),
        (1, "gdrdoctor: fix-in-place(acs-redirect-on-path)\n".into())
    );
    assert_eq!(
        out(ready(), "reason", &[]),
        (0, "gdrdoctor: ready\n".into())
    );
    assert_eq!(
        out(unverified(), "reason", &[]),
        (0, "gdrdoctor: ready (unverified: acs)\n".into())
    );
    // --strict: the unknown blocks, and the reason names it.
    let (c, line) = out(unverified(), "reason", &["--strict"]);
    assert_eq!(c, 1);
    assert!(line.starts_with("gdrdoctor: none(acs-"), "{line}");
    // Two failing checks: every blocking code, by action (the strongest first), in check order
    // within it, each once.
    assert_eq!(
        out(fixture("h100x4-fabric-in-progress"), "reason", &[]),
        (
            1,
            "gdrdoctor: provider(rdma-no-device) fix-in-place(gpu-fabric-not-ready)\n".into()
        )
    );
    // Every failing fixture: one line, only code and action characters, the codes the JSON
    // blocks on, each under the strongest action of its blocking findings.
    for name in fixture_names() {
        if name.starts_with("broken/") || name.starts_with("fleet/") {
            continue;
        }
        let root = fixture(&name);
        let (c, line) = out(root, "reason", &[]);
        let report = json(&gdrdoctor(&["--root", root, "check", "--format", "json"]));
        assert_eq!(line.lines().count(), 1, "{root}: {line:?}");
        let body = line.trim_end().strip_prefix("gdrdoctor: ").unwrap();
        if c == 1 {
            // The actions, the strongest first (docs/actions.md).
            const ORDER: [&str; 6] = [
                "provider",
                "replace-part",
                "reboot",
                "reset-gpu",
                "fix-in-place",
                "none",
            ];
            let rank = |a: &str| ORDER.iter().position(|x| *x == a).unwrap();
            let mut want: Vec<(String, usize)> = Vec::new();
            for b in report["verdict"]["blocking"].as_array().unwrap() {
                let check = report["checks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["id"] == b["check"])
                    .unwrap();
                for code in b["codes"].as_array().unwrap() {
                    let code = code.as_str().unwrap().to_owned();
                    let action = check["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter(|f| f["code"] == code.as_str() && f["status"] == "fail")
                        .map(|f| rank(f["action"].as_str().expect("a failure's action")))
                        .min()
                        .unwrap();
                    match want.iter_mut().find(|(c, _)| *c == code) {
                        Some((_, a)) => *a = (*a).min(action),
                        None => want.push((code, action)),
                    }
                }
            }
            let groups: Vec<String> = ORDER
                .iter()
                .enumerate()
                .filter_map(|(i, a)| {
                    let of: Vec<&str> = want
                        .iter()
                        .filter(|(_, r)| *r == i)
                        .map(|(c, _)| c.as_str())
                        .collect();
                    (!of.is_empty()).then(|| format!("{a}({})", of.join(",")))
                })
                .collect();
            assert_eq!(body, groups.join(" "), "{root}");
            assert!(
                body.chars().all(|ch| ch.is_ascii_lowercase()
                    || ch.is_ascii_digit()
                    || "-,+() ".contains(ch)),
                "{root}: {body}"
            );
        } else {
            assert!(body.starts_with("ready"), "{root}: {body}");
        }
    }
}

#[test]
fn nfd_feature_files() {
    let label = |l: &str| {
        let (k, v) = l.split_once('=').expect("name=value");
        let k = k
            .strip_prefix("feature.node.kubernetes.io/")
            .expect("NFD's default namespace, in full");
        let ok = |s: &str, max| {
            !s.is_empty()
                && s.len() <= max
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && s.chars().next().unwrap().is_ascii_alphanumeric()
                && s.chars().last().unwrap().is_ascii_alphanumeric()
        };
        assert!(ok(k, 63) && ok(v, 63), "not a valid NFD label: {l}");
    };
    for (root, name, rc) in [
        (failing(), "nfd-failing", 1),
        (ready(), "nfd-ready", 0),
        (fixture("healthy-4gpu-ib-peermem"), "nfd-peermem", 0),
        (fixture("amd-no-gdr-path"), "nfd-no-path", 1),
    ] {
        let (c, text) = out(root, "nfd", &[]);
        assert_eq!(c, rc, "{root}");
        text.lines().filter(|l| !l.starts_with('#')).for_each(label);
        insta::assert_snapshot!(name, text);
    }
    // A capture without GPUs: the same word as the fleet view.
    let (_, text) = out(fixture("lab-switch-pt"), "nfd", &[]);
    assert!(text.contains("/gdr.path=no-gpu\n"), "{text}");
    // --nfd-expiry: NFD drops the labels at that time (RFC 3339, UTC).
    let (_, text) = out(ready(), "nfd", &["--nfd-expiry", "1800"]);
    let line = text.lines().nth(1).unwrap();
    let when = line.strip_prefix("# +expiry-time=").expect(line);
    assert!(
        when.len() == 20 && when.ends_with('Z') && when.as_bytes()[10] == b'T',
        "{when}"
    );
}

#[test]
fn junit_one_testcase_per_finding() {
    let (c, xml) = out(failing(), "junit", &[]);
    assert_eq!(c, 1);
    insta::assert_snapshot!("junit-failing", xml);
    let report = json(&gdrdoctor(&[
        "--root",
        failing(),
        "check",
        "--format",
        "json",
    ]));
    let findings: usize = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["findings"].as_array().unwrap().len().max(1))
        .sum();
    assert_eq!(xml.matches("<testcase ").count(), findings);
    assert!(
        xml.contains("tests=\"20\" failures=\"1\" errors=\"0\""),
        "{xml}"
    );
    // Ready: no failure, no error. Unknown is skipped, or an error under --strict.
    let (_, xml) = out(ready(), "junit", &[]);
    assert!(!xml.contains("<failure") && !xml.contains("<error"));
    let (_, xml) = out(unverified(), "junit", &[]);
    assert!(xml.contains("failures=\"0\" errors=\"0\""), "{xml}");
    let (_, xml) = out(unverified(), "junit", &["--strict"]);
    assert!(xml.contains("<error type=\"acs-"), "{xml}");
}

#[test]
fn prometheus_gauges() {
    let (c, text) = out(failing(), "prometheus", &[]);
    assert_eq!(c, 1);
    assert!(text.contains("\ngdrdoctor_ready 0\n"));
    assert!(text.contains("gdrdoctor_check_status{check=\"acs\",status=\"fail\"} 1\n"));
    assert!(text.contains(
        "gdrdoctor_findings{check=\"acs\",code=\"acs-redirect-on-path\",status=\"fail\"} 1\n"
    ));
    let ts: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("gdrdoctor_last_run_timestamp_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - ts).abs() < 120.0, "{ts} vs {now}");
    insta::assert_snapshot!("prometheus-failing", stable(&text));
    let (_, text) = out(ready(), "prometheus", &[]);
    assert!(text.contains("\ngdrdoctor_ready 1\n"));
}

#[test]
fn outputs_are_written_whole_next_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let json_path = format!("json:{d}/report.json");
    let nfd_path = format!("nfd:{d}/gdrdoctor");
    let o = gdrdoctor(&[
        "--root",
        failing(),
        "check",
        "--format",
        "reason",
        "--output",
        &json_path,
        "--output",
        &nfd_path,
        "--textfile-dir",
        d,
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "gdrdoctor: fix-in-place(acs-redirect-on-path)\n"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["gdrdoctor", "gdrdoctor.prom", "report.json"]);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(saved["verdict"]["ready"], false);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("gdrdoctor")).unwrap(),
        out(failing(), "nfd", &[]).1
    );
    let prom = std::fs::read_to_string(dir.path().join("gdrdoctor.prom")).unwrap();
    assert_eq!(stable(&prom), stable(&out(failing(), "prometheus", &[]).1));
    // A directory that does not exist: the report still goes to stdout; a ready node's run
    // exits 2 and names the file ...
    let o = gdrdoctor(&[
        "--root",
        ready(),
        "check",
        "--format",
        "reason",
        "--output",
        "json:/nonexistent-gdrdoctor-dir/r.json",
    ]);
    assert_eq!(code(&o), 2);
    assert_eq!(stdout(&o), "gdrdoctor: ready\n");
    assert!(
        stderr(&o).contains("cannot write /nonexistent-gdrdoctor-dir/r.json"),
        "{}",
        stderr(&o)
    );
    // ... but never hides "not ready": a prolog must still drain (exit 1, and the warning).
    let o = gdrdoctor(&[
        "--root",
        failing(),
        "check",
        "--format",
        "reason",
        "--output",
        "json:/nonexistent-gdrdoctor-dir/r.json",
    ]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("cannot write /nonexistent-gdrdoctor-dir/r.json"));
    // Bad specs are refused before anything runs.
    for bad in ["json", "yaml:/tmp/x", "json:"] {
        let o = gdrdoctor(&["--root", ready(), "check", "--output", bad]);
        assert_eq!(code(&o), 2, "{bad}");
    }
}

/// A GPU probe that hangs, with --deadline 1.5: the run ends in time, and the probe is an
/// unknown that says it was cut short, not a verdict on the GPUs.
#[test]
fn deadline_cuts_the_gpu_probe_short() {
    let (_dir, exe) = script("sleep 30");
    let bound = Duration::from_millis(1500);
    let (o, took) = in_time(bound, || {
        Gdrdoctor::new()
            .args([
                "--root",
                ready(),
                "--deadline",
                "1.5",
                "check",
                "--gpu-probe",
                "--format",
                "json",
            ])
            .env("GDRDOCTOR_PROBE_EXE", &exe)
            .output()
    });
    assert!(took[took.len() - 1] < bound, "{took:?}");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let r = json(&o);
    let gpu = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "gpu")
        .unwrap();
    assert_eq!(gpu["status"], "unknown");
    let msg = gpu["findings"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("cut short by the --deadline of 1.5 s"),
        "{msg}"
    );
    assert_eq!(r["verdict"]["verified"], false);
}

/// When reading the node itself overruns (a sysfs read that blocks on a dead device; the test
/// stands one in), the watchdog ends the run at the deadline with exit 2, saying where it was.
#[test]
fn deadline_watchdog_ends_a_stuck_run() {
    let bound = Duration::from_millis(1000);
    let (o, took) = in_time(bound, || {
        Gdrdoctor::new()
            .args([
                "--root",
                ready(),
                "--deadline",
                "0.5",
                "check",
                "--format",
                "reason",
            ])
            .env("GDRDOCTOR_TEST_STALL_MS", "20000")
            .output()
    });
    assert!(took[took.len() - 1] < bound, "{took:?}");
    assert_eq!(code(&o), 2);
    assert_eq!(stdout(&o), "gdrdoctor: deadline-exceeded\n");
    assert!(
        stderr(&o).contains("the --deadline of 0.5 s passed while reading the node"),
        "{}",
        stderr(&o)
    );
    // Without a stall the same deadline is plenty: a run that took under 0.5 s cannot have met
    // the watchdog, and a slower one (a loaded machine) is tried again.
    let (o, took) = in_time(Duration::from_millis(500), || {
        gdrdoctor(&[
            "--root",
            ready(),
            "--deadline",
            "0.5",
            "check",
            "--format",
            "reason",
        ])
    });
    assert_eq!(
        (code(&o), stdout(&o)),
        (0, "gdrdoctor: ready\n".into()),
        "{took:?}"
    );
    for bad in ["0", "-1", "soon", "1e9"] {
        assert_eq!(code(&gdrdoctor(&["--deadline", bad, "list"])), 2, "{bad}");
    }
}

#[test]
fn man_pages_and_completions_come_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let o = gdrdoctor(&["man", dir.path().to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("gdrdoctor.1")).unwrap();
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH gdrdoctor 1"),
        "{page}"
    );
    assert!(page.contains("deadline"));
    let check = std::fs::read_to_string(dir.path().join("gdrdoctor-check.1")).unwrap();
    assert!(check.contains("textfile"));
    // Hidden internals stay out of the pages.
    assert!(!dir.path().join("gdrdoctor-probe-gpu.1").exists());
    for shell in ["bash", "zsh", "fish"] {
        let o = gdrdoctor(&["completions", shell]);
        assert_eq!(code(&o), 0);
        let s = stdout(&o);
        assert!(s.contains("fleet") && s.contains("deadline"), "{shell}");
        assert!(
            !s.contains("probe-gpu") && !s.contains("gdr-pair"),
            "{shell}"
        );
    }
}
