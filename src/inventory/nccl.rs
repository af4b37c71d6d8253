//! What NCCL reads on the node besides sysfs, read the way NCCL reads it: the environment the
//! site declares for its jobs, `NCCL_CONF_FILE` or `~/.nccl.conf`, `/etc/nccl.conf`, and the
//! topology XML (`NCCL_TOPO_FILE`, else NCCL's default location).
//!
//! The precedence is NCCL's own (src/misc/param.cc `initEnvFunc`, 2.23 to 2.30): the environment
//! first; then the file `NCCL_CONF_FILE` names, or, when it names none, `~/.nccl.conf`; then
//! `/etc/nccl.conf`. Every value is set with `setenv(name, value, 0)`, so the first definition
//! wins, within a file and across files. (`NCCL_CONF_FILE` itself is read from the environment
//! only; before 2.23 it did not exist and `~/.nccl.conf` was always read. The home directory is
//! the user's from the password database, as NCCL up to 2.29 takes it; 2.30 reads `$HOME`.)
//!
//! The node's files are read through [`Root`], so a capture holds them and offline equals live;
//! the declared environment is the operator's (config `nccl.env`, `--nccl-env FILE`), never the
//! node's: gdrdoctor runs in a prolog or a unit, whose own environment is not the job's.

use super::Problem;
use crate::parse::nccl_conf::{self, ConfFile, OddLine};
use crate::parse::nccl_topo::{self as topo, Library, ParseError, Topology};
use crate::root::{ReadError, Root};
use std::collections::BTreeMap;

pub const ETC_CONF: &str = "/etc/nccl.conf";
pub const PASSWD: &str = "/etc/passwd";
/// Where NCCL looks for a topology when `NCCL_TOPO_FILE` is unset (src/graph/topo.cc
/// `ncclTopoGetSystem`, 2.19 and later): what NVIDIA's topology daemon writes in some VMs.
pub const DEFAULT_TOPO: &str = "/var/run/nvidia-topologyd/virtualTopology.xml";

pub use super::nccl_setting::{Origin, Role, Setting};

/// One of NCCL's configuration files, and what became of it.
#[derive(Debug, Clone)]
pub struct ConfSource {
    pub path: String,
    pub role: Role,
    pub state: SourceState,
}

#[derive(Debug, Clone)]
pub enum SourceState {
    Absent,
    /// NCCL would not read it, or gdrdoctor cannot tell which file it is: why.
    NotRead(String),
    Unreadable(ReadError),
    Read(ConfFile),
}

/// The topology file NCCL loads.
#[derive(Debug, Clone)]
pub struct Topo {
    pub path: String,
    /// The setting that names it; `None`: the network plugin's file ([`Topo::plugin`]) or
    /// NCCL's default location.
    pub named_by: Option<Setting>,
    /// The network plugin sets `NCCL_TOPO_FILE` to this file itself (aws-ofi-nccl on the
    /// instance types it has a file for), since no setting names one.
    pub plugin: Option<super::nccl_plugin::PluginTopology>,
    pub state: TopoState,
}

