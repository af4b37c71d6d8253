//! `gdrdoctor capture`: writes out exactly what a check read (files, links, directories), so
//! that `check --root` on the copy reads the same bytes and gives the same findings.
//!
//! The copy is built from a [`Recording`] of one inventory load: regular files with the bytes
//! that were read, links with their target text (relative, as the kernel wrote them), the
//! directories walked through, and for listed directories every entry (entries that were never
//! read become empty placeholders, so a listing of the copy gives the same names and nothing of
//! their content leaks). Special files are never copied.
//!
//! A capture must always be readable by `check --root`, which refuses archives whose links
//! leave the capture. A link whose target is absolute or climbs above the root with `..` is
//! therefore rewritten as the relative path to where [`Root`] resolves it inside the node (an
//! absolute target starts at the root, `..` stops there), so the copy resolves as the node did.

// Writing the copy is this module's job; reading stays in Root.
use crate::root::{Listed, Recording, Root, join};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>),
    Link(String),
}

/// What a capture wrote.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub links: usize,
    pub dirs: usize,
    pub bytes: usize,
    /// Links whose target led outside the root, written relative and inside it.
    pub rewritten: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{0}: already exists and is not an empty directory; capture writes into a new one")]
    Exists(PathBuf),
    #[error("{path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: not a path that can be written inside the capture")]
    BadPath(String),
}

/// True when `out` names a `.tar.gz` (or `.tgz`) archive rather than a directory.
pub fn is_archive(out: &Path) -> bool {
    let name = out.to_string_lossy();
    name.ends_with(".tar.gz") || name.ends_with(".tgz")
}

/// Turns a recording into the tree to write, and how many links were rewritten to stay inside
/// it. `root` answers the targets of listed links that were never followed, and resolves the
/// targets that lead outside.
fn tree(rec: &Recording, root: &Root) -> Result<(BTreeMap<String, Node>, usize), CaptureError> {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut rewritten = 0;
    let mut link = |path: &str, target: &str| {
        let inside = inside(root, path, target);
        rewritten += usize::from(inside != target);
        Node::Link(inside)
    };
    for d in &rec.dirs {
        nodes.insert(d.clone(), Node::Dir);
    }
    for (path, target) in &rec.links {
        nodes.insert(path.clone(), link(path, target));
    }
    for (path, bytes) in &rec.files {
        nodes.insert(path.clone(), Node::File(redact(path, bytes)));
    }
    for (dir, entries) in &rec.listings {
        for (name, kind) in entries {
            let path = join(dir, name);
            if nodes.contains_key(&path) {
                continue;
            }
            let node = match kind {
                Listed::Dir => Node::Dir,
                Listed::File => Node::File(Vec::new()),
                Listed::Link => match root.read_link(&path) {
                    Ok(target) => link(&path, &target),
                    Err(_) => continue,
                },
                Listed::Special => continue,
            };
            nodes.insert(path, node);
        }
    }
    nodes.remove("/");
    // Every ancestor is a directory.
    let paths: Vec<String> = nodes.keys().cloned().collect();
    for p in paths {
        let mut cut = p.as_str();
        while let Some(i) = cut.rfind('/') {
            cut = &cut[..i];
            if cut.is_empty() {
                break;
            }
            nodes.entry(cut.to_owned()).or_insert(Node::Dir);
        }
    }
    for p in nodes.keys() {
        relative(p)?;
    }
    Ok((nodes, rewritten))
}

