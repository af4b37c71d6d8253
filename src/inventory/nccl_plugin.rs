//! The network plugin NCCL loads, found the way NCCL looks for it, and what it does to NCCL's
//! view of the node (issue 29).
//!
//! NCCL's search (NVIDIA/nccl, read at its release tags):
//! - 2.4 to 2.21 (`src/net.cc` `ncclNetPluginInit`): `NCCL_NET_PLUGIN=X` opens
//!   `libnccl-net-X.so`; unset, `libnccl-net.so`.
//! - 2.22 to 2.26 (`src/net.cc`, then `src/plugin/plugin_open.cc` `openPluginLib`): `X` itself
//!   first (a path or a library name), then `libnccl-net-X.so`; unset, `libnccl-net.so`.
//! - 2.27 and later (`src/plugin/net.cc`): `NCCL_NET_PLUGIN` is a comma-separated list, each
//!   name tried as above; 2.28 reads `none` as no external plugin at all.
//!
//! Each name goes to `dlopen`, which searches (ld.so(8)) `LD_LIBRARY_PATH`, the cache
//! `ldconfig` builds from `/etc/ld.so.conf` and its includes, then the system directories. A
//! job's `LD_LIBRARY_PATH` is its own: gdrdoctor knows it only as the site declares it (config
//! `nccl.env`, `--nccl-env`), as for every NCCL variable.
//!
//! When a plugin loads, NCCL's own InfiniBand/RoCE transport is used only if the plugin fails
//! to initialise. aws-ofi-nccl (aws/aws-ofi-nccl) reaches AWS EFA through libfabric's efa
//! provider, and on the instance types of its platform table (`src/platform-aws.cpp`,
//! `platform_data_map`, matched against DMI's product_name) sets `NCCL_TOPO_FILE` to its own
//! topology file when NCCL_TOPO_FILE is unset (`PlatformAWS::init`): the files it installs
//! under `${pkgdatadir}/xml` (`src/Makefile.am`: `-DXML_DIR`; `topology/Makefile.am`).

use super::nccl_setting::Setting;
use crate::root::Root;

/// `NCCL_NET_PLUGIN`'s default library, every release.
pub const DEFAULT_PLUGIN: &str = "libnccl-net.so";
/// Where the EFA installer puts aws-ofi-nccl and libfabric (its prefix, `/opt/amazon`).
pub const EFA_INSTALLER_OFI: &str = "/opt/amazon/ofi-nccl";
pub const EFA_INSTALLER_LIBFABRIC: &str = "/opt/amazon/efa";
pub const LD_SO_CONF: &str = "/etc/ld.so.conf";
/// How much of a library is read for its version string, at most; a capture keeps it, and a
/// capture archive takes a library's prefix up to this size (`root::LIBRARY_PREFIX_LIMIT`).
pub const VERSION_SCAN_MAX: u64 = crate::root::LIBRARY_PREFIX_LIMIT;

/// aws-ofi-nccl's platforms with a topology file of their own (src/platform-aws.cpp
/// `platform_data_map`, `.topology`; topology/Makefile.am `dist_xml_DATA`): DMI product_name,
/// file name. p5.48xlarge had one (2023-07) that the platform table never named; it was removed
/// as unused in 2025-06 ("topo: Remove unused P5 topo file").
pub const AWS_TOPOLOGIES: &[(&str, &str)] = &[
    ("p4d.24xlarge", "p4d-24xl-topo.xml"),
    ("p4de.24xlarge", "p4de-24xl-topo.xml"),
    ("g5.48xlarge", "g5.48xl-topo.xml"),
];

/// aws-ofi-nccl's platforms that require GPUDirect RDMA (`.gdr_required = true`): without it
/// the plugin refuses to open an endpoint ("GDR disabled on GDR-supported instance type"), and
/// NCCL falls back to its next transport. Regexes of the table written as prefixes.
pub const AWS_GDR_REQUIRED: &[&str] = &[
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.",
    "p5en.",
    "p6-",
    "p7",
    "p8",
    "p9",
    "g7e.12xlarge",
    "g7e.24xlarge",
    "g7e.48xlarge",
    "trn",
    "inf",
];

