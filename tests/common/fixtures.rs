//! Every fixture's path, for the tests (and for the library's unit tests, which include this
//! file by path).
//!
//! The synthetic fixtures are not committed: `fixtures/synth/synth.py --out` writes them into
//! the build directory, once per version of the generator (the directory is named after a hash
//! of `fixtures/synth/`), and every test binary reuses that copy. The real captures are
//! committed as `fixtures/<name>/capture.tar.gz` and read in place.
//!
//! gdrdoctor runs in [`home()`], where every fixture is `fixtures/<name>` as it used to be in
//! the repository: the generated ones are there, and each committed folder (a real capture's
//! archive with its reference files, pciutils' dumps) is linked there. So the tests name a root
//! `fixtures/healthy-8gpu-roce`, and the reports, which print the root, read the same.
#![allow(clippy::disallowed_methods)] // tests generate and read fixtures, not a node
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The real captures: `fixtures/<name>/capture.tar.gz`, committed.
pub const CAPTURES: &[&str] = &["h100x4-vm", "h200x2-vm", "lab-switch-pt"];

/// Committed folders that are not roots but that the tests read (pciutils' config dumps).
const COMMITTED: &[&str] = &["pciutils", "nccl-logs"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory gdrdoctor runs in: it holds `fixtures/<name>` for every fixture. The first call
/// generates the synthetic fixtures unless this version of the generator already did.
pub fn home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| generate().unwrap_or_else(|e| panic!("generating the fixtures: {e}")))
}

/// FNV-1a: a stable name for a version of the generator (std's hashers may change between
/// releases; a changed name would only mean one more generation).
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x100_0000_01b3);
    }
}

/// What the generation depends on: every file of fixtures/synth/ and where the repository is
/// (the committed folders are linked by absolute path).
fn key() -> std::io::Result<String> {
    let synth = repo().join("fixtures/synth");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&synth)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    names.sort();
    let mut h = 0xcbf2_9ce4_8422_2325;
    fnv(&mut h, repo().as_os_str().as_encoded_bytes());
    for p in names.iter().filter(|p| p.is_file()) {
        fnv(&mut h, p.file_name().unwrap().as_encoded_bytes());
        fnv(&mut h, &std::fs::read(p)?);
    }
    Ok(format!("{h:016x}"))
}

/// The build directory: `target/` (or `$CARGO_TARGET_DIR`), found from this test binary, which
/// cargo puts in `<target>/<profile>/deps/`.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .map(Path::to_owned)
        .unwrap_or_else(|| repo().join("target"))
}