/// The target the copy of the link at `link` gets: `target` itself when it stays inside the
/// root, else a relative target that `Root` resolves the way it resolved `target`. The part up
/// to the last `..` is resolved as `Root` resolves it (an absolute target starts at the root,
/// `..` stops there, a link on the way is followed); the names after it are kept as written and
/// followed from there, as `Root` followed them, so the copy ends in the same names (a `driver`
/// link is judged by its last two). Names that the link's own directory passes through are
/// walked down to first, for a shorter target (`/sys/bus/...` from `/sys/devices/x/y` is
/// `../../bus/...`). When that first part does not resolve (the capture does not hold it), it
/// is taken by its names, clamped at the root.
fn inside(root: &Root, link: &str, target: &str) -> String {
    let dir = parent(link);
    if !target.starts_with('/') && crate::archive::stays_inside(dir, target) {
        return target.to_owned();
    }
    let parts: Vec<&str> = target
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let cut = parts.iter().rposition(|p| *p == "..").map_or(0, |i| i + 1);
    let (climb, mut tail) = parts.split_at(cut);
    let start = if target.starts_with('/') { "/" } else { dir };
    let mut from = start.to_owned();
    for p in climb {
        from = if *p == ".." {
            parent(&from).to_owned()
        } else {
            join(&from, p)
        };
    }
    if !climb.is_empty() {
        let path = climb.iter().fold(start.to_owned(), |at, p| join(&at, p));
        if let Ok(resolved) = root.canonical(&path) {
            from = resolved;
        }
    }
    // `dir` has no links in it, so walking down its own names reaches the same directories.
    while let [first, rest @ ..] = tail {
        let next = join(&from, first);
        if rest.is_empty() || !(dir == next || dir.starts_with(&format!("{next}/"))) {
            break;
        }
        from = next;
        tail = rest;
    }
    let mut out = relative_to(dir, &from);
    for name in tail {
        out = if out == "." {
            (*name).to_owned()
        } else {
            format!("{out}/{name}")
        };
    }
    out
}

/// The directory a node path is in: `/sys/class` -> `/sys`; the root's is the root.
fn parent(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((d, _)) => d,
    }
}

/// The relative path from directory `from` to `to`, both node paths without links or `..`:
/// (`/sys/class/net`, `/sys/devices/x`) -> `../../devices/x`. It never climbs above the root.
fn relative_to(from: &str, to: &str) -> String {
    let a: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    let b: Vec<&str> = to.split('/').filter(|p| !p.is_empty()).collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts = vec![".."; a.len() - common];
    parts.extend(&b[common..]);
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// Identifiers that files the checks read happen to carry, and that no check uses: they stay on
/// the node. The NVIDIA driver's per-GPU `information` file is read for its `Model:` line; its
/// `GPU UUID:` line names that very board.
fn redact(path: &str, bytes: &[u8]) -> Vec<u8> {
    let nvidia_info =
        path.starts_with("/proc/driver/nvidia/gpus/") && path.ends_with("/information");
    if !nvidia_info {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        if !line.starts_with(b"GPU UUID:") {
            out.extend_from_slice(line);
        }
    }
    out
}

/// `/sys/class/net` -> `sys/class/net`, refusing anything that could climb out.
fn relative(path: &str) -> Result<String, CaptureError> {
    let rel = path
        .strip_prefix('/')
        .ok_or_else(|| CaptureError::BadPath(path.to_owned()))?;
    let ok = !rel.is_empty()
        && rel
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
    ok.then(|| rel.to_owned())
        .ok_or_else(|| CaptureError::BadPath(path.to_owned()))
}

/// Writes what `root` recorded to `out`: a new (or empty) directory, or a `.tar.gz`.
pub fn write(rec: &Recording, root: &Root, out: &Path) -> Result<Summary, CaptureError> {
    let (nodes, rewritten) = tree(rec, root)?;
    let mut summary = Summary {
        rewritten,
        ..Summary::default()
    };
    for node in nodes.values() {
        match node {
            Node::Dir => summary.dirs += 1,
            Node::File(b) => {
                summary.files += 1;
                summary.bytes += b.len();
            }
            Node::Link(_) => summary.links += 1,
        }
    }
    if is_archive(out) {
        write_archive(&nodes, out)?;
    } else {
        write_dir(&nodes, out)?;
    }
    Ok(summary)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CaptureError + '_ {
    move |source| CaptureError::Write {
        path: path.to_owned(),
        source,
    }
}

fn write_dir(nodes: &BTreeMap<String, Node>, out: &Path) -> Result<(), CaptureError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => {
            #[allow(clippy::disallowed_methods)] // the output directory, not a node
            let empty = std::fs::read_dir(out)
                .map_err(io_err(out))?
                .next()
                .is_none();
            if !empty {
                return Err(CaptureError::Exists(out.to_owned()));
            }
        }
        Ok(_) => return Err(CaptureError::Exists(out.to_owned())),
        Err(_) => std::fs::create_dir(out).map_err(io_err(out))?,
    }
    // Parents sort before their children; every parent is one of ours, created just before,
    // and never a link (links are leaves), so nothing is written through a link.
    for (path, node) in nodes {
        let dest = out.join(relative(path)?);
        match node {
            Node::Dir => std::fs::create_dir(&dest).map_err(io_err(&dest))?,
            Node::Link(target) => {
                std::os::unix::fs::symlink(target, &dest).map_err(io_err(&dest))?
            }
            Node::File(bytes) => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&dest)
                    .map_err(io_err(&dest))?;
                f.write_all(bytes).map_err(io_err(&dest))?;
            }
        }
    }
    Ok(())
}

