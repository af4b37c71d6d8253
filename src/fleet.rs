//! `gdrdoctor fleet CAPTURE...`: many captures, one view. Each capture is checked as
//! `check --root` would (in parallel, in memory for `.tar.gz` ones); the result per node is
//! written out as it comes, in the order given, and only small per-model tallies are kept, so
//! memory does not grow with the number of captures. What no single report can say comes from the
//! tallies: nodes of one model that differ from their siblings (GID index, RoCE version, driver,
//! firmware, kernel, placement, peermem).

use crate::archive;
use crate::checks::{self, Selection};
use crate::config::Config;
use crate::inventory::{GpuVendor, Inventory};
use crate::model::Status;
use crate::report::Format;
use crate::root::Root;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod two_node;

/// One node, as the fleet view shows it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    pub capture: String,
    pub hostname: Option<String>,
    pub product: Option<String>,
    pub board: Option<String>,
    pub kernel: Option<String>,
    /// The GPU driver: `nvidia 580.159.04 (open)`, `amdgpu`.
    pub gpu_driver: Option<String>,
    /// NIC firmware versions, distinct, sorted (`mlx5 28.39.1002`).
    pub nic_firmware: Vec<String>,
    pub gpus: usize,
    pub rdma_devices: usize,
    pub ready: bool,
    pub exit_code: u8,
    /// The checks that make it not ready, with their codes: `acs (acs-redirect-on-path)`.
    pub blocking: Vec<String>,
    /// Every warning, failure and unknown: code -> status.
    pub problems: BTreeMap<String, Status>,
    /// The RoCE v2 GID indices its RoCE ports use (`3`), `none` where a port has none.
    pub gid_indices: Vec<String>,
    /// `v2`, `v1-only`, `none` (no RoCE v2 GID on some RoCE port), or null without RoCE.
    pub roce: Option<String>,
    /// The GPU x NIC levels, row by row (`PIX PIX NODE ...|...`): equal placement, equal string.
    pub placement: Option<String>,
    /// `registered`, `loaded-unregistered`, `absent`.
    pub peermem: String,
    /// The settings NCCL reads on the node that change GPUDirect RDMA, effective values only
    /// (`NCCL_IB_HCA` -> `=mlx5_0`); `NCCL_TOPO_FILE` with its content's digest, so that two
    /// files of one name but different content differ. The GID index is compared as
    /// `gid_indices`, where a pin counts (issue 16).
    pub nccl: BTreeMap<String, String>,
    /// The path the peer-memory check found: `dmabuf`, `peermem`, `none`, `unknown`.
    pub gdr_path: String,
    /// The picture of its PCIe tree (`topo --format svg`), when `--pictures` asked for it and
    /// this capture may be the first of its model (see `Pictures`). Not part of the JSON.
    #[serde(skip)]
    pub picture: Option<String>,
}

/// The model a node is grouped by: its DMI product name.
fn model_of(product: Option<&str>) -> String {
    product.unwrap_or("(model unknown)").to_owned()
}

/// Which capture draws each model's picture for `--pictures`: the first of the model in input
/// order. The workers analyse out of order, so one draws unless a capture before it of the same
/// model already has; the first of a model to be emitted (the first in input order) has then
/// always drawn, and the writer keeps only that one. Later captures of a model draw only when
/// they get ahead of an earlier one: a few pictures at most, within the workers' window.
#[derive(Debug, Default)]
pub struct Pictures {
    claimed: std::sync::Mutex<BTreeMap<String, usize>>,
}

impl Pictures {
    /// Whether capture `index` of `model` draws.
    fn claim(&self, model: &str, index: usize) -> bool {
        // Nothing panics while the lock is held; a poisoned lock is still a sound map.
        let mut m = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(model) {
            Some(&first) if first <= index => false,
            _ => {
                m.insert(model.to_owned(), index);
                true
            }
        }
    }
}

/// A file name for a model's picture: lower-case ASCII letters and digits, the rest as single
/// dashes, at most 64 characters. The model comes from the capture (untrusted): no `/`, no
/// `..`, no hidden file, nothing a shell or a web server would read twice.
pub fn slug(model: &str) -> String {
    let mut s = String::new();
    for c in model.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
        } else if !s.is_empty() && !s.ends_with('-') {
            s.push('-');
        }
        if s.len() >= 64 {
            break;
        }
    }
    let s = s.trim_end_matches('-');
    if s.is_empty() {
        "model".to_owned()
    } else {
        s.to_owned()
    }
}

/// Writes `--pictures DIR/<model-slug>.svg`, one per model: the first node of each model to
/// be emitted, which is the first in input order.
#[derive(Debug)]
pub struct PictureWriter {
    dir: PathBuf,
    /// The models drawn, and the file names taken.
    models: BTreeSet<String>,
    names: BTreeSet<String>,
}