/// The committed folders (real captures, pciutils' dumps, NCCL logs) beside the generated ones,
/// as links; made again when a generation is reused (the list may have grown since).
fn link_committed(out: &Path) -> std::io::Result<()> {
    for name in CAPTURES.iter().chain(COMMITTED) {
        match std::os::unix::fs::symlink(repo().join("fixtures").join(name), out.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

fn generate() -> std::io::Result<PathBuf> {
    let parent = build_dir().join("fixtures");
    let key = key()?;
    let done = parent.join(&key);
    if done.join("fixtures").is_dir() {
        link_committed(&done.join("fixtures"))?;
        return Ok(done);
    }
    std::fs::create_dir_all(&parent)?;
    // Into a directory of this process's own, renamed into place when complete: test binaries
    // running at the same time never see half a generation, and the first rename wins.
    let tmp = parent.join(format!(".{key}.{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    let out = tmp.join("fixtures");
    std::fs::create_dir_all(&out)?;
    // --hard-links: files of equal bytes share one inode, which makes the generation seconds
    // faster; nothing writes into these trees (a test that changes one works on fixture_copy).
    let run = Command::new("python3")
        .arg(repo().join("fixtures/synth/synth.py"))
        .args(["--hard-links", "--out"])
        .arg(&out)
        .output()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("python3 (needed for fixtures/synth): {e}"),
            )
        })?;
    if !run.status.success() {
        return Err(std::io::Error::other(format!(
            "fixtures/synth/synth.py --out failed:\n{}",
            String::from_utf8_lossy(&run.stderr)
        )));
    }
    link_committed(&out)?;
    match std::fs::rename(&tmp, &done) {
        Ok(()) => {}
        Err(_) if done.join("fixtures").is_dir() => std::fs::remove_dir_all(&tmp)?,
        Err(e) => return Err(e),
    }
    // Generations of older versions of the generator are of no further use, nor are half ones
    // that a process left when it died.
    for e in std::fs::read_dir(&parent)?.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let stale = match name.strip_prefix('.') {
            Some(tmp) => tmp
                .rsplit_once('.')
                .is_some_and(|(_, pid)| !Path::new("/proc").join(pid).exists()),
            None => name != key,
        };
        if stale {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    Ok(done)
}

/// The root of fixture `name` as the tests give it to gdrdoctor (relative to [`home()`]):
/// `fixtures/<name>` for a generated one (`broken/<case>` included), the archive for a real
/// capture and for a fleet node (`fleet/node03`), `fixtures/fleet` for the whole fleet.
/// (Kept for the whole run, so that it can stand wherever a `&'static str` argument does.)
pub fn fixture(name: &str) -> &'static str {
    home();
    static PATHS: Mutex<BTreeMap<String, &'static str>> = Mutex::new(BTreeMap::new());
    let mut paths = PATHS.lock().unwrap_or_else(|e| e.into_inner());
    paths.entry(name.to_owned()).or_insert_with(|| {
        let path = if CAPTURES.contains(&name) {
            format!("fixtures/{name}/capture.tar.gz")
        } else if name.starts_with("fleet/") {
            format!("fixtures/{name}.tar.gz")
        } else {
            format!("fixtures/{name}")
        };
        Box::leak(path.into_boxed_str())
    })
}

/// [`fixture`] as an absolute path.
pub fn fixture_path(name: &str) -> PathBuf {
    home().join(fixture(name))
}

/// The config a fixture is run with, if it has one (`fixtures/<name>/config.yaml`).
pub fn fixture_config(name: &str) -> Option<String> {
    let rel = format!("fixtures/{name}/config.yaml");
    home().join(&rel).is_file().then_some(rel)
}

/// Every root fixture by name, sorted: the generated ones (`broken/<case>`, `fleet/nodeNN`
/// included) and the real captures. Not pciutils (dumps, not a root).
pub fn fixture_names() -> Vec<String> {
    let base = home().join("fixtures");
    let mut out: Vec<String> = CAPTURES.iter().map(|s| s.to_string()).collect();
    let list = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    for name in list(&base) {
        let dir = base.join(&name);
        if name == "broken" {
            out.extend(list(&dir).into_iter().map(|c| format!("broken/{c}")));
        } else if name == "fleet" {
            out.extend(
                list(&dir)
                    .into_iter()
                    .filter_map(|c| c.strip_suffix(".tar.gz").map(|n| format!("fleet/{n}"))),
            );
        } else if dir.join("sys").is_dir() || dir.join("proc").is_dir() {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// A writable copy of fixture `name` as a directory, `<tempdir>/root`, to change: the generated
/// tree copied, or the archive unpacked. Keep the TempDir alive while the copy is used.
pub fn fixture_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    copy_to(name, &root);
    (dir, root)
}

/// Fixture `name` as a new directory `dest` of independent files (the generated trees share
/// inodes between equal files, which a copy must not: a change to one would change them all).
pub fn copy_to(name: &str, dest: &Path) {
    let src = fixture_path(name);
    let ok = if src.is_dir() {
        Command::new("cp")
            .args(["-a", "--no-preserve=links"])
            .arg(&src)
            .arg(dest)
            .status()
    } else {
        std::fs::create_dir(dest).unwrap();
        Command::new("tar")
            .arg("xzf")
            .arg(&src)
            .arg("-C")
            .arg(dest)
            .status()
    };
    assert!(ok.unwrap().success(), "copying {}", src.display());
}
