//! `gdrdoctor list`: the checks, in the order they run.

use crate::checks;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also list every finding code each check can report.
    #[arg(long)]
    codes: bool,
}

pub fn run(args: &Args) -> ExitCode {
    let mut text = String::new();
    for c in checks::ALL {
        let live = if c.live_only() { "  (live only)" } else { "" };
        text += &format!("{:<14} {}{live}\n", c.id(), c.title());
        if args.codes {
            for code in c.codes() {
                text += &format!("    {:<28} {}\n", code.id, code.summary);
            }
        }
    }
    out!("{text}");
    ExitCode::SUCCESS
}