/// One library name NCCL tries, and where the loader finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// As NCCL passes it to dlopen: `libnccl-net-ofi.so`, or a path.
    pub name: String,
    /// The NCCL releases that try this name.
    pub releases: &'static str,
    /// Where it was found: the file, and the loader directory (with what named that
    /// directory) it was found in.
    pub found: Option<Found>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The path dlopen opens (`/opt/amazon/ofi-nccl/lib/libnccl-net.so`).
    pub path: String,
    /// The file it resolves to, links followed.
    pub real: String,
    /// Which part of the loader's search found it: `LD_LIBRARY_PATH (declared)`,
    /// `/etc/ld.so.conf.d/000_efa.conf line 2`, `a system directory`, `a path`.
    pub via: String,
}

/// Which plugin a library is, from the strings it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// aws/aws-ofi-nccl: its `PACKAGE_STRING` (`aws-ofi-nccl 1.14.0`) is in the library, the
    /// string NCCL logs as `NET/OFI Initializing aws-ofi-nccl 1.14.0`.
    AwsOfi {
        version: String,
    },
    /// NVIDIA's IBext plugin (nccl-rdma-sharp-plugins, shipped in HPC-X): NCCL's InfiniBand
    /// transport with SHARP, over the same verbs devices.
    IbExt,
    Unidentified,
}

/// The plugin NCCL will load, as far as the node tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// `NCCL_NET_PLUGIN=none` (2.28 and later): no external plugin.
    Disabled,
    /// The first name found.
    Found { at: Found, kind: Kind },
    /// No name NCCL tries is on the loader's path.
    NotFound,
}

/// A topology file the plugin would set `NCCL_TOPO_FILE` to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginTopology {
    /// The instance type, as DMI's product_name says it.
    pub platform: String,
    /// The file (`.../share/aws-ofi-nccl/xml/p4d-24xl-topo.xml`).
    pub path: String,
    /// aws-ofi-nccl's source of the file.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPlugin {
    /// `NCCL_NET_PLUGIN`, when the node or the declared environment sets it.
    pub setting: Option<Setting>,
    /// Every name NCCL tries, in order.
    pub tried: Vec<Candidate>,
    pub state: State,
    /// The loader's directories, in search order, with what named each.
    pub search: Vec<(String, String)>,
    /// libfabric (`libfabric.so.1`), which aws-ofi-nccl is linked against: where found.
    pub libfabric: Option<Found>,
    /// DMI's product_name, read for the plugin's platform table.
    pub product_name: Option<String>,
    /// aws-ofi-nccl where the EFA installer puts it, when NCCL does not load it from there.
    pub unused_install: Option<UnusedInstall>,
}

/// aws-ofi-nccl installed under the EFA installer's prefix, in a directory the loader does not
/// search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedInstall {
    /// The plugin library (`/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-net-ofi.so`).
    pub library: String,
    /// Its directory: what the loader must be told.
    pub dir: String,
    /// `libnccl-net.so` is in `dir`: the name NCCL opens when NCCL_NET_PLUGIN is unset.
    /// aws-ofi-nccl installs it by default: alone in 1.14, then as a link to libnccl-net-ofi.so
    /// (1.15, 1.16: `ENABLE_NCCL_NET_SYMLINK`), then a library of its own (1.17 and later:
    /// `ENABLE_NCCL_NET_LIBRARY`; NGC's builds turn it off) (src/Makefile.am).
    pub default_name: bool,
}

impl Default for NetPlugin {
    fn default() -> NetPlugin {
        NetPlugin {
            setting: None,
            tried: Vec::new(),
            state: State::NotFound,
            search: Vec::new(),
            libfabric: None,
            product_name: None,
            unused_install: None,
        }
    }
}

impl NetPlugin {
    /// aws-ofi-nccl's version, when that is the plugin NCCL loads.
    pub fn aws_ofi(&self) -> Option<&str> {
        match &self.state {
            State::Found {
                kind: Kind::AwsOfi { version },
                ..
            } => Some(version),
            _ => None,
        }
    }

