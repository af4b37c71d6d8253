//! What a netdev stacked on a RoCE port is, where its GID carries RoCE: a VLAN (802.1Q tags, so
//! the frames carry a PCP) or something else (a macvlan, a vxlan, a bond). Told by what the
//! kernel says, not by the name: `uevent`'s `DEVTYPE=vlan` (net/8021q/vlan_dev.c sets the device
//! type "vlan"), the VID and the lower device from `/proc/net/vlan/config` (vlanproc.c writes
//! `NAME | VID | LOWER` a line), the lower device also from the `lower_<name>` link sysfs keeps in
//! the VLAN's directory. A VLAN called `vlan5` is one as much as `enp3s0f0np0.5`; only where the
//! kernel's files say nothing (a capture that kept none of them) is `<port netdev>.<VID>` taken
//! by its name, and said so.

use super::net::{CLASS_NET, is_netdev_name};
use crate::parse::int;
use crate::root::Root;

pub const PROC_VLAN_CONFIG: &str = "/proc/net/vlan/config";

/// A netdev named in the GID table other than the port's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stacked {
    pub name: String,
    pub kind: StackedKind,
    /// The file that told (`/sys/class/net/vlan5/uevent`), or what the judgement rests on.
    pub path: String,
    /// What it said there (`DEVTYPE=vlan`, `VID 5 on enp3s0f0np0`).
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackedKind {
    /// An 802.1Q VLAN: tagged frames. `vid` and `lower` where the kernel's files say them.
    Vlan {
        vid: Option<u16>,
        lower: Option<String>,
        /// Only the name said so (`IF.VID` on the port's netdev): the kernel's files were absent.
        by_name: bool,
    },
    /// The kernel names another type (`DEVTYPE=macvlan`, `bond`, ...) or none: untagged.
    Other(Option<String>),
}

impl Stacked {
    pub fn is_vlan(&self) -> bool {
        matches!(self.kind, StackedKind::Vlan { .. })
    }

    /// `VLAN 5 on enp3s0f0np0 (/sys/class/net/vlan5/uevent: DEVTYPE=vlan)`, for a chain's text.
    pub fn shown(&self) -> String {
        match &self.kind {
            StackedKind::Vlan { vid, lower, .. } => {
                let vid = vid.map(|v| format!(" {v}")).unwrap_or_default();
                let lower = lower
                    .as_ref()
                    .map(|l| format!(" on {l}"))
                    .unwrap_or_default();
                format!("VLAN{vid}{lower} ({}: {})", self.path, self.value)
            }
            StackedKind::Other(t) => format!(
                "{} ({}: {})",
                t.as_deref().unwrap_or("not a VLAN"),
                self.path,
                self.value
            ),
        }
    }
}

/// `/proc/net/vlan/config`: `(name, vid, lower)` a line after its two header lines.
pub fn parse_vlan_config(text: &str) -> Vec<(String, u16, String)> {
    text.lines()
        .filter_map(|l| {
            let mut cols = l.split('|').map(str::trim);
            let (name, vid, lower) = (cols.next()?, cols.next()?, cols.next()?);
            let vid = int::<u16>(vid).filter(|v| *v < 4095)?;
            (is_netdev_name(name) && is_netdev_name(lower))
                .then(|| (name.to_owned(), vid, lower.to_owned()))
        })
        .collect()
}

/// `DEVTYPE=` of a netdev's `uevent`: `Some(None)` when the file reads and names no type.
fn devtype(root: &Root, name: &str) -> Option<(String, Option<String>)> {
    let path = format!("{CLASS_NET}/{name}/uevent");
    let text = root.read_text(&path).ok()?;
    let t = text
        .lines()
        .find_map(|l| l.strip_prefix("DEVTYPE="))
        .map(str::trim)
        .filter(|t| !t.is_empty() && t.len() < 32 && t.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned);
    Some((path, t))
}

