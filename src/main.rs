use std::process::ExitCode;

fn main() -> ExitCode {
    match gdrdoctor_cli::run() {
        Ok(code) => code,
        Err(e) => {
            // The whole chain: "cannot open root: fixtures/x: No such file or directory".
            eprintln!("gdrdoctor: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[path = "cli.rs"]
mod gdrdoctor_cli;
