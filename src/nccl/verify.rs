//! `gdrdoctor nccl verify`: NCCL itself, run on this node's GPUs, says whether it uses
//! GPUDirect RDMA here; what it says is then compared with gdrdoctor's own view ([`compare`]).
//!
//! Two sides, as for the GPU probe (src/gpu): this process never loads a vendor library. It
//! finds the libnccl to use (`--library`, the dynamic loader's `libnccl.so.2`, the NVIDIA pip
//! wheel of the python3 on PATH), and starts `gdrdoctor nccl-child` with a deadline and NCCL's
//! log sent to a file: `NCCL_DEBUG=INFO`, `NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV` (the network,
//! each NIC's GDR decision, the GPU-NIC paths, the settings NCCL read), `NCCL_TOPO_DUMP_FILE`,
//! and always `NCCL_NVLS_ENABLE=0` (never NVLink multicast). The child loads NCCL and CUDA,
//! takes the GPUs by PCI address, and makes one communicator over all of them: with one GPU a
//! one-rank communicator, which still makes NCCL load its network, judge each NIC and compute its
//! GPU-NIC paths; with two or more, `ncclCommInitAll` and an all-reduce with P2P and SHM off, so
//! that NCCL's network carries it, the sum checked element by element. The parent then reads
//! NCCL's log through the `nccl explain` parser and keeps the topology dump's text.
//!
//! [`compare`]: super::compare

use super::explain::{self, Explanation};
use crate::ffi::cuda::Session;
use crate::ffi::nccl::{LoadError, Nccl, NcclError, version_text};
use crate::gpu::model::{HIDING_ENV, Lib};
use crate::parse::pci::Bdf;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the child is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Libraries to try in order; the first that loads is used.
    pub libraries: Vec<String>,
    /// The GPUs by PCI address, in rank order.
    pub gpus: Vec<String>,
    /// int32 elements per rank in the all-reduce.
    pub elements: u64,
}

/// The all-reduce's buffer: 4 MiB of int32 per rank, enough for NCCL to split it over its
/// channels and chunks, small next to any GPU's memory.
pub const ELEMENTS: u64 = 1 << 20;

/// One library the child tried and could not load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tried {
    pub library: String,
    pub error: String,
}

/// A GPU of the communicator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankGpu {
    pub rank: u32,
    pub bus_id: String,
    /// The CUDA ordinal NCCL was given.
    pub ordinal: i32,
}

/// How the child's run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// The all-reduce's sum was right in every element of every rank.
    Ok { elements: u64 },
    /// Some elements were wrong: how many, and the first.
    Wrong {
        elements: u64,
        wrong: u64,
        rank: u32,
        index: u64,
        expected: i64,
        got: i64,
    },
    /// An NCCL call failed.
    NcclError {
        call: String,
        code: i32,
        error: String,
        detail: Option<String>,
    },
    /// CUDA could not give NCCL what it needs (the library, a GPU, memory, a stream).
    CudaError { call: String, error: String },
    /// No candidate library loaded (`tried` says why each did not).
    NoLibrary,
    /// A library loaded that lacks an NCCL call every release since 2.4 exports.
    MissingSymbol { library: String, symbol: String },
    /// The spec could not be read.
    BadSpec { error: String },
}

impl From<NcclError> for Outcome {
    fn from(e: NcclError) -> Outcome {
        Outcome::NcclError {
            call: e.call,
            code: e.code,
            error: e.error,
            detail: e.detail,
        }
    }
}

/// What the child did and saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildAnswer {
    /// The file NCCL was loaded from (the loader's own record of it).
    pub library: Option<String>,
    pub tried: Vec<Tried>,
    /// `ncclGetVersion`, as a release: `2.28.9`.
    pub version: Option<String>,
    pub version_code: Option<i32>,
    pub cuda_library: Option<String>,
    pub cuda_driver_version: Option<i32>,
    pub gpus: Vec<RankGpu>,
    pub outcome: Outcome,
    pub init_ms: Option<f64>,
    pub all_reduce_ms: Option<f64>,
    pub total_ms: f64,
    /// Calls that failed after the answer was known (destroying a communicator).
    pub cleanup_errors: Vec<String>,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

