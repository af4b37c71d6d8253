//! What the kernel answers of a RoCE port's lossless chain that no file shows: dcbnl's DCB
//! configuration (PFC, ETS, the APP table, the buffers, the DCBX mode) and ethtool's pause
//! parameters and driver statistics, per netdev. The probe stage asks them on the live node
//! (src/probe/qos.rs); `gdrdoctor capture` keeps the answers in a file of its own
//! ([`RECORDED_QOS`], docs/qos-json.md), which a check of the copy reads instead, so that the
//! copy's report is the node's.

use crate::parse::dcbnl::Dcb;
use crate::parse::ethtool::Pause;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where `gdrdoctor capture` puts the answers inside the captured tree: a top-level name of
/// gdrdoctor's own, read only from captured roots.
pub const RECORDED_QOS: &str = "/gdrdoctor/qos.json";

/// The format of [`RECORDED_QOS`] this gdrdoctor writes and reads.
pub const VERSION: u32 = 1;

/// What the runs know of the netdevs' QoS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qos {
    /// Not asked, and why (`no RoCE port`, `a capture made before gdrdoctor recorded QoS`).
    NotRead(String),
    /// Asked of the live node's kernel.
    Live(QosAnswers),
    /// As a capture recorded them on the node ([`RECORDED_QOS`]).
    Recorded(QosAnswers),
}

impl Qos {
    /// The answers, live or recorded.
    pub fn answers(&self) -> Option<&QosAnswers> {
        match self {
            Qos::Live(a) | Qos::Recorded(a) => Some(a),
            Qos::NotRead(_) => None,
        }
    }

    /// What was answered for `netdev`.
    pub fn netdev(&self, netdev: &str) -> Option<&NetdevQos> {
        self.answers().and_then(|a| a.netdevs.get(netdev))
    }
}

/// The answers for every netdev asked about, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosAnswers {
    pub netdevs: BTreeMap<String, NetdevQos>,
}

/// One netdev's answers: each query stands or fails on its own (virtio-net has statistics but
/// neither DCB nor pause parameters).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetdevQos {
    /// dcbnl's `DCB_CMD_IEEE_GET` (with the DCBX mode, asked with `DCB_CMD_GDCBX` when the
    /// IEEE reply has none).
    #[serde(with = "answer")]
    pub dcb: Result<Dcb, QueryError>,
    pub ethtool: Ethtool,
}

/// The words of the driver statistics kept ([`kept_stat`]): what the lossless chain and the
/// link's health read. Names from the drivers' tables: mlx5 (drivers/net/ethernet/mellanox/
/// mlx5/core/en_stats.c: `rx_prio3_pause`, `tx_prio3_pause_duration`,
/// `tx_pause_storm_warning_events`, `rx_discards_phy`, `rx_pcs_symbol_err_phy`,
/// `link_down_events_phy`), bnxt (`rx_pfc_ena_frames_pri3`), ice (`rx_priority_3_xon`).
pub const KEPT_STAT_WORDS: &[&str] = &[
    "pause",
    "pfc",
    "prio",
    "xon",
    "xoff",
    "storm",
    "discard",
    "drop",
    "out_of_buffer",
    "_phy",
    "crc",
    "symbol",
    "link_down",
    "ecn",
    "cnp",
];

/// Whether a driver statistic is kept in the answers: one with a word of [`KEPT_STAT_WORDS`]
/// in its name. The rest (mlx5 has about a hundred per channel, thousands on a large host)
/// says nothing of the chain, and a capture of eight such ports would not fit the file limit.
pub fn kept_stat(name: &str) -> bool {
    KEPT_STAT_WORDS.iter().any(|w| name.contains(w))
}

/// What ethtool answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ethtool {
    /// `ETHTOOL_GPAUSEPARAM`: 802.3x global pause.
    #[serde(with = "answer")]
    pub pause: Result<Pause, QueryError>,
    /// `ethtool -S`: the driver's statistics that [`kept_stat`] keeps, name and value, in the
    /// driver's order.
    #[serde(with = "answer")]
    pub stats: Result<Vec<(String, u64)>, QueryError>,
}

impl Ethtool {
    /// The statistic called `name`, if the driver has it.
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats
            .as_ref()
            .ok()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

/// Why a query has no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryError {
    pub kind: ErrorKind,
    /// The errno, where the kernel gave one (its number is the node's architecture's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// What happened, in words.
    pub message: String,
}

