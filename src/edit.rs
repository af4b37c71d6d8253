//! `gdrdoctor edit`: the file edits of the persistent fixes, done by gdrdoctor itself rather than
//! by `echo >>` and `sed -i` in a script (issue 39: an append glued onto a last line without a
//! newline, a second definition NCCL never reads, a single-quoted GRUB line left as it was, no
//! backup). Each edit reads the file through the root, computes the new text and writes it only
//! when it differs: running one twice changes nothing the second time. The first change to a
//! file keeps the original beside it (`FILE.gdrdoctor-orig`, see `root::write`).
//!
//! The text functions here are pure (`&str` in, `String` out) and tested on their own; `apply`
//! puts them to a root: `/` for the node, or a directory (an OS image being built, a copy).

use crate::root::{Root, Written};

pub use crate::model::edit::Edit;

/// The parameter a kernel command-line word sets: `iommu` for `iommu=pt`, `pci=config_acs` for
/// `pci=config_acs=...` (pci= takes many options: only the same option conflicts), the word
/// itself for a flag.
fn parameter(word: &str) -> &str {
    let mut parts = word.splitn(3, '=');
    let first = parts.next().unwrap_or(word);
    match (first, parts.next(), parts.next()) {
        ("pci", Some(opt), Some(_)) => &word[..first.len() + 1 + opt.len()],
        (_, Some(_), _) => first,
        _ => word,
    }
}

/// Text as a list of lines and whether it ended with a newline.
fn lines(text: &str) -> Vec<&str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() && text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    }
}

fn joined(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    if !lines.is_empty() {
        s.push('\n');
    }
    s
}

/// The key of a `KEY=VALUE` line as NCCL's file reader takes it: everything before the first
/// `=`, on a line that does not start with `#`.
fn key_of(line: &str) -> Option<&str> {
    if line.starts_with('#') {
        return None;
    }
    line.split_once('=').map(|(k, _)| k)
}

/// The value of the first definition of `key` (the one NCCL keeps), if any.
pub fn first_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    lines(text)
        .into_iter()
        .find(|l| key_of(l) == Some(key))
        .and_then(|l| l.split_once('=').map(|(_, v)| v))
}

/// `Set`: the first definition of `key` replaced in place, or the line appended; a file without
/// a final newline gets one before the new line.
pub fn set_key(text: &str, key: &str, value: &str) -> String {
    let want = format!("{key}={value}");
    let mut out: Vec<String> = lines(text).iter().map(|l| (*l).to_owned()).collect();
    match out.iter().position(|l| key_of(l) == Some(key)) {
        Some(i) if out[i] == want => return text.to_owned(),
        Some(i) => out[i] = want,
        None => out.push(want),
    }
    joined(&out)
}

/// `Unset`: every definition of `key` commented out.
pub fn unset_key(text: &str, key: &str) -> String {
    let mut changed = false;
    let out: Vec<String> = lines(text)
        .iter()
        .map(|l| {
            if key_of(l) == Some(key) {
                changed = true;
                format!("# {l}")
            } else {
                (*l).to_owned()
            }
        })
        .collect();
    if changed {
        joined(&out)
    } else {
        text.to_owned()
    }
}

/// `Line`: the exact line present.
pub fn ensure_line(text: &str, line: &str) -> String {
    if lines(text).contains(&line) {
        return text.to_owned();
    }
    let mut out: Vec<String> = lines(text).iter().map(|l| (*l).to_owned()).collect();
    out.push(line.to_owned());
    joined(&out)
}

/// `Replace`: the first line that is exactly `old` becomes `new`.
pub fn replace_line(text: &str, old: &str, new: &str) -> String {
    let mut out: Vec<String> = lines(text).iter().map(|l| (*l).to_owned()).collect();
    match out.iter().position(|l| l == old) {
        Some(i) => {
            out[i] = new.to_owned();
            joined(&out)
        }
        None => text.to_owned(),
    }
}

/// One shell assignment `NAME=value` in /etc/default/grub: where its value starts and ends on
/// the line, and how it is quoted.
struct Assignment {
    start: usize,
    end: usize,
    quote: Option<char>,
}

