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
        let live = if c.meta().live_only {
            "  (live only)"
        } else {
            ""
        };
        text += &format!("{:<14} {}{live}\n", c.meta().id, c.meta().title);
        if args.codes {
            for code in c.meta().codes {
                text += &format!("    {:<28} {}\n", code.id, code.summary);
            }
        }
    }
    out!("{text}");
    ExitCode::SUCCESS
}