/// The kinds of [`QueryError`] a check tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// `EOPNOTSUPP` (or `ENOTSUP`, `EINVAL` of an old kernel): the driver has no such
    /// interface (virtio-net and most VM NICs have no DCB), or the kernel lacks CONFIG_DCB.
    NotSupported,
    /// `ENODEV`: no netdev of that name (it went away, or another network namespace has it).
    NoDevice,
    /// `EPERM` / `EACCES`.
    PermissionDenied,
    /// No answer within the timeout.
    TimedOut,
    /// The driver claimed more entries than gdrdoctor reads: refused, not allocated.
    TooLarge,
    /// An answer that is not what the kernel's structs say it must be.
    Malformed,
    /// Any other failure (the errno says which).
    Failed,
}

impl QueryError {
    /// The error for a failed system call or a kernel's refusal with `errno`.
    pub fn errno(errno: i32, message: impl Into<String>) -> QueryError {
        let kind = match errno {
            e if e == libc::EOPNOTSUPP || e == libc::ENOTSUP => ErrorKind::NotSupported,
            e if e == libc::ENODEV => ErrorKind::NoDevice,
            e if e == libc::EPERM || e == libc::EACCES => ErrorKind::PermissionDenied,
            e if e == libc::ETIMEDOUT || e == libc::EAGAIN => ErrorKind::TimedOut,
            _ => ErrorKind::Failed,
        };
        QueryError {
            kind,
            errno: Some(errno),
            message: message.into(),
        }
    }

    pub fn new(kind: ErrorKind, message: impl Into<String>) -> QueryError {
        QueryError {
            kind,
            errno: None,
            message: message.into(),
        }
    }

    /// The driver has no such interface: the chain is unknown there, never a pass.
    pub fn not_supported(&self) -> bool {
        self.kind == ErrorKind::NotSupported
    }
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::sanitize::text(&self.message))
    }
}

/// The file [`RECORDED_QOS`]: the version, then the answers.
#[derive(Serialize)]
struct Written<'a> {
    version: u32,
    netdevs: &'a BTreeMap<String, NetdevQos>,
}

#[derive(Deserialize)]
struct Read {
    netdevs: BTreeMap<String, NetdevQos>,
}

impl QosAnswers {
    /// What `capture` writes: one JSON document, indented, each array of numbers or strings
    /// on one line (a statistic is one line, `["rx_prio3_pause", 12]`), and a newline.
    pub fn to_json(&self) -> String {
        let file = Written {
            version: VERSION,
            netdevs: &self.netdevs,
        };
        inline_flat_arrays(&serde_json::to_string_pretty(&file).unwrap_or_default())
    }

    /// The recorded file; another version is refused, naming it.
    pub fn parse(text: &[u8]) -> Result<QosAnswers, String> {
        #[derive(Deserialize)]
        struct Version {
            version: Option<u32>,
        }
        let v: Version = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        match v.version {
            Some(VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "version {v}; this gdrdoctor reads version {VERSION}"
                ));
            }
            None => return Err("no version".into()),
        }
        let file: Read = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        Ok(QosAnswers {
            netdevs: file.netdevs,
        })
    }
}

