//! The site's policy: what a node of theirs should have, which accelerators count, which
//! findings matter how much. YAML, from `--config FILE` or `/etc/gdrdoctor/config.yaml`.
//!
//! The config is the operator's, never the node's: with `--root`, the captured tree's
//! `/etc/gdrdoctor/config.yaml` is ignored, so a capture cannot lower its own severities.

use crate::model::{Level, Status};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const DEFAULT_PATH: &str = "/etc/gdrdoctor/config.yaml";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// What this node should have; fewer is a failure.
    #[serde(default)]
    pub expect: Expect,
    /// PCI devices to treat as GPUs besides NVIDIA and AMD display/3D/accelerator functions.
    #[serde(default)]
    pub accelerators: Vec<Accelerator>,
    /// Finding code -> status, replacing the check's own verdict for that code.
    #[serde(default)]
    pub severity: BTreeMap<String, Status>,
    /// Check IDs never to run.
    #[serde(default)]
    pub skip: Vec<String>,
    #[serde(default)]
    pub thresholds: Thresholds,
    #[serde(default)]
    pub timeouts: Timeouts,
    /// What NCCL's jobs on the node read besides the node's files: whose `~/.nccl.conf`, and the
    /// job environment the site sets.
    #[serde(default)]
    pub nccl: NcclConfig,
}

/// The NCCL inputs a site declares (the node's own `/etc/nccl.conf` and topology file are read
/// from the node).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NcclConfig {
    /// The user whose `~/.nccl.conf` NCCL reads (the home directory from the node's
    /// `/etc/passwd`). Unset: no user file is read; jobs of other users may differ.
    pub user: Option<String>,
    /// The job environment the site sets for every job (a Slurm TaskProlog's exports, a module
    /// file): `NCCL_*` variables and their values, as NCCL reads the environment first.
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// The NCCL release the site's jobs run (`2.27.3`), where it is not the node's own (a
    /// container, PyTorch's wheel): NCCL's decisions on Grace nodes differ by release. Unset:
    /// the release the node's files name (`inventory::nccl_release`).
    #[serde(default, deserialize_with = "nccl_version")]
    pub version: Option<crate::parse::nccl_log::Version>,
    /// `--nccl-env FILE`: more of the job environment, read by the command line (it overrides
    /// `env`). Not a config key.
    #[serde(skip)]
    pub env_file: Option<DeclaredEnv>,
}

/// `nccl.version`: `2.27.3` (a release NCCL has: major 2, minor and patch numbers).
fn nccl_version<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::parse::nccl_log::Version>, D::Error> {
    let s = String::deserialize(d)?;
    let v = crate::parse::nccl_log::Version::parse(&s)
        .filter(|v| v.major == 2 && v.to_string() == s.trim())
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "nccl.version {s:?} is not an NCCL release such as 2.27.3"
            ))
        })?;
    Ok(Some(v))
}

/// The job environment the operator declared in a file (`--nccl-env FILE`).
#[derive(Debug, Clone, Default)]
pub struct DeclaredEnv {
    pub path: String,
    pub lines: Vec<crate::parse::nccl_conf::EnvLine>,
}

/// A variable's value in the config: a string, or a number or boolean written unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvValue(pub String);

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EnvValue, D::Error> {
        match serde_norway::Value::deserialize(d)? {
            serde_norway::Value::String(s) => Ok(EnvValue(s)),
            serde_norway::Value::Number(n) => Ok(EnvValue(n.to_string())),
            serde_norway::Value::Bool(b) => Ok(EnvValue(if b { "1" } else { "0" }.into())),
            other => Err(serde::de::Error::custom(format!(
                "an environment value must be a string or a number, not {}",
                serde_norway::to_string(&other).unwrap_or_default().trim()
            ))),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Seconds the GPU probe (NVML, CUDA, HIP in a child process) may take before it is killed
    /// and reported as hung. CUDA initialises every GPU: about a second on a node without
    /// persistence mode, much longer on a GPU that is failing.
    pub gpu_probe_s: f64,
    /// Seconds one GDR write-test pair may take, from allocation to the last completion.
    pub gdr_pair_s: f64,
    /// Seconds NCCL may take in `nccl verify` (`check --nccl-verify`): loading, a communicator
    /// over every GPU (it starts its network, probes each NIC, computes the topology) and one
    /// all-reduce. A few seconds on a healthy node; a hung network or driver is killed here.
    pub nccl_verify_s: f64,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            gpu_probe_s: 20.0,
            gdr_pair_s: 10.0,
            nccl_verify_s: 60.0,
        }
    }
}

