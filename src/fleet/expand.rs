//! The inputs of a fleet run: the arguments expanded (directories one level down, globs in the
//! last component) into captures and two-node reports.

use super::{Unreadable, two_node};
use std::path::{Path, PathBuf};

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
