//! A `.tar.gz` capture read in place, into memory: nothing is extracted, so nothing in an
//! untrusted archive can land anywhere on this machine. Every member is checked on the way in,
//! and a capture with anything a gdrdoctor capture never holds is refused whole, with the reason:
//! members named with `..` or an absolute path, links that lead out of the capture or to an
//! absolute path, hard links, device files, FIFOs, members over the read limit, a path held
//! twice (tar would let the last copy win, unseen), more data than a capture could hold (a gzip
//! bomb), or a truncated or corrupt stream.

use std::collections::BTreeMap;
// foldhash: a seeded hash several times cheaper than SipHash on short paths (a capture has
// about a thousand members, the fleet reads 100,000 captures; issue 43), still keyed per process.
use foldhash::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Limits on what a capture may hold. A full 8-GPU node captures to about 1,500 entries and
/// 2 MB uncompressed.
/// The most Root reads of one file, from a node or from a capture (`root::DEFAULT_READ_LIMIT`
/// is this one; defined here so that the archive needs nothing of Root). Sysfs attributes are at
/// most a page; anything this large in a capture is hostile or broken.
pub const FILE_READ_LIMIT: u64 = 1 << 20;
/// A member may hold one byte more than the read limit: a capture of a file over the limit
/// holds the bytes that were read, the limit and one more, so that the copy is too large too.
pub const MAX_MEMBER_BYTES: u64 = FILE_READ_LIMIT + 1;
/// A library's prefix, which a capture keeps where a version string was searched for in it (the
/// network plugin's, NCCL's own): an ELF file's first bytes may be this many. The whole capture
/// stays within [`MAX_TOTAL_BYTES`] and the run's budget (issue 41: a capture kept 32 MiB of a
/// libnccl-net.so and gdrdoctor refused its own archive).
pub const MAX_LIBRARY_MEMBER_BYTES: u64 = 32 << 20;
pub const MAX_TOTAL_BYTES: u64 = 256 << 20;
/// Members, and the directories their paths imply (a tar file need not list them).
pub const MAX_ENTRIES: usize = 200_000;
/// The paths of all of them together. A real capture's are under 100 KiB; without a bound, a
/// member 4 KiB deep under a new name each time implied 2,000 directories of up to 4 KiB each.
pub const MAX_PATH_BYTES: usize = 32 << 20;

/// What all the archives read at once by one `fleet` run may inflate to, together. Each
/// capture is capped at `MAX_TOTAL_BYTES`, but `fleet -j N` reads N at a time: N gzip bombs
/// would hold N x 256 MiB (issue 14). Twice the cap: a capture within the cap always fits
/// alone, and another is read beside it. docs/fleet.md says so.
pub const RUN_BUDGET_BYTES: u64 = 2 * MAX_TOTAL_BYTES;

/// Bytes are reserved from a budget in steps of this size, not per read: a small capture takes
/// a step or two, and the lock is taken once a MiB.
pub const BUDGET_STEP: u64 = 1 << 20;

/// A grant at least this big is given back to the system too when it is dropped (see
/// `sys::malloc::trim`); smaller ones are not worth the walk over the allocator's arenas.
const TRIM_ABOVE: u64 = 16 << 20;

/// A byte budget shared by the archive reads of one run. A read reserves what it inflates as
/// it goes, and the tree it builds keeps the reservation until it is dropped.
///
/// A read that finds no room waits for others to give back, holding what it has, as long as
/// some other holder goes on (a read not waiting, or a tree being checked): that one will give
/// back. When every other holder waits too, waiting would be a deadlock, and the read holding
/// the least (the cheapest to do again) gives up: it is refused (`Refusal::OverBudget`), gives
/// back all it had, and its caller waits in `wait_for_room` until there is room for as much
/// as it had, then reads it again with twice that reserved up front (so that it is not the
/// cheapest to give up again, and its tries cost at most twice its size in all). A read alone
/// always fits: the budget is at least twice the cap of one capture.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    state: Mutex<BudgetState>,
    given_back: Condvar,
}

