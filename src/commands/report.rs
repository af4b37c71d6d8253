//! The report of `check` and `gdr-test`: judged, rendered, and written to standard output and
//! to the files `--output` and `--textfile-dir` name.

use super::Formats;
use super::watchdog::{self, Stage, stage};
use crate::checks::{self, Selection};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::Runs;
use crate::report::{self, Format};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

/// Where a report goes besides standard output.
#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// Also write the report in FORMAT to PATH, atomically (a temporary file in the same
    /// directory, then renamed; a device or FIFO is written in place), e.g.
    /// `json:/run/gdrdoctor/report.json`. Repeatable.
    #[arg(long = "output", value_name = "FORMAT:PATH", value_parser = parse_output)]
    pub outputs: Vec<(Format, PathBuf)>,
    /// Also write the Prometheus metrics to DIR/gdrdoctor.prom, atomically, for
    /// node_exporter's textfile collector (--collector.textfile.directory).
    #[arg(long, value_name = "DIR")]
    textfile_dir: Option<PathBuf>,
    /// NFD output: labels expire SECONDS after the run (`# +expiry-time=`), so a node whose
    /// checker stopped does not keep its last verdict. 1 to 31536000 (a year).
    // Bounded: 2^64-1 used to wrap around to a time before the run.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    nfd_expiry: Option<u64>,
}

/// The formats of a check report: `check`, `gdr-test` (and its two-node test, which has no
/// NFD) and their `--output`.
pub const FORMATS: Formats = Formats(&[
    (
        Format::Human,
        "For people: findings, fixes, the verdict last",
    ),
    (
        Format::Json,
        "Everything, as documented in docs/report-json.md",
    ),
    (
        Format::Junit,
        "JUnit XML: a testcase per finding, a testsuite per check",
    ),
    (
        Format::Prometheus,
        "Prometheus text exposition: gdrdoctor_* gauges",
    ),
    (
        Format::Nfd,
        "Node Feature Discovery feature file: gdr.ready=true, gdr.path=dmabuf, ...",
    ),
    (
        Format::Reason,
        "One line: `gdrdoctor: ready` or `gdrdoctor: <blocking codes>` (a drain reason)",
    ),
]);

fn parse_output(s: &str) -> Result<(Format, PathBuf), String> {
    let (format, path) = s.split_once(':').ok_or_else(|| {
        format!("{s:?}: expected FORMAT:PATH, such as json:/run/gdrdoctor/report.json")
    })?;
    let format = FORMATS
        .find(format, true)
        .ok_or_else(|| format!("{format:?} is not a format ({})", FORMATS.names()))?;
    if path.is_empty() {
        return Err(format!("{s:?}: no path after the format"));
    }
    Ok((format, PathBuf::from(path)))
}

/// What the command line asks of the report.
pub struct Wanted<'a> {
    pub format: Format,
    pub output: &'a OutputArgs,
    pub verbose: bool,
    pub strict: bool,
}

/// Runs the checks over the inventory and writes the report: the files first, then standard
/// output. The exit code is the verdict's, or 2 on a ready node whose file was not written.
pub fn write(
    inv: &Inventory,
    runs: &Runs,
    config: &Config,
    selection: &Selection,
    wanted: &Wanted,
    display: String,
) -> anyhow::Result<ExitCode> {
    let Wanted {
        format,
        output,
        verbose,
        strict,
    } = *wanted;
    stage(Stage::Judging);
    let results = checks::run(inv, runs, config, selection);
    let report = report::build(
        inv,
        runs,
        results,
        &report::Options {
            strict,
            root_display: display,
        },
    );
    let (t0, wall) = watchdog::started();
    let run = report::prometheus::Run {
        started_unix_s: wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        duration_s: t0.elapsed().as_secs_f64(),
    };
    let options = report::format::Options {
        verbose,
        run: Some(run),
        nfd_expires: output
            .nfd_expiry
            .map(|s| (run.started_unix_s as u64).saturating_add(s)),
    };
    let mut files: Vec<(Format, PathBuf)> = output.outputs.clone();
    if let Some(dir) = &output.textfile_dir {
        files.push((Format::Prometheus, dir.join("gdrdoctor.prom")));
    }
    watchdog::writing_report();
    let mut failed = false;
    for (f, path) in &files {
        if let Err(e) = crate::output::write_atomic(path, f.render(&report, &options)?.as_bytes()) {
            errln!("gdrdoctor: error: cannot write {}: {e}", path.display());
            failed = true;
        }
    }
    out!("{}", format.render(&report, &options)?);
    crate::trace::mark(|| "report written".into());
    // A file that could not be written never hides "not ready" (a prolog must still drain);
    // on a ready node it is exit 2, so that a unit or a cron job notices the missing file.
    let code = match (failed, report.verdict.exit_code) {
        (true, 0) => {
            errln!(
                "gdrdoctor: the report above is complete; the exit code is 2 because an output file could not be written"
            );
            2
        }
        (_, c) => c,
    };
    Ok(ExitCode::from(code))
}
