//! Production truth (issue 42): what records NCCL's own GPUDirect RDMA decisions for every job.
//! The Slurm TaskProlog (packaging/slurm/task-prolog.sh), run as Slurm runs it: a script whose
//! `export NAME=value` lines Slurm sets in the task.
#![allow(clippy::disallowed_methods)] // tests build inputs, they do not read a node

use crate::common::*;
use std::path::Path;

/// The TaskProlog's output and the job directory, for `env` (the task's environment).
fn task_prolog(jobs: &Path, env: &[(&str, &str)]) -> String {
    let mut c = std::process::Command::new("bash");
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
    // Not a job id; a job directory that is a link: nothing recorded, the task runs.
    assert_eq!(task_prolog(&jobs, &[("SLURM_JOB_ID", "../x")]), "");
    std::os::unix::fs::symlink(d.path(), jobs.join("4245")).unwrap();
    assert_eq!(task_prolog(&jobs, &[("SLURM_JOB_ID", "4245")]), "");
}