#[derive(Debug, Default)]
struct BudgetState {
    used: u64,
    /// Grants holding bytes: reads under way and the trees they made.
    holders: usize,
    /// The reads waiting for room: (grant, bytes it holds).
    waiting: Vec<(u64, u64)>,
    /// Waiting reads chosen to give up; each leaves when it wakes.
    giving_up: Vec<u64>,
    /// The last grant's number.
    grants: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            state: Mutex::default(),
            given_back: Condvar::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, BudgetState> {
        // A panic while holding the lock leaves plain counters: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, s: MutexGuard<'a, BudgetState>) -> MutexGuard<'a, BudgetState> {
        self.given_back.wait(s).unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes reserved now, by every read and tree of the run.
    pub fn used(&self) -> u64 {
        self.state().used
    }

    fn grant(self: &Arc<Self>) -> Grant {
        let mut s = self.state();
        s.grants += 1;
        Grant {
            budget: Arc::clone(self),
            id: s.grants,
            bytes: 0,
        }
    }

    /// Reserves `n` more bytes for grant `id`, which holds `held`, waiting for room while
    /// some other holder goes on; false when this read is the one to give up.
    fn take(&self, id: u64, held: u64, n: u64) -> bool {
        let mut s = self.state();
        loop {
            if let Some(k) = s.giving_up.iter().position(|g| *g == id) {
                s.giving_up.swap_remove(k);
                return false;
            }
            if s.used + n <= self.limit {
                s.used += n;
                s.holders += usize::from(held == 0);
                return true;
            }
            // Every other holder waits: unless one is already giving up (and will give
            // back), the cheapest read to do again gives up now. Reads that hold nothing
            // are no part of it: giving up would give nothing back.
            let others = s.holders - usize::from(held > 0);
            let stuck = s.waiting.iter().filter(|&&(_, h)| h > 0);
            if others <= stuck.clone().count() && s.giving_up.is_empty() {
                match stuck.copied().min_by_key(|&(_, h)| h) {
                    Some((victim, h)) if h < held => {
                        s.giving_up.push(victim);
                        self.given_back.notify_all();
                    }
                    _ => return false,
                }
            }
            s.waiting.push((id, held));
            s = self.wait(s);
            s.waiting.retain(|&(g, _)| g != id);
        }
    }

    /// Gives back `n` bytes of a grant; `all` when they are all it held.
    fn give_back(&self, n: u64, all: bool) {
        let mut s = self.state();
        s.used -= n.min(s.used);
        if all {
            s.holders = s.holders.saturating_sub(1);
        }
        self.given_back.notify_all();
    }

    /// After a refusal for the budget: blocks until `n` bytes are free, or nothing is held.
    pub fn wait_for_room(&self, n: u64) {
        let mut s = self.state();
        while s.used > 0 && s.used + n.min(self.limit) > self.limit {
            s = self.wait(s);
        }
    }
}

/// Bytes reserved from a budget, given back when dropped.
#[derive(Debug)]
struct Grant {
    budget: Arc<Budget>,
    id: u64,
    bytes: u64,
}

impl Drop for Grant {
    fn drop(&mut self) {
        if self.bytes >= TRIM_ABOVE {
            // What the bytes stood for is freed by now (a tree drops its nodes before its
            // grant); back to the system before anyone is told there is room.
            crate::sys::malloc::trim();
        }
        if self.bytes > 0 {
            self.budget.give_back(self.bytes, true);
        }
    }
}

/// Why an archive was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The capture itself is refused, with the reason.
    Capture(String),
    /// Reading it now would take the run over its budget, having reserved `had` bytes: read
    /// it again once that much is free.
    OverBudget { had: u64 },
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Capture(why)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Capture(why) => f.write_str(why),
            Refusal::OverBudget { had } => write!(
                f,
                "over the run's memory budget ({} MiB for all the captures read at once) \
                 after {} MiB",
                RUN_BUDGET_BYTES >> 20,
                had >> 20
            ),
        }
    }
}

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
    /// The bytes of the paths in `nodes`, bounded by MAX_PATH_BYTES.
    path_bytes: usize,
    /// What the tree holds of its run's budget, given back with the tree.
    _grant: Option<Grant>,
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

    /// A directory at `path` and every directory above it (tar files need not list them): the
    /// nearest one there, then each below it, in a loop (a recursion per component once
    /// overflowed the stack on a member path of 30,000 components, issue 25).
    fn ensure_dir(&mut self, path: &str) -> Result<(), String> {
        let mut missing = Vec::new();
        let mut p = path;
        loop {
            match self.nodes.get(p) {
                Some(Node::Dir(_)) => break,
                Some(_) => return Err(format!("{p} is both a directory and something else")),
                None => {
                    missing.push(p);
                    if p == "/" {
                        break;
                    }
                    p = split(p).0;
                }
            }
        }
        for p in missing.into_iter().rev() {
            if p != "/" {
                let (parent, name) = split(p);
                if let Some(Node::Dir(entries)) = self.nodes.get_mut(parent) {
                    entries.insert(name.to_owned(), EntryKind::Dir);
                }
            }
            self.add(p.to_owned(), Node::Dir(BTreeMap::new()))?;
        }
        Ok(())
    }

    /// A new node, counted against MAX_ENTRIES and MAX_PATH_BYTES.
    fn add(&mut self, path: String, node: Node) -> Result<(), String> {
        if self.nodes.len() >= MAX_ENTRIES {
            return Err(format!(
                "more than {MAX_ENTRIES} members and directories: not a capture"
            ));
        }
        self.path_bytes += path.len();
        if self.path_bytes > MAX_PATH_BYTES {
            return Err(format!(
                "member paths of more than {} MiB in all: not a capture",
                MAX_PATH_BYTES >> 20
            ));
        }
        self.nodes.insert(path, node);
        Ok(())
    }

    /// A member at `path`, its directories made as needed. The path is taken, not copied
    /// (a capture has a thousand members, a fleet run 100,000 captures).
    fn insert(&mut self, path: String, node: Node) -> Result<(), String> {
        let kind = match &node {
            Node::Dir(_) => return self.ensure_dir(&path),
            Node::File(_) => EntryKind::File,
            Node::Link(_) => EntryKind::Link,
        };
        if matches!(self.nodes.get(&path), Some(Node::Dir(_))) {
            return Err(format!("{path} is both a directory and a {kind:?}"));
        }
        let (parent, name) = split(&path);
        self.ensure_dir(parent)?;
        if let Some(Node::Dir(entries)) = self.nodes.get_mut(parent) {
            entries.insert(name.to_owned(), kind);
        }
        match self.nodes.get_mut(&path) {
            // A path held twice is refused by the caller; replaced, it is not counted again.
            Some(old) => *old = node,
            None => self.add(path, node)?,
        }
        Ok(())
    }
}

