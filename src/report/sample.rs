//! The sample window or the baseline in the report: its span and every counter that grew, with
//! both readings (`inventory.sample` in JSON; `gdrdoctor_link_growth` and
//! `gdrdoctor_aer_growth` for Prometheus). Counters that did not move are left out: their
//! values are node_exporter's to export.

use crate::inventory::Inventory;
use crate::model::health::{Sample, SampleKind, growth};
use crate::parse::pci::Bdf;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct SampleSummary {
    /// `window` (`--sample`: the later reading) or `since-last-run` (`--baseline`).
    pub kind: &'static str,
    /// The span, to a tenth of a second (a capture's copy says the same).
    pub seconds: f64,
    pub cut: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    pub ports: Vec<PortGrowth>,
    pub aer: Vec<AerGrowth>,
}

#[derive(Debug, Serialize)]
pub struct PortGrowth {
    pub device: String,
    pub port: u32,
    pub counter: &'static str,
    pub path: String,
    pub before: u64,
    pub after: u64,
}

#[derive(Debug, Serialize)]
pub struct AerGrowth {
    pub bdf: Bdf,
    /// `fatal`, `non-fatal` or `correctable`.
    pub severity: &'static str,
    pub path: String,
    pub before: u64,
    pub after: u64,
}

pub fn summarise(inv: &Inventory, sample: &Sample) -> SampleSummary {
    let ports = inv
        .rdma
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter_map(|(d, p)| {
            let other = sample.port(&d.name, p.num)?;
            let (before, after) = sample.order(&p.counters, other);
            Some(growth(before, after).into_iter().map(move |g| PortGrowth {
                device: d.name.clone(),
                port: p.num,
                counter: g.watched.name,
                path: g.path.clone(),
                before: g.was,
                after: g.now,
            }))
        })
        .flatten()
        .collect();
    let aer = inv
        .pci
        .values()
        .filter_map(|f| Some((f.bdf, &f.detail.as_ref()?.aer)))
        .filter_map(|(bdf, ours)| {
            let other = sample.aer(bdf)?;
            let (before, after) = sample.order(ours, other);
            let grew: Vec<AerGrowth> = before
                .grew(after)
                .into_iter()
                .map(|(severity, b, a, path)| AerGrowth {
                    bdf,
                    severity,
                    path: path.to_owned(),
                    before: b.total,
                    after: a.total,
                })
                .collect();
            Some(grew)
        })
        .flatten()
        .collect();
    let (kind, baseline) = match &sample.kind {
        SampleKind::Window => ("window", None),
        SampleKind::SinceLastRun { path, .. } => ("since-last-run", Some(path.clone())),
    };
    SampleSummary {
        kind,
        seconds: (sample.seconds * 10.0).round() / 10.0,
        cut: sample.cut,
        baseline,
        ports,
        aer,
    }
}

/// A span as a person reads it: `3.0 s`, `12 min`, `2.5 h`, `3.1 days`.
pub fn span(seconds: f64) -> String {
    match seconds {
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        s => format!("{:.1} days", s / 86400.0),
    }
}

impl SampleSummary {
    /// The line the human report opens with: what the counters were judged over.
    pub fn line(&self) -> String {
        let grew = self.ports.len() + self.aer.len();
        let grew = match grew {
            0 => "no counter grew".to_owned(),
            1 => "1 counter grew".to_owned(),
            n => format!("{n} counters grew"),
        };
        let cut = if self.cut {
            " (cut short by --deadline)"
        } else {
            ""
        };
        match &self.baseline {
            None => format!(
                "counters judged over a {} window (--sample: read twice){cut}: {grew}",
                span(self.seconds)
            ),
            Some(path) => format!(
                "counters and the kernel log judged since the last run, {} ago (--baseline {path}): {grew}",
                span(self.seconds)
            ),
        }
    }
}
