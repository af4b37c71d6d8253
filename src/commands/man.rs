//! The packaging commands: the man pages and the shell completions, generated from the command
//! line itself (cli.rs hands its definition down).

use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// `gdrdoctor man DIR`: a page per command into DIR.
pub fn man(cli: clap::Command, args: &ManArgs) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    clap_mangen::generate_to(cli, dir)
        .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `gdrdoctor completions SHELL`: the script on standard output.
pub fn completions(full: clap::Command, args: &CompletionsArgs) -> ExitCode {
    // clap_complete offers hidden subcommands too; complete only what people type.
    let mut cmd = clap::Command::new("gdrdoctor")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gdrdoctor", &mut script);
    crate::stdio::print_bytes(&script);
    ExitCode::SUCCESS
}
