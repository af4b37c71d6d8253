//! The inputs of a fleet run: the arguments expanded (directories one level down, globs in the
//! last component) into captures and two-node reports.

use super::{Unreadable, two_node};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The captures of a fleet run, in the order given, held compactly: a capture costs its name's
/// bytes and a 16-byte slot, not a path and an enum of its own (about 118 bytes each, which
/// made 100,000 captures take 11 MiB more than 10,000: issue 43).
#[derive(Debug, Default)]
pub struct Captures {
    /// The directories captures were listed from; `""` for the captures named themselves.
    dirs: Vec<PathBuf>,
    /// Every capture's name in its directory (its whole path when named), one after another.
    names: Vec<u8>,
    slots: Vec<Slot>,
    unreadable: Vec<Unreadable>,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    /// `dirs[dir]` joined with `names[start..end]`.
    Path {
        dir: u32,
        start: u32,
        end: u32,
    },
    Unreadable(u32),
}

impl Captures {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The `i`th capture's path, or why the argument it came from gave none.
    pub fn get(&self, i: usize) -> Option<Result<PathBuf, Unreadable>> {
        Some(match *self.slots.get(i)? {
            Slot::Path { dir, start, end } => {
                let name = OsStr::from_bytes(self.names.get(start as usize..end as usize)?);
                Ok(self.dirs.get(dir as usize)?.join(name))
            }
            Slot::Unreadable(u) => Err(self.unreadable.get(u as usize)?.clone()),
        })
    }

    fn dir(&mut self, dir: &Path) -> u32 {
        if self.dirs.last().map(PathBuf::as_path) != Some(dir) {
            self.dirs.push(dir.to_owned());
        }
        (self.dirs.len() - 1) as u32
    }

    /// Keeps a name; `None` past 4 GiB of names, which no fleet reaches: the caller reports it
    /// rather than wrap.
    fn name(&mut self, name: &OsStr) -> Option<(u32, u32)> {
        let start = u32::try_from(self.names.len()).ok()?;
        let end = u32::try_from(self.names.len() + name.len()).ok()?;
        self.names.extend_from_slice(name.as_bytes());
        Some((start, end))
    }

    fn push(&mut self, dir: u32, (start, end): (u32, u32)) {
        self.slots.push(Slot::Path { dir, start, end });
    }

    fn push_unreadable(&mut self, u: Unreadable) {
        self.slots
            .push(Slot::Unreadable(self.unreadable.len() as u32));
        self.unreadable.push(u);
    }

    /// A capture named itself (its whole path kept as its name).
    fn push_named(&mut self, path: &Path) {
        let dir = self.dir(Path::new(""));
        match self.name(path.as_os_str()) {
            Some(n) => self.push(dir, n),
            None => self.push_unreadable(too_many(path)),
        }
    }

    /// The entries of `dir` as `pick` finds them: the captures kept, sorted by name as the
    /// paths they make sort, and the reports appended to `reports`, sorted alike. Whether any
    /// was found.
    fn push_listed(
        &mut self,
        reports: &mut Vec<PathBuf>,
        dir: &Path,
        entries: impl Iterator<Item = std::ffi::OsString>,
        pick: impl Fn(&Path) -> Found,
    ) -> bool {
        let d = self.dir(dir);
        let reports_before = reports.len();
        let mut hits: Vec<(u32, u32)> = Vec::new();
        for name in entries {
            let path = dir.join(&name);
            match pick(&path) {
                Found::Capture => {}
                Found::Report => {
                    reports.push(path);
                    continue;
                }
                Found::Neither => continue,
            }
            match self.name(&name) {
                Some(n) => hits.push(n),
                None => {
                    self.push_unreadable(too_many(&path));
                    break;
                }
            }
        }
        let names = &self.names;
        hits.sort_by(|a, b| {
            names[a.0 as usize..a.1 as usize].cmp(&names[b.0 as usize..b.1 as usize])
        });
        let found = !hits.is_empty() || reports.len() > reports_before;
        for n in hits {
            self.push(d, n);
        }
        reports[reports_before..].sort();
        found
    }
}

/// What an entry of a listed directory or pattern is to a fleet run.
enum Found {
    Capture,
    Report,
    Neither,
}

/// The names in `dir`; none when it cannot be listed.
#[allow(clippy::disallowed_methods)] // the operator's files, not a node
fn names_in(dir: &Path) -> impl Iterator<Item = std::ffi::OsString> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
}

fn too_many(path: &Path) -> Unreadable {
    Unreadable {
        capture: path.display().to_string(),
        reason: "more capture names than one fleet run holds (4 GiB of names)".into(),
    }
}