impl PictureWriter {
    /// Creates `dir` when it does not exist.
    pub fn new(dir: &Path) -> std::io::Result<PictureWriter> {
        std::fs::create_dir_all(dir)?;
        Ok(PictureWriter {
            dir: dir.to_owned(),
            models: BTreeSet::new(),
            names: BTreeSet::new(),
        })
    }

    /// Writes the node's picture when it is the first of its model; returns the file written.
    /// An error names the file.
    pub fn write(&mut self, n: &NodeResult) -> Result<Option<PathBuf>, String> {
        let Some(svg) = &n.picture else {
            return Ok(None);
        };
        let model = model_of(n.product.as_deref());
        if self.models.contains(&model) {
            return Ok(None);
        }
        self.models.insert(model.clone());
        // Two models can make one slug ("A/B", "A B"): the later one gets a number.
        let base = slug(&model);
        let mut name = base.clone();
        let mut k = 2;
        while self.names.contains(&name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        let path = self.dir.join(format!("{name}.svg"));
        crate::output::write_atomic(&path, svg.as_bytes())
            .map_err(|e| format!("cannot write the picture {}: {e}", path.display()))?;
        Ok(Some(path))
    }
}

/// A capture that could not be read.
#[derive(Debug, Clone, Serialize)]
pub struct Unreadable {
    pub capture: String,
    pub reason: String,
}

/// Checks one capture. Its archive's tree counts in the run's `budget` while it is held: when
/// the budget has no room, reading it waits for other captures to give theirs back.
/// With `draw`, the capture's index in the input and the run's `Pictures`: the picture of its
/// tree is drawn when it may be the first of its model.
pub fn analyse(
    path: &Path,
    config: &Config,
    budget: &Arc<archive::Budget>,
    draw: Option<(&Pictures, usize)>,
) -> Result<NodeResult, String> {
    let root = Root::open_within(path, Some(budget)).map_err(|e| e.to_string())?;
    if root.is_live() {
        return Err("/ is the live system, not a capture".into());
    }
    let inv = Inventory::load(&root, config, crate::inventory::Options::default());
    let picture = draw
        .filter(|(p, index)| p.claim(&model_of(inv.kernel.product.as_deref()), *index))
        .map(|_| {
            let p = crate::report::picture::picture(&inv, config, &path.display().to_string());
            let mut svg = Vec::new();
            // Writing into memory cannot fail.
            let _ = crate::report::svg::write(&p, &mut svg);
            String::from_utf8_lossy(&svg).into_owned()
        });
    // Everything the checks need is in the inventory now. An archive's tree is the biggest
    // thing a job holds (up to `archive::MAX_TOTAL_BYTES`): it goes before the checks run, so
    // that a job never holds the tree, the inventory and the report at once (issue 14).
    drop(root);
    let results = checks::run(&inv, config, &Selection::default());
    let report = crate::report::build(
        &inv,
        results,
        &crate::report::Options {
            strict: false,
            root_display: path.display().to_string(),
        },
    );
    let mut problems = BTreeMap::new();
    for c in &report.checks {
        for f in &c.findings {
            if matches!(f.status, Status::Warn | Status::Fail | Status::Unknown) {
                let e = problems.entry(f.code.to_owned()).or_insert(f.status);
                *e = (*e).max(f.status);
            }
        }
    }
    let gdr_path = crate::report::nfd::path(&report).to_owned();
    // Only the node's facts and the verdict are kept of the report; its findings (thousands on
    // a node with thousands of GPUs) go now.
    let crate::report::Report { node, verdict, .. } = report;
    let mut gid_indices = BTreeSet::new();
    // A pinned NCCL_IB_GID_INDEX is the index NCCL uses on every RoCE port; without one, the
    // index `gdrdoctor nccl` would pin (the same rule): a pin and the rule that agree compare
    // equal, a pin that differs from a sibling's choice does not.
    let pinned = inv
        .nccl
        .value("NCCL_IB_GID_INDEX")
        .map(|v| crate::nccl::params::nccl_int(v).0)
        .filter(|&i| i >= 0);
    let mut roce_ports = 0;
    let mut v2 = 0;
    let mut v1_only = 0;
    for d in &inv.rdma {
        for p in d.ports.iter().filter(|p| p.is_ethernet()) {
            roce_ports += 1;
            if let Some(i) = pinned {
                gid_indices.insert(i.to_string());
            }
            match p.roce_v2_gid_index() {
                Some(_) if pinned.is_some() => v2 += 1,
                Some(i) => {
                    v2 += 1;
                    gid_indices.insert(i.to_string());
                }
                None => {
                    if pinned.is_none() {
                        gid_indices.insert("none".to_owned());
                    }
                    if p.gids.iter().any(|g| g.gid_type.value().is_some()) {
                        v1_only += 1;
                    }
                }
            }
        }
    }
    let roce = (roce_ports > 0).then(|| {
        if v2 == roce_ports {
            "v2"
        } else if v1_only > 0 {
            "v1-only"
        } else {
            "none"
        }
        .to_owned()
    });
    let m = crate::placement::matrix(&inv);
    let gpu_rows: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].kind == crate::placement::Kind::Gpu)
        .collect();
    let nic_cols: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].kind == crate::placement::Kind::Nic)
        .collect();
    let placement = (!gpu_rows.is_empty() && !nic_cols.is_empty()).then(|| {
        gpu_rows
            .iter()
            .map(|&r| {
                nic_cols
                    .iter()
                    .map(|&c| m.level(r, c).map(|(l, _)| l.as_str()).unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("|")
    });
    let peermem = if inv
        .kernel
        .memory_peers
        .keys()
        .any(|k| k.starts_with("nv_mem"))
    {
        "registered"
    } else if ["nvidia_peermem", "nv_peer_mem"]
        .iter()
        .any(|m| inv.kernel.module(m).is_some_and(|m| m.live()))
    {
        "loaded-unregistered"
    } else {
        "absent"
    }
    .to_owned();
    let gpu_driver = match inv.kernel.nvidia.value() {
        Some(v) => Some(format!(
            "nvidia {}{}",
            v.version,
            if v.open { " (open)" } else { "" }
        )),
        None if inv.gpus.iter().any(|g| g.vendor == GpuVendor::Amd) => Some("amdgpu".to_owned()),
        None => None,
    };
    let nic_firmware: BTreeSet<String> = inv
        .rdma
        .iter()
        .filter_map(|d| {
            Some(format!(
                "{} {}",
                d.driver.as_deref().unwrap_or("?"),
                d.fw_ver.as_deref()?
            ))
        })
        .collect();
    Ok(NodeResult {
        capture: path.display().to_string(),
        hostname: node.hostname,
        product: node.product,
        board: node.board,
        kernel: node.kernel,
        gpu_driver,
        nic_firmware: nic_firmware.into_iter().collect(),
        gpus: inv.gpus.len(),
        rdma_devices: inv.rdma.len(),
        ready: verdict.ready,
        exit_code: verdict.exit_code,
        blocking: if verdict.state == crate::report::State::NothingVerified {
            vec![crate::report::NOTHING_VERIFIED.to_owned()]
        } else {
            verdict
                .blocking
                .iter()
                .map(|b| format!("{} ({})", b.check, b.codes.join(", ")))
                .collect()
        },
        problems,
        gid_indices: gid_indices.into_iter().collect(),
        roce,
        placement,
        peermem,
        gdr_path,
        nccl: nccl_settings(&inv.nccl),
        picture,
    })
}

/// The effective values of the settings that change GPUDirect RDMA (the GID index aside: see
/// `NodeResult::nccl`), and the topology file NCCL loads, with its state or content digest.
fn nccl_settings(n: &crate::inventory::nccl::Nccl) -> BTreeMap<String, String> {
    use crate::inventory::nccl::{SourceState, TopoState};
    // A file NCCL reads that could not be read may set any of them: what is not set elsewhere
    // is unknown on that node, not unset (issue 25: the same cause as `gdrdoctor nccl`
    // proposing settings as if an unreadable /etc/nccl.conf were not there).
    let unread = n.sources.iter().find_map(|s| match s.state {
        SourceState::Unreadable(_) | SourceState::NotRead(_) => Some(s.path.as_str()),
        SourceState::Absent | SourceState::Read(_) => None,
    });
    let mut out: BTreeMap<String, String> = crate::nccl::params::GDR_PARAMS
        .iter()
        .filter(|(name, _)| !matches!(*name, "NCCL_IB_GID_INDEX" | "NCCL_TOPO_FILE"))
        .filter_map(|(name, _)| {
            let value = match (n.value(name), unread) {
                (Some(v), _) => v.to_owned(),
                (None, Some(path)) => format!("(unknown: {path} could not be read)"),
                (None, None) => return None,
            };
            Some(((*name).to_owned(), value))
        })
        .collect();
    if let Some(t) = &n.topology {
        let state = match &t.state {
            TopoState::Missing => "not there".to_owned(),
            TopoState::Relative => "a relative path".to_owned(),
            TopoState::Unreadable(_) => "unreadable".to_owned(),
            TopoState::Invalid(_) => "cannot be parsed".to_owned(),
            TopoState::Parsed { digest, .. } => format!("content {digest:016x}"),
        };
        out.insert("NCCL_TOPO_FILE".into(), format!("{} ({state})", t.path));
    } else if let Some(v) = n.value("NCCL_TOPO_FILE") {
        out.insert("NCCL_TOPO_FILE".into(), v.to_owned());
    }
    out
}

/// One input of a fleet run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A capture: a `.tar.gz` archive or a captured root directory (or anything else named,
    /// which `check --root` then judges).
    Capture(PathBuf),
    /// A two-node test's report (`gdr-test --format json`), recognised by what it holds.
    TwoNode(PathBuf),
}

/// The inputs named by the arguments: `.tar.gz` captures, capture directories, directories of
/// either (one level), globs in the last component (`caps/*.tar.gz`) for shells that did not
/// expand them, and two-node reports, recognised by their content wherever they are: a file
/// named or matched that starts as JSON is read as one (and refused with the reason when it is
/// not one); in a directory, a file whose start names the two-node schema is taken.
#[allow(clippy::disallowed_methods)] // these are the operator's files, not a node
pub fn expand(args: &[PathBuf]) -> Vec<Result<Input, Unreadable>> {
    let is_capture_file = |p: &Path| {
        let n = p.to_string_lossy();
        n.ends_with(".tar.gz") || n.ends_with(".tgz")
    };
    let is_root_dir = |p: &Path| p.join("sys").is_dir() || p.join("proc").is_dir();
    // A file named on the command line or matched by a glob.
    let named = |p: PathBuf| -> Input {
        if !is_capture_file(&p) && p.is_file() && two_node::sniff(&p) != two_node::Looks::Other {
            Input::TwoNode(p)
        } else {
            Input::Capture(p)
        }
    };
    let mut out = Vec::new();
    for a in args {
        let text = a.to_string_lossy();
        let name = a
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.contains(['*', '?']) && !a.exists() {
            let dir = a
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| glob(&name, &e.file_name().to_string_lossy()))
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default();
            hits.sort();
            if hits.is_empty() {
                out.push(Err(Unreadable {
                    capture: text.into_owned(),
                    reason: "no capture matches this pattern".into(),
                }));
            }
            out.extend(hits.into_iter().map(|p| Ok(named(p))));
        } else if a.is_dir() && !is_root_dir(a) {
            let mut hits: Vec<Input> = std::fs::read_dir(a)
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter_map(|p| {
                            if (p.is_file() && is_capture_file(&p))
                                || (p.is_dir() && is_root_dir(&p))
                            {
                                Some(Input::Capture(p))
                            } else if p.is_file() && two_node::sniff(&p) == two_node::Looks::Report
                            {
                                Some(Input::TwoNode(p))
                            } else {
                                None
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            hits.sort_by(|x, y| path_of(x).cmp(path_of(y)));
            if hits.is_empty() {
                out.push(Err(Unreadable {
                    capture: text.into_owned(),
                    reason: "neither a capture nor a directory of captures".into(),
                }));
            }
            out.extend(hits.into_iter().map(Ok));
        } else {
            out.push(Ok(named(a.clone())));
        }
    }
    out
}

fn path_of(i: &Input) -> &Path {
    match i {
        Input::Capture(p) | Input::TwoNode(p) => p,
    }
}

/// Splits the inputs into the captures (with the arguments that could not be read) and the
/// two-node reports.
pub fn split(
    inputs: Vec<Result<Input, Unreadable>>,
) -> (Vec<Result<PathBuf, Unreadable>>, Vec<PathBuf>) {
    let (mut captures, mut reports) = (Vec::new(), Vec::new());
    for i in inputs {
        match i {
            Ok(Input::Capture(p)) => captures.push(Ok(p)),
            Ok(Input::TwoNode(p)) => reports.push(p),
            Err(u) => captures.push(Err(u)),
        }
    }
    (captures, reports)
}

/// `*` and `?` over one path component. In a loop that backtracks only to the last `*`, as
/// fnmatch does: O(pattern x name) steps and no recursion. The recursive match it replaces
/// overflowed the stack on a pattern of 100,000 `*` and took exponential time on `*a*a...*b`
/// (issue 25).
fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut i, mut j) = (0, 0);
    // After the last `*` seen: where the pattern goes on, and the name position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        match p.get(i) {
            Some('*') => {
                star = Some((i + 1, j));
                i += 1;
            }
            Some(&c) if c == '?' || c == n[j] => {
                i += 1;
                j += 1;
            }
            // No match here: the last `*` takes one more character, if there was one.
            _ => match star {
                Some((after, tried)) => {
                    star = Some((after, tried + 1));
                    i = after;
                    j = tried + 1;
                }
                None => return false,
            },
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Values seen for one aspect of one model, each with a count and a few example nodes.
const EXAMPLES: usize = 3;
/// Distinct values kept per aspect; more are counted together (memory stays bounded).
const MAX_VALUES: usize = 64;
const OTHER: &str = "(other values)";

#[derive(Debug, Default, Clone, Serialize)]
pub struct Seen {
    pub nodes: usize,
    pub examples: Vec<String>,
}

#[derive(Debug, Default)]
struct ModelTally {
    nodes: usize,
    aspects: BTreeMap<&'static str, BTreeMap<String, Seen>>,
}

/// A difference between nodes of one model.
#[derive(Debug, Clone, Serialize)]
pub struct CrossFinding {
    pub code: String,
    pub model: String,
    pub aspect: &'static str,
    /// Value -> how many nodes, with examples.
    pub values: BTreeMap<String, Seen>,
    pub message: String,
}

/// The running totals.
#[derive(Debug, Default)]
pub struct Tally {
    pub nodes: usize,
    pub ready: usize,
    pub unreadable: usize,
    /// code -> status -> nodes.
    pub codes: BTreeMap<String, BTreeMap<Status, usize>>,
    models: BTreeMap<String, ModelTally>,
}

const ASPECTS: &[(&str, &str)] = &[
    // A pinned NCCL_IB_GID_INDEX counts as the index (`analyse`).
    ("gid-index", "the RoCE v2 GID index"),
    ("roce-version", "the RoCE version"),
    ("gpu-driver", "the GPU driver"),
    ("nic-firmware", "the NIC firmware"),
    ("kernel", "the kernel"),
    ("placement", "the GPU-NIC placement"),
    ("peermem", "nvidia_peermem"),
];

impl Tally {
    pub fn add(&mut self, n: &NodeResult) {
        self.nodes += 1;
        self.ready += usize::from(n.ready);
        for (code, status) in &n.problems {
            *self
                .codes
                .entry(code.clone())
                .or_default()
                .entry(*status)
                .or_default() += 1;
        }
        let model = n
            .product
            .clone()
            .unwrap_or_else(|| "(model unknown)".into());
        let name = n.hostname.clone().unwrap_or_else(|| n.capture.clone());
        let t = self.models.entry(model).or_default();
        t.nodes += 1;
        let values: [(&str, Option<String>); 7] = [
            (
                "gid-index",
                (!n.gid_indices.is_empty()).then(|| n.gid_indices.join(",")),
            ),
            ("roce-version", n.roce.clone()),
            ("gpu-driver", n.gpu_driver.clone()),
            (
                "nic-firmware",
                (!n.nic_firmware.is_empty()).then(|| n.nic_firmware.join(", ")),
            ),
            ("kernel", n.kernel.clone()),
            ("placement", n.placement.clone()),
            ("peermem", Some(n.peermem.clone())),
        ];
        // NCCL's settings: every one of them, "(unset)" where a node does not set it, so that a
        // setting on some nodes only is a difference too.
        let nccl = crate::nccl::params::GDR_PARAMS
            .iter()
            .filter(|(name, _)| *name != "NCCL_IB_GID_INDEX")
            .map(|(name, _)| {
                (
                    *name,
                    Some(
                        n.nccl
                            .get(*name)
                            .cloned()
                            .unwrap_or_else(|| "(unset)".into()),
                    ),
                )
            });
        for (aspect, value) in values.into_iter().chain(nccl) {
            let value = value.unwrap_or_else(|| "(none)".into());
            let seen = t.aspects.entry(aspect).or_default();
            let key = if seen.contains_key(&value) || seen.len() < MAX_VALUES {
                value
            } else {
                OTHER.to_owned()
            };
            let s = seen.entry(key).or_default();
            s.nodes += 1;
            if s.examples.len() < EXAMPLES {
                s.examples.push(name.clone());
            }
        }
    }

    /// Every aspect on which the nodes of one model disagree.
    pub fn cross(&self) -> Vec<CrossFinding> {
        let mut out = Vec::new();
        for (model, t) in &self.models {
            if t.nodes < 2 {
                continue;
            }
            let nccl = crate::nccl::params::GDR_PARAMS
                .iter()
                .filter(|(name, _)| *name != "NCCL_IB_GID_INDEX")
                .map(|(name, _)| (*name, *name));
            for (aspect, what) in ASPECTS.iter().copied().chain(nccl) {
                let Some(values) = t.aspects.get(aspect) else {
                    continue;
                };
                if values.len() < 2 {
                    continue;
                }
                let (code, what) = if aspect.starts_with("NCCL_") {
                    (
                        "fleet-nccl-setting-differs".to_owned(),
                        format!("{what}, as NCCL reads it (nccl.conf, the declared environment)"),
                    )
                } else {
                    (format!("fleet-{aspect}-differs"), what.to_owned())
                };
                let parts: Vec<String> = values
                    .iter()
                    .map(|(v, s)| {
                        format!(
                            "{} on {} node(s) (e.g. {})",
                            if aspect == "placement" {
                                short_placement(v)
                            } else {
                                v.clone()
                            },
                            s.nodes,
                            s.examples.join(", ")
                        )
                    })
                    .collect();
                out.push(CrossFinding {
                    code,
                    model: model.clone(),
                    aspect,
                    values: values.clone(),
                    message: format!(
                        "{} nodes of {model} differ in {what}: {}",
                        t.nodes,
                        parts.join("; ")
                    ),
                });
            }
        }
        out
    }
}

/// A placement signature as a reader wants it: `8 GPUs x 8 NICs: 16 PIX, 16 NODE, 32 SYS
/// [3f2a]`, the tag telling apart matrices with the same counts.
fn short_placement(v: &str) -> String {
    if !v.contains(' ') && !v.contains('|') && v.starts_with('(') {
        return v.to_owned();
    }
    let rows: Vec<&str> = v.split('|').collect();
    let cols = rows.first().map(|r| r.split(' ').count()).unwrap_or(0);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for cell in rows.iter().flat_map(|r| r.split(' ')) {
        *counts.entry(cell).or_default() += 1;
    }
    let order = ["PIX", "PXB", "PHB", "NODE", "SYS", "?"];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|l| counts.get(l).map(|n| format!("{n} {l}")))
        .collect();
    // FNV-1a: a short, stable tag for the exact matrix.
    let tag = v.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!(
        "{} GPUs x {cols} NICs: {} [{:04x}]",
        rows.len(),
        parts.join(", "),
        tag & 0xffff
    )
}

fn csv_field(s: &str) -> String {
    // Text read off a capture (a firmware version, a hostname) never reaches a spreadsheet or
    // a terminal raw: control characters are escaped as the human output shows them
    // (`\u{1b}`); JSON escapes them its own way.
    let s = clean(s);
    // Formula injection in spreadsheets: a leading = + - @ is quoted with a tab-free apostrophe.
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn clean(s: &str) -> String {
    crate::sanitize::text(s).into_owned()
}

/// Writes one node's line as it arrives.
pub fn write_node(
    out: &mut dyn Write,
    format: Format,
    first: bool,
    r: &Result<NodeResult, Unreadable>,
) -> std::io::Result<()> {
    match (format, r) {
        (Format::Human, Ok(n)) => writeln!(
            out,
            "{:<10} {:<40} {:<20} {:<28} {}",
            if n.ready { "READY" } else { "NOT READY" },
            clean(&n.capture),
            clean(n.hostname.as_deref().unwrap_or("?")),
            clean(n.product.as_deref().unwrap_or("?")),
            clean(&n.blocking.join("; "))
        ),
        (Format::Human, Err(u)) => writeln!(
            out,
            "{:<10} {:<40} {}",
            "UNREADABLE",
            clean(&u.capture),
            clean(&u.reason)
        ),
        (Format::Json, r) => {
            let v = match r {
                Ok(n) => serde_json::to_value(n),
                Err(u) => serde_json::to_value(
                    serde_json::json!({"capture": u.capture, "unreadable": u.reason}),
                ),
            }
            .unwrap_or_default();
            write!(out, "{}\n    {}", if first { "" } else { "," }, v)
        }
        (Format::Csv, Ok(n)) => writeln!(
            out,
            "{}",
            [
                n.capture.clone(),
                n.hostname.clone().unwrap_or_default(),
                n.product.clone().unwrap_or_default(),
                n.board.clone().unwrap_or_default(),
                n.kernel.clone().unwrap_or_default(),
                n.gpu_driver.clone().unwrap_or_default(),
                n.nic_firmware.join("; "),
                n.gpus.to_string(),
                n.rdma_devices.to_string(),
                n.ready.to_string(),
                n.exit_code.to_string(),
                n.blocking.join("; "),
                n.gid_indices.join(";"),
                n.roce.clone().unwrap_or_default(),
                n.peermem.clone(),
                n.gdr_path.clone(),
                String::new(),
            ]
            .iter()
            .map(|s| csv_field(s))
            .collect::<Vec<_>>()
            .join(",")
        ),
        (Format::Csv, Err(u)) => writeln!(
            out,
            "{},,,,,,,,,,,,,,,,{}",
            csv_field(&u.capture),
            csv_field(&u.reason)
        ),
        (other, _) => Err(unsupported(other)),
    }
}

pub const CSV_HEADER: &str = "capture,hostname,product,board,kernel,gpu_driver,nic_firmware,gpus,rdma_devices,ready,exit_code,blocking,gid_indices,roce,peermem,gdr_path,unreadable";

/// The summary after every node line, and the two-node reports' part: one fleet report, one
/// document per format. The human report shows the captures' part only when there were
/// captures; JSON always has every member, `two_node` when there were reports; CSV gives each
/// report file a row of its own after the captures'.
pub fn write_summary(
    out: &mut dyn Write,
    format: Format,
    t: &Tally,
    captures: bool,
    two: &two_node::TwoNode,
) -> std::io::Result<()> {
    let cross = t.cross();
    match format {
        Format::Human => {
            if captures {
                writeln!(
                    out,
                    "\n{} captures: {} ready, {} not ready, {} unreadable",
                    t.nodes + t.unreadable,
                    t.ready,
                    t.nodes - t.ready,
                    t.unreadable
                )?;
                if !t.codes.is_empty() {
                    writeln!(
                        out,
                        "\nfindings (nodes with each warning, failure or unknown):"
                    )?;
                    for (code, by) in &t.codes {
                        let parts: Vec<String> =
                            by.iter().map(|(s, n)| format!("{n} {s}")).collect();
                        writeln!(out, "  {code:<30} {}", parts.join(", "))?;
                    }
                }
                if cross.is_empty() {
                    writeln!(out, "\nno differences between nodes of the same model")?;
                } else {
                    writeln!(out, "\ndifferences between nodes of the same model:")?;
                    for c in &cross {
                        writeln!(out, "  WARN {}: {}", c.code, clean(&c.message))?;
                    }
                }
            }
            if !two.is_empty() {
                if captures {
                    writeln!(out)?;
                }
                write!(out, "{}", two_node::human(two))?;
            }
            Ok(())
        }
        Format::Json => {
            let codes: BTreeMap<&String, BTreeMap<String, usize>> = t
                .codes
                .iter()
                .map(|(c, by)| (c, by.iter().map(|(s, n)| (s.to_string(), *n)).collect()))
                .collect();
            let two = if two.is_empty() {
                String::new()
            } else {
                format!(
                    ",\n  \"two_node\": {}",
                    serde_json::to_string_pretty(&two_node::json(two))
                        .unwrap_or_default()
                        .replace('\n', "\n  ")
                )
            };
            write!(
                out,
                "\n  ],\n  \"summary\": {},\n  \"codes\": {},\n  \"cross\": {}{two}\n}}\n",
                serde_json::json!({"captures": t.nodes + t.unreadable, "ready": t.ready, "not_ready": t.nodes - t.ready, "unreadable": t.unreadable}),
                serde_json::to_string(&codes).unwrap_or_default(),
                serde_json::to_string_pretty(&cross)
                    .unwrap_or_default()
                    .replace('\n', "\n  ")
            )
        }
        Format::Csv => write_two_node_rows(out, two),
        other => Err(unsupported(other)),
    }
}

/// One CSV row per two-node report file, in the captures' columns: the file, its host(s),
/// whether every session passed, the worst session's exit code, and in `blocking` what the
/// judgement says about its host (else the directions that failed, or why the test could not
/// run); a file not read has its reason under `unreadable`.
fn write_two_node_rows(out: &mut dyn Write, two: &two_node::TwoNode) -> std::io::Result<()> {
    let about = two
        .verdict
        .as_ref()
        .map(two_node::about)
        .unwrap_or_default();
    // A file's sessions are next to each other (TwoNode::read keeps the order): one pass.
    for sessions in two.sessions.chunk_by(|a, b| a.file == b.file) {
        let file = sessions[0].file.as_str();
        let mut hosts: Vec<&str> = sessions.iter().map(|s| s.host.as_str()).collect();
        hosts.dedup();
        let mut blocking: Vec<String> = Vec::new();
        for h in &hosts {
            blocking.extend(about.get(h).into_iter().flatten().cloned());
        }
        for s in sessions {
            if let Some(e) = &s.error {
                blocking.push(format!("two-node: could not run: {e}"));
            } else if blocking.is_empty() && !s.failing.is_empty() {
                blocking.push(format!("two-node: {}", s.failing.join(", ")));
            }
        }
        let worst = sessions.iter().map(|s| s.exit_code).max().unwrap_or(2);
        let mut row = vec![String::new(); 17];
        row[0] = file.to_owned();
        row[1] = hosts.join("; ");
        row[9] = (worst == 0).to_string();
        row[10] = worst.to_string();
        row[11] = blocking.join("; ");
        writeln!(
            out,
            "{}",
            row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(",")
        )?;
    }
    for u in &two.unreadable {
        writeln!(
            out,
            "{},,,,,,,,,,,,,,,,{}",
            csv_field(&u.file),
            csv_field(&u.reason)
        )?;
    }
    Ok(())
}

/// The header; the human one only over captures (a run of two-node reports alone has none).
pub fn write_header(out: &mut dyn Write, format: Format, captures: bool) -> std::io::Result<()> {
    match format {
        Format::Human if !captures => Ok(()),
        Format::Human => writeln!(
            out,
            "{:<10} {:<40} {:<20} {:<28} BLOCKING",
            "VERDICT", "CAPTURE", "HOSTNAME", "PRODUCT"
        ),
        Format::Json => write!(
            out,
            "{{\n  \"schema\": \"gdrdoctor.fleet\",\n  \"schema_version\": 1,\n  \"gdrdoctor_version\": \"{}\",\n  \"nodes\": [",
            env!("CARGO_PKG_VERSION")
        ),
        Format::Csv => writeln!(out, "{CSV_HEADER}"),
        other => Err(unsupported(other)),
    }
}

/// The fleet report is human, JSON or CSV (commands/fleet.rs offers only these).
fn unsupported(format: Format) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("the fleet report has no {format} format"),
    )
}

