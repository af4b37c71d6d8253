//! Which NCCL release the node's jobs run, as far as the node's files say (issue 38): NCCL's
//! decisions on a Grace node (GPUDirect RDMA over NVLink-C2C) and the settings that change them
//! differ by release, so `check`, `topo` and `gdrdoctor nccl` need it offline as live.
//!
//! Read in this order, the first that names a release winning:
//! 1. the site's statement, config `nccl.version` (jobs that bring their own NCCL: a
//!    container, PyTorch's wheel);
//! 2. the library the loader gives NCCL's jobs, `libnccl.so.2` in the loader's directories
//!    (the network plugin's search: the declared `LD_LIBRARY_PATH`, ld.so.conf, the system
//!    directories), by the name of the file it links to (`libnccl.so.2.27.3`);
//! 3. the package database: dpkg's file list of libnccl2, which names that file;
//! 4. the header libnccl-dev installs, `nccl.h` (`NCCL_MAJOR`, `NCCL_MINOR`, `NCCL_PATCH`).
//!
//! Every read goes through [`Root`], so a capture keeps what was read and a check of the copy
//! finds the same release. RPM's database is not read (a binary database): there the library's
//! name is what tells, and where the name carries no release (a copy under its soname), the
//! version string NCCL builds into it, within the first megabytes.

use crate::parse::nccl_log::Version;
use crate::parse::nccl_release;
use crate::root::Root;

pub const SONAME: &str = "libnccl.so.2";
/// dpkg's file lists of NVIDIA's runtime package, plain and with the architecture dpkg adds
/// to the name of a Multi-Arch: same package.
pub const DPKG_LISTS: &[&str] = &[
    "/var/lib/dpkg/info/libnccl2.list",
    "/var/lib/dpkg/info/libnccl2:amd64.list",
    "/var/lib/dpkg/info/libnccl2:arm64.list",
];
/// The path a release stated by the site's config is shown with.
pub const STATED: &str = "config nccl.version";
pub const HEADERS: &[&str] = &["/usr/include/nccl.h", "/usr/local/include/nccl.h"];

/// The release, and what said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub version: Version,
    /// The file that says it (`config nccl.version` for the site's statement).
    pub path: String,
    /// What in it: `libnccl.so.2 -> libnccl.so.2.27.3 (found through /etc/ld.so.conf.d/x.conf
    /// line 1)`.
    pub value: String,
}

impl Installed {
    /// `NCCL 2.27.3 (libnccl.so.2 -> ... in /usr/lib/...)`, for a finding.
    pub fn describe(&self) -> String {
        format!("{} ({}: {})", self.version, self.path, self.value)
    }
}

/// The release as the node's files (or the site) state it; `None` when nothing does.
pub fn load(
    root: &Root,
    stated: Option<Version>,
    search: &[(String, String)],
) -> Option<Installed> {
    if let Some(version) = stated {
        return Some(Installed {
            version,
            path: STATED.to_owned(),
            value: format!("{version}, the release the site's jobs run"),
        });
    }
    library(root, search)
        .or_else(|| dpkg(root))
        .or_else(|| header(root))
}

/// How much of a library whose name carries no release is searched for NCCL's version string.
const STRING_SCAN: u64 = 8 << 20;

/// The first loader directory's `libnccl.so.2`: the release its file's name carries, else the
/// `NCCL version 2.27.3+cuda12.9` string NCCL builds into the library (src/init.cc
/// `VERSION_STRING`, there to be found by `strings`), searched for in the first 8 MiB only (the
/// library is hundreds of megabytes; a capture keeps what was read).
fn library(root: &Root, search: &[(String, String)]) -> Option<Installed> {
    let (dir, via, real) = search.iter().find_map(|(dir, via)| {
        let path = format!("{dir}/{SONAME}");
        Some((dir, via, super::nccl_plugin::library_at(root, &path)?))
    })?;
    let path = format!("{dir}/{SONAME}");
    let name = real.rsplit('/').next()?;
    if let Some(version) = nccl_release::library_name(name) {
        return Some(Installed {
            version,
            path,
            value: format!("-> {real} (found through {via})"),
        });
    }
    let bytes = root.read_prefix(&real, STRING_SCAN).ok()?;
    let text = super::nccl_plugin::package_version(&bytes, b"NCCL version ")?;
    let version = crate::parse::nccl_log::Version::parse(&text)?;
    Some(Installed {
        version,
        path,
        value: format!("{real}: \"NCCL version {text}\" (found through {via})"),
    })
}