/// Rank `rank`'s value at `index`: a ramp, so that a chunk put in the wrong place or summed
/// twice shows, not only a missing rank.
fn value(rank: u64, index: u64) -> i64 {
    (rank as i64 + 1) * ((index % 1000) as i64 + 1)
}

/// The sum every rank must hold at `index` after the all-reduce over `n` ranks.
fn expected(n: u64, index: u64) -> i64 {
    (n * (n + 1) / 2) as i64 * ((index % 1000) as i64 + 1)
}

/// The child's side (`gdrdoctor nccl-child --spec JSON`): the answer line, marked.
pub fn child_main(spec_json: &str) -> String {
    let started = Instant::now();
    let mut answer = ChildAnswer {
        library: None,
        tried: Vec::new(),
        version: None,
        version_code: None,
        cuda_library: None,
        cuda_driver_version: None,
        gpus: Vec::new(),
        outcome: Outcome::NoLibrary,
        init_ms: None,
        all_reduce_ms: None,
        total_ms: 0.0,
        cleanup_errors: Vec::new(),
    };
    answer.outcome = match serde_json::from_str::<Spec>(spec_json) {
        Ok(spec) => child_run(&spec, &mut answer),
        Err(e) => Outcome::BadSpec {
            error: e.to_string(),
        },
    };
    answer.total_ms = ms(started.elapsed());
    format!(
        "{}{}",
        crate::child::ANSWER,
        serde_json::to_string(&answer).unwrap_or_default()
    )
}

fn cuda_error(e: Lib<()>) -> Outcome {
    match e {
        Lib::NotFound { tried, message } => Outcome::CudaError {
            call: "dlopen".into(),
            error: format!("{} cannot be loaded: {message}", tried.join(", ")),
        },
        Lib::MissingSymbol { library, symbol } => Outcome::CudaError {
            call: "dlsym".into(),
            error: format!("{library} lacks {symbol}"),
        },
        Lib::Failed { call, error, .. } => Outcome::CudaError { call, error },
        Lib::Ready(()) => Outcome::CudaError {
            call: "(none)".into(),
            error: "no facts".into(),
        },
    }
}

