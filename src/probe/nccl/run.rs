//! The parent's side: which libnccl to try, NCCL run in a child with a deadline and its log
//! and topology dump sent to files of our own, and what it wrote read back (the log through the
//! `nccl explain` collector).

use super::{
    Candidate, ChildAnswer, Library, Log, NcclVerify, Options, Run, Search, Spec, TOPO_KEPT,
    TopoDump, ms,
};
use crate::nccl::explain;
use crate::parse::pci::Bdf;
use crate::probe::gpu::model::HIDING_ENV;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `nvidia/nccl/lib/libnccl.so.2` under a site-packages directory: where the NVIDIA pip wheel
/// (`nvidia-nccl-cu12`, `nvidia-nccl-cu13`; PyTorch's wheels depend on it) puts NCCL.
pub const WHEEL_PATH: &str = "nvidia/nccl/lib/libnccl.so.2";

/// Where pip wheels put RCCL under a site-packages directory: PyTorch's ROCm wheels
/// (download.pytorch.org/whl/rocm*) bundle it in `torch/lib`, as `librccl.so` (their build copies
/// ROCm's `librccl.so` there: pytorch/pytorch .ci/manywheel/build_rocm.sh), `librccl.so.1` in
/// other builds; ROCm's own Python wheel of libraries (`rocm[libraries]`, ROCm/TheRock, which
/// TheRock's PyTorch builds install) puts it in `_rocm_sdk_libraries_<GPU family>/lib/librccl.so.1`,
/// found by listing the directory (see [`ROCM_SDK_LIBRARIES`]).
pub const RCCL_WHEEL_PATHS: [&str; 2] = ["torch/lib/librccl.so", "torch/lib/librccl.so.1"];

/// ROCm's wheel of libraries: `_rocm_sdk_libraries` and a GPU family (`_gfx94X_dcgpu`), its
/// RCCL at `lib/librccl.so.1` (ROCm/TheRock build_tools/packaging/python, `_dist_info.py`).
const ROCM_SDK_LIBRARIES: &str = "_rocm_sdk_libraries";

/// ROCm's install directory: `/opt/rocm` (a link to the newest), and each `/opt/rocm-X.Y.Z` of a
/// side-by-side install, RCCL in its `lib`.
const ROCM_LIB: &str = "lib/librccl.so.1";

/// The libraries to try: `--library` alone when given; else the loader's `libnccl.so.2` (or
/// GDRDOCTOR_LIBNCCL in its place), then every copy in the pip wheel of the python3 on PATH. For
/// RCCL: the loader's `librccl.so.1` (or GDRDOCTOR_LIBRCCL), ROCm's directories, then the wheels
/// of the python3 on PATH ([`RCCL_WHEEL_PATHS`]).
pub fn search(library: Option<&Path>, which: Library) -> Search {
    if let Some(path) = library {
        return Search {
            candidates: vec![Candidate {
                library: path.display().to_string(),
                source: "option",
            }],
            python: "not looked for (--library)".into(),
        };
    }
    let (env, soname) = crate::ffi::nccl::names(which);
    let mut candidates = vec![match std::env::var_os(env) {
        Some(v) if !v.is_empty() => Candidate {
            library: v.to_string_lossy().into_owned(),
            source: "environment",
        },
        _ => Candidate {
            library: soname.into(),
            source: "loader",
        },
    }];
    let root = crate::root::Root::live();
    if which == Library::Rccl {
        for lib in rocm_dirs(&root) {
            push(&mut candidates, lib, "rocm");
        }
    }
    let python = match python_sys_path() {
        Ok(entries) => {
            let before = candidates.len();
            for e in entries.iter().filter(|e| e.starts_with('/')) {
                for lib in wheel_files(&root, e.trim_end_matches('/'), which) {
                    push(&mut candidates, lib, "pip-wheel");
                }
            }
            let found = candidates.len() - before;
            let looked = match which {
                Library::Nccl => WHEEL_PATH.to_owned(),
                Library::Rccl => format!(
                    "{}, {ROCM_SDK_LIBRARIES}*/lib/librccl.so.1",
                    RCCL_WHEEL_PATHS.join(", ")
                ),
            };
            format!(
                "python3 on PATH: {} sys.path entries, {found} with {looked}",
                entries.len()
            )
        }
        Err(e) => format!("the pip wheel was not looked for: {e}"),
    };
    Search { candidates, python }
}