fn split(path: &str) -> (&str, &str) {
    match memchr::memrchr(b'/', path.as_bytes()) {
        Some(0) => ("/", &path[1..]),
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("/", path),
    }
}

/// A member name as a node path, or why it is refused: a path or a component longer than the
/// kernel takes (PATH_MAX, NAME_MAX) is no file a capture copied.
fn node_path(raw: &[u8]) -> Result<String, String> {
    use crate::sys::{NAME_MAX, PATH_MAX};
    if raw.len() > PATH_MAX {
        return Err(format!(
            "a member name of {} bytes, over PATH_MAX ({PATH_MAX}): not a capture",
            raw.len()
        ));
    }
    let name =
        std::str::from_utf8(raw).map_err(|_| "a member name that is not UTF-8".to_owned())?;
    // No component can pass NAME_MAX unless the whole name does: a name within it is not split
    // a second time (that split was 2% of a fleet run's instructions).
    if name.len() > NAME_MAX {
        if let Some(long) = name.split('/').find(|c| c.len() > NAME_MAX) {
            return Err(format!(
                "a member name with a component of {} bytes, over NAME_MAX ({NAME_MAX}): not a capture",
                long.len()
            ));
        }
    }
    if name.starts_with('/') {
        return Err(format!("member {name:?} has an absolute path"));
    }
    // One allocation of the final size: a member's path is its name behind a slash, less
    // what it had of `.` and empty components. The parts are cut with `slash_parts` (the `str`
    // splitter searched for each: this function was 9% of a fleet run's time).
    let mut out = String::with_capacity(name.len() + 1);
    for part in slash_parts(name) {
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

/// `s.split('/')`, the slashes found with `memchr`: the `str` splitter searches for each part
/// anew, and member names and node paths are split per member and per lookup (issue 43). A cut
/// at an ASCII byte is a character boundary.
#[inline]
pub(crate) fn slash_parts(s: &str) -> impl Iterator<Item = &str> {
    let mut start = 0;
    memchr::memchr_iter(b'/', s.as_bytes())
        .chain(std::iter::once(s.len()))
        .map(move |end| {
            let part = &s[start..end];
            start = end + 1;
            part
        })
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
/// With a budget, it also reserves what comes through, ahead, a step at a time, and fails
/// when the run's budget has no room.
struct Capped<'a, R> {
    inner: R,
    left: u64,
    reservation: &'a mut Reservation,
}

/// What one read holds of its run's budget. It outlives the tar reader, which words the
/// reader's errors in its own way: `over_budget` tells a refusal for the budget apart.
#[derive(Debug, Default)]
struct Reservation {
    grant: Option<Grant>,
    /// Reserved but not yet come through.
    ahead: u64,
    over_budget: bool,
}

impl<R: Read> Read for Capped<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)? as u64;
        if n > self.left {
            return Err(std::io::Error::other(format!(
                "expands beyond {} MiB: not a capture (a gzip bomb?)",
                MAX_TOTAL_BYTES >> 20
            )));
        }
        self.left -= n;
        let r = &mut *self.reservation;
        if let Some(grant) = &mut r.grant {
            if n > r.ahead {
                let step = (n - r.ahead).next_multiple_of(BUDGET_STEP);
                if !grant.budget.take(grant.id, grant.bytes, step) {
                    r.over_budget = true;
                    let refusal = Refusal::OverBudget { had: grant.bytes };
                    return Err(std::io::Error::other(refusal.to_string()));
                }
                grant.bytes += step;
                r.ahead += step;
            }
            r.ahead -= n;
        }
        Ok(n as usize)
    }
}