/// Analyses the captures on `workers` threads; `emit` gets each result in input order as soon
/// as it and every earlier one are done. With `pictures`, the first capture of each model comes
/// with the picture of its tree (`NodeResult::picture`). Returns the tally.
pub fn run(
    captures: Vec<Result<PathBuf, Unreadable>>,
    config: &Config,
    workers: usize,
    pictures: bool,
    mut emit: impl FnMut(&Result<NodeResult, Unreadable>),
) -> Tally {
    let claims = Pictures::default();
    let claims = pictures.then_some(&claims);
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    // How far the output has got: workers stay within a window of it, so that one slow capture
    // cannot make the reorder buffer hold the rest of the fleet.
    let emitted = AtomicUsize::new(0);
    let window = workers.max(1) * 16;
    let total = captures.len();
    let mut tally = Tally::default();
    // One budget for every archive the workers hold at once (issue 14).
    let budget = archive::Budget::new(archive::RUN_BUDGET_BYTES);
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<(usize, Result<NodeResult, Unreadable>)>(workers * 4);
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            let tx = tx.clone();
            let next = &next;
            let emitted = &emitted;
            let captures = &captures;
            let budget = &budget;
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    while i >= emitted.load(Ordering::Relaxed) + window {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    let r = match &captures[i] {
                        Err(u) => Err(u.clone()),
                        Ok(path) => {
                            let path = path.clone();
                            // A capture that panics the analysis is reported, never fatal.
                            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                analyse(&path, config, budget, claims.map(|c| (c, i)))
                            })) {
                                Ok(Ok(n)) => Ok(n),
                                Ok(Err(reason)) => Err(Unreadable {
                                    capture: path.display().to_string(),
                                    reason,
                                }),
                                Err(_) => Err(Unreadable {
                                    capture: path.display().to_string(),
                                    reason:
                                        "gdrdoctor failed on this capture (a bug: please report it)"
                                            .into(),
                                }),
                            }
                        }
                    };
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Reorder: results arrive nearly in order; hold the early ones until their turn.
        let mut pending: BTreeMap<usize, Result<NodeResult, Unreadable>> = BTreeMap::new();
        let mut want = 0;
        for (i, r) in rx {
            pending.insert(i, r);
            while let Some(r) = pending.remove(&want) {
                match &r {
                    Ok(n) => tally.add(n),
                    Err(_) => tally.unreadable += 1,
                }
                emit(&r);
                want += 1;
                emitted.store(want, Ordering::Relaxed);
            }
        }
    });
    tally
}

