//! A `.tar.gz` capture read in place, into memory: nothing is extracted, so nothing in an
//! untrusted archive can land anywhere on this machine. Every member is checked on the way in,
//! and a capture with anything a gdrdoctor capture never holds is refused whole, with the reason:
//! members named with `..` or an absolute path, links that lead out of the capture or to an
//! absolute path, hard links, device files, FIFOs, members over the read limit, a path held
//! twice (tar would let the last copy win, unseen), more data than a capture could hold (a gzip
//! bomb), or a truncated or corrupt stream.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

/// Limits on what a capture may hold. A full 8-GPU node captures to about 1,500 entries and
/// 2 MB uncompressed.
/// A member may hold one byte more than the read limit: a capture of a file over the limit
/// holds the bytes that were read, the limit and one more, so that the copy is too large too.
pub const MAX_MEMBER_BYTES: u64 = crate::root::DEFAULT_READ_LIMIT + 1;
pub const MAX_TOTAL_BYTES: u64 = 256 << 20;
pub const MAX_ENTRIES: usize = 200_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File,
    Link,
}

#[derive(Debug)]
pub enum Node {
    /// Entries by name, with their kind (what `getdents` would say).
    Dir(BTreeMap<String, EntryKind>),
    File(Vec<u8>),
    Link(String),
}

/// The capture's tree: node paths (`/sys/class/net`) to what is there.
#[derive(Debug, Default)]
pub struct Tree {
    nodes: HashMap<String, Node>,
}

impl Tree {
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A directory at `path` and every directory above it (tar files need not list them).
    fn ensure_dir(&mut self, path: &str) -> Result<(), String> {
        if let Some(node) = self.nodes.get(path) {
            return match node {
                Node::Dir(_) => Ok(()),
                _ => Err(format!("{path} is both a directory and something else")),
            };
        }
        if path != "/" {
            let (parent, name) = split(path);
            self.ensure_dir(parent)?;
            if let Some(Node::Dir(entries)) = self.nodes.get_mut(parent) {
                entries.insert(name.to_owned(), EntryKind::Dir);
            }
        }
        self.nodes
            .insert(path.to_owned(), Node::Dir(BTreeMap::new()));
        Ok(())
    }

    fn insert(&mut self, path: &str, node: Node) -> Result<(), String> {
        let kind = match &node {
            Node::Dir(_) => return self.ensure_dir(path),
            Node::File(_) => EntryKind::File,
            Node::Link(_) => EntryKind::Link,
        };
        if matches!(self.nodes.get(path), Some(Node::Dir(_))) {
            return Err(format!("{path} is both a directory and a {kind:?}"));
        }
        let (parent, name) = split(path);
        self.ensure_dir(parent)?;
        if let Some(Node::Dir(entries)) = self.nodes.get_mut(parent) {
            entries.insert(name.to_owned(), kind);
        }
        self.nodes.insert(path.to_owned(), node);
        Ok(())
    }
}

fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

/// A member name as a node path, or why it is refused.
fn node_path(raw: &[u8]) -> Result<String, String> {
    let name =
        std::str::from_utf8(raw).map_err(|_| "a member name that is not UTF-8".to_owned())?;
    if name.starts_with('/') {
        return Err(format!("member {name:?} has an absolute path"));
    }
    let mut out = String::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("member {name:?} climbs out with '..'")),
            p => {
                out.push('/');
                out.push_str(p);
            }
        }
    }
    Ok(if out.is_empty() { "/".into() } else { out })
}

/// Whether a link in directory `dir` to `target` stays inside the capture, lexically (the
/// resolver clamps at the root anyway; a capture that tries to leave is refused outright).
pub(crate) fn stays_inside(dir: &str, target: &str) -> bool {
    let mut depth = dir.split('/').filter(|p| !p.is_empty()).count() as i64;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => depth += 1,
        }
    }
    true
}

/// A reader that fails once more than `left` bytes have come through: the gzip bomb guard.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            return Err(std::io::Error::other(format!(
                "expands beyond {} MiB: not a capture (a gzip bomb?)",
                MAX_TOTAL_BYTES >> 20
            )));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Reads a `.tar.gz` capture into memory; `Err` says why the whole capture is refused.