/// The inputs named by the arguments: `.tar.gz` captures, capture directories, directories of
/// either (one level), globs in the last component (`caps/*.tar.gz`) for shells that did not
/// expand them, and two-node reports, recognised by their content wherever they are: a file
/// named or matched that starts as JSON is read as one (and refused with the reason when it is
/// not one); in a directory, a file whose start names the two-node schema is taken. Returns the
/// captures (with the arguments that could not be read, in place) and the two-node reports.
#[allow(clippy::disallowed_methods)] // these are the operator's files, not a node
pub fn expand(args: &[PathBuf]) -> (Captures, Vec<PathBuf>) {
    let is_capture_file = |p: &Path| {
        let n = p.to_string_lossy();
        n.ends_with(".tar.gz") || n.ends_with(".tgz")
    };
    let is_root_dir = |p: &Path| p.join("sys").is_dir() || p.join("proc").is_dir();
    // A file named on the command line or matched by a glob: a report, or else a capture.
    let is_report = |p: &Path| {
        !is_capture_file(p) && p.is_file() && two_node::sniff(p) != two_node::Looks::Other
    };
    let mut captures = Captures::default();
    let mut reports = Vec::new();
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
            let entries = names_in(dir).filter(|n| glob(&name, &n.to_string_lossy()));
            let found = captures.push_listed(&mut reports, dir, entries, |p| {
                if is_report(p) {
                    Found::Report
                } else {
                    Found::Capture
                }
            });
            if !found {
                captures.push_unreadable(Unreadable {
                    capture: text.into_owned(),
                    reason: "no capture matches this pattern".into(),
                });
            }
        } else if a.is_dir() && !is_root_dir(a) {
            // One look at each entry: what it is decides how it is taken.
            let found = captures.push_listed(&mut reports, a, names_in(a), |p| {
                match std::fs::metadata(p) {
                    Ok(m) if m.is_file() && is_capture_file(p) => Found::Capture,
                    Ok(m) if m.is_dir() && is_root_dir(p) => Found::Capture,
                    Ok(m) if m.is_file() && two_node::sniff(p) == two_node::Looks::Report => {
                        Found::Report
                    }
                    _ => Found::Neither,
                }
            });
            if !found {
                captures.push_unreadable(Unreadable {
                    capture: text.into_owned(),
                    reason: "neither a capture nor a directory of captures".into(),
                });
            }
        } else if is_report(a) {
            reports.push(a.clone());
        } else {
            captures.push_named(a);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The captures of a directory, a pattern and names given come back as the paths they were
    /// found as, sorted as paths sort within each argument, the arguments in their order and
    /// the ones that name nothing in place; reports go apart, sorted alike.
    #[test]
    #[allow(clippy::disallowed_methods)] // a temporary directory of the test's own
    fn captures_come_back_in_order_as_found() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("caps");
        std::fs::create_dir(&dir).unwrap();
        let report = format!("{{\"schema\": \"{}\"}}", two_node::SCHEMA);
        // Created out of order; one name is not UTF-8; one directory is a captured root.
        let bad = OsStr::from_bytes(b"n\xff.tar.gz");
        for name in [
            OsStr::new("n10.tar.gz"),
            OsStr::new("n02.tgz"),
            bad,
            OsStr::new("n1.tar.gz"),
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        std::fs::create_dir_all(dir.join("root0/sys")).unwrap();
        std::fs::write(dir.join("notes.txt"), b"not a capture").unwrap();
        std::fs::write(dir.join("z-report.json"), &report).unwrap();
        std::fs::write(dir.join("a-report.json"), &report).unwrap();
        let args = [
            dir.join("n1*"),
            tmp.path().join("missing-*.tar.gz"),
            dir.clone(),
            tmp.path().join("named.tar.gz"),
        ];
        let (captures, reports) = expand(&args);
        let got: Vec<Result<PathBuf, String>> = (0..captures.len())
            .map(|i| captures.get(i).unwrap().map_err(|u| u.capture))
            .collect();
        let mut want: Vec<Result<PathBuf, String>> = vec![
            Ok(dir.join("n1.tar.gz")),
            Ok(dir.join("n10.tar.gz")),
            Err(args[1].display().to_string()),
        ];
        let mut listed = vec![
            dir.join("n02.tgz"),
            dir.join("n1.tar.gz"),
            dir.join("n10.tar.gz"),
            dir.join(bad),
            dir.join("root0"),
        ];
        listed.sort();
        want.extend(listed.into_iter().map(Ok));
        want.push(Ok(args[3].clone()));
        assert_eq!(got, want);
        assert!(captures.get(captures.len()).is_none());
        assert_eq!(
            reports,
            [dir.join("a-report.json"), dir.join("z-report.json")]
        );
    }

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
}