/// serde_json's indented text with every array that holds no array or object on one line.
/// In that text a line ends with `[` or `{` only where an array or object opens (a string
/// ends with its quote), and each element of a flat array is a line of its own.
fn inline_flat_arrays(pretty: &str) -> String {
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out = String::with_capacity(pretty.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.ends_with('[') {
            let items: Vec<&str> = lines[i..]
                .iter()
                .map(|l| l.trim())
                .take_while(|t| !t.starts_with(']') && !t.ends_with('[') && !t.ends_with('{'))
                .collect();
            if let Some(close) = lines.get(i + items.len()).map(|l| l.trim())
                && close.starts_with(']')
            {
                out.push_str(line);
                let items: Vec<&str> = items
                    .iter()
                    .map(|t| t.strip_suffix(',').unwrap_or(t))
                    .collect();
                out.push_str(&items.join(", "));
                out.push_str(close);
                out.push('\n');
                i += items.len() + 1;
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A `Result` in the file: `{"ok": ...}` or `{"error": {...}}`.
mod answer {
    use super::QueryError;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    enum Ref<'a, T> {
        Ok(&'a T),
        Error(&'a QueryError),
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Owned<T> {
        Ok(T),
        Error(QueryError),
    }

    pub fn serialize<S: Serializer, T: Serialize>(
        r: &Result<T, QueryError>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match r {
            Ok(v) => Ref::Ok(v),
            Err(e) => Ref::Error(e),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Result<T, QueryError>, D::Error> {
        Ok(match Owned::deserialize(d)? {
            Owned::Ok(v) => Ok(v),
            Owned::Error(e) => Err(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::dcbnl::{App, Pfc};

    fn sample() -> QosAnswers {
        let mut netdevs = BTreeMap::new();
        netdevs.insert(
            "eth0".to_string(),
            NetdevQos {
                dcb: Err(QueryError::errno(
                    libc::EOPNOTSUPP,
                    "Operation not supported",
                )),
                ethtool: Ethtool {
                    pause: Err(QueryError::errno(
                        libc::EOPNOTSUPP,
                        "Operation not supported",
                    )),
                    stats: Ok(vec![("rx_drops".into(), 0), ("tx_kicks".into(), 2992)]),
                },
            },
        );
        netdevs.insert(
            "enp1s0f0np0".to_string(),
            NetdevQos {
                dcb: Ok(Dcb {
                    pfc: Some(Pfc {
                        cap: 8,
                        enabled: 0x08,
                        ..Pfc::default()
                    }),
                    app: vec![App {
                        selector: 5,
                        priority: 3,
                        protocol: 26,
                    }],
                    dcbx: Some(0x0a),
                    ..Dcb::default()
                }),
                ethtool: Ethtool {
                    pause: Ok(Pause::default()),
                    stats: Err(QueryError::new(ErrorKind::TooLarge, "too many")),
                },
            },
        );
        QosAnswers { netdevs }
    }

    #[test]
    fn the_file_round_trips() {
        let a = sample();
        let text = a.to_json();
        assert!(
            text.starts_with("{\n  \"version\": 1,\n  \"netdevs\": {"),
            "{text}"
        );
        assert!(text.contains("\"kind\": \"not-supported\""), "{text}");
        assert!(
            text.contains("\"ok\": [\n            [\"rx_drops\", 0],\n"),
            "{text}"
        );
        assert!(
            text.contains("\"requests\": [0, 0, 0, 0, 0, 0, 0, 0],\n"),
            "{text}"
        );
        assert_eq!(QosAnswers::parse(text.as_bytes()), Ok(a.clone()));
        // Written again, byte for byte the same.
        assert_eq!(QosAnswers::parse(text.as_bytes()).unwrap().to_json(), text);
        let q = Qos::Recorded(a);
        assert_eq!(
            q.netdev("eth0").unwrap().ethtool.stat("tx_kicks"),
            Some(2992)
        );
        assert!(
            q.netdev("eth0")
                .unwrap()
                .dcb
                .as_ref()
                .unwrap_err()
                .not_supported()
        );
        assert_eq!(q.netdev("eth9"), None);
        assert_eq!(Qos::NotRead("x".into()).answers(), None);
    }

    #[test]
    fn other_versions_and_garbage_are_refused() {
        let e = QosAnswers::parse(br#"{"version": 2, "netdevs": {}}"#).unwrap_err();
        assert_eq!(e, "version 2; this gdrdoctor reads version 1");
        assert_eq!(
            QosAnswers::parse(br#"{"netdevs": {}}"#).unwrap_err(),
            "no version"
        );
        assert!(QosAnswers::parse(b"[]").is_err());
        assert!(QosAnswers::parse(br#"{"version": 1}"#).is_err());
        assert!(
            QosAnswers::parse(br#"{"version": 1, "netdevs": {"a": {"dcb": {"maybe": 1}}}}"#)
                .is_err()
        );
        assert_eq!(
            QosAnswers::parse(br#"{"version": 1, "netdevs": {}, "later": true}"#),
            Ok(QosAnswers::default())
        );
    }

    #[test]
    fn the_chains_statistics_are_kept() {
        for name in [
            "rx_prio3_pause",
            "tx_prio3_pause_duration",
            "tx_pause_storm_warning_events",
            "tx_pause_storm_error_events",
            "rx_discards_phy",
            "rx_pcs_symbol_err_phy",
            "link_down_events_phy",
            "rx_pfc_ena_frames_pri3",
            "rx_priority_3_xon",
            "rx_out_of_buffer",
            "rx_drops",
        ] {
            assert!(kept_stat(name), "{name}");
        }
        for name in [
            "rx0_packets",
            "tx12_bytes",
            "rx_queue_0_packets",
            "tx_kicks",
        ] {
            assert!(!kept_stat(name), "{name}");
        }
    }

    #[test]
    fn errnos_have_kinds() {
        let k = |e| QueryError::errno(e, "").kind;
        assert_eq!(k(libc::EOPNOTSUPP), ErrorKind::NotSupported);
        assert_eq!(k(libc::ENODEV), ErrorKind::NoDevice);
        assert_eq!(k(libc::EPERM), ErrorKind::PermissionDenied);
        assert_eq!(k(libc::EIO), ErrorKind::Failed);
        let shown = QueryError::new(ErrorKind::Malformed, "a\u{1b}[31m").to_string();
        assert!(!shown.contains('\u{1b}'), "{shown}");
    }
}
