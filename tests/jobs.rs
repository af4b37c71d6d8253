//! Production truth (issue 42): what records NCCL's own GPUDirect RDMA decisions for every job.
//! The Slurm TaskProlog (packaging/slurm/task-prolog.sh), run as Slurm runs it: a script whose
//! `export NAME=value` lines Slurm sets in the task.
#![allow(clippy::disallowed_methods)] // tests build inputs, they do not read a node

use crate::common::*;
use std::path::Path;
use std::time::Duration;

/// The TaskProlog's output and the job directory, for `env` (the task's environment).
fn task_prolog(jobs: &Path, env: &[(&str, &str)]) -> String {
    // As the job's user runs it: as root, root without capabilities, whom modes bind.
    let mut c = if effective_uid() == 0 {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--bounding-set=-all", "--inh-caps=-all", "bash"]);
        c
    } else {
        std::process::Command::new("bash")
    };
    c.arg(crate_dir().join("packaging/slurm/task-prolog.sh"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("GDRDOCTOR_DEFAULTS", "/dev/null")
        .env("GDRDOCTOR_JOBS_DIR", jobs);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A job that set nothing gets NCCL's INFO lines of INIT, NET and ENV written to its own
/// directory, one file per host and process (NCCL's %h, %p); a job that set NCCL_DEBUG or
/// NCCL_DEBUG_FILE keeps its own, and its directory says it was not recorded and why; a job id
/// that is not one, or a directory that is a link, records nothing.
#[test]
fn the_task_prolog_sets_what_the_job_has_not() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = task_prolog(&jobs, &[("SLURM_JOB_ID", "4242")]);
    let dir = jobs.join("4242");
    assert_eq!(
        out,
        format!(
            "export NCCL_DEBUG=INFO\nexport NCCL_DEBUG_SUBSYS=INIT,NET,ENV\nexport NCCL_DEBUG_FILE={}/nccl.%h.%p.log\n",
            dir.display()
        )
    );
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // The job's own subsystems are kept.
    let out = task_prolog(
        &jobs,
        &[("SLURM_JOB_ID", "4242"), ("NCCL_DEBUG_SUBSYS", "GRAPH")],
    );
    assert!(
        !out.contains("NCCL_DEBUG_SUBSYS") && out.contains("NCCL_DEBUG=INFO"),
        "{out}"
    );
    // A step inside a batch script inherits the batch step's settings, which are ours: kept,
    // and no "not recorded".
    let ours = format!("{}/nccl.%h.%p.log", dir.display());
    let out = task_prolog(
        &jobs,
        &[
            ("SLURM_JOB_ID", "4242"),
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV"),
            ("NCCL_DEBUG_FILE", &ours),
        ],
    );
    assert!(out.contains(&format!("NCCL_DEBUG_FILE={ours}")), "{out}");
    assert!(!dir.join("not-recorded").exists());
    // The job's own NCCL_DEBUG_FILE (or NCCL_DEBUG) wins: nothing set, the reason kept.
    let out = task_prolog(
        &jobs,
        &[
            ("SLURM_JOB_ID", "4243"),
            ("NCCL_DEBUG_FILE", "/tmp/mine.%h"),
        ],
    );
    assert_eq!(out, "");
    assert_eq!(
        std::fs::read_to_string(jobs.join("4243/not-recorded")).unwrap(),
        "not recorded: the job set NCCL_DEBUG_FILE\n"
    );
    let out = task_prolog(&jobs, &[("SLURM_JOB_ID", "4244"), ("NCCL_DEBUG", "WARN")]);
    assert_eq!(out, "");
    assert!(
        std::fs::read_to_string(jobs.join("4244/not-recorded"))
            .unwrap()
            .contains("NCCL_DEBUG=WARN")
    );
    // A jobs directory the job cannot write (or that is missing): nothing exported, so that NCCL
    // does not print its lines into the job's own output for want of its file.
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    assert_eq!(task_prolog(&ro, &[("SLURM_JOB_ID", "4246")]), "");
    assert!(!ro.join("4246").exists());
    // The job's own directory made read-only: the same.
    std::fs::create_dir(jobs.join("4247")).unwrap();
    std::fs::set_permissions(jobs.join("4247"), std::fs::Permissions::from_mode(0o500)).unwrap();
    assert_eq!(task_prolog(&jobs, &[("SLURM_JOB_ID", "4247")]), "");
    assert_eq!(
        task_prolog(&d.path().join("missing"), &[("SLURM_JOB_ID", "4246")]),
        ""
    );
    // Not a job id; a job directory that is a link: nothing recorded, the task runs.
    assert_eq!(task_prolog(&jobs, &[("SLURM_JOB_ID", "../x")]), "");
    std::os::unix::fs::symlink(d.path(), jobs.join("4245")).unwrap();
    assert_eq!(task_prolog(&jobs, &[("SLURM_JOB_ID", "4245")]), "");
}

// ---------------------------------------------------------------------------------------------
// The Epilog (packaging/slurm/epilog.sh) and `gdrdoctor jobs record`: one journal line per job
// and node, the last job's metrics, the logs removed; and never hurting a job (issue 42, point 5).

/// A jobs directory as the TaskProlog finds it (1777), a journal beside it.
struct Spool {
    _d: tempfile::TempDir,
    jobs: std::path::PathBuf,
    journal: std::path::PathBuf,
    textfile: std::path::PathBuf,
    reports: std::path::PathBuf,
}

fn spool() -> Spool {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs");
    std::fs::create_dir(&jobs).unwrap();
    std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let reports = d.path().join("run");
    std::fs::create_dir(&reports).unwrap();
    Spool {
        journal: d.path().join("lib/jobs.jsonl"),
        textfile: d.path().join("job.prom"),
        jobs,
        reports,
        _d: d,
    }
}

impl Spool {
    /// Job `id`'s directory with `logs` (file name, contents).
    fn job(&self, id: &str, logs: &[(&str, &[u8])]) -> std::path::PathBuf {
        let dir = self.jobs.join(id);
        std::fs::create_dir(&dir).unwrap();
        for (name, text) in logs {
            std::fs::write(dir.join(name), text).unwrap();
        }
        dir
    }

    /// The Epilog for job `id` on node `node`, with `gdrdoctor` as the binary and `extra`
    /// settings; it must exit 0 within `wall`.
    fn epilog(&self, id: &str, node: &str, gdrdoctor: &Path, extra: &str, wall: u64) -> String {
        let defaults = self.jobs.parent().unwrap().join("defaults");
        std::fs::write(
            &defaults,
            format!(
                "GDRDOCTOR={}\nGDRDOCTOR_JOBS_DIR={}\nGDRDOCTOR_JOURNAL={}\nGDRDOCTOR_JOBS_RECENT={}\nGDRDOCTOR_TEXTFILE={}\nGDRDOCTOR_REPORT_DIR={}\n{extra}\n",
                gdrdoctor.display(),
                self.jobs.display(),
                self.journal.display(),
                self.recent().display(),
                self.textfile.display(),
                self.reports.display()
            ),
        )
        .unwrap();
        let start = std::time::Instant::now();
        let out = std::process::Command::new("bash")
            .arg(crate_dir().join("packaging/slurm/epilog.sh"))
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("GDRDOCTOR_DEFAULTS", &defaults)
            .env("SLURM_JOB_ID", id)
            .env("SLURMD_NODENAME", node)
            .output()
            .unwrap();
        let took = start.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "the Epilog failed: {err}");
        assert!(took.as_secs() < wall, "the Epilog took {took:?}: {err}");
        err
    }

    /// `gdrdoctor jobs record` on job `id`'s directory as the Epilog runs it (the logs removed),
    /// with `extra` arguments; it must succeed.
    fn record(&self, id: &str, node: &str, extra: &[&str]) {
        let dir = self.jobs.join(id);
        let mut args = vec![
            "jobs",
            "record",
            dir.to_str().unwrap(),
            "--journal",
            self.journal.to_str().unwrap(),
            "--remove",
            "--job",
            id,
            "--node",
            node,
        ];
        args.extend_from_slice(extra);
        let out = gdrdoctor(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The node's recent jobs' file, as the Epilog keeps it.
    fn recent(&self) -> std::path::PathBuf {
        self.journal.with_file_name("jobs-recent.json")
    }

    /// The journal's lines, each parsed (a line that is not JSON fails the test).
    fn lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.journal)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_gdrdoctor"))
}

fn log(name: &str) -> Vec<u8> {
    std::fs::read(crate_dir().join("fixtures/nccl-logs").join(name)).unwrap()
}

/// A job whose ranks used GDR and one whose NCCL had no peer memory on a node the Prolog called
/// ready: a line each, the second contradicting the prediction; the textfile says the last job
/// rank by rank; the logs and the directories are gone.
#[test]
fn the_epilog_records_each_job_and_removes_its_logs() {
    let s = spool();
    std::fs::write(
        s.reports.join("prolog.json"),
        r#"{"verdict":{"ready":true,"state":"ready","summary":"ready: 9 passed, 2 skipped"}}"#,
    )
    .unwrap();
    s.job(
        "101",
        &[("nccl.node17.4242.log", &log("nccl-707-gdrdma-ib.log"))],
    );
    s.job(
        "102",
        &[("nccl.node17.4243.log", &log("nccl-899-no-module.log"))],
    );
    s.epilog("101", "node17", bin(), "", 20);
    s.epilog("102", "node17", bin(), "", 20);
    let lines = s.lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["job"], "101");
    assert_eq!(lines[0]["status"], "gdr");
    assert_eq!(lines[0]["connections"]["gdr"], 12);
    assert_eq!(lines[0]["contradicted"], false);
    assert_eq!(lines[1]["status"], "no-gdr");
    assert_eq!(lines[1]["node"], "node17");
    assert_eq!(lines[1]["causes"][0]["cause"], "no-peer-memory");
    assert_eq!(lines[1]["predicted"]["ready"], true);
    assert_eq!(lines[1]["contradicted"], true);
    assert_eq!(lines[1]["logs"]["removed"], true);
    assert!(!s.jobs.join("101").exists() && !s.jobs.join("102").exists());
    let prom = std::fs::read_to_string(&s.textfile).unwrap();
    assert!(
        prom.contains(r#"gdrdoctor_last_job_info{job="102",user="",status="no-gdr""#),
        "{prom}"
    );
    assert!(prom.contains("gdrdoctor_last_job_contradicted 1"), "{prom}");
    assert!(
        prom.lines()
            .any(|l| l.starts_with("gdrdoctor_job_gdr{job=\"102\"") && l.ends_with(" 0")),
        "{prom}"
    );
}

/// A job that set its own NCCL_DEBUG_FILE is "not recorded", a job without NCCL "not exercised":
/// never "no GDR".
#[test]
fn jobs_without_a_recording_or_without_nccl_are_never_no_gdr() {
    let s = spool();
    s.job(
        "201",
        &[(
            "not-recorded",
            b"not recorded: the job set NCCL_DEBUG_FILE\n",
        )],
    );
    s.job("202", &[]);
    s.job(
        "203",
        &[("nccl.n.1.log", &log("nccl-1653-wsl-single-node.log"))],
    );
    for id in ["201", "202", "203"] {
        s.epilog(id, "n", bin(), "", 20);
    }
    let st: Vec<(String, String)> = s
        .lines()
        .iter()
        .map(|l| {
            (
                l["status"].as_str().unwrap().to_owned(),
                l["summary"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(st[0].0, "not-recorded");
    assert_eq!(st[0].1, "not recorded: the job set NCCL_DEBUG_FILE");
    assert_eq!(st[1].0, "no-nccl");
    assert_eq!(st[2].0, "not-exercised", "{}", st[2].1);
}

/// A missing binary, and one that hangs: the Epilog exits 0 in its time, the journal gets a
/// line saying why (one `gdrdoctor jobs` reads), the logs are removed all the same.
#[test]
fn a_missing_or_hanging_binary_never_fails_the_epilog() {
    let s = spool();
    s.job("301", &[("nccl.n.1.log", b"x\n")]);
    s.epilog("301", "n", Path::new("/nonexistent/gdrdoctor"), "", 10);
    let hang = s.jobs.parent().unwrap().join("hang.sh");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&hang, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    s.job("302", &[("nccl.n.2.log", b"x\n")]);
    s.epilog("302", "n", &hang, "GDRDOCTOR_EPILOG_SECONDS=1", 15);
    let lines = s.lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["status"], "error");
    assert!(
        lines[0]["summary"]
            .as_str()
            .unwrap()
            .contains("could not be run (exit 127)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1]["summary"]
            .as_str()
            .unwrap()
            .contains("timed out after 6 s"),
        "{}",
        lines[1]
    );
    assert!(!s.jobs.join("301").exists() && !s.jobs.join("302").exists());
    let out = gdrdoctor(&["jobs", "--format", "json", s.journal.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["taken"].as_u64(), v["malformed"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(v["nodes"][0]["not_recorded"], 2);
}

/// A job of thousands of ranks, a log of gigabytes, a killed job's last line cut in half, a FIFO
/// and links among the logs: the line is written within the bounds, says it was cut, names what
/// was refused, reads nothing through a link; every entry is removed.
#[test]
fn big_killed_and_hostile_job_directories_are_bounded() {
    let s = spool();
    let dir = s.job("401", &[]);
    // 5,000 ranks, one log each (more than one listing reads): rank r's GDR connection.
    for r in 0..5000u32 {
        std::fs::write(
            dir.join(format!("nccl.h.{r}.log")),
            format!("h:{r}:{r} [0] NCCL INFO Channel 00/0 : {r}[0] -> {}[0] [send] via NET/IB/0/GDRDMA\n", r + 1),
        )
        .unwrap();
    }
    // A sparse log of 2 GiB after a killed job's cut line.
    let big = dir.join("nccl.h.big.log");
    std::fs::write(
        &big,
        "h:9:9 [0] NCCL INFO Channel 00/0 : 7[0] -> 8[0] [receive] via NET/IB/0/GDR",
    )
    .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let secret = s.jobs.parent().unwrap().join("secret");
    std::fs::write(
        &secret,
        "h:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via NET/IB/0\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("nccl.h.link.log")).unwrap();
    std::fs::create_dir_all(s.journal.parent().unwrap()).unwrap();
    let fifo = dir.join("nccl.h.fifo.log");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let ran = Gdrdoctor::new()
        .args(["jobs", "record"])
        .arg(&dir)
        .arg("--journal")
        .arg(&s.journal)
        .args([
            "--remove",
            "--job",
            "401",
            "--node",
            "h",
            "--max-log-mib",
            "8",
        ])
        .within(Duration::from_secs(30), 300)
        .run();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let lines = s.lines();
    let l = &lines[0];
    assert_eq!(l["status"], "gdr", "{l}");
    assert_eq!(l["logs"]["cut"], true);
    assert_eq!(l["ranks"].as_array().unwrap().len(), 1024);
    assert!(l["ranks_more"].as_u64().unwrap() > 0);
    let refused = l["logs"]["refused"].to_string();
    assert!(
        refused.contains("nccl.h.link.log: a link, not followed"),
        "{refused}"
    );
    assert!(
        refused.contains("nccl.h.fifo.log: a FIFO, not a regular file"),
        "{refused}"
    );
    assert!(
        std::fs::read_to_string(&secret)
            .unwrap()
            .contains("NET/IB/0")
    );
    assert_eq!(l["logs"]["removed"], true);
    assert!(!dir.exists());
    assert!(std::fs::metadata(&s.journal).unwrap().len() < 256 * 1024);
}

/// The job directory swapped for a link (to a directory of someone else's): nothing read there,
/// nothing removed there.
#[test]
fn a_job_directory_that_is_a_link_is_not_followed() {
    let s = spool();
    let other = s.jobs.parent().unwrap().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("nccl.h.1.log"), log("nccl-707-gdrdma-ib.log")).unwrap();
    std::os::unix::fs::symlink(&other, s.jobs.join("501")).unwrap();
    s.epilog("501", "h", bin(), "", 20);
    let l = &s.lines()[0];
    assert_eq!(l["status"], "error", "{l}");
    assert!(other.join("nccl.h.1.log").exists());
}

/// Epilogs of jobs ending at once append whole lines; a journal past its limit moves to .1, so
/// that the journal takes at most twice the limit; a write the disk refuses leaves the journal
/// whole lines (RLIMIT_FSIZE stands in for a full disk).
#[test]
fn the_journal_stays_whole_lines_and_bounded() {
    let s = spool();
    std::fs::create_dir_all(s.journal.parent().unwrap()).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let dir = s.job(
                &format!("6{i:02}"),
                &[("nccl.h.1.log", &log("nccl-707-gdrdma-ib.log"))],
            );
            let journal = s.journal.clone();
            std::thread::spawn(move || {
                Gdrdoctor::new()
                    .args(["jobs", "record"])
                    .arg(&dir)
                    .arg("--journal")
                    .arg(&journal)
                    .args(["--remove", "--job", &format!("6{i:02}"), "--node", "h"])
                    .output()
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap().status.success());
    }
    assert_eq!(s.lines().len(), 16);
    let before = std::fs::read(&s.journal).unwrap();
    // A limit of 1 MiB and a line that does not fit under RLIMIT_FSIZE: refused, nothing cut.
    s.job("700", &[("nccl.h.1.log", &log("nccl-707-gdrdma-ib.log"))]);
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; exec prlimit --fsize={} -- \"$0\" jobs record \"$1\" --journal \"$2\" --job 700 --node h",
            before.len() + 100
        ))
        .arg(bin())
        .arg(s.jobs.join("700"))
        .arg(&s.journal)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&s.journal).unwrap(), before);
    // The limit: past it, the journal moves aside and the new line starts a new one.
    let first = before.split(|&b| b == b'\n').next().unwrap().to_vec();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&s.journal)
        .unwrap();
    while f.metadata().unwrap().len() < 1 << 20 {
        std::io::Write::write_all(&mut f, &[&first[..], b"\n"].concat()).unwrap();
    }
    let ran = gdrdoctor(&[
        "jobs",
        "record",
        s.jobs.join("700").to_str().unwrap(),
        "--journal",
        s.journal.to_str().unwrap(),
        "--journal-max-mib",
        "1",
        "--job",
        "700",
        "--node",
        "h",
    ]);
    assert!(ran.status.success());
    let mut rotated = s.journal.as_os_str().to_owned();
    rotated.push(".1");
    assert!(std::fs::metadata(&rotated).unwrap().len() >= 1 << 20);
    let lines = s.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["job"], "700");
}

/// `gdrdoctor jobs` over a journal of three nodes: node17's jobs without GDR on a node its check
/// called ready (contradicted) come first with their repeating cause; node18's job whose NCCL
/// read policy left sends without GDR is its own setting, not a contradiction; node19's jobs were
/// not recorded or did not use the network. Human, CSV and JSON; a time range; a malformed line.
#[test]
fn jobs_ranks_nodes_and_nics_by_jobs_without_gdr() {
    let s = spool();
    std::fs::create_dir_all(s.journal.parent().unwrap()).unwrap();
    let ready = s.reports.join("prolog.json");
    std::fs::write(
        &ready,
        r#"{"verdict":{"ready":true,"state":"ready","summary":"ready: 9 passed"}}"#,
    )
    .unwrap();
    let jobs: &[(&str, &str, &str)] = &[
        ("1001", "node17", "nccl-707-gdrdma-ib.log"),
        ("1002", "node17", "nccl-899-no-module.log"),
        ("1003", "node17", "nccl-899-no-module.log"),
        ("1004", "node18", "nccl-tests-133-roce-gdrdma.log"),
        ("1005", "node18", "nccl-tests-36-gdr-read-off.log"),
        ("1006", "node19", "nccl-1653-wsl-single-node.log"),
        ("1007", "node19", ""),
    ];
    for (id, node, file) in jobs {
        if file.is_empty() {
            s.job(
                id,
                &[(
                    "not-recorded",
                    b"not recorded: the job set NCCL_DEBUG=WARN\n",
                )],
            );
        } else {
            s.job(id, &[("nccl.h.1.log", &log(file))]);
        }
        s.record(
            id,
            node,
            &[
                "--predicted",
                ready.to_str().unwrap(),
                "--user",
                "alice",
                "--job-nodes",
                "node[17-19]",
            ],
        );
    }
    // Fixed times, a minute apart from 2026-11-22T12:00:00Z, and one line that is not one.
    let base = 1_795_348_800u64;
    let mut text = String::new();
    for (i, mut l) in s.lines().into_iter().enumerate() {
        l["time"] = (base + 60 * i as u64).into();
        l["predicted"]["report"] = "/run/gdrdoctor/prolog.json".into();
        l["predicted"]["time"] = base.into();
        text.push_str(&format!("{l}\n"));
    }
    text.push_str("{\"truncated\n");
    std::fs::write(&s.journal, text).unwrap();
    let j = s.journal.to_str().unwrap();
    let human = gdrdoctor(&["jobs", j]);
    assert_eq!(human.status.code(), Some(1));
    let human = String::from_utf8(human.stdout)
        .unwrap()
        .replace(j, "JOURNAL");
    insta::assert_snapshot!("jobs-human", human);
    let csv = String::from_utf8(gdrdoctor(&["jobs", "--format", "csv", j]).stdout).unwrap();
    insta::assert_snapshot!("jobs-csv", csv);
    let v: serde_json::Value =
        serde_json::from_slice(&gdrdoctor(&["jobs", "--format", "json", j]).stdout).unwrap();
    assert_eq!(v["nodes"][0]["node"], "node17");
    assert_eq!(v["nodes"][0]["without_gdr"], 2);
    assert_eq!(v["nodes"][0]["contradicted"], 2);
    assert_eq!(v["nodes"][0]["top_cause"][0], "no-peer-memory");
    assert_eq!(v["nodes"][1]["node"], "node18");
    assert_eq!(v["nodes"][1]["contradicted"], 0);
    assert_eq!(v["nodes"][2]["not_exercised"], 1);
    assert_eq!(v["nodes"][2]["not_recorded"], 1);
    assert_eq!(v["malformed"], 1);
    // From the third job on: node17 has one job without GDR left.
    let v: serde_json::Value = serde_json::from_slice(
        &gdrdoctor(&["jobs", "--format", "json", "--since", "2026-11-22T12:02", j]).stdout,
    )
    .unwrap();
    assert_eq!(v["taken"], 5);
    assert_eq!(v["nodes"][0]["without_gdr"], 1);
    // Only lines before any job without GDR: exit 0.
    let out = gdrdoctor(&["jobs", "--until", "2026-11-22T12:00:30", j]);
    assert_eq!(out.status.code(), Some(0));
}

/// The `job-history` check on a captured node whose Epilog kept its recent jobs: the newest job
/// that used the network went without GDR on a node the Prolog called ready (warn, the cause
/// and the checks that explain it, a fix that reads); a later job with GDR clears it and the
/// earlier one is shown; a job without GDR that the check had predicted (not ready) passes; the
/// capture of the node carries the file and is judged the same.
#[test]
fn job_history_holds_the_jobs_against_the_check() {
    let (_d, root) = fixture_copy("healthy-8gpu-roce");
    let lib = root.join("var/lib/gdrdoctor");
    std::fs::create_dir_all(&lib).unwrap();
    let s = spool();
    std::fs::create_dir_all(s.journal.parent().unwrap()).unwrap();
    let ready = s.reports.join("ready.json");
    std::fs::write(
        &ready,
        r#"{"verdict":{"ready":true,"state":"ready","summary":"ready: 9 passed"}}"#,
    )
    .unwrap();
    let not_ready = s.reports.join("not-ready.json");
    std::fs::write(&not_ready, r#"{"verdict":{"ready":false,"state":"not-ready","summary":"not ready: peer-memory (peermem-not-loaded)"}}"#).unwrap();
    let record = |id: &str, file: &str, predicted: &Path| {
        s.job(id, &[("nccl.h.1.log", &log(file))]);
        s.record(
            id,
            "node17",
            &[
                "--recent",
                lib.join("jobs-recent.json").to_str().unwrap(),
                "--predicted",
                predicted.to_str().unwrap(),
            ],
        );
        // Fixed times, so that the report is the same on every run.
        let p = lib.join("jobs-recent.json");
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        for (i, j) in v["jobs"].as_array_mut().unwrap().iter_mut().enumerate() {
            j["time"] = (1_795_348_800 + 60 * i as u64).into();
        }
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    };
    let check = |root: &Path| {
        let out = Gdrdoctor::new()
            .root_at(root)
            .args(["check", "--select", "job-history"])
            .output();
        String::from_utf8(out.stdout).unwrap()
    };
    // No file yet: skipped, saying why.
    assert!(
        check(&root).contains("jobs-none-recorded")
            || check(&root).contains("no recent jobs' file"),
        "{}",
        check(&root)
    );
    record("1001", "nccl-707-gdrdma-ib.log", &ready);
    record("1002", "nccl-899-no-module.log", &ready);
    let warned = check(&root).replace(&*root.to_string_lossy(), "ROOT");
    insta::assert_snapshot!("job-history-contradicted", warned);
    let json = Gdrdoctor::new()
        .root_at(&root)
        .args(["check", "--select", "job-history", "--format", "json"])
        .output();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let f = &v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "job-history")
        .unwrap()["findings"][0];
    assert_eq!(
        (f["code"].as_str(), f["status"].as_str()),
        (Some("jobs-without-gdr"), Some("warn"))
    );
    assert!(
        f["fix"]["commands"][0]["run"]
            .as_str()
            .unwrap()
            .contains("--select peer-memory"),
        "{f}"
    );
    assert_eq!(f["action"], "fix-in-place");
    // The capture carries the file, and is judged the same.
    let cap = s.jobs.parent().unwrap().join("cap");
    let out = Gdrdoctor::new()
        .root_at(&root)
        .args(["capture"])
        .arg(&cap)
        .output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cap.join("var/lib/gdrdoctor/jobs-recent.json").exists());
    assert_eq!(check(&cap).replace(&*cap.to_string_lossy(), "ROOT"), warned);
    // A later job with GDR: as predicted, the earlier one shown.
    record("1003", "nccl-707-gdrdma-ib.log", &ready);
    let out = check(&root);
    assert!(out.contains("used GPUDirect RDMA on every NET connection (1 earlier without GDR where the check had said ready: job 1002"), "{out}");
    let code_of = |root: &Path| {
        let out = Gdrdoctor::new()
            .root_at(root)
            .args(["check", "--select", "job-history", "--format", "json"])
            .output();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "job-history")
            .unwrap()
            .clone();
        (
            c["findings"][0]["code"].as_str().unwrap().to_owned(),
            c["findings"][0]["status"].as_str().unwrap().to_owned(),
        )
    };
    assert_eq!(
        code_of(&root),
        ("jobs-as-predicted".to_owned(), "pass".to_owned())
    );
    // Without GDR where the check had said not ready: the prediction held.
    record("1004", "nccl-899-no-module.log", &not_ready);
    let out = check(&root);
    assert!(
        out.contains("as the node's check had said it would"),
        "{out}"
    );
    assert_eq!(
        code_of(&root),
        ("jobs-as-predicted".to_owned(), "pass".to_owned())
    );
    // A file that is not the Epilog's: unknown, never a pass.
    std::fs::write(lib.join("jobs-recent.json"), "{\"jobs\": 5}").unwrap();
    assert_eq!(
        code_of(&root),
        ("jobs-journal-unreadable".to_owned(), "unknown".to_owned())
    );
}