fn assignment(line: &str, name: &str) -> Option<Assignment> {
    let trimmed = line.trim_start();
    let indent = line.len() - trimmed.len();
    let rest = trimmed
        .strip_prefix("export ")
        .map(str::trim_start)
        .unwrap_or(trimmed);
    let at = indent + (trimmed.len() - rest.len());
    let value = rest.strip_prefix(name)?.strip_prefix('=')?;
    let start = at + name.len() + 1;
    match value.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let close = value[1..].find(q)? + 1;
            Some(Assignment {
                start: start + 1,
                end: start + close,
                quote: Some(q),
            })
        }
        _ => {
            let len = value
                .find(|c: char| c.is_whitespace() || c == ';' || c == '#')
                .unwrap_or(value.len());
            Some(Assignment {
                start,
                end: start + len,
                quote: None,
            })
        }
    }
}

/// The words of a command line, `remove` taken out and every word setting the parameter of
/// one in `add` too; then `add` appended when `append`.
fn edit_words(words: &str, add: &[String], remove: &[String], append: bool) -> String {
    let params: Vec<&str> = add.iter().map(|w| parameter(w)).collect();
    let mut out: Vec<&str> = words
        .split_whitespace()
        .filter(|w| !remove.iter().any(|r| r == w) && !params.contains(&parameter(w)))
        .collect();
    if append {
        out.extend(add.iter().map(String::as_str));
    }
    out.join(" ")
}

/// /etc/default/grub: GRUB_CMDLINE_LINUX gets `add` (its last assignment: the one the shell
/// keeps) and loses `remove`; GRUB_CMDLINE_LINUX_DEFAULT, which grub-mkconfig puts after it on
/// the kernel line (so a conflicting word there wins), loses both. Single and double quotes
/// and an unquoted value are kept as they are. No GRUB_CMDLINE_LINUX: one is appended.
pub fn grub_default(text: &str, add: &[String], remove: &[String]) -> String {
    let mut out: Vec<String> = lines(text).iter().map(|l| (*l).to_owned()).collect();
    let last_linux = out
        .iter()
        .rposition(|l| assignment(l, "GRUB_CMDLINE_LINUX").is_some());
    for (i, line) in out.iter_mut().enumerate() {
        for name in ["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"] {
            let Some(a) = assignment(line, name) else {
                continue;
            };
            let append = name == "GRUB_CMDLINE_LINUX" && Some(i) == last_linux;
            let words = edit_words(&line[a.start..a.end], add, remove, append);
            let words = if a.quote.is_none() && words.contains(' ') {
                format!("\"{words}\"")
            } else {
                words
            };
            *line = format!("{}{}{}", &line[..a.start], words, &line[a.end..]);
        }
    }
    if last_linux.is_none() && !add.is_empty() {
        out.push(format!("GRUB_CMDLINE_LINUX=\"{}\"", add.join(" ")));
    }
    let new = joined(&out);
    if new == text { text.to_owned() } else { new }
}

/// A BLS entry (/boot/loader/entries/*.conf): its `options` line edited, unless it takes the
/// command line from grubenv's `$kernelopts` (RHEL 8: grub2-mkconfig writes that from
/// /etc/default/grub).
pub fn bls_entry(text: &str, add: &[String], remove: &[String]) -> String {
    let mut changed = false;
    let out: Vec<String> = lines(text)
        .iter()
        .map(|l| match l.strip_prefix("options") {
            Some(rest) if rest.starts_with([' ', '\t']) && !rest.contains("$kernelopts") => {
                let new = format!("options {}", edit_words(rest, add, remove, true));
                changed |= new != *l;
                new
            }
            _ => (*l).to_owned(),
        })
        .collect();
    if changed {
        joined(&out)
    } else {
        text.to_owned()
    }
}

/// /etc/kernel/cmdline (kernel-install's command line for kernels installed later): one line.
pub fn kernel_cmdline_file(text: &str, add: &[String], remove: &[String]) -> String {
    let first = lines(text).first().copied().unwrap_or("");
    let new = format!("{}\n", edit_words(first, add, remove, true));
    if new == text { text.to_owned() } else { new }
}

/// Words a kernel-args edit will not put on a command line: quotes, `$` and backslashes
/// would be shell syntax in /etc/default/grub.
fn unsafe_word(w: &str) -> bool {
    w.is_empty() || w.contains(|c: char| c.is_whitespace() || "\"'$`\\".contains(c))
}

/// What `apply` did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub file: String,
    pub written: Written,
}

impl std::fmt::Display for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.written {
            Written::Unchanged => write!(f, "{}: unchanged (already as it should be)", self.file),
            Written::Created => write!(f, "{}: created", self.file),
            Written::Replaced { backup: Some(b) } => {
                write!(f, "{}: changed (the original kept as {b})", self.file)
            }
            Written::Replaced { backup: None } => write!(
                f,
                "{}: changed (the original was kept before, as {}{})",
                self.file,
                self.file,
                crate::root::BACKUP_SUFFIX
            ),
        }
    }
}