/// Forward "seeks" only, by reading: what the tar reader asks to skip after each member (its
/// padding to 512 bytes, or a member not read). Without it, `tar` skips through a 32 KiB
/// buffer it zeroes on every member, even to skip nothing: most of what reading a capture cost.
impl<R: Read> Seek for Capped<'_, R> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let backwards = || std::io::Error::other("a capture is read forward only");
        let SeekFrom::Current(n) = pos else {
            return Err(backwards());
        };
        let mut n = u64::try_from(n).map_err(|_| backwards())?;
        let mut buf = [0u8; 512];
        while n > 0 {
            let k = self.read(&mut buf[..n.min(512) as usize])?;
            if k == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            n -= k as u64;
        }
        // The tar reader takes this as its position in the archive: every byte it read came
        // through here.
        Ok(MAX_TOTAL_BYTES - self.left)
    }
}

/// Reads a `.tar.gz` capture into memory; `Err` says why the whole capture is refused.
pub fn read(gz: impl Read) -> Result<Tree, String> {
    read_within(gz, None, 0).map_err(|r| r.to_string())
}

/// `read`, reserving what it inflates from a run's budget (see `Budget`), `prepay` bytes of it
/// before it starts: what a read refused for the budget is known to need. Refused for the
/// budget, it has given back all it had by the time it returns.
pub fn read_within(
    gz: impl Read,
    budget: Option<&Arc<Budget>>,
    prepay: u64,
) -> Result<Tree, Refusal> {
    let mut reservation = Reservation::default();
    if let Some(budget) = budget {
        let mut grant = budget.grant();
        if prepay > 0 {
            if !budget.take(grant.id, 0, prepay) {
                return Err(Refusal::OverBudget { had: 0 });
            }
            grant.bytes = prepay;
            reservation.ahead = prepay;
        }
        reservation.grant = Some(grant);
    }
    let archive = tar::Archive::new(Capped {
        inner: flate2::read::GzDecoder::new(gz),
        left: MAX_TOTAL_BYTES,
        reservation: &mut reservation,
    });
    match fill(archive) {
        Ok(mut tree) => {
            // What was reserved ahead and not inflated (the rest of the last step, or a
            // prepayment bigger than the capture) is not held by the tree: it holds exactly
            // what it inflated.
            if let Some(grant) = &mut reservation.grant {
                let unused = reservation.ahead;
                if unused > 0 && unused < grant.bytes {
                    grant.bytes -= unused;
                    grant.budget.give_back(unused, false);
                }
            }
            tree._grant = reservation.grant.take();
            Ok(tree)
        }
        Err(_) if reservation.over_budget => Err(Refusal::OverBudget {
            had: reservation.grant.as_ref().map_or(0, |g| g.bytes),
        }),
        Err(why) => Err(Refusal::Capture(why)),
    }
}