fn child_run(spec: &Spec, a: &mut ChildAnswer) -> Outcome {
    let nccl = match Nccl::open(&spec.libraries) {
        Ok(n) => n,
        Err(LoadError::NotFound(tried)) => {
            a.tried = tried
                .into_iter()
                .map(|(library, error)| Tried { library, error })
                .collect();
            return Outcome::NoLibrary;
        }
        Err(LoadError::MissingSymbol { library, symbol }) => {
            return Outcome::MissingSymbol { library, symbol };
        }
    };
    a.library = Some(nccl.path.clone());
    a.tried = nccl
        .tried
        .iter()
        .map(|(library, error)| Tried {
            library: library.clone(),
            error: error.clone(),
        })
        .collect();
    match nccl.version() {
        Ok(v) => {
            a.version_code = Some(v);
            a.version = Some(version_text(v));
        }
        Err(e) => return e.into(),
    }
    let session = match Session::open() {
        Ok(s) => s,
        Err(e) => return cuda_error(e),
    };
    a.cuda_library = Some(session.path.clone());
    a.cuda_driver_version = Some(session.driver_version);
    if let Err(e) = session.nccl_symbols() {
        return cuda_error(e);
    }
    if spec.gpus.is_empty() {
        return Outcome::BadSpec {
            error: "no GPU to run on".into(),
        };
    }
    let mut gpus = Vec::new();
    for (rank, bus) in spec.gpus.iter().enumerate() {
        match session.gpu(bus) {
            Ok(g) => {
                a.gpus.push(RankGpu {
                    rank: rank as u32,
                    bus_id: bus.clone(),
                    ordinal: g.ordinal(),
                });
                gpus.push(g);
            }
            Err(error) => {
                return Outcome::CudaError {
                    call: format!("the GPU at {bus}"),
                    error,
                };
            }
        }
    }
    let n = gpus.len() as u64;
    let count = spec.elements.max(1);
    let Ok(len) = usize::try_from(count * 4) else {
        return Outcome::BadSpec {
            error: format!("{count} elements do not fit in memory"),
        };
    };
    // Each rank's send buffer (its ramp), receive buffer (zeros) and stream.
    let mut ranks = Vec::new();
    for (r, g) in gpus.iter().enumerate() {
        let step = (|| {
            g.make_current()?;
            let (send, _) = g.alloc(len)?;
            let (recv, _) = g.alloc(len)?;
            let ramp: Vec<u8> = (0..count)
                .flat_map(|i| (value(r as u64, i) as i32).to_ne_bytes())
                .collect();
            send.write(&ramp)?;
            recv.write(&vec![0u8; len])?;
            let stream = g.stream()?;
            Ok::<_, String>((send, recv, stream))
        })();
        match step {
            Ok(x) => ranks.push(x),
            Err(error) => {
                return Outcome::CudaError {
                    call: format!("buffers and stream on rank {r} ({})", spec.gpus[r]),
                    error,
                };
            }
        }
    }
    let t = Instant::now();
    let comms = if gpus.len() == 1 {
        if let Err(error) = gpus[0].make_current() {
            return Outcome::CudaError {
                call: "cuCtxSetCurrent".into(),
                error,
            };
        }
        nccl.init_one().map(|c| vec![c])
    } else {
        let ordinals: Vec<i32> = gpus.iter().map(|g| g.ordinal()).collect();
        nccl.init_all(&ordinals)
    };
    let comms = match comms {
        Ok(c) => c,
        Err(e) => return e.into(),
    };
    a.init_ms = Some(ms(t.elapsed()));
    let t = Instant::now();
    // One process drives every GPU, so the calls are one group (NCCL's documented pattern for
    // a single thread with several devices); a single rank needs none.
    let launched = (|| {
        if comms.len() > 1 {
            nccl.group_start()?;
        }
        for ((send, recv, stream), comm) in ranks.iter().zip(&comms) {
            nccl.all_reduce_i32(send.ptr, recv.ptr, count as usize, comm, stream)?;
        }
        if comms.len() > 1 {
            nccl.group_end()?;
        }
        Ok::<_, NcclError>(())
    })();
    if let Err(e) = launched {
        return e.into();
    }
    for (r, (_, _, stream)) in ranks.iter().enumerate() {
        if let Err(error) = stream.synchronize() {
            return Outcome::CudaError {
                call: format!("cuStreamSynchronize on rank {r}"),
                error,
            };
        }
    }
    for comm in &comms {
        if let Err(e) = nccl.async_error(comm) {
            return e.into();
        }
    }
    a.all_reduce_ms = Some(ms(t.elapsed()));
    let mut wrong = 0u64;
    let mut first = None;
    for (r, (g, (_, recv, _))) in gpus.iter().zip(&ranks).enumerate() {
        let mut out = vec![0u8; len];
        if let Err(error) = g.make_current().and_then(|()| recv.read(&mut out)) {
            return Outcome::CudaError {
                call: format!("reading rank {r}'s result"),
                error,
            };
        }
        for (i, chunk) in out.chunks_exact(4).enumerate() {
            let got = i64::from(i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
            let want = expected(n, i as u64);
            if got != want {
                wrong += 1;
                first.get_or_insert((r as u32, i as u64, want, got));
            }
        }
    }
    for comm in comms {
        if let Err(e) = nccl.destroy(comm) {
            a.cleanup_errors.push(format!("{}: {}", e.call, e.error));
        }
    }
    match first {
        None => Outcome::Ok { elements: count },
        Some((rank, index, expected, got)) => Outcome::Wrong {
            elements: count,
            wrong,
            rank,
            index,
            expected,
            got,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The parent's side

/// Where a candidate library came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub library: String,
    /// `option` (--library), `environment` (GDRDOCTOR_LIBNCCL), `loader` (the dynamic loader's
    /// `libnccl.so.2`: LD_LIBRARY_PATH, the ld.so cache, the system directories), `pip-wheel`
    /// (`nvidia/nccl/lib` under a `sys.path` entry of the python3 on PATH).
    pub source: &'static str,
}

/// The libraries to try, in order, and what the search saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Search {
    pub candidates: Vec<Candidate>,
    /// How the pip wheel was looked for: the python3 that answered and what it had, or why
    /// it was not looked for.
    pub python: String,
}

/// `nvidia/nccl/lib/libnccl.so.2` under a site-packages directory: where the NVIDIA pip wheel
/// (`nvidia-nccl-cu12`, `nvidia-nccl-cu13`; PyTorch's wheels depend on it) puts NCCL.
pub const WHEEL_PATH: &str = "nvidia/nccl/lib/libnccl.so.2";

/// The libraries to try: `--library` alone when given; else the loader's `libnccl.so.2` (or
/// GDRDOCTOR_LIBNCCL in its place), then every copy in the pip wheel of the python3 on PATH.
pub fn search(library: Option<&Path>) -> Search {
    if let Some(path) = library {
        return Search {
            candidates: vec![Candidate {
                library: path.display().to_string(),
                source: "option",
            }],
            python: "not looked for (--library)".into(),
        };
    }
    let mut candidates = vec![match std::env::var_os(crate::ffi::nccl::ENV) {
        Some(v) if !v.is_empty() => Candidate {
            library: v.to_string_lossy().into_owned(),
            source: "environment",
        },
        _ => Candidate {
            library: crate::ffi::nccl::SONAME.into(),
            source: "loader",
        },
    }];
    let python = match python_sys_path() {
        Ok(entries) => {
            let root = crate::root::Root::live();
            let mut found = 0;
            for e in entries.iter().filter(|e| e.starts_with('/')) {
                let lib = format!("{}/{WHEEL_PATH}", e.trim_end_matches('/'));
                if root.exists(&lib) && !candidates.iter().any(|c| c.library == lib) {
                    candidates.push(Candidate {
                        library: lib,
                        source: "pip-wheel",
                    });
                    found += 1;
                }
            }
            format!(
                "python3 on PATH: {} sys.path entries, {found} with {WHEEL_PATH}",
                entries.len()
            )
        }
        Err(e) => format!("the pip wheel was not looked for: {e}"),
    };
    Search { candidates, python }
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

/// How to run NCCL.
#[derive(Debug, Clone)]
pub struct Options {
    /// This binary (the child is `gdrdoctor nccl-child`).
    pub exe: PathBuf,
    pub library: Option<PathBuf>,
    pub timeout: Duration,
    /// `--deadline` (seconds) when it made `timeout` shorter than configured.
    pub cut_by_deadline: Option<f64>,
    /// Keep NCCL's log and topology dump here instead of a temporary directory.
    pub log_dir: Option<PathBuf>,
    pub elements: u64,
}

/// NCCL's log, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Log {
    /// Where it is kept (`--log-dir`), or null when it was a temporary file.
    pub path: Option<String>,
    pub bytes: u64,
    pub lines: u64,
    pub nccl_lines: u64,
    /// Why there is no explanation, when there is none (no log written, not NCCL's output).
    pub note: Option<String>,
}

/// NCCL's topology dump (`NCCL_TOPO_DUMP_FILE`), kept as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoDump {
    pub path: Option<String>,
    pub bytes: u64,
    /// Its first [`TOPO_KEPT`] bytes.
    pub text: String,
    pub truncated: bool,
}

/// The topology dump kept: a node of 8 GPUs and 8 NICs writes about 10 KiB.
pub const TOPO_KEPT: u64 = 1 << 20;

/// Whether NCCL was run, and what it did: what the inventory holds for the `nccl-verify` check.
#[derive(Debug, Clone)]
pub enum NcclVerify {
    /// Not run, and why; `no_gpu`: there is no NVIDIA GPU (gpu-driver says why).
    NotRun {
        reason: String,
        no_gpu: bool,
    },
    Ran(Box<Run>),
}

impl NcclVerify {
    pub const NOT_ASKED: &str = "not asked (--nccl-verify runs it; it takes seconds)";

    pub fn not_run(reason: impl Into<String>) -> NcclVerify {
        NcclVerify::NotRun {
            reason: reason.into(),
            no_gpu: false,
        }
    }

    pub fn run(&self) -> Option<&Run> {
        match self {
            NcclVerify::Ran(r) => Some(r),
            NcclVerify::NotRun { .. } => None,
        }
    }
}

/// Runs NCCL on the node's NVIDIA GPUs, or says why not.
pub fn run_on(gpus: &[Bdf], opts: &Options) -> NcclVerify {
    if gpus.is_empty() {
        return NcclVerify::NotRun {
            reason: "no NVIDIA GPU on the PCI bus: NCCL has nothing to run on (see gpu-driver)"
                .into(),
            no_gpu: true,
        };
    }
    NcclVerify::Ran(Box::new(run(gpus, opts)))
}

/// One run of NCCL, as the parent saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub search: Search,
    pub gpus: Vec<String>,
    /// `one-rank` (one GPU) or `all-reduce` (several, over NCCL's network).
    pub mode: &'static str,
    /// The NCCL variables set for the child.
    pub env: BTreeMap<String, String>,
    /// `NAME=value` of variables removed from the child's environment (the GPU-hiding ones).
    pub cleared_env: Vec<String>,
    pub timeout_s: f64,
    pub cut_by_deadline: Option<f64>,
    pub answer: Option<ChildAnswer>,
    /// The file the library is, its links resolved (`libnccl.so.2` ->
    /// `/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9`).
    pub library_file: Option<String>,
    /// Why the child gave no answer (it could not start, hung, crashed, answered garbage).
    pub error: Option<String>,
    pub log: Log,
    #[serde(skip)]
    pub explanation: Option<Explanation>,
    pub topology_dump: Option<TopoDump>,
    pub elapsed_ms: f64,
}