fn text_of(root: &Root, file: &str) -> anyhow::Result<Option<String>> {
    match root.read_for_edit(file) {
        Ok(None) => Ok(None),
        Ok(Some(b)) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| anyhow::anyhow!("{file}: not text (UTF-8): not edited")),
        Err(e) => Err(anyhow::anyhow!("{file}: {e}")),
    }
}

fn put(root: &Root, file: &str, new: &str) -> anyhow::Result<Done> {
    let written = root
        .write_file(file, new.as_bytes())
        .map_err(|e| anyhow::anyhow!("{file}: cannot write: {e}"))?;
    Ok(Done {
        file: file.to_owned(),
        written,
    })
}

/// The edit done through `root`: each file it changed (or found as it should be).
pub fn apply(root: &Root, edit: &Edit) -> anyhow::Result<Vec<Done>> {
    match edit {
        Edit::Set { file, key, value } => {
            if key.is_empty() || key.contains(['=', '\n']) || key.starts_with('#') {
                anyhow::bail!("{key:?}: not a setting name");
            }
            if value.contains('\n') {
                anyhow::bail!("a value with a line break: not written");
            }
            let old = text_of(root, file)?.unwrap_or_default();
            Ok(vec![put(root, file, &set_key(&old, key, value))?])
        }
        Edit::Unset { file, key } => match text_of(root, file)? {
            None => Ok(vec![Done {
                file: file.clone(),
                written: Written::Unchanged,
            }]),
            Some(old) => Ok(vec![put(root, file, &unset_key(&old, key))?]),
        },
        Edit::Line { file, line } => {
            if line.contains('\n') {
                anyhow::bail!("a line with a line break: not written");
            }
            let old = text_of(root, file)?.unwrap_or_default();
            Ok(vec![put(root, file, &ensure_line(&old, line))?])
        }
        Edit::Replace { file, old, new } => {
            if new.contains('\n') {
                anyhow::bail!("a line with a line break: not written");
            }
            match text_of(root, file)? {
                None => Ok(vec![Done {
                    file: file.clone(),
                    written: Written::Unchanged,
                }]),
                Some(text) => Ok(vec![put(root, file, &replace_line(&text, old, new))?]),
            }
        }
        Edit::Write { file, lines } => {
            if lines.iter().any(|l| l.contains('\n')) {
                anyhow::bail!("a line with a line break: not written");
            }
            let owned: Vec<String> = lines.clone();
            Ok(vec![put(root, file, &joined(&owned))?])
        }
        Edit::KernelArgs { add, remove } => {
            if let Some(w) = add.iter().chain(remove).find(|w| unsafe_word(w)) {
                anyhow::bail!("{w:?}: not a kernel command-line word gdrdoctor writes");
            }
            let mut done = Vec::new();
            if let Some(old) = text_of(root, "/etc/default/grub")? {
                done.push(put(
                    root,
                    "/etc/default/grub",
                    &grub_default(&old, add, remove),
                )?);
            }
            if let Ok(listing) = root.read_dir("/boot/loader/entries") {
                let mut names: Vec<String> = listing
                    .names
                    .iter()
                    .filter(|n| n.ends_with(".conf"))
                    .cloned()
                    .collect();
                names.sort();
                for n in names {
                    let file = format!("/boot/loader/entries/{n}");
                    if let Some(old) = text_of(root, &file)? {
                        done.push(put(root, &file, &bls_entry(&old, add, remove))?);
                    }
                }
            }
            if let Some(old) = text_of(root, "/etc/kernel/cmdline")? {
                done.push(put(
                    root,
                    "/etc/kernel/cmdline",
                    &kernel_cmdline_file(&old, add, remove),
                )?);
            }
            if done.is_empty() {
                anyhow::bail!(
                    "no boot loader configuration here (no /etc/default/grub, /boot/loader/entries or /etc/kernel/cmdline): add {} with the boot loader's own tool",
                    add.join(" ")
                );
            }
            Ok(done)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn set_replaces_the_first_definition_in_place_and_appends_newline_safe() {
        // NCCL keeps the first definition: appending after it does nothing (issue 39).
        assert_eq!(
            set_key(
                "NCCL_IB_TC=106\nNCCL_DEBUG=WARN\nNCCL_IB_TC=0\n",
                "NCCL_IB_TC",
                "128"
            ),
            "NCCL_IB_TC=128\nNCCL_DEBUG=WARN\nNCCL_IB_TC=0\n"
        );
        // No final newline: the new line is not glued onto the last one.
        assert_eq!(
            set_key("NCCL_SOCKET_IFNAME=ib0", "NCCL_TOPO_FILE", "/t.xml"),
            "NCCL_SOCKET_IFNAME=ib0\nNCCL_TOPO_FILE=/t.xml\n"
        );
        assert_eq!(set_key("", "A", "1"), "A=1\n");
        // Already so: the text comes back byte for byte (no newline added either).
        assert_eq!(set_key("A=1", "A", "1"), "A=1");
        // A commented definition is not one; a key is the whole name before '='.
        assert_eq!(set_key("#A=2\nAB=3\n", "A", "1"), "#A=2\nAB=3\nA=1\n");
    }

    #[test]
    fn unset_and_line() {
        assert_eq!(unset_key("A=1\nB=2\nA=3", "A"), "# A=1\nB=2\n# A=3\n");
        assert_eq!(unset_key("B=2", "A"), "B=2");
        assert_eq!(
            ensure_line("x\ny", "nvidia-peermem"),
            "x\ny\nnvidia-peermem\n"
        );
        assert_eq!(
            ensure_line("nvidia-peermem\n", "nvidia-peermem"),
            "nvidia-peermem\n"
        );
        assert_eq!(
            replace_line("a\nexport X=1\n", "export X=1", "X=1"),
            "a\nX=1\n"
        );
        assert_eq!(replace_line("a\nX=1\n", "export X=1", "X=1"), "a\nX=1\n");
    }

    #[test]
    fn grub_quotes_default_and_conflicts() {
        let add = v(&["iommu=pt"]);
        // Double quotes, a conflicting word replaced.
        assert_eq!(
            grub_default("GRUB_CMDLINE_LINUX=\"quiet iommu=on\"\n", &add, &[]),
            "GRUB_CMDLINE_LINUX=\"quiet iommu=pt\"\n"
        );
        // Single quotes kept (issue 39: the sed for "..." left it unchanged, exit 0).
        assert_eq!(
            grub_default("GRUB_CMDLINE_LINUX='quiet'\n", &add, &[]),
            "GRUB_CMDLINE_LINUX='quiet iommu=pt'\n"
        );
        // A conflicting word in _DEFAULT comes later on the kernel line and would win: gone.
        assert_eq!(
            grub_default(
                "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=off\"\nGRUB_CMDLINE_LINUX=\"\"\n",
                &add,
                &[]
            ),
            "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n"
        );
        // No final newline, no GRUB_CMDLINE_LINUX: appended on its own line.
        assert_eq!(
            grub_default("GRUB_DISABLE_RECOVERY=\"true\"", &add, &[]),
            "GRUB_DISABLE_RECOVERY=\"true\"\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\n"
        );
        // Twice: nothing changes.
        let once = grub_default("GRUB_CMDLINE_LINUX=\"a\"\n", &add, &[]);
        assert_eq!(grub_default(&once, &add, &[]), once);
        // Removal, and an unquoted value.
        assert_eq!(
            grub_default(
                "GRUB_CMDLINE_LINUX=iommu.passthrough=1\n",
                &[],
                &v(&["iommu.passthrough=1"])
            ),
            "GRUB_CMDLINE_LINUX=\n"
        );
        // pci= options conflict only with the same option.
        assert_eq!(
            grub_default(
                "GRUB_CMDLINE_LINUX=\"pci=realloc pci=config_acs=x@1\"\n",
                &v(&["pci=config_acs=y@2"]),
                &[]
            ),
            "GRUB_CMDLINE_LINUX=\"pci=realloc pci=config_acs=y@2\"\n"
        );
    }

    #[test]
    fn bls_and_kernel_cmdline() {
        let add = v(&["iommu=pt"]);
        assert_eq!(
            bls_entry(
                "title RHEL\noptions root=/dev/vda1 ro iommu=on\n",
                &add,
                &[]
            ),
            "title RHEL\noptions root=/dev/vda1 ro iommu=pt\n"
        );
        let rhel8 = "options $kernelopts $tuned_params\n";
        assert_eq!(bls_entry(rhel8, &add, &[]), rhel8);
        assert_eq!(
            kernel_cmdline_file("ro quiet\n", &add, &[]),
            "ro quiet iommu=pt\n"
        );
    }
}
