#![deny(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    gdrdoctor::trace::start();
    let code = match gdrdoctor::cli::run() {
        Ok(code) => code,
        Err(e) => {
            // The whole chain: "cannot open root: fixtures/x: No such file or directory". One
            // line: what it quotes (a path, a node list, a peer's reason) cannot start another.
            gdrdoctor::stdio::eprintln(&format!(
                "gdrdoctor: error: {}",
                gdrdoctor::sanitize::text(&format!("{e:#}"))
            ));
            ExitCode::from(2)
        }
    };
    match gdrdoctor::stdio::failure() {
        None => code,
        Some(e) => {
            gdrdoctor::stdio::eprintln(&format!(
                "gdrdoctor: error: cannot write to standard output: {e}"
            ));
            // As with a report file that cannot be written: a lost report is "could not run",
            // but it never hides "not ready" (a prolog must still drain the node).
            if code == ExitCode::from(1) {
                code
            } else {
                ExitCode::from(2)
            }
        }
    }
}