fn dpkg(root: &Root) -> Option<Installed> {
    DPKG_LISTS.iter().find_map(|list| {
        let text = root.read_text(list).ok()?;
        let (version, file) = nccl_release::file_list(&text)?;
        Some(Installed {
            version,
            path: (*list).to_owned(),
            value: format!("libnccl2 installed {file}"),
        })
    })
}

fn header(root: &Root) -> Option<Installed> {
    HEADERS.iter().find_map(|h| {
        let text = root.read_text(h).ok()?;
        let version = nccl_release::header(&text)?;
        Some(Installed {
            version,
            path: (*h).to_owned(),
            value: format!("NCCL_MAJOR/MINOR/PATCH {version}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with(files: &[(&str, &[u8])], links: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        for (path, bytes) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, bytes).unwrap();
        }
        for (path, target) in links {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, p).unwrap();
        }
        let root = Root::captured(dir.path()).unwrap();
        (dir, root)
    }

    fn system() -> Vec<(String, String)> {
        vec![(
            "/usr/lib/x86_64-linux-gnu".to_owned(),
            "a system directory".to_owned(),
        )]
    }

    #[test]
    fn from_the_library_the_loader_finds() {
        let (_d, root) = root_with(
            &[
                (
                    "/usr/lib/x86_64-linux-gnu/libnccl.so.2.27.3",
                    b"\x7fELF....",
                ),
                (
                    "/usr/include/nccl.h",
                    b"#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n#define NCCL_PATCH 1\n",
                ),
            ],
            &[(
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                "libnccl.so.2.27.3",
            )],
        );
        let r = load(&root, None, &system()).unwrap();
        assert_eq!(r.version, Version::new(2, 27, 3));
        assert_eq!(r.path, "/usr/lib/x86_64-linux-gnu/libnccl.so.2");
        assert!(r.value.contains("libnccl.so.2.27.3"), "{}", r.value);
        // The site's statement comes first.
        let r = load(&root, Some(Version::new(2, 26, 5)), &system()).unwrap();
        assert_eq!(r.version, Version::new(2, 26, 5));
        assert_eq!(r.path, "config nccl.version");
    }

    #[test]
    fn from_the_version_string_where_the_name_has_none() {
        let (_d, root) = root_with(
            &[(
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                b"\x7fELF....\0NCCL version 2.28.9+cuda12.9\0more",
            )],
            &[],
        );
        let r = load(&root, None, &system()).unwrap();
        assert_eq!(r.version, Version::new(2, 28, 9));
        assert!(
            r.value.contains("NCCL version 2.28.9+cuda12.9"),
            "{}",
            r.value
        );
    }

    #[test]
    fn from_the_package_then_the_header() {
        // A library that is no ELF file is not NCCL's: the package's list then says it.
        let (_d, root) = root_with(
            &[
                ("/usr/lib/x86_64-linux-gnu/libnccl.so.2.26.2", b"not elf"),
                (
                    "/var/lib/dpkg/info/libnccl2.list",
                    b"/.\n/usr/lib/x86_64-linux-gnu/libnccl.so.2.26.2\n/usr/lib/x86_64-linux-gnu/libnccl.so.2\n",
                ),
                ("/usr/include/nccl.h", b"#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n#define NCCL_PATCH 1\n"),
            ],
            &[("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.26.2")],
        );
        let r = load(&root, None, &system()).unwrap();
        assert_eq!(r.version, Version::new(2, 26, 2));
        assert_eq!(r.path, "/var/lib/dpkg/info/libnccl2.list");
        let (_d, root) = root_with(
            &[(
                "/usr/include/nccl.h",
                b"#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n#define NCCL_PATCH 1\n",
            )],
            &[],
        );
        assert_eq!(
            load(&root, None, &system()).unwrap().version,
            Version::new(2, 18, 1)
        );
        let (_d, root) = root_with(&[], &[]);
        assert_eq!(load(&root, None, &system()), None);
    }
}