    /// The topology file aws-ofi-nccl would name for this instance type: beside the library
    /// NCCL loads (its prefix's `share/aws-ofi-nccl/xml`), or, with no plugin found, where the
    /// EFA installer puts it.
    pub fn aws_topology(&self) -> Option<PluginTopology> {
        let product = self.product_name.as_deref()?;
        let (_, file) = AWS_TOPOLOGIES.iter().find(|(p, _)| *p == product)?;
        let prefix = match &self.state {
            State::Found {
                at,
                kind: Kind::AwsOfi { .. },
            } => prefix_of(&at.real),
            State::Found { .. } => return None,
            _ => EFA_INSTALLER_OFI.to_owned(),
        };
        Some(PluginTopology {
            platform: product.to_owned(),
            path: format!("{prefix}/share/aws-ofi-nccl/xml/{file}"),
            source: format!("aws-ofi-nccl topology/{file}"),
        })
    }

    /// Whether aws-ofi-nccl requires GPUDirect RDMA on this instance type.
    pub fn aws_gdr_required(&self) -> bool {
        self.product_name
            .as_deref()
            .is_some_and(|p| AWS_GDR_REQUIRED.iter().any(|r| p.starts_with(r)))
    }
}

/// The installation prefix of a library: its directory without `lib`, `lib64` or a multiarch
/// `lib/<triplet>` (`/opt/amazon/ofi-nccl/lib/libnccl-net.so` -> `/opt/amazon/ofi-nccl`).
fn prefix_of(library: &str) -> String {
    let dir = library.rsplit_once('/').map_or("", |(d, _)| d);
    let mut parts: Vec<&str> = dir.split('/').collect();
    if parts.last().is_some_and(|p| p.ends_with("-linux-gnu")) {
        parts.pop();
    }
    if parts.last().is_some_and(|p| *p == "lib" || *p == "lib64") {
        parts.pop();
    }
    parts.join("/")
}

/// The most names of an NCCL_NET_PLUGIN list looked for (NCCL tries them in order and stops at
/// the first that loads; a real list names a few).
pub const MAX_PLUGIN_NAMES: usize = 16;

/// The names NCCL tries for `NCCL_NET_PLUGIN` (`None`: unset), in order, with the releases
/// that try each; `None` for `none`.
pub fn names(setting: Option<&str>) -> Option<Vec<(String, &'static str)>> {
    let Some(value) = setting.filter(|v| !v.is_empty()) else {
        return Some(vec![(DEFAULT_PLUGIN.to_owned(), "every release")]);
    };
    if value.eq_ignore_ascii_case("none") {
        return None;
    }
    // Before 2.27 the whole value is one name; a list is read from 2.27.
    let list = value.contains(',');
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Each name once, at most MAX_PLUGIN_NAMES of them: every name is looked for in every
    // directory of the loader's path (issue 41: 40,000 names x 20,000 directories).
    for name in value
        .split(',')
        .filter(|n| !n.is_empty() && seen.insert(*n))
        .take(MAX_PLUGIN_NAMES)
    {
        out.push((
            name.to_owned(),
            if list {
                "2.27 and later"
            } else {
                "2.22 and later"
            },
        ));
        // A path or a library name is not made into libnccl-net-<name>.so (2.29 skips it; the
        // releases before form a name no file has).
        let library_like = name.contains('/') || (name.starts_with("lib") && name.ends_with(".so"));
        if !library_like {
            out.push((
                format!("libnccl-net-{name}.so"),
                if list {
                    "2.27 and later"
                } else {
                    "every release"
                },
            ));
        }
    }
    Some(out)
}

/// The most directories the loader's path is taken to hold, and the most ld.so.conf files read:
/// far past any real node's (a few dozen directories, a dozen files), and what keeps a hostile
/// LD_LIBRARY_PATH or include web from costing minutes or gigabytes (issue 41).
pub const MAX_SEARCH_DIRS: usize = 1024;
pub const MAX_CONF_FILES: usize = 256;

