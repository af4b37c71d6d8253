//! The report formats: one [`Format`] for every format gdrdoctor writes, and, per document,
//! the one place that says which renderer writes it in each format. A command takes only the
//! formats its documents have; its `--format` parser lists them (commands/):
//!
//! | command                | formats                                       |
//! |------------------------|-----------------------------------------------|
//! | `check`, `gdr-test`    | human, json, junit, prometheus, nfd, reason   |
//! | two-node `gdr-test`    | the same but nfd (refused when asked for)     |
//! | `topo`                 | human, json, svg, dot                         |
//! | `fleet`                | human, json, csv                              |
//! | `nccl explain, verify` | human, json                                   |
//!
//! A new format: its file in report/, a variant here, an arm in each [`Document`] that has it,
//! and its name in the `--format` lists of the commands that offer it.

use super::Report;
use crate::model::twonode;

/// Every format a report is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// For people.
    Human,
    Json,
    /// JUnit XML.
    Junit,
    /// Prometheus text exposition.
    Prometheus,
    /// A Node Feature Discovery feature file.
    Nfd,
    /// One line: a drain reason.
    Reason,
    /// One row per node (`fleet`).
    Csv,
    /// A picture of the PCIe tree (`topo`).
    Svg,
    /// The same picture as Graphviz DOT (`topo`).
    Dot,
}

impl Format {
    /// Its name on the command line: `--format NAME`, `--output NAME:PATH`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Human => "human",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Prometheus => "prometheus",
            Format::Nfd => "nfd",
            Format::Reason => "reason",
            Format::Csv => "csv",
            Format::Svg => "svg",
            Format::Dot => "dot",
        }
    }

    /// `doc` in this format: the one call `check`, `gdr-test` and the two-node test make.
    pub fn render<D: Document + ?Sized>(
        self,
        doc: &D,
        options: &Options,
    ) -> Result<String, Unsupported> {
        doc.render(self, options)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a rendering needs besides the document and its format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Human: the evidence behind every finding (`-v`).
    pub verbose: bool,
    /// Prometheus: when the run started and how long it took.
    pub run: Option<super::prometheus::Run>,
    /// NFD: when the labels expire, in Unix seconds (`--nfd-expiry`).
    pub nfd_expires: Option<u64>,
}

/// A format a document does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported(pub Format);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no {} format", self.0)
    }
}

impl std::error::Error for Unsupported {}

/// A document gdrdoctor writes in the report formats.
pub trait Document {
    fn render(&self, format: Format, options: &Options) -> Result<String, Unsupported>;
}

/// The check report (`check`, `gdr-test`).
impl Document for Report {
    fn render(&self, format: Format, o: &Options) -> Result<String, Unsupported> {
        use super::{human, json, junit, nfd, prometheus, reason};
        Ok(match format {
            Format::Human => human::render(self, &human::Style { verbose: o.verbose }),
            Format::Json => json::render(self),
            Format::Junit => junit::render(self),
            Format::Prometheus => prometheus::render(self, o.run),
            Format::Nfd => nfd::render(self, o.nfd_expires),
            Format::Reason => reason::render(self),
            Format::Csv | Format::Svg | Format::Dot => return Err(Unsupported(format)),
        })
    }
}

/// The two-node test's sessions (one, or a ring's two).
impl Document for [twonode::Report] {
    fn render(&self, format: Format, _: &Options) -> Result<String, Unsupported> {
        use super::twonode as r;
        Ok(match format {
            Format::Human => r::human(self),
            Format::Json => r::json(self),
            Format::Junit => r::junit(self),
            Format::Prometheus => r::prometheus(self),
            Format::Reason => r::reason(self),
            Format::Nfd | Format::Csv | Format::Svg | Format::Dot => {
                return Err(Unsupported(format));
            }
        })
    }
}
