//! The baseline a periodic run keeps (`check --baseline FILE`, the metrics timer's state
//! directory): the link-health counters, the AER tables and the kernel log's last record as
//! this run read them, for the next run to judge what grew in between.
//!
//! The file is a capture archive (`gdrdoctor --root FILE check` reads it): each counter file at
//! its own path, and [`META`] with when it was read and on which boot. A baseline from another
//! boot says nothing (every counter restarted): it is not compared. It is written to a new file
//! beside FILE (created, never opened through a link) and renamed over FILE.

use crate::inventory::Inventory;
use crate::model::health::{KernelLog, Sample, SampleKind};
use crate::root::{Recording, Root};
use std::collections::BTreeMap;
use std::path::Path;

/// When the baseline was read and on which boot.
pub const META: &str = "/gdrdoctor/baseline";
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// What `--baseline` found: the last run's reading, or why there is none to compare.
#[derive(Debug)]
pub enum Loaded {
    Found(Sample),
    /// No file yet (the first run), or one that cannot be compared, and why.
    None(String),
}

fn boot_id(root: &Root) -> Option<String> {
    root.read_text(BOOT_ID)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Whether `path` may be the baseline: none yet, or a regular file of the caller's (root's
/// may be root's), in a directory only its owner can write (or one with the sticky bit, as
/// /tmp, where others cannot replace the caller's file). Anything else (a device node, a FIFO,
/// a link, a directory, another user's file, a directory others can write) is refused before
/// it is opened: `--baseline /dev/null` as root would have replaced /dev/null, and a FIFO
/// blocked for ever in open (issue 41).
pub fn check_target(path: &Path) -> Result<bool, String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let shown = path.display();
    let me = crate::sys::fd::effective_uid();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let d = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !d.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let others_write = d.mode() & 0o022 != 0;
    let sticky = d.mode() & 0o1000 != 0;
    if (others_write && !sticky) || (d.uid() != me && d.uid() != 0) {
        return Err(format!(
            "{}: a directory others can write (mode {:o}, owner {}): a baseline there could be replaced under gdrdoctor; keep it in a directory of its own (/var/lib/gdrdoctor)",
            dir.display(),
            d.mode() & 0o7777,
            d.uid()
        ));
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("{shown}: {e}")),
        Ok(m) => {
            let t = m.file_type();
            let what = if t.is_symlink() {
                "a symbolic link"
            } else if t.is_dir() {
                "a directory"
            } else if t.is_fifo() {
                "a FIFO"
            } else if t.is_block_device() || t.is_char_device() {
                "a device node"
            } else if t.is_socket() {
                "a socket"
            } else if m.uid() != me {
                "another user's file"
            } else {
                return Ok(true);
            };
            Err(format!(
                "{shown}: {what}, not a baseline gdrdoctor wrote: neither read nor replaced"
            ))
        }
    }
}

/// The last run's reading from `path`, as a [`Sample`] that is the earlier of the two.
pub fn load(path: &Path, live: &Root, inv: &Inventory) -> Loaded {
    let shown = path.display().to_string();
    match check_target(path) {
        Ok(true) => {}
        Ok(false) => {
            return Loaded::None(format!(
                "{shown}: no baseline yet (the first run writes it)"
            ));
        }
        Err(e) => return Loaded::None(e),
    }
    let root = match Root::archive(path) {
        Ok(r) => r,
        Err(e) => return Loaded::None(format!("{e}: not compared (this run writes a new one)")),
    };
    let Ok(meta) = root.read_text(META) else {
        return Loaded::None(format!("{shown}: no {META} in it: not a baseline"));
    };
    let field = |k: &str| {
        meta.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
            .map(str::trim)
    };
    let Some(taken) = field("taken_at").and_then(|v| v.parse::<f64>().ok()) else {
        return Loaded::None(format!("{shown}: {META} has no taken_at"));
    };
    let (then, now) = (field("boot_id").unwrap_or(""), boot_id(live));
    if now.as_deref() != Some(then) {
        return Loaded::None(format!(
            "{shown}: read on another boot (boot_id {then}): the counters restarted since, not compared"
        ));
    }
    let seconds = crate::deadline::unix_now() - taken;
    if !seconds.is_finite() || seconds < 0.0 {
        return Loaded::None(format!(
            "{shown}: taken_at {taken} is in the future: the clock moved, not compared"
        ));
    }
    // A baseline of this boot was read after it: a span longer than the uptime is a forged or
    // broken taken_at (issue 41: one before 1970 made every rate about 0).
    let uptime = live
        .read_text("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok());
    if let Some(up) = uptime.filter(|up| seconds > up + 60.0) {
        return Loaded::None(format!(
            "{shown}: taken_at {taken} is {seconds:.0} s ago, before this boot ({up:.0} s ago): not a reading of this boot, not compared"
        ));
    }
    let (ports, aer) = super::sample::read(&root, inv, "");
    Loaded::Found(Sample {
        seconds,
        cut: false,
        ports,
        aer,
        kernel_log: None,
        kind: SampleKind::SinceLastRun {
            path: shown,
            kernel_last_seq: field("kernel_last_seq").and_then(|v| v.parse().ok()),
        },
        pause: super::sample::recorded_pause(&root, ""),
    })
}

/// Writes this run's reading to `path`: the window's second reading when one was taken (the
/// later one), else the inventory's own (nothing is read again).
pub fn save(
    path: &Path,
    live: &Root,
    inv: &Inventory,
    qos: &crate::model::qos::Qos,
    window: Option<&Sample>,
) -> Result<(), String> {
    check_target(path)?;
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let first;
    let latest = match window.filter(|s| !s.is_earlier()) {
        Some(s) => s,
        None => {
            first = super::sample::first_reading(inv, qos);
            &first
        }
    };
    super::sample::files_of(latest, "", &mut files);
    let last_seq = match &latest.kernel_log {
        Some(KernelLog::Read { last_seq, .. }) => last_seq.map(|q| q.to_string()),
        _ => None,
    };
    // The boot it was read on, at its own path too: the copy is then a root (it has proc/)
    // even on a node with no counter to keep.
    if let Some(id) = boot_id(live) {
        files.insert(BOOT_ID.to_owned(), format!("{id}\n").into_bytes());
    }
    files.insert(
        META.to_owned(),
        format!(
            "taken_at={:.3}\nboot_id={}\nkernel_last_seq={}\n",
            crate::deadline::unix_now(),
            boot_id(live).unwrap_or_default(),
            last_seq.unwrap_or_else(|| "none".into())
        )
        .into_bytes(),
    );
    let recording = Recording {
        files,
        ..Recording::default()
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let tmp = dir.join(format!(".{name}.{}.tar.gz", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    crate::capture::write(&recording, live, &tmp).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}