/// The loader's directories: the declared `LD_LIBRARY_PATH`, `/etc/ld.so.conf` with its
/// includes, the system directories; each once, in that order, at most [`MAX_SEARCH_DIRS`].
pub(super) fn search_path(
    root: &Root,
    ld_library_path: Option<&Setting>,
    arch: &str,
) -> Vec<(String, String)> {
    let mut out = Dirs::default();
    if let Some(s) = ld_library_path {
        for d in s.value.split(':').filter(|d| d.starts_with('/')) {
            out.push(d, || format!("LD_LIBRARY_PATH ({})", s.origin.short()));
        }
    }
    ld_so_conf(root, &mut out);
    let triplet = format!("{arch}-linux-gnu");
    for d in [
        format!("/lib/{triplet}"),
        format!("/usr/lib/{triplet}"),
        "/lib64".to_owned(),
        "/usr/lib64".to_owned(),
        "/lib".to_owned(),
        "/usr/lib".to_owned(),
    ] {
        // The system directories always count, past the bound too.
        out.push_always(&d, "a system directory");
    }
    out.list
}

/// Directories in order, each once: a repeat is dropped as it comes, not at the end.
#[derive(Default)]
struct Dirs {
    list: Vec<(String, String)>,
    seen: std::collections::HashSet<String>,
}

impl Dirs {
    fn push(&mut self, dir: &str, via: impl FnOnce() -> String) {
        if self.list.len() < MAX_SEARCH_DIRS {
            let dir = dir.trim_end_matches('/');
            if self.seen.insert(dir.to_owned()) {
                self.list.push((dir.to_owned(), via()));
            }
        }
    }

    fn push_always(&mut self, dir: &str, via: &str) {
        if self.seen.insert(dir.to_owned()) {
            self.list.push((dir.to_owned(), via.to_owned()));
        }
    }
}

/// /etc/ld.so.conf and its includes: directories, and `include` globs (`*` within the last name
/// only, as ldconfig's glob(3) use in practice), an include's directories where it appears.
/// Each file is read once, whatever includes it how often (a web of files including each other
/// ends), at most [`MAX_CONF_FILES`] of them, four includes deep.
fn ld_so_conf(root: &Root, out: &mut Dirs) {
    let mut walk = ConfWalk::default();
    walk.file(root, LD_SO_CONF, 0, out);
}

/// What the walk of ld.so.conf's includes has done: the files read, the include lines followed.
#[derive(Default)]
struct ConfWalk {
    read: std::collections::HashSet<String>,
    includes: usize,
}

impl ConfWalk {
    fn file(&mut self, root: &Root, path: &str, depth: usize, out: &mut Dirs) {
        if depth > 4 || self.read.len() >= MAX_CONF_FILES || !self.read.insert(path.to_owned()) {
            return;
        }
        let Ok(text) = root.read_text(path) else {
            return;
        };
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(pattern) = line.strip_prefix("include").map(str::trim) {
                // Each include line globs a directory: at most MAX_CONF_FILES of them in all.
                if pattern.is_empty() || self.includes >= MAX_CONF_FILES {
                    continue;
                }
                self.includes += 1;
                let pattern = if pattern.starts_with('/') {
                    pattern.to_owned()
                } else {
                    format!("/etc/{pattern}")
                };
                for file in glob(root, &pattern) {
                    self.file(root, &file, depth + 1, out);
                }
            } else if line.starts_with('/') && !line.contains(char::is_whitespace) {
                out.push(line, || format!("{path} line {}", i + 1));
            }
        }
    }
}

/// The files a `dir/pre*post` pattern names, sorted (a pattern without `*` names itself).
fn glob(root: &Root, pattern: &str) -> Vec<String> {
    let Some((dir, name)) = pattern.rsplit_once('/') else {
        return Vec::new();
    };
    let Some((pre, post)) = name.split_once('*') else {
        return vec![pattern.to_owned()];
    };
    let Ok(listing) = root.read_dir(if dir.is_empty() { "/" } else { dir }) else {
        return Vec::new();
    };
    listing
        .names
        .into_iter()
        .filter(|n| n.len() >= pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post))
        .map(|n| format!("{dir}/{n}"))
        .collect()
}

/// Whether a library file is there: its first bytes read (so that a capture holds it and
/// offline finds it as live did), links followed.
pub(crate) fn library_at(root: &Root, path: &str) -> Option<String> {
    let real = root.canonical(path).ok()?;
    root.read_prefix(&real, 4)
        .ok()
        .filter(|b| b == b"\x7fELF")?;
    Some(real)
}