fn write_archive(nodes: &BTreeMap<String, Node>, out: &Path) -> Result<(), CaptureError> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => CaptureError::Exists(out.to_owned()),
            _ => CaptureError::Write {
                path: out.to_owned(),
                source: e,
            },
        })?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, node) in nodes {
        let rel = relative(path)?;
        // Deterministic archives: no owners, times or modes from this machine.
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        match node {
            Node::Dir => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                tar.append_data(&mut h, format!("{rel}/"), std::io::empty())
                    .map_err(io_err(out))?;
            }
            Node::File(bytes) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(0o644);
                h.set_size(bytes.len() as u64);
                tar.append_data(&mut h, &rel, &bytes[..])
                    .map_err(io_err(out))?;
            }
            Node::Link(target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, &rel, target).map_err(io_err(out))?;
            }
        }
    }
    let gz = tar.into_inner().map_err(io_err(out))?;
    let mut file = gz.finish().map_err(io_err(out))?;
    file.flush().map_err(io_err(out))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_stay_inside() {
        assert_eq!(relative("/sys/class/net").unwrap(), "sys/class/net");
        for bad in ["/", "sys", "/sys/../etc", "/sys//x", "/sys/./x"] {
            assert!(relative(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn gpu_uuids_stay_on_the_node() {
        // The H200 VM's /proc/driver/nvidia/gpus/0000:00:06.0/information (shortened).
        let info = b"Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-c783c174-2489-07fb-69e0-b646a5b7d417\nBus Type: \t PCIe\n";
        let out = redact("/proc/driver/nvidia/gpus/0000:00:06.0/information", info);
        assert_eq!(
            out,
            b"Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nBus Type: \t PCIe\n"
        );
        assert_eq!(redact("/proc/cmdline", info), info);
    }

    /// Links that leave the root, rewritten to where the resolver takes them: an absolute
    /// target starts at the root, `..` stops there. Nothing here exists, so every component is
    /// followed by name.
    #[test]
    fn links_out_of_the_root_are_rewritten_inside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sys")).unwrap();
        let root = Root::captured(dir.path()).unwrap();
        let gpu = "/sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0";
        for (link, target, want) in [
            // Inside already: kept as written.
            (
                "/sys/class/net/eth0",
                "../../devices/virtual/net/eth0",
                "../../devices/virtual/net/eth0",
            ),
            (
                &*format!("{gpu}/driver"),
                "/sys/bus/pci/drivers/nvidia",
                "../../../../bus/pci/drivers/nvidia",
            ),
            (
                "/sys/class/infiniband/mlx5_0",
                "../../../../../../../../sys/devices/x/infiniband/mlx5_0",
                "../../devices/x/infiniband/mlx5_0",
            ),
            // The names after the last `..` stay as written: this one names no driver, before
            // and after.
            (
                &*format!("{gpu}/driver"),
                "/sys/bus/pci/drivers/../../../../etc",
                "../../../../../etc",
            ),
            ("/proc/cmdline", "/proc/cmdline", "cmdline"),
            ("/proc/self", "/proc/./1//", "1"),
            ("/sys/up", "/", ".."),
            ("/up", "/", "."),
            (
                "/sys/class/x",
                "/sys/class/../../../sys/devices",
                "../devices",
            ),
            (
                "/sys/kernel/iommu_groups",
                "/sys/kernel/iommu_groups",
                "iommu_groups",
            ),
        ] {
            let got = inside(&root, link, target);
            assert_eq!(got, want, "{link} -> {target}");
            assert!(crate::archive::stays_inside(parent(link), &got));
        }
        assert_eq!(relative_to("/", "/sys"), "sys");
    }

    #[test]
    fn archive_names() {
        assert!(is_archive(Path::new("node17.tar.gz")));
        assert!(is_archive(Path::new("/tmp/x.tgz")));
        assert!(!is_archive(Path::new("/tmp/node17")));
    }
}