pub fn read(gz: impl Read) -> Result<Tree, String> {
    let decoder = flate2::read::GzDecoder::new(gz);
    let mut archive = tar::Archive::new(Capped {
        inner: decoder,
        left: MAX_TOTAL_BYTES,
    });
    let mut tree = Tree::default();
    tree.ensure_dir("/")?;
    // Member paths seen, normalised: `sys/x`, `./sys/x` and `sys//x` are one path.
    let mut seen = std::collections::HashSet::new();
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar.gz capture: {e}"))?;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} members: not a capture"));
        }
        let mut entry = entry.map_err(|e| format!("truncated or corrupt: {e}"))?;
        let raw_path = entry.path_bytes().into_owned();
        let path = node_path(&raw_path)?;
        if !seen.insert(path.clone()) {
            return Err(format!(
                "member {path} appears twice: which copy is the node's cannot be told"
            ));
        }
        let kind = entry.header().entry_type();
        let size = entry.header().size().map_err(|e| format!("{path}: {e}"))?;
        use tar::EntryType as T;
        match kind {
            T::Directory => tree.insert(&path, Node::Dir(BTreeMap::new()))?,
            T::Regular | T::Continuous => {
                if size > MAX_MEMBER_BYTES {
                    return Err(format!(
                        "member {path} is {size} bytes, over the {}-byte read limit",
                        crate::root::DEFAULT_READ_LIMIT
                    ));
                }
                let mut data = Vec::with_capacity(size as usize);
                entry
                    .by_ref()
                    .take(MAX_MEMBER_BYTES + 1)
                    .read_to_end(&mut data)
                    .map_err(|e| format!("truncated or corrupt at {path}: {e}"))?;
                if data.len() as u64 != size {
                    return Err(format!(
                        "truncated or corrupt at {path}: {} of {size} bytes",
                        data.len()
                    ));
                }
                tree.insert(&path, Node::File(data))?;
            }
            T::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| format!("link {path} has no target"))?;
                let target = std::str::from_utf8(&target)
                    .map_err(|_| format!("link {path} has a target that is not UTF-8"))?
                    .to_owned();
                if target.starts_with('/') {
                    return Err(format!(
                        "link {path} points to the absolute path {target:?}"
                    ));
                }
                if !stays_inside(split(&path).0, &target) {
                    return Err(format!(
                        "link {path} -> {target:?} leads out of the capture"
                    ));
                }
                tree.insert(&path, Node::Link(target))?;
            }
            T::Link => return Err(format!("member {path} is a hard link (a capture has none)")),
            T::Char | T::Block => return Err(format!("member {path} is a device file")),
            T::Fifo => return Err(format!("member {path} is a FIFO")),
            // Extended headers are consumed by the tar reader; anything else is refused.
            other => {
                return Err(format!(
                    "member {path} is of tar type {other:?}, which a capture never holds"
                ));
            }
        }
    }
    // The stream must end cleanly: a truncated gzip trailer is an error too.
    let mut rest = archive.into_inner();
    std::io::copy(&mut rest, &mut std::io::sink())
        .map_err(|e| format!("truncated or corrupt: {e}"))?;
    if tree.get("/sys").is_none() && tree.get("/proc").is_none() {
        return Err("not a captured root: it has neither sys/ nor proc/".into());
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A .tar.gz of regular files with these names and contents, with a `sys/` directory.
    fn tar_gz(files: &[(&str, &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_size(0);
        b.append_data(&mut dir, "sys/", std::io::empty()).unwrap();
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            b.append_data(&mut h, name, data.as_bytes()).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_path_held_twice_is_refused() {
        let once = read(&tar_gz(&[("sys/a", "1"), ("sys/b", "2")])[..]).unwrap();
        assert!(matches!(once.get("/sys/b"), Some(Node::File(d)) if d == b"2"));
        for second in ["sys/a", "./sys/a", "sys//a"] {
            let e = read(&tar_gz(&[("sys/a", "1"), (second, "2")])[..]).unwrap_err();
            assert!(e.contains("member /sys/a appears twice"), "{second}: {e}");
        }
    }

    #[test]
    fn names_and_links() {
        assert_eq!(node_path(b"./sys/class").unwrap(), "/sys/class");
        assert!(node_path(b"sys/../../etc/passwd").is_err());
        assert!(node_path(b"/etc/passwd").is_err());
        assert!(stays_inside(
            "/sys/class/net",
            "../../devices/virtual/net/lo"
        ));
        assert!(stays_inside(
            "/sys/bus/pci/devices",
            "../../../devices/pci0000:00/0000:00:01.0"
        ));
        assert!(!stays_inside("/sys/class", "../../../etc"));
    }
}