/// Adds a candidate unless it is one already.
fn push(candidates: &mut Vec<Candidate>, library: String, source: &'static str) {
    if !candidates.iter().any(|c| c.library == library) {
        candidates.push(Candidate { library, source });
    }
}

/// RCCL in ROCm's directories, where they hold it: `/opt/rocm/lib/librccl.so.1`, then each
/// `/opt/rocm-X.Y.Z/lib/librccl.so.1`, the newest release first.
fn rocm_dirs(root: &crate::root::Root) -> Vec<String> {
    let mut versions: Vec<(Vec<u32>, String)> = root
        .read_dir("/opt")
        .map(|l| l.names)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|name| {
            let v = name.strip_prefix("rocm-")?;
            let parts: Option<Vec<u32>> = v.split('.').map(|p| p.parse().ok()).collect();
            Some((parts?, name))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    std::iter::once("rocm".to_owned())
        .chain(versions.into_iter().map(|(_, name)| name))
        .map(|dir| format!("/opt/{dir}/{ROCM_LIB}"))
        .filter(|lib| root.exists(lib))
        .collect()
}

/// The library's files a pip wheel put under one `sys.path` entry.
fn wheel_files(root: &crate::root::Root, entry: &str, which: Library) -> Vec<String> {
    let mut files: Vec<String> = match which {
        Library::Nccl => vec![format!("{entry}/{WHEEL_PATH}")],
        Library::Rccl => {
            let mut f: Vec<String> = RCCL_WHEEL_PATHS
                .iter()
                .map(|p| format!("{entry}/{p}"))
                .collect();
            let sdk = root
                .read_dir(entry)
                .map(|l| l.names)
                .unwrap_or_default()
                .into_iter()
                .filter(|n| n.starts_with(ROCM_SDK_LIBRARIES))
                .map(|n| format!("{entry}/{n}/lib/librccl.so.1"));
            f.extend(sdk);
            f
        }
    };
    files.retain(|f| root.exists(f));
    files
}

/// `sys.path` of the python3 on PATH, asked with a deadline.
fn python_sys_path() -> Result<Vec<String>, String> {
    let line = crate::child::run(
        Path::new("python3"),
        &["-c", "import json, sys; print(json.dumps(sys.path))"],
        &[],
        Duration::from_secs(10),
        "python3",
    )?;
    serde_json::from_str(&line).map_err(|e| format!("python3's sys.path is unreadable ({e})"))
}

/// The version of the libnccl (or librccl) a run would load (the same search), asked in a child
/// that loads it and calls `ncclGetVersion`, nothing else: (`2.28.9`, the library's file), or
/// why not.
pub fn version(
    exe: &Path,
    library: Option<&Path>,
    which: Library,
    timeout: Duration,
) -> Result<(String, String), String> {
    let search = search(library, which);
    let name = which.name();
    let spec = Spec {
        library: which,
        libraries: search
            .candidates
            .iter()
            .map(|c| c.library.clone())
            .collect(),
        gpus: Vec::new(),
        elements: 0,
        version_only: true,
    };
    let spec_json = serde_json::to_string(&spec).unwrap_or_default();
    let env: Vec<(&str, Option<&str>)> = HIDING_ENV.iter().map(|n| (*n, None)).collect();
    let done = crate::child::run_env(
        exe,
        &["nccl-child", "--spec", &spec_json],
        &env,
        timeout,
        name,
    )?;
    let answer = done
        .stdout
        .lines()
        .rev()
        .find_map(|l| l.split_once(crate::child::ANSWER).map(|(_, a)| a))
        .ok_or_else(|| format!("{name}'s child printed no answer{}", done.stderr_tail))
        .and_then(|a| {
            serde_json::from_str::<ChildAnswer>(a)
                .map_err(|e| format!("{name}'s child answered garbage ({e})"))
        })?;
    let lib = match which {
        Library::Nccl => "libnccl",
        Library::Rccl => "librccl",
    };
    match (answer.version, answer.library) {
        (Some(v), Some(l)) => {
            let file = crate::root::Root::live().canonical(&l).unwrap_or(l);
            Ok((v, file))
        }
        _ if answer.tried.is_empty() => {
            Err(format!("no {lib} could be loaded ({:?})", answer.outcome))
        }
        _ => Err(format!(
            "no {lib} could be loaded: {}",
            answer
                .tried
                .iter()
                .map(|t| format!("{}: {}", t.library, t.error))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
}

/// Runs NCCL on the node's NVIDIA GPUs (RCCL on its AMD GPUs), or says why not.
pub fn run_on(gpus: &[Bdf], opts: &Options) -> NcclVerify {
    if gpus.is_empty() {
        return NcclVerify::NotRun {
            reason: "no NVIDIA or AMD GPU on the PCI bus: neither NCCL nor RCCL has anything to run on (see gpu-driver)"
                .into(),
            no_gpu: true,
        };
    }
    NcclVerify::Ran(Box::new(run(gpus, opts)))
}

/// A directory of our own for NCCL's files: `--log-dir`, or a new one under the temporary
/// directory (0700), removed afterwards.
fn work_dir(opts: &Options) -> Result<(PathBuf, bool), String> {
    use std::os::unix::fs::DirBuilderExt as _;
    if let Some(d) = &opts.log_dir {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(d)
            .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        prepare_log_dir(d)?;
        return Ok((d.clone(), true));
    }
    let base = std::env::temp_dir();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = base.join(format!("gdrdoctor-nccl-{}-{stamp}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok((dir, false))
}

/// The files NCCL writes in `--log-dir` (fopen "w": it follows a link and truncates what is
/// there, as the user who runs gdrdoctor, often root).
const NCCL_FILES: [&str; 2] = ["nccl.log", "topo.xml"];

/// Makes `--log-dir D` safe for NCCL to write in: D must not be a place where others can plant
/// a link (writable by group or others, unless sticky and ours: then no one else can replace
/// what we create), and `D/nccl.log` and `D/topo.xml` are created here, new (O_EXCL) and never
/// through a link (O_NOFOLLOW), before NCCL opens them. A link or a special file already at
/// either name is refused, named; a regular file (an earlier run's log) is replaced. Without
/// this, a link planted as `D/nccl.log` made NCCL overwrite its target (issue 25).
fn prepare_log_dir(d: &Path) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
    let meta = std::fs::metadata(d).map_err(|e| format!("cannot use {}: {e}", d.display()))?;
    if !meta.is_dir() {
        return Err(format!("cannot use {}: not a directory", d.display()));
    }
    let mode = meta.permissions().mode();
    let ours = meta.uid() == crate::sys::fd::effective_uid();
    if mode & 0o022 != 0 && !(mode & 0o1000 != 0 && ours) {
        return Err(format!(
            "refusing --log-dir {}: mode {:04o} lets others write there, and a link they plant as nccl.log or topo.xml would make NCCL overwrite its target as this user; use a directory only you can write to",
            d.display(),
            mode & 0o7777
        ));
    }
    for name in NCCL_FILES {
        let path = d.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                // The operator's own directory, not the node's: no Root here.
                #[allow(clippy::disallowed_methods)]
                let target = std::fs::read_link(&path)
                    .map(|t| format!(" to {}", crate::sanitize::text(&t.to_string_lossy())))
                    .unwrap_or_default();
                return Err(format!(
                    "refusing --log-dir {}: {name} there is a symbolic link{target}, which NCCL would write through; remove it or use another directory",
                    d.display()
                ));
            }
            Ok(m) if m.is_file() => std::fs::remove_file(&path)
                .map_err(|e| format!("cannot replace {}: {e}", path.display()))?,
            Ok(m) => {
                return Err(format!(
                    "refusing --log-dir {}: {name} there is {}, not a file NCCL can write; remove it or use another directory",
                    d.display(),
                    crate::input::kind_of(&m.file_type())
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot use {}: {e}", path.display())),
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs NCCL on `gpus` (PCI addresses, in rank order) in a child with a deadline.
pub fn run(gpus: &[Bdf], opts: &Options) -> Run {
    let started = Instant::now();
    let search = search(opts.library.as_deref(), opts.which);
    let gpus: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
    let mut run = Run {
        library: opts.which,
        search,
        mode: if gpus.len() > 1 {
            "all-reduce"
        } else {
            "one-rank"
        },
        gpus,
        env: BTreeMap::new(),
        cleared_env: HIDING_ENV
            .iter()
            .filter_map(|n| std::env::var_os(n).map(|v| format!("{n}={}", v.to_string_lossy())))
            .collect(),
        timeout_s: opts.timeout.as_secs_f64(),
        cut_by_deadline: opts.cut_by_deadline,
        answer: None,
        library_file: None,
        error: None,
        log: Log {
            path: None,
            bytes: 0,
            lines: 0,
            nccl_lines: 0,
            note: None,
        },
        explanation: None,
        topology_dump: None,
        elapsed_ms: 0.0,
    };
    if let Some(seconds) = opts.cut_by_deadline {
        if opts.timeout < Duration::from_millis(500) {
            run.error = Some(format!(
                "{} was not run: the --deadline of {seconds} s left no time for it",
                opts.which.name()
            ));
            return run;
        }
    }
    let (dir, keep) = match work_dir(opts) {
        Ok(d) => d,
        Err(e) => {
            run.error = Some(e);
            return run;
        }
    };
    let log_path = dir.join("nccl.log");
    let topo_path = dir.join("topo.xml");
    let env = nccl_env(&log_path, &topo_path, run.gpus.len(), opts.which);
    run.env = env.iter().cloned().collect();
    start_child(&mut run, opts, &env);
    run.library_file = run
        .answer
        .as_ref()
        .and_then(|a| a.library.as_deref())
        .and_then(|l| crate::root::Root::live().canonical(l).ok());
    read_log(&mut run, &log_path, keep);
    run.topology_dump = read_topology(&topo_path, keep);
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    run.elapsed_ms = ms(started.elapsed());
    run
}

/// What NCCL is told for the run: its log and topology dump to our files, INFO for the
/// subsystems that say what it decided, never NVLink multicast; with several GPUs, no P2P and no
/// shared memory, so that its network carries the all-reduce (and for RCCL, none of its other
/// all-reduce kernels).
fn nccl_env(
    log_path: &Path,
    topo_path: &Path,
    gpus: usize,
    which: Library,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("NCCL_DEBUG".into(), "INFO".into()),
        ("NCCL_DEBUG_SUBSYS".into(), "INIT,NET,GRAPH,ENV".into()),
        ("NCCL_DEBUG_FILE".into(), log_path.display().to_string()),
        (
            "NCCL_TOPO_DUMP_FILE".into(),
            topo_path.display().to_string(),
        ),
        // Never NVLink multicast (NVLS): the lent machines must not use it, and it says
        // nothing about GPUDirect RDMA.
        ("NCCL_NVLS_ENABLE".into(), "0".into()),
    ];
    if gpus > 1 {
        // Without P2P and shared memory, NCCL's only way between the GPUs of one node is its
        // network: the all-reduce goes through the NICs (or sockets), as between nodes.
        env.push(("NCCL_P2P_DISABLE".into(), "1".into()));
        env.push(("NCCL_SHM_DISABLE".into(), "1".into()));
    }
    if gpus > 1 && which == Library::Rccl {
        // RCCL's other all-reduce kernels (MSCCL, MSCCL++) stay off whatever the environment
        // says: the all-reduce is to run on RCCL's channels over its network transport, whose
        // connections its log prints.
        env.push(("RCCL_MSCCL_ENABLE".into(), "0".into()));
        env.push(("RCCL_MSCCLPP_ENABLE".into(), "0".into()));
    }
    env
}

/// Starts `gdrdoctor nccl-child` with the spec and `env`, the GPU-hiding variables cleared,
/// and keeps its answer, or why there is none.
fn start_child(run: &mut Run, opts: &Options, env: &[(String, String)]) {
    let spec = Spec {
        library: run.library,
        libraries: run
            .search
            .candidates
            .iter()
            .map(|c| c.library.clone())
            .collect(),
        gpus: run.gpus.clone(),
        elements: opts.elements,
        version_only: false,
    };
    let spec_json = serde_json::to_string(&spec).unwrap_or_default();
    let mut child_env: Vec<(&str, Option<&str>)> = env
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())))
        .collect();
    child_env.extend(HIDING_ENV.iter().map(|n| (*n, None)));
    // A fixed bootstrap address from the caller's environment would tie the one-process
    // communicator to it.
    child_env.push(("NCCL_COMM_ID", None));
    let result = crate::child::run_env(
        &opts.exe,
        &["nccl-child", "--spec", &spec_json],
        &child_env,
        opts.timeout,
        opts.which.name(),
    );
    let name = opts.which.name();
    match result {
        Ok(done) => {
            let line = done
                .stdout
                .lines()
                .rev()
                .find_map(|l| l.split_once(crate::child::ANSWER).map(|(_, a)| a));
            match line.map(serde_json::from_str::<ChildAnswer>) {
                Some(Ok(a)) => run.answer = Some(a),
                Some(Err(e)) => run.error = Some(format!("{name}'s child answered garbage ({e})")),
                None => {
                    run.error = Some(format!(
                        "{name}'s child printed no answer{}",
                        done.stderr_tail
                    ))
                }
            }
        }
        Err(e) => {
            run.error = Some(match opts.cut_by_deadline {
                Some(seconds) if e.contains("did not finish") => format!(
                    "{e}: cut short by the --deadline of {seconds} s, which bounds the whole run (not a verdict on {name})"
                ),
                _ if e.contains("did not finish") => format!(
                    "{e} ({name} hung: the log below shows how far it got; a network that does not answer, or a GPU that hangs the driver)"
                ),
                _ => e,
            })
        }
    }
}

fn read_log(run: &mut Run, path: &Path, keep: bool) {
    run.log.path = keep.then(|| path.display().to_string());
    // Read as `nccl explain` reads a job's log: a regular file, no further than its size when
    // opened. With --log-dir, what is there may be anything: a link to /dev/zero or a FIFO
    // there made this read go on, or wait, for ever (issue 25).
    let file = match crate::input::open(path) {
        Ok(f) => f,
        Err(crate::input::InputError::Open(e)) => {
            run.log.note = Some(format!("NCCL wrote no log ({}: {e})", path.display()));
            return;
        }
        Err(e) => {
            run.log.note = Some(format!("NCCL's log was not read ({}: {e})", path.display()));
            return;
        }
    };
    let mut collector = explain::Collector::new();
    collector.read("NCCL_DEBUG_FILE", file);
    match collector.finish() {
        Ok(e) => {
            if let Some(i) = e.inputs.first() {
                run.log.bytes = i.bytes;
                run.log.lines = i.lines;
                run.log.nccl_lines = i.nccl_lines;
            }
            run.explanation = Some(e);
        }
        Err(not_nccl) => {
            if let Some(i) = not_nccl.inputs.first() {
                run.log.bytes = i.bytes;
                run.log.lines = i.lines;
            }
            run.log.note = Some(not_nccl.to_string());
        }
    }
}

fn read_topology(path: &Path, keep: bool) -> Option<TopoDump> {
    let root = crate::root::Root::live();
    let p = path.to_str()?;
    let bytes = root.read_prefix(p, TOPO_KEPT + 1).ok()?;
    let truncated = bytes.len() as u64 > TOPO_KEPT;
    let kept = &bytes[..bytes.len().min(TOPO_KEPT as usize)];
    Some(TopoDump {
        path: keep.then(|| p.to_owned()),
        bytes: std::fs::metadata(path).map_or(bytes.len() as u64, |m| m.len()),
        text: String::from_utf8_lossy(kept).into_owned(),
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_option_is_the_only_candidate() {
        let s = search(Some(Path::new("/opt/nccl/lib/libnccl.so.2")), Library::Nccl);
        assert_eq!(
            s.candidates,
            vec![Candidate {
                library: "/opt/nccl/lib/libnccl.so.2".into(),
                source: "option"
            }]
        );
    }
}