impl Topo {
    /// Who names the file: `NCCL_TOPO_FILE (/etc/nccl.conf line 2)`, `aws-ofi-nccl (for
    /// p4d.24xlarge)`, `NCCL's default location`.
    pub fn named(&self) -> String {
        match (&self.named_by, &self.plugin) {
            (Some(s), _) => format!("NCCL_TOPO_FILE ({})", s.origin.describe()),
            (None, Some(p)) => format!(
                "aws-ofi-nccl, which sets NCCL_TOPO_FILE itself on {}",
                p.platform
            ),
            (None, None) => "NCCL's default location".to_owned(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum TopoState {
    /// Not there: NCCL logs "Could not open XML topology file" at INFO and reads sysfs.
    Missing,
    /// A relative path: NCCL opens it from each job's working directory.
    Relative,
    /// There, but not readable here (permissions, a FIFO, over the read limit).
    Unreadable(ReadError),
    /// Not what NCCL (or gdrdoctor's bounds) can read.
    Invalid(ParseError),
    Parsed {
        topology: Topology,
        /// FNV-1a of the bytes: tells files of one name apart across a fleet.
        digest: u64,
    },
}

/// The user whose `~/.nccl.conf` is read, as the node's password database has them.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub home: String,
    pub passwd_line: usize,
}

/// NCCL's inputs on the node, resolved.
#[derive(Debug, Clone, Default)]
pub struct Nccl {
    /// The configuration files in NCCL's order of reading.
    pub sources: Vec<ConfSource>,
    /// The effective value of every variable set anywhere.
    pub settings: BTreeMap<String, Setting>,
    /// Definitions NCCL ignores because one came before them.
    pub shadowed: Vec<Setting>,
    /// Lines of the configuration files that do not do what they look like.
    pub odd: Vec<(String, OddLine)>,
    pub topology: Option<Topo>,
    pub user: Option<User>,
    /// The network plugin NCCL loads, and how it was found.
    pub plugin: super::nccl_plugin::NetPlugin,
    /// The NCCL release the node's jobs run, as the site states it or the node's files say
    /// (`None`: nothing says).
    pub release: Option<super::nccl_release::Installed>,
    pub problems: Vec<Problem>,
    /// The library that reads these files: RCCL on a node whose GPUs are all AMD's (set by
    /// the inventory once it knows the GPUs), else NCCL.
    pub library: Library,
}

impl Nccl {
    pub fn get(&self, name: &str) -> Option<&Setting> {
        self.settings.get(name)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.get(name).map(|s| s.value.as_str())
    }

    /// The topology NCCL builds its tree from, when it can: present and parsed, and not one
    /// NCCL refuses.
    pub fn topology(&self) -> Option<(&Topo, &Topology)> {
        let t = self.topology.as_ref()?;
        match &t.state {
            TopoState::Parsed { topology, .. } if topology.refusals(self.library).is_empty() => {
                Some((t, topology))
            }
            _ => None,
        }
    }
}

/// FNV-1a, 64 bits.
pub fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn read_conf(root: &Root, path: &str, role: Role) -> ConfSource {
    let state = match root.read(path) {
        Ok(bytes) => SourceState::Read(nccl_conf::parse(&bytes)),
        Err(e) if e.is_not_found() => SourceState::Absent,
        Err(e) => SourceState::Unreadable(e),
    };
    ConfSource {
        path: path.to_owned(),
        role,
        state,
    }
}

/// The home directory of `user` from the node's `/etc/passwd`.
fn home_of(root: &Root, user: &str, problems: &mut Vec<Problem>) -> Option<User> {
    let text = match root.read(PASSWD) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            problems.push(Problem::from_error(&e));
            return None;
        }
    };
    for (i, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 6 && fields[0] == user {
            let home = fields[5];
            if !home.starts_with('/') || home.contains("/../") || home.ends_with("/..") {
                problems.push(Problem {
                    path: PASSWD.into(),
                    message: format!(
                        "line {}: the home directory of {user} is {}, not an absolute path",
                        i + 1,
                        crate::sanitize::quoted(home)
                    ),
                });
                return None;
            }
            return Some(User {
                name: user.to_owned(),
                home: home.trim_end_matches('/').to_owned(),
                passwd_line: i + 1,
            });
        }
    }
    problems.push(Problem {
        path: PASSWD.into(),
        message: format!("no user {user} (config nccl.user): their ~/.nccl.conf is not read"),
    });
    None
}

pub fn load(root: &Root, config: &crate::config::NcclConfig, kernel: &super::Kernel) -> Nccl {
    let declared = config.env_file.as_ref();
    let mut out = Nccl::default();
    // The declared environment: the config's, then the file's (later lines override earlier
    // ones, as in a shell; `unset` removes).
    let mut env: BTreeMap<String, Setting> = BTreeMap::new();
    for (name, value) in &config.env {
        env.insert(
            name.clone(),
            Setting {
                name: name.clone(),
                value: value.0.clone(),
                origin: Origin::Config,
            },
        );
    }
    if let Some(d) = declared {
        for l in &d.lines {
            match &l.value {
                Some(v) => {
                    env.insert(
                        l.name.clone(),
                        Setting {
                            name: l.name.clone(),
                            value: v.clone(),
                            origin: Origin::EnvFile {
                                path: d.path.clone(),
                                line: l.line,
                            },
                        },
                    );
                }
                None => {
                    env.remove(&l.name);
                }
            }
        }
    }
    // The user file, or the file NCCL_CONF_FILE names instead of it.
    match env.get("NCCL_CONF_FILE").filter(|s| !s.value.is_empty()) {
        Some(s) if s.value.starts_with('/') => {
            out.sources.push(read_conf(root, &s.value, Role::ConfFile));
        }
        Some(s) => out.sources.push(ConfSource {
            path: s.value.clone(),
            role: Role::ConfFile,
            state: SourceState::NotRead(
                "a relative path: NCCL opens it from each job's working directory".into(),
            ),
        }),
        None => {
            if let Some(user) = &config.user {
                out.user = home_of(root, user, &mut out.problems);
                if let Some(u) = &out.user {
                    let path = if u.home == "/" {
                        "/.nccl.conf".to_owned()
                    } else {
                        format!("{}/.nccl.conf", u.home)
                    };
                    out.sources.push(read_conf(root, &path, Role::User));
                }
            }
        }
    }
    out.sources.push(read_conf(root, ETC_CONF, Role::Etc));

    // First definition wins: the environment, then the files in reading order.
    out.settings = env;
    for src in &out.sources {
        let SourceState::Read(file) = &src.state else {
            continue;
        };
        for o in &file.odd {
            out.odd.push((src.path.clone(), o.clone()));
        }
        for l in &file.lines {
            let s = Setting {
                name: l.name.clone(),
                value: l.value.clone(),
                origin: Origin::File {
                    path: src.path.clone(),
                    line: l.line,
                    role: src.role,
                },
            };
            if out.settings.contains_key(&l.name) {
                out.shadowed.push(s);
            } else {
                out.settings.insert(l.name.clone(), s);
            }
        }
    }

    out.plugin = super::nccl_plugin::load(root, &out.settings, kernel);
    out.release = super::nccl_release::load(root, config.version, &out.plugin.search);
    // aws-ofi-nccl sets NCCL_TOPO_FILE when it is unset, at the plugin's init, before NCCL
    // looks at the variable or its default location (src/platform-aws.cpp PlatformAWS::init).
    let plugin_file = out
        .plugin
        .aws_ofi()
        .and_then(|_| out.plugin.aws_topology())
        .filter(|_| !out.settings.contains_key("NCCL_TOPO_FILE"));
    out.topology = topology(root, out.settings.get("NCCL_TOPO_FILE"), plugin_file);
    out
}

fn topology(
    root: &Root,
    named: Option<&Setting>,
    plugin: Option<super::nccl_plugin::PluginTopology>,
) -> Option<Topo> {
    let named = named.filter(|s| !s.value.is_empty());
    let path = named
        .map(|s| s.value.clone())
        .or_else(|| plugin.as_ref().map(|p| p.path.clone()))
        .unwrap_or(DEFAULT_TOPO.into());
    let by_plugin = named.is_none() && plugin.is_some();
    let topo = |state| {
        Some(Topo {
            path: path.clone(),
            named_by: named.cloned(),
            plugin: plugin.clone().filter(|_| by_plugin),
            state,
        })
    };
    if !path.starts_with('/') {
        return topo(TopoState::Relative);
    }
    match root.read_limited(&path, topo::MAX_BYTES as u64) {
        Ok(bytes) => {
            let state = match topo::parse(&bytes) {
                Ok(doc) => TopoState::Parsed {
                    topology: Topology::from_document(&doc),
                    digest: digest(&bytes),
                },
                Err(e) => TopoState::Invalid(e),
            };
            topo(state)
        }
        // NCCL's default location is tried silently: absent means no file. The plugin's file
        // missing is worth saying: the plugin names it.
        Err(e) if e.is_not_found() && named.is_none() && !by_plugin => None,
        Err(e) if e.is_not_found() => topo(TopoState::Missing),
        Err(e) => topo(TopoState::Unreadable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`load`] with the kernel inventory of the same root, as the inventory reads them.
    fn load(root: &Root, c: &crate::config::NcclConfig) -> Nccl {
        super::load(root, c, &super::super::Kernel::load(root, &mut Vec::new()))
    }

    fn root_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let root = Root::captured(dir.path()).unwrap();
        (dir, root)
    }

    fn config(user: Option<&str>, env: &[(&str, &str)]) -> crate::config::NcclConfig {
        crate::config::NcclConfig {
            user: user.map(str::to_owned),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), crate::config::EnvValue(v.to_string())))
                .collect(),
            env_file: None,
            version: None,
        }
    }

    /// NCCL's precedence: environment, then ~/.nccl.conf, then /etc/nccl.conf; the first
    /// definition wins within a file too.
    #[test]
    fn precedence_is_nccls() {
        let (_d, root) = root_with(&[
            (
                "/etc/passwd",
                "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n",
            ),
            (
                "/home/alice/.nccl.conf",
                "NCCL_IB_HCA=mlx5_1\nNCCL_NET_GDR_LEVEL=SYS\n",
            ),
            (
                "/etc/nccl.conf",
                "NCCL_NET_GDR_LEVEL=PHB\nNCCL_IB_GID_INDEX=3\nNCCL_IB_GID_INDEX=5\nNCCL_IB_HCA=mlx5_0\n",
            ),
        ]);
        let declared = crate::config::DeclaredEnv {
            path: "/site/env.sh".into(),
            lines: crate::parse::nccl_conf::parse_env("export NCCL_IB_HCA==mlx5_2\n").unwrap(),
        };
        let mut c = config(Some("alice"), &[("NCCL_IB_HCA", "mlx5_9")]);
        c.env_file = Some(declared);
        let n = load(&root, &c);
        assert_eq!(n.value("NCCL_IB_HCA"), Some("=mlx5_2"));
        assert_eq!(
            n.get("NCCL_IB_HCA").unwrap().origin.short(),
            "environment, /site/env.sh:1"
        );
        assert_eq!(n.value("NCCL_NET_GDR_LEVEL"), Some("SYS"));
        assert_eq!(
            n.get("NCCL_NET_GDR_LEVEL").unwrap().origin.short(),
            "/home/alice/.nccl.conf:2"
        );
        assert_eq!(n.value("NCCL_IB_GID_INDEX"), Some("3"));
        assert_eq!(n.shadowed.len(), 4);
        assert_eq!(n.user.as_ref().unwrap().home, "/home/alice");
        assert!(n.topology.is_none());
    }

    /// NCCL_CONF_FILE replaces ~/.nccl.conf; /etc/nccl.conf is still read after it.
    #[test]
    fn conf_file_replaces_the_user_file() {
        let (_d, root) = root_with(&[
            ("/etc/passwd", "alice:x:1000:1000::/home/alice:/bin/bash\n"),
            ("/home/alice/.nccl.conf", "NCCL_IB_HCA=mlx5_1\n"),
            ("/shared/nccl.conf", "NCCL_TOPO_FILE=/shared/topo.xml\n"),
            ("/etc/nccl.conf", "NCCL_IB_HCA=mlx5_0\n"),
        ]);
        let n = load(
            &root,
            &config(Some("alice"), &[("NCCL_CONF_FILE", "/shared/nccl.conf")]),
        );
        assert_eq!(n.value("NCCL_IB_HCA"), Some("mlx5_0"));
        assert_eq!(n.sources.len(), 2);
        assert_eq!(n.sources[0].role, Role::ConfFile);
        let t = n.topology.unwrap();
        assert!(matches!(t.state, TopoState::Missing));
        assert_eq!(t.path, "/shared/topo.xml");
    }

    #[test]
    fn unknown_user_and_relative_paths() {
        let (_d, root) = root_with(&[("/etc/passwd", "root:x:0:0::/root:/bin/sh\n")]);
        let n = load(
            &root,
            &config(Some("bob"), &[("NCCL_TOPO_FILE", "topo.xml")]),
        );
        assert!(n.problems[0].message.contains("no user bob"));
        assert!(matches!(n.topology.unwrap().state, TopoState::Relative));
    }
}