impl Timeouts {
    /// Validated at load: finite, positive, at most an hour.
    pub fn gpu_probe(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.gpu_probe_s)
            .unwrap_or(std::time::Duration::from_secs(20))
    }

    pub fn nccl_verify(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.nccl_verify_s)
            .unwrap_or(std::time::Duration::from_secs(60))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub gpus: Option<usize>,
    pub rdma_devices: Option<usize>,
    /// Every RDMA port should run at least this rate (Gb/s), e.g. 400 for NDR / 400GbE.
    pub port_rate_gbps: Option<f64>,
}

/// Selects PCI functions by vendor, and optionally device and class prefix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accelerator {
    pub vendor: PciId,
    pub device: Option<PciId>,
    /// Class code prefix in hex: `12` (base), `0380` (base + subclass) or `038000`.
    pub class: Option<ClassPrefix>,
    /// How reports name it, e.g. `lab stand-in GPU`.
    pub name: Option<String>,
}

impl Accelerator {
    pub fn matches(&self, vendor: u16, device: u16, class: u32) -> bool {
        self.vendor.0 == vendor
            && self.device.as_ref().is_none_or(|d| d.0 == device)
            && self.class.as_ref().is_none_or(|c| c.matches(class))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// RLIMIT_MEMLOCK below this (MiB) fails `rdma-access`; any finite limit warns.
    pub memlock_min_mib: u64,
    /// A RoCE port whose netdev MTU gives an active IB MTU below this warns in `rdma-link`.
    pub roce_min_active_mtu: u32,
    /// The farthest a GPU's nearest NIC may be for `pcie-placement` to pass: the
    /// `NCCL_NET_GDR_LEVEL` the site runs NCCL with (NCCL's default is PXB).
    pub gdr_level: Level,
    /// A GPU whose BAR1 (the aperture GPUDirect RDMA maps GPU memory through) is smaller than
    /// this (MiB) fails `gpu`.
    pub bar1_min_mib: u64,
    /// The GDR write test warns when a pair's bandwidth is below this fraction of the rate it
    /// should reach (the lowest of the port rate and the two PCIe links).
    pub gdr_min_bw_fraction: f64,
    /// link-health: link errors (symbol, receive, CRC, recovery, ...) growing on a port faster
    /// than this many a minute warn; at or below it the port is quiet. 0: any growth warns.
    pub link_errors_per_min: f64,
    /// link-health: transport retries and sequence errors growing faster than this many a
    /// minute warn. 0: any growth warns.
    pub link_retries_per_min: f64,
    /// link-health: a counter whose total since the driver loaded is above its number here is
    /// judged (`link-lifetime-over`, warn) even with one reading; none by default.
    pub link_lifetime: BTreeMap<String, u64>,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        // 64 MiB: NCCL registers its host-side buffers (proxy FIFOs, bounce buffers for non-GDR
        // paths) per connection; below this even small jobs fail ibv_reg_mr with ENOMEM.
        // NVIDIA's and every cloud's guidance is `unlimited`, hence the warning above it.
        Thresholds {
            memlock_min_mib: 64,
            roce_min_active_mtu: 4096,
            // NCCL src/graph/paths.cc: GPUDirect RDMA is used up to PXB unless NCCL_NET_GDR_LEVEL
            // says otherwise.
            gdr_level: Level::Pxb,
            // Display-mode workstation and consumer GPUs expose 256 MiB; NCCL alone registers
            // 2 x NCCL_BUFFSIZE (4 MiB) per channel and peer, hundreds of MiB on one node.
            // Data-centre GPUs expose 16 GiB or more.
            bar1_min_mib: 1024,
            // A GPU at SYS distance reaches about half of host-memory bandwidth (perftest#241);
            // healthy GDR loopback reaches 90-95% of the port (Azure's health checks).
            gdr_min_bw_fraction: 0.6,
            // The InfiniBand specification expects no symbol error on a healthy link over a
            // window of seconds (16.1.3.5); a site with a known-noisy fabric sets a rate.
            link_errors_per_min: 0.0,
            link_retries_per_min: 0.0,
            link_lifetime: BTreeMap::new(),
        }
    }
}