/// Where dlopen finds `name`: as a path when it has a slash, else in the first directory of
/// `search` that holds it.
pub(super) fn resolve(root: &Root, name: &str, search: &[(String, String)]) -> Option<Found> {
    if name.contains('/') {
        let real = library_at(root, name)?;
        return Some(Found {
            path: name.to_owned(),
            real,
            via: "a path".to_owned(),
        });
    }
    search.iter().find_map(|(dir, via)| {
        let path = format!("{dir}/{name}");
        let real = library_at(root, &path)?;
        Some(Found {
            path,
            real,
            via: via.clone(),
        })
    })
}

/// What the library is, from the strings in it: a growing prefix is read until the version
/// string is found (a capture keeps only what was read).
fn kind_of(root: &Root, real: &str) -> Kind {
    let mut n: u64 = 256 << 10;
    loop {
        let Ok(bytes) = root.read_prefix(real, n) else {
            return Kind::Unidentified;
        };
        if let Some(version) = package_version(&bytes, b"aws-ofi-nccl ") {
            return Kind::AwsOfi { version };
        }
        if (bytes.len() as u64) < n || n >= VERSION_SCAN_MAX {
            if find(&bytes, b"IBext").is_some() {
                return Kind::IbExt;
            }
            return Kind::Unidentified;
        }
        // Never past the limit (issue 41: 256 KiB x 4^3 read 64 MiB, twice the 32 MiB meant).
        n = (n * 4).min(VERSION_SCAN_MAX);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The version after `marker` (`1.14.0`, `1.7.4-aws`), where the marker is followed by one.
pub fn package_version(bytes: &[u8], marker: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], marker) {
        let start = from + at + marker.len();
        let v: Vec<u8> = bytes[start..]
            .iter()
            .take(32)
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
            .copied()
            .collect();
        if v.first().is_some_and(u8::is_ascii_digit) && v.contains(&b'.') {
            return String::from_utf8(v).ok();
        }
        from = start;
    }
    None
}

/// The directories aws-ofi-nccl's packages put it in under the EFA installer's prefix, in the
/// order they are looked at (aws/aws-ofi-nccl contrib/, read at the release tags):
/// - `lib`: the Debian packages from 1.17.0 (debian-template/rules `--libdir=${prefix}/lib`),
///   and a build from source (autoconf's default libdir);
/// - `lib/<arch>-linux-gnu`: the Debian packages 1.14.0 to 1.16.3, which left the libdir to
///   dh_auto_configure, whose default is multiarch (their rules name
///   `/opt/amazon/ofi-nccl/lib/$(DEB_HOST_MULTIARCH)/` in /etc/ld.so.conf.d/100_ofinccl.conf);
/// - `lib64`: the RPMs (fedora/aws-ofi-nccl.spec: `%configure` under `%global _prefix
///   /opt/amazon/ofi-nccl`, so `%{_libdir}`).
///
/// `arch` is the kernel's (`x86_64`, `aarch64`): Debian's triplets are `<arch>-linux-gnu`. One
/// that is not a plain word is not made into a path (it ends up in a fix's shell command).
fn install_dirs(arch: &str) -> Vec<String> {
    let mut dirs = vec![format!("{EFA_INSTALLER_OFI}/lib")];
    if !arch.is_empty() && arch.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        dirs.push(format!("{EFA_INSTALLER_OFI}/lib/{arch}-linux-gnu"));
    }
    dirs.push(format!("{EFA_INSTALLER_OFI}/lib64"));
    dirs
}

/// aws-ofi-nccl under the EFA installer's prefix ([`install_dirs`]): the first directory that
/// holds its library.
fn unused_install(root: &Root, arch: &str) -> Option<UnusedInstall> {
    install_dirs(arch).into_iter().find_map(|dir| {
        let library = ["libnccl-net-ofi.so", DEFAULT_PLUGIN]
            .into_iter()
            .map(|n| format!("{dir}/{n}"))
            .find(|l| library_at(root, l).is_some())?;
        let default_name = library_at(root, &format!("{dir}/{DEFAULT_PLUGIN}")).is_some();
        Some(UnusedInstall {
            library,
            dir,
            default_name,
        })
    })
}