/// The tree of the archive's members, each checked on the way in.
fn fill<R: Read>(mut archive: tar::Archive<Capped<'_, R>>) -> Result<Tree, String> {
    let mut tree = Tree::default();
    tree.ensure_dir("/")?;
    // Directory members seen, normalised (`sys/x`, `./sys/x` and `sys//x` are one path). A
    // file or link member is in the tree from then on, and nothing else makes a file or a link
    // there: the tree itself tells one seen before, without a copy of every path.
    let mut seen_dirs = foldhash::HashSet::default();
    let entries = archive
        .entries_with_seek()
        .map_err(|e| format!("not a tar.gz capture: {e}"))?;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} members: not a capture"));
        }
        let mut entry = entry.map_err(|e| format!("truncated or corrupt: {e}"))?;
        let path = node_path(&entry.path_bytes())?;
        if seen_dirs.contains(&path)
            || matches!(tree.get(&path), Some(Node::File(_) | Node::Link(_)))
        {
            return Err(format!(
                "member {path} appears twice: which copy is the node's cannot be told"
            ));
        }
        if entry.header().entry_type() == tar::EntryType::Directory {
            seen_dirs.insert(path.clone());
        }
        let kind = entry.header().entry_type();
        let size = entry.header().size().map_err(|e| format!("{path}: {e}"))?;
        use tar::EntryType as T;
        match kind {
            T::Directory => tree.insert(path, Node::Dir(BTreeMap::new()))?,
            T::Regular | T::Continuous => {
                // Over the read limit only an ELF library's prefix, up to its own limit.
                if size > MAX_LIBRARY_MEMBER_BYTES {
                    return Err(format!(
                        "member {path} is {size} bytes, over the {}-byte read limit",
                        FILE_READ_LIMIT
                    ));
                }
                let mut data = Vec::with_capacity(size.min(MAX_MEMBER_BYTES) as usize);
                entry
                    .by_ref()
                    .take(MAX_MEMBER_BYTES.min(size.max(4)))
                    .read_to_end(&mut data)
                    .map_err(|e| format!("truncated or corrupt at {path}: {e}"))?;
                if size > MAX_MEMBER_BYTES {
                    if !data.starts_with(b"\x7fELF") {
                        return Err(format!(
                            "member {path} is {size} bytes, over the {}-byte read limit (only a library's prefix may be longer)",
                            FILE_READ_LIMIT
                        ));
                    }
                    entry
                        .by_ref()
                        .take(size - data.len() as u64 + 1)
                        .read_to_end(&mut data)
                        .map_err(|e| format!("truncated or corrupt at {path}: {e}"))?;
                }
                if data.len() as u64 != size {
                    return Err(format!(
                        "truncated or corrupt at {path}: {} of {size} bytes",
                        data.len()
                    ));
                }
                tree.insert(path, Node::File(data))?;
            }
            T::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| format!("link {path} has no target"))?;
                if target.len() > crate::sys::PATH_MAX {
                    return Err(format!(
                        "link {path} has a target of {} bytes, over PATH_MAX ({})",
                        target.len(),
                        crate::sys::PATH_MAX
                    ));
                }
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
                tree.insert(path, Node::Link(target))?;
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
        // Directories and links too, in any order with files (`tar_gz` lists `sys/` first);
        // a directory only implied by a member below it is no member, and may come later.
        let member = |name: &str, kind: tar::EntryType| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(0);
            if kind == tar::EntryType::Symlink {
                h.set_link_name("b").unwrap();
            }
            (name.to_owned(), h)
        };
        let archive = |members: Vec<(String, tar::Header)>| {
            let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::fast(),
            ));
            for (name, mut h) in members {
                b.append_data(&mut h, name, std::io::empty()).unwrap();
            }
            b.into_inner().unwrap().finish().unwrap()
        };
        use tar::EntryType::{Directory as D, Regular as F, Symlink as L};
        let twice = [
            vec![member("sys/", D), member("sys/", D)],
            vec![member("sys/", D), member("./sys", D)],
            vec![member("sys/", D), member("sys", F)],
            vec![member("sys/a", L), member("sys/a", L)],
            vec![member("sys/a", L), member("sys/a", F)],
            vec![member("sys/a", F), member("sys/a/", D)],
        ];
        for members in twice {
            let names: Vec<String> = members.iter().map(|(n, _)| n.clone()).collect();
            let e = read(&archive(members)[..]).unwrap_err();
            assert!(e.contains("appears twice"), "{names:?}: {e}");
        }
        let t = read(&archive(vec![member("sys/d/f", F), member("sys/d/", D)])[..]).unwrap();
        assert!(matches!(t.get("/sys/d"), Some(Node::Dir(e)) if e.len() == 1));
        let e = read(&archive(vec![member("sys/d/f", F), member("sys/d", F)])[..]).unwrap_err();
        assert!(e.contains("/sys/d is both a directory and a File"), "{e}");
    }

    /// Member paths within PATH_MAX are taken however deep, their directories made in a loop;
    /// a longer one is refused (issue 25: 30,000 components overflowed the stack), and so is a
    /// capture whose paths, the directories they imply counted, pass MAX_PATH_BYTES.
    #[test]
    fn deep_paths_are_bounded() {
        let deep = format!("sys/{}f", "a/".repeat(2_000));
        let t = read(&tar_gz(&[(&deep, "1")])[..]).unwrap();
        assert!(matches!(t.get(&format!("/{deep}")), Some(Node::File(d)) if d == b"1"));
        assert_eq!(t.len(), 2_003, "/, /sys, 2,000 directories a, the file");
        let too_deep = format!("sys/{}f", "a/".repeat(30_000));
        let e = read(&tar_gz(&[(&too_deep, "1")])[..]).unwrap_err();
        assert!(e.contains("60005 bytes, over PATH_MAX (4096)"), "{e}");
        let many: Vec<(String, &str)> = (0..10)
            .map(|i| (format!("sys/{i}/{}f", "a/".repeat(2_000)), "1"))
            .collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, d)| (n.as_str(), *d)).collect();
        let e = read(&tar_gz(&many)[..]).unwrap_err();
        assert!(e.contains("member paths of more than 32 MiB"), "{e}");
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

    /// A capture of `mib` files of 1 MiB under sys/.
    fn capture(mib: usize) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for k in 0..mib {
            let mut h = tar::Header::new_gnu();
            h.set_size(1 << 20);
            h.set_mode(0o644);
            tar.append_data(&mut h, format!("sys/f{k}"), &vec![0u8; 1 << 20][..])
                .unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn a_tree_holds_its_budget_until_dropped() {
        let budget = Budget::new(8 << 20);
        // What the tar stream inflates to: two files, their two headers, the end blocks.
        let size = (2 << 20) + 2 * 512 + 1024;
        let tree = read_within(&capture(2)[..], Some(&budget), 0).unwrap();
        assert_eq!(budget.used(), size);
        // Neither what was reserved a step ahead nor a prepayment beyond the capture is kept.
        let second = read_within(&capture(2)[..], Some(&budget), 5 << 20).unwrap();
        assert_eq!(budget.used(), 2 * size);
        drop((tree, second));
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_read_that_could_only_wait_on_itself_is_refused() {
        // Alone and over the budget: nobody else would ever give back. Refused, with what it
        // had, and holding nothing afterwards.
        let budget = Budget::new(2 << 20);
        match read_within(&capture(3)[..], Some(&budget), 0) {
            Err(Refusal::OverBudget { had }) => assert_eq!(had, 2 << 20),
            other => panic!("{other:?}"),
        }
        assert_eq!(budget.used(), 0);
        // Without a budget the same capture reads.
        assert!(read(&capture(3)[..]).is_ok());
    }

    #[test]
    fn a_read_waits_for_a_tree_to_be_dropped() {
        // One tree holds most of the budget; a second read waits (rather than being refused)
        // until the tree is dropped.
        let budget = Budget::new(4 << 20);
        let tree = read_within(&capture(2)[..], Some(&budget), 0).unwrap();
        let second = capture(2);
        std::thread::scope(|s| {
            let reader = s.spawn(|| read_within(&second[..], Some(&budget), 0));
            while budget.state().waiting.is_empty() {
                std::thread::yield_now();
            }
            drop(tree);
            let second = reader.join().unwrap().unwrap();
            assert_eq!(budget.used(), (2 << 20) + 2 * 512 + 1024);
            drop(second);
        });
        assert_eq!(budget.used(), 0);
    }
}