/// A 16-bit PCI ID written as a quoted hex string: `"10de"` or `"0x10de"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciId(pub u16);

impl<'de> Deserialize<'de> for PciId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PciId, D::Error> {
        // Unquoted `1050` would be read as decimal by YAML and silently select the wrong device,
        // so numbers are refused.
        let v = serde_norway::Value::deserialize(d)?;
        let s = match v {
            serde_norway::Value::String(s) => s,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "PCI IDs must be quoted hex strings such as \"10de\", not {}",
                    serde_norway::to_string(&other).unwrap_or_default().trim()
                )));
            }
        };
        crate::parse::hex_u16(&s)
            .map(PciId)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not a 16-bit hex PCI ID")))
    }
}

/// A class code prefix: 2, 4 or 6 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassPrefix {
    value: u32,
    digits: u32,
}

impl ClassPrefix {
    pub fn matches(&self, class: u32) -> bool {
        class >> (4 * (6 - self.digits)) == self.value
    }
}

impl<'de> Deserialize<'de> for ClassPrefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ClassPrefix, D::Error> {
        let v = serde_norway::Value::deserialize(d)?;
        let serde_norway::Value::String(s) = v else {
            return Err(serde::de::Error::custom(
                "class must be a quoted hex string such as \"0302\" or \"12\"",
            ));
        };
        let digits = s.trim_start_matches("0x");
        if ![2, 4, 6].contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(serde::de::Error::custom(format!(
                "{s:?} is not a class prefix of 2, 4 or 6 hex digits"
            )));
        }
        Ok(ClassPrefix {
            value: u32::from_str_radix(digits, 16).unwrap_or(0),
            digits: digits.len() as u32,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read {what}: {source}")]
    Read {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The largest config file read. A policy file never needs more: the longest real one is a
/// few KiB, and reading without a limit let `--config /dev/zero` take all memory.
pub const MAX_BYTES: u64 = 1 << 20;

/// Reads the config file: a regular file of at most [`MAX_BYTES`], UTF-8. Opened with
/// O_NONBLOCK so that a FIFO cannot hold the run (with no deadline given, for ever) before it is
/// refused.
fn read_policy(path: &Path) -> Result<String, ConfigError> {
    read_tool_input(path, "config", "a policy file")
}

/// Reads one of the operator's own input files (`what`: `config`, `environment file`) as every
/// input is read (crate::input): a regular file of at most [`MAX_BYTES`], UTF-8, never blocking
/// on a FIFO. `/dev/null` reads as empty. `kind` names it in the size refusal (`a policy file
/// never needs more than 1 MiB`).
pub fn read_tool_input(path: &Path, what: &'static str, kind: &str) -> Result<String, ConfigError> {
    use crate::input::InputError;
    let read_error = |source| ConfigError::Read {
        path: path.to_owned(),
        what,
        source,
    };
    let refuse = |message: String| ConfigError::Invalid {
        path: path.to_owned(),
        message,
    };
    let bytes = crate::input::read(path, MAX_BYTES).map_err(|e| match e {
        InputError::Open(e) | InputError::Read(e) => read_error(e),
        InputError::NotRegular(found) => refuse(format!(
            "cannot read {what}: {found}; the {what} must be a regular file"
        )),
        InputError::TooLarge { len, .. } => refuse(format!(
            "cannot read {what}: {len} bytes; {kind} never needs more than 1 MiB"
        )),
    })?;
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// Reads `--nccl-env FILE`: the job environment the site sets (what a Slurm TaskProlog prints,
/// `export NAME=value` lines). The operator's input, read like the config; a line that is not an
/// assignment stops the run with the file, line and column.
pub fn load_nccl_env(path: &Path) -> Result<DeclaredEnv, ConfigError> {
    let text = read_tool_input(path, "environment file", "a job environment")?;
    let lines = crate::parse::nccl_conf::parse_env(&text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        line: e.line,
        column: e.column,
        message: e.message,
    })?;
    Ok(DeclaredEnv {
        path: path.display().to_string(),
        lines,
    })
}

/// The names a config may use for checks and finding codes. The check registry knows them
/// (`checks::NAMES`); the config only asks, so that data flows one way (config -> checks).
pub struct Names {
    pub check: fn(&str) -> bool,
    pub code: fn(&str) -> bool,
}

impl Config {
    /// Loads `--config FILE`, or the default file when it exists, or the built-in defaults.
    /// The config is the tool's input, not node data, so it is read here and not through Root.
    pub fn load(
        explicit: Option<&Path>,
        names: &Names,
    ) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let path = match explicit {
            Some(p) => p.to_owned(),
            None if Path::new(DEFAULT_PATH).exists() => PathBuf::from(DEFAULT_PATH),
            None => return Ok((Config::default(), None)),
        };
        let text = read_policy(&path)?;
        Config::parse(&text, &path, names).map(|c| (c, Some(path)))
    }

    pub fn parse(text: &str, path: &Path, names: &Names) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = serde_norway::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            // serde's message repeats the position; keep the file:line:column form only.
            let message = e.to_string();
            let message = message
                .split(" at line ")
                .next()
                .unwrap_or(&message)
                .to_owned();
            ConfigError::Syntax {
                path: path.to_owned(),
                line,
                column,
                message,
            }
        })?;
        config.validate(text, path, names)?;
        Ok(config)
    }

    /// Names that must refer to real checks and codes: a typo must not silently do nothing.
    fn validate(&self, text: &str, path: &Path, names: &Names) -> Result<(), ConfigError> {
        let position = |needle: &str| -> String {
            text.lines()
                .enumerate()
                .find_map(|(i, l)| l.find(needle).map(|c| format!("{}:{}: ", i + 1, c + 1)))
                .unwrap_or_default()
        };
        for id in &self.skip {
            if !(names.check)(id) {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}skip: unknown check {id:?} (see `gdrdoctor list`)",
                        position(id)
                    ),
                });
            }
        }
        for (key, t) in [
            ("gpu_probe_s", self.timeouts.gpu_probe_s),
            ("gdr_pair_s", self.timeouts.gdr_pair_s),
            ("nccl_verify_s", self.timeouts.nccl_verify_s),
        ] {
            if !(t.is_finite() && t > 0.0 && t <= 3600.0) {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}timeouts.{key}: {t} is not a number of seconds between 0 and 3600",
                        position(key)
                    ),
                });
            }
        }
        for (key, v) in [
            ("link_errors_per_min", self.thresholds.link_errors_per_min),
            ("link_retries_per_min", self.thresholds.link_retries_per_min),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}thresholds.{key}: {v} is not a rate of 0 or more a minute",
                        position(key)
                    ),
                });
            }
        }
        // Each link_lifetime key a counter link-health reads: a misspelt one would be taken and
        // never match (issue 41).
        for key in self.thresholds.link_lifetime.keys() {
            let known = crate::model::health::WATCHED;
            if !known.iter().any(|w| w.name == key) {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}thresholds.link_lifetime: unknown counter {key:?} (link-health reads {})",
                        position("link_lifetime"),
                        known.iter().map(|w| w.name).collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
        let f = self.thresholds.gdr_min_bw_fraction;
        if !(f.is_finite() && (0.0..=1.0).contains(&f)) {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                message: format!(
                    "{}thresholds.gdr_min_bw_fraction: {f} is not a fraction between 0 and 1",
                    position("gdr_min_bw_fraction")
                ),
            });
        }
        if let Some(user) = &self.nccl.user {
            // A login name (useradd's rule, with the usual '.' and '@' allowed): it is looked up
            // in the node's /etc/passwd, never used as a path itself.
            let ok = !user.is_empty()
                && user.len() <= 32
                && !user.starts_with('-')
                && user
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b));
            if !ok {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!("{}nccl.user: {user:?} is not a user name", position("user")),
                });
            }
        }
        for name in self.nccl.env.keys() {
            let mut b = name.bytes();
            let ok = matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
                && b.all(|c| c.is_ascii_alphanumeric() || c == b'_');
            if !ok {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}nccl.env: {name:?} is not a variable name",
                        position(name)
                    ),
                });
            }
        }
        for code in self.severity.keys() {
            if !(names.code)(code) {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    message: format!(
                        "{}severity: unknown finding code {code:?} (see `gdrdoctor list --codes`)",
                        position(code)
                    ),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A few real names: the config's own tests do not depend on the registry.
    const NAMES: Names = Names {
        check: |id| ["rdma-access", "acs", "iommu"].contains(&id),
        code: |code| ["roce-mtu-small", "rdma-no-device"].contains(&code),
    };

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.yaml"), &NAMES)
    }

    #[test]
    fn full_config() {
        let c = parse(
            "expect:\n  gpus: 8\n  rdma_devices: 8\naccelerators:\n  - vendor: \"1af4\"\n    device: \"0x1050\"\n    class: \"0380\"\n    name: lab GPU\nseverity:\n  roce-mtu-small: fail\nskip: [rdma-access]\nthresholds:\n  memlock_min_mib: 128\n",
        )
        .unwrap();
        assert_eq!(c.expect.gpus, Some(8));
        assert!(c.accelerators[0].matches(0x1af4, 0x1050, 0x038000));
        assert!(!c.accelerators[0].matches(0x1af4, 0x1050, 0x020000));
        assert_eq!(c.severity["roce-mtu-small"], Status::Fail);
        assert_eq!(c.thresholds.memlock_min_mib, 128);
        assert_eq!(c.thresholds.roce_min_active_mtu, 4096);
    }

    #[test]
    fn errors_have_line_and_column() {
        let e = parse("expect:\n  gpus: eight\n").unwrap_err();
        let ConfigError::Syntax { line, column, .. } = e else {
            panic!("{e}")
        };
        assert_eq!((line, column), (2, 9));
        let e = parse("expct:\n  gpus: 8\n").unwrap_err().to_string();
        assert!(e.starts_with("test.yaml:1:1: unknown field `expct`"), "{e}");
        let e = parse("accelerators:\n  - vendor: 1050\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("quoted hex"), "{e}");
        let e = parse("skip: [rdma-acess]\n").unwrap_err().to_string();
        assert!(e.contains("1:8: skip: unknown check \"rdma-acess\""), "{e}");
        let e = parse("severity:\n  no-such-code: fail\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("2:3: severity: unknown finding code"), "{e}");
        let e = parse("severity:\n  rdma-no-device: loud\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("test.yaml:2:"), "{e}");
    }

    #[test]
    fn nccl_section() {
        let c = parse("nccl:\n  user: alice\n  env:\n    NCCL_IB_HCA: \"=mlx5_0\"\n    NCCL_IB_GID_INDEX: 3\n").unwrap();
        assert_eq!(c.nccl.user.as_deref(), Some("alice"));
        assert_eq!(c.nccl.env["NCCL_IB_GID_INDEX"], EnvValue("3".into()));
        let e = parse("nccl:\n  user: ../root\n").unwrap_err().to_string();
        assert!(e.contains("not a user name"), "{e}");
        let e = parse("nccl:\n  env:\n    NCCL IB: x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("3:5: nccl.env"), "{e}");
        let e = parse("nccl:\n  env:\n    NCCL_X: [1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("string or a number"), "{e}");
    }

    #[test]
    fn empty_is_default() {
        assert!(parse("").unwrap().accelerators.is_empty());
        assert!(parse("# nothing\n").unwrap().skip.is_empty());
    }

    #[test]
    fn class_prefixes() {
        let p = |s: &str| serde_norway::from_str::<ClassPrefix>(s);
        assert!(p("\"12\"").unwrap().matches(0x120000));
        assert!(p("\"0302\"").unwrap().matches(0x030200));
        assert!(!p("\"0302\"").unwrap().matches(0x030000));
        assert!(p("\"030200\"").unwrap().matches(0x030200));
        assert!(p("\"123\"").is_err());
        assert!(p("12").is_err());
    }
}