/// The plugin NCCL loads on this node, with what decides it. The machine's architecture (for
/// the loader's directories) and DMI's product_name (for aws-ofi-nccl's platform table) are the
/// kernel inventory's.
pub fn load(
    root: &Root,
    settings: &std::collections::BTreeMap<String, Setting>,
    kernel: &super::Kernel,
) -> NetPlugin {
    let setting = settings.get("NCCL_NET_PLUGIN").cloned();
    let arch = kernel.arch.as_ref().map_or("x86_64", |(a, _)| a.as_str());
    let search = search_path(root, settings.get("LD_LIBRARY_PATH"), arch);
    let product_name = kernel.product_name.clone();
    let mut out = NetPlugin {
        setting: setting.clone(),
        search: search.clone(),
        product_name,
        ..NetPlugin::default()
    };
    let Some(names) = names(setting.as_ref().map(|s| s.value.as_str())) else {
        out.state = State::Disabled;
        return out;
    };
    for (name, releases) in names {
        let found = resolve(root, &name, &search);
        if let (Some(f), State::NotFound) = (&found, &out.state) {
            out.state = State::Found {
                kind: kind_of(root, &f.real),
                at: f.clone(),
            };
        }
        out.tried.push(Candidate {
            name,
            releases,
            found,
        });
    }
    if out.aws_ofi().is_none() {
        out.unused_install = unused_install(root, arch);
    }
    if out.aws_ofi().is_some() || root.is_dir(EFA_INSTALLER_LIBFABRIC) {
        let mut libfabric_search = search;
        for d in ["lib", "lib64"] {
            libfabric_search.push((
                format!("{EFA_INSTALLER_LIBFABRIC}/{d}"),
                "the EFA installer's directory (aws-ofi-nccl's RUNPATH when built by it)"
                    .to_owned(),
            ));
        }
        out.libfabric = resolve(root, "libfabric.so.1", &libfabric_search);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL's names per NCCL_NET_PLUGIN value, as src/plugin/plugin_open.cc forms them.
    #[test]
    fn names_as_nccl_forms_them() {
        assert_eq!(
            names(None).unwrap(),
            vec![("libnccl-net.so".to_owned(), "every release")]
        );
        assert!(names(Some("none")).is_none());
        assert!(names(Some("NONE")).is_none());
        let ofi: Vec<String> = names(Some("ofi"))
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(ofi, ["ofi", "libnccl-net-ofi.so"]);
        let path: Vec<String> = names(Some("/opt/x/libnccl-net.so"))
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(path, ["/opt/x/libnccl-net.so"]);
    }

    /// Where the packages install it: `lib`, Debian's multiarch directory (1.14 to 1.16), the
    /// RPMs' `lib64`; a machine name that is not a word makes no path.
    #[test]
    fn install_directories() {
        assert_eq!(
            install_dirs("aarch64"),
            [
                "/opt/amazon/ofi-nccl/lib",
                "/opt/amazon/ofi-nccl/lib/aarch64-linux-gnu",
                "/opt/amazon/ofi-nccl/lib64"
            ]
        );
        assert_eq!(install_dirs("x86_64; reboot").len(), 2);
        assert_eq!(install_dirs("").len(), 2);
    }

    #[test]
    fn prefixes_and_versions() {
        assert_eq!(
            prefix_of("/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"),
            "/opt/amazon/ofi-nccl"
        );
        assert_eq!(
            prefix_of("/usr/lib/x86_64-linux-gnu/libnccl-net.so"),
            "/usr"
        );
        // The string NCCL logs as "NET/OFI Initializing aws-ofi-nccl 1.7.4-aws".
        let lib = b"\x7fELF....Initializing \0aws-ofi-nccl \0aws-ofi-nccl 1.7.4-aws\0more";
        assert_eq!(
            package_version(lib, b"aws-ofi-nccl ").as_deref(),
            Some("1.7.4-aws")
        );
        assert_eq!(package_version(b"aws-ofi-nccl x", b"aws-ofi-nccl "), None);
    }
}