#[cfg(test)]
mod tests {
    #[test]
    fn globbing() {
        assert!(super::glob("*.tar.gz", "node1.tar.gz"));
        assert!(super::glob("node?.tgz", "node7.tgz"));
        assert!(!super::glob("*.tar.gz", "node1.tgz"));
        assert!(super::glob("*", ""));
        assert!(super::glob("a*b*c", "aXbYbZc"));
        assert!(!super::glob("a*b*c", "aXbYbZ"));
        assert!(super::glob("*?", "x"));
        assert!(!super::glob("?", ""));
        assert!(super::glob("n*.tar.gz", "n.tar.gz.tar.gz"));
    }

    /// Patterns that made the recursive match overflow the stack or take exponential time
    /// (issue 25) end at once.
    #[test]
    fn globbing_is_linear_in_both() {
        let stars = "*".repeat(100_000);
        assert!(super::glob(&stars, "node1.tar.gz"));
        let t = std::time::Instant::now();
        let name = "a".repeat(200);
        assert!(!super::glob(&format!("{}*b", "*a".repeat(30)), &name));
        assert!(super::glob(&format!("{}*", "*a".repeat(30)), &name));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn model_slugs_are_safe_file_names() {
        use super::slug;
        assert_eq!(
            slug("Supermicro SYS-821GE-TNHR"),
            "supermicro-sys-821ge-tnhr"
        );
        assert_eq!(slug("(model unknown)"), "model-unknown");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug(".hidden"), "hidden");
        assert_eq!(
            slug("NVIDIA DGXA100 920-23687-2530-000"),
            "nvidia-dgxa100-920-23687-2530-000"
        );
        assert_eq!(slug("Ünïcode / \u{1b}"), "n-code");
        assert_eq!(slug("///"), "model");
        assert_eq!(slug(&"x".repeat(500)).len(), 64);
    }

    #[test]
    fn the_first_capture_of_a_model_draws() {
        let p = super::Pictures::default();
        // Capture 3 gets ahead of capture 1 of the same model: both draw, capture 5 does not.
        assert!(p.claim("A", 3));
        assert!(p.claim("A", 1));
        assert!(!p.claim("A", 5));
        assert!(!p.claim("A", 2));
        assert!(p.claim("B", 4));
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(super::csv_field("a,b"), "\"a,b\"");
        assert_eq!(super::csv_field("=cmd()"), "'=cmd()");
        assert_eq!(super::csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(
            super::csv_field("20.39\u{1b}[2J\r\n"),
            "20.39\\u{1b}[2J\\r\\n"
        );
    }
}
