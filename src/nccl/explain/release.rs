//! Which NCCL wrote a node's lines, and how that release numbers GPU-NIC distances: the same
//! number is a different level in different releases (`nccl::levels`).

use super::collector::{GpuAcc, NodeAcc};
use crate::model::nccl::explain::NcclVersion;
use crate::nccl::levels::{self, Table};
use crate::parse::nccl_log::{Era, Version};

/// What is known of a node's NCCL release.
#[derive(Debug, Clone, Copy)]
pub(super) enum Known {
    Exact(Version),
    Range(Era),
    Unknown,
}

impl Known {
    pub(super) fn era(self) -> Era {
        match self {
            Known::Exact(v) => Era::new(v, Version::new(v.major, v.minor, v.patch + 1)),
            Known::Range(e) => e,
            Known::Unknown => Era::ANY,
        }
    }

    /// Definitely older than 2.x.0?
    pub(super) fn before(self, minor: u16) -> bool {
        self.era().until <= Version::new(2, minor, 0)
    }

    /// Definitely 2.x.0 or later?
    pub(super) fn since(self, minor: u16) -> bool {
        self.era().from >= Version::new(2, minor, 0)
    }

    pub(super) fn describe(self) -> String {
        match self {
            Known::Exact(v) => format!("NCCL {v}"),
            Known::Range(e) => format!("NCCL {e}"),
            Known::Unknown => "this NCCL".to_owned(),
        }
    }
}

/// The node's release; `bare_rccl`: the version line without a host was RCCL's banner.
pub(super) fn version_of(
    acc: &NodeAcc,
    bare: &Option<(Version, String)>,
    bare_rccl: bool,
) -> (Known, NcclVersion) {
    let library = if acc.rccl || (bare_rccl && acc.versions.is_empty()) {
        "RCCL"
    } else {
        "NCCL"
    };
    let all: Vec<String> = if acc.versions.len() > 1 {
        acc.versions.values().cloned().collect()
    } else {
        Vec::new()
    };
    if let Some((v, text)) = acc.versions.iter().next() {
        return (
            Known::Exact(*v),
            NcclVersion {
                library,
                version: Some(text.clone()),
                source: "log",
                range: None,
                all,
            },
        );
    }
    if let Some((v, text)) = bare {
        return (
            Known::Exact(*v),
            NcclVersion {
                library,
                version: Some(text.clone()),
                source: "log-unprefixed",
                range: None,
                all,
            },
        );
    }
    match acc.era {
        Some(e) if !acc.era_conflict => (
            Known::Range(e),
            NcclVersion {
                library,
                version: None,
                source: "wording",
                range: Some(e.to_string()),
                all,
            },
        ),
        _ => (
            Known::Unknown,
            NcclVersion {
                library,
                version: None,
                source: "unknown",
                range: None,
                all,
            },
        ),
    }
}

/// A level NCCL printed as a number, with the name the environment gave it
/// (`NCCL_NET_GDR_LEVEL set by environment to PHB`), tells the numbering, hence the releases:
/// PHB is 4 only in 2.6-2.7.
pub(super) fn narrow_by_level(acc: &NodeAcc, known: Known) -> Known {
    let Known::Range(era) = known else {
        return known;
    };
    let Some(name) = acc.env.get("NCCL_NET_GDR_LEVEL") else {
        return known;
    };
    let mut narrowed: Option<Era> = None;
    for t in levels::tables(era) {
        if acc
            .gpus
            .values()
            .all(|g| t.name(g.level) == Some(name.as_str()))
            && !acc.gpus.is_empty()
        {
            let fit = t.era.intersect(era).unwrap_or(t.era);
            narrowed = Some(match narrowed {
                None => fit,
                Some(n) => Era::new(n.from.min(fit.from), n.until.max(fit.until)),
            });
        }
    }
    narrowed.map(Known::Range).unwrap_or(known)
}

/// The names a distance number may have: one, or several with the releases of each.
pub(super) fn names(tables: &[&'static Table], n: u32) -> String {
    let mut by_name: Vec<(&str, Era)> = Vec::new();
    for t in tables {
        let name = t.name(n).unwrap_or("?");
        match by_name.iter_mut().find(|(x, _)| *x == name) {
            Some((_, e)) => {
                e.from = e.from.min(t.era.from);
                e.until = e.until.max(t.era.until);
            }
            None => by_name.push((name, t.era)),
        }
    }
    match by_name.as_slice() {
        [] => "?".to_owned(),
        [(name, _)] => (*name).to_owned(),
        many => many
            .iter()
            .map(|(name, e)| format!("{name} in NCCL {e}"))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// The numberings a decision may be read in, and whether that rests on assuming NCCL's default
/// level. The environment's level name, when the log has it, picks the numbering.
pub(super) fn tables_for(acc: &NodeAcc, known: Known, g: &GpuAcc) -> (Vec<&'static Table>, bool) {
    let era = if g.inclusive {
        known
            .era()
            .intersect(Era::new(Version::new(2, 0, 0), Version::new(2, 6, 0)))
    } else {
        known
            .era()
            .intersect(Era::new(Version::new(2, 6, 0), Version::new(99, 0, 0)))
    }
    .unwrap_or(known.era());
    let all = levels::tables(era);
    if all.len() <= 1 {
        return (all, false);
    }
    if let Some(name) = acc.env.get("NCCL_NET_GDR_LEVEL") {
        let fit: Vec<_> = all
            .iter()
            .copied()
            .filter(|t| t.name(g.level) == Some(name.as_str()))
            .collect();
        if !fit.is_empty() {
            return (fit, false);
        }
        return (all, false);
    }
    let fit: Vec<_> = all
        .iter()
        .copied()
        .filter(|t| t.name(g.level) == Some(t.default_level) && t.name(g.distance).is_some())
        .collect();
    if fit.is_empty() {
        (all, false)
    } else {
        (fit, true)
    }
}

pub(super) fn level_source(acc: &NodeAcc, tables: &[&'static Table], g: &GpuAcc) -> &'static str {
    if acc.env.contains_key("NCCL_NET_GDR_LEVEL") {
        "environment"
    } else if tables
        .iter()
        .all(|t| t.name(g.level) == Some(t.default_level))
    {
        "default"
    } else {
        "not-default"
    }
}