/// The `lower_<name>` links of a netdev's directory: the device it is stacked on.
fn lower_link(root: &Root, name: &str) -> Option<String> {
    let names = root.read_dir(&format!("{CLASS_NET}/{name}")).ok()?.names;
    names
        .iter()
        .filter_map(|n| n.strip_prefix("lower_"))
        .find(|l| is_netdev_name(l))
        .map(str::to_owned)
}

/// What each netdev of `names` is, `own` being the port's netdev. `config` is read once per
/// inventory (`None` until asked, then the parsed lines, empty where it cannot be read).
pub fn stacked(
    root: &Root,
    own: Option<&str>,
    names: &[&str],
    config: &mut Option<Vec<(String, u16, String)>>,
) -> Vec<Stacked> {
    let mut out = Vec::new();
    for &name in names {
        if Some(name) == own || out.iter().any(|s: &Stacked| s.name == name) {
            continue;
        }
        let mut proc_line = |root: &Root| {
            config
                .get_or_insert_with(|| {
                    root.read_text(PROC_VLAN_CONFIG)
                        .map(|t| parse_vlan_config(&t))
                        .unwrap_or_default()
                })
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, v, l)| (*v, l.clone()))
        };
        let s = match devtype(root, name) {
            Some((path, Some(t))) if t == "vlan" => {
                let (vid, lower) = match proc_line(root) {
                    Some((v, l)) => (Some(v), Some(l)),
                    None => (None, lower_link(root, name)),
                };
                Stacked {
                    name: name.to_owned(),
                    kind: StackedKind::Vlan {
                        vid,
                        lower,
                        by_name: false,
                    },
                    path,
                    value: "DEVTYPE=vlan".into(),
                }
            }
            Some((path, t)) => Stacked {
                name: name.to_owned(),
                value: t
                    .as_ref()
                    .map(|t| format!("DEVTYPE={t}"))
                    .unwrap_or_else(|| "no DEVTYPE".into()),
                kind: StackedKind::Other(t),
                path,
            },
            // No uevent (a capture that kept none): /proc/net/vlan/config, else the name.
            None => match proc_line(root) {
                Some((v, l)) => Stacked {
                    name: name.to_owned(),
                    value: format!("{name} | {v} | {l}"),
                    kind: StackedKind::Vlan {
                        vid: Some(v),
                        lower: Some(l),
                        by_name: false,
                    },
                    path: PROC_VLAN_CONFIG.into(),
                },
                None => {
                    let vid = own
                        .and_then(|o| name.strip_prefix(o))
                        .and_then(|r| r.strip_prefix('.'))
                        .and_then(int::<u16>);
                    Stacked {
                        name: name.to_owned(),
                        kind: match vid {
                            Some(v) => StackedKind::Vlan {
                                vid: Some(v),
                                lower: own.map(str::to_owned),
                                by_name: true,
                            },
                            None => StackedKind::Other(None),
                        },
                        path: format!("{CLASS_NET}/{name}/uevent"),
                        value: match vid {
                            Some(_) => "absent; a VLAN by its name only".into(),
                            None => "absent".into(),
                        },
                    }
                }
            },
        };
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout net/8021q/vlanproc.c writes (`%-15s| %d  | %s`), under its two header lines.
    #[test]
    fn the_vlan_config_as_the_kernel_writes_it() {
        let text = "VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\nvlan5          | 5  | enp3s0f0np0\nenp3s0f1np1.6  | 6  | enp3s0f1np1\nbad name       | 7  | x\nvlan9          | 4095  | eth0\n";
        assert_eq!(
            parse_vlan_config(text),
            vec![
                ("vlan5".to_owned(), 5, "enp3s0f0np0".to_owned()),
                ("enp3s0f1np1.6".to_owned(), 6, "enp3s0f1np1".to_owned()),
            ]
        );
        assert!(parse_vlan_config("").is_empty());
        assert!(parse_vlan_config("a|b|c\n|||\n").is_empty());
    }
}