impl Run {
    /// The candidate that loaded: the child tried them in order and lists the ones that failed.
    pub fn used(&self) -> Option<&Candidate> {
        let a = self.answer.as_ref()?;
        a.library.as_ref()?;
        self.search.candidates.get(a.tried.len())
    }

    /// The child was killed at a deadline.
    pub fn timed_out(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.contains("did not finish"))
    }
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
    let ours = meta.uid() == crate::ffi::fd::effective_uid();
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
    let search = search(opts.library.as_deref());
    let gpus: Vec<String> = gpus.iter().map(|g| g.to_string()).collect();
    let mut run = Run {
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
                "NCCL was not run: the --deadline of {seconds} s left no time for it"
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
    if run.gpus.len() > 1 {
        // Without P2P and shared memory, NCCL's only way between the GPUs of one node is its
        // network: the all-reduce goes through the NICs (or sockets), as between nodes.
        env.push(("NCCL_P2P_DISABLE".into(), "1".into()));
        env.push(("NCCL_SHM_DISABLE".into(), "1".into()));
    }
    run.env = env.iter().cloned().collect();
    let spec = Spec {
        libraries: run
            .search
            .candidates
            .iter()
            .map(|c| c.library.clone())
            .collect(),
        gpus: run.gpus.clone(),
        elements: opts.elements,
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
        "NCCL",
    );
    match result {
        Ok(done) => {
            let line = done
                .stdout
                .lines()
                .rev()
                .find_map(|l| l.split_once(crate::child::ANSWER).map(|(_, a)| a));
            match line.map(serde_json::from_str::<ChildAnswer>) {
                Some(Ok(a)) => run.answer = Some(a),
                Some(Err(e)) => run.error = Some(format!("NCCL's child answered garbage ({e})")),
                None => {
                    run.error = Some(format!(
                        "NCCL's child printed no answer{}",
                        done.stderr_tail
                    ))
                }
            }
        }
        Err(e) => {
            run.error = Some(match opts.cut_by_deadline {
                Some(seconds) if e.contains("did not finish") => format!(
                    "{e}: cut short by the --deadline of {seconds} s, which bounds the whole run (not a verdict on NCCL)"
                ),
                _ if e.contains("did not finish") => format!(
                    "{e} (NCCL hung: the log below shows how far it got; a network that does not answer, or a GPU that hangs the driver)"
                ),
                _ => e,
            })
        }
    }
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
    fn the_sum_of_the_ramps() {
        for n in 1..=8u64 {
            for i in [0u64, 1, 999, 1000, 123_456] {
                let sum: i64 = (0..n).map(|r| value(r, i)).sum();
                assert_eq!(sum, expected(n, i), "n {n} i {i}");
            }
        }
        // 64 ranks stay far from int32's limit.
        assert!(expected(64, 999) < i64::from(i32::MAX));
    }

    #[test]
    fn library_option_is_the_only_candidate() {
        let s = search(Some(Path::new("/opt/nccl/lib/libnccl.so.2")));
        assert_eq!(
            s.candidates,
            vec![Candidate {
                library: "/opt/nccl/lib/libnccl.so.2".into(),
                source: "option"
            }]
        );
    }
}
