//! `gdrdoctor nccl`: the settings that follow from the node, as environment exports and an
//! /etc/nccl.conf body, each with the evidence it came from.

use crate::inventory::Inventory;
use crate::nccl::Setting;
use std::fmt::Write;

fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\'', r"'\''"))
}

/// Environment exports, then an /etc/nccl.conf body. Where a file NCCL reads could not be read
/// (issue 25: an /etc/nccl.conf that is a directory, a FIFO or too big), it says so first, and
/// an unreadable /etc/nccl.conf gets no body to replace it, only the lines to add by hand.
pub fn render(
    inv: &Inventory,
    settings: &[Setting],
    release: &crate::nccl::Release,
    root: &str,
) -> String {
    let mut o = String::new();
    let host = inv
        .kernel
        .hostname
        .as_deref()
        .unwrap_or("(hostname unknown)");
    let _ = writeln!(
        o,
        "# NCCL settings for {} from gdrdoctor {} ({root})",
        crate::sanitize::text(host),
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        o,
        "# Each line says what it came from; settings the node does not need are left out, with why."
    );
    let _ = writeln!(o, "# {}", crate::sanitize::text(&release.describe()));
    let unread = crate::nccl::unread(inv);
    for (path, why) in &unread {
        let _ = writeln!(
            o,
            "# WARNING: NCCL reads {}, and gdrdoctor cannot: {}. What it sets is unknown: the settings below may repeat or contradict it (gdrdoctor check --select nccl-config)",
            crate::fixscript::comment(path),
            crate::fixscript::comment(why)
        );
    }
    let etc_unread = unread
        .iter()
        .any(|(p, _)| p == crate::inventory::nccl::ETC_CONF);
    let _ = writeln!(
        o,
        "\n# --- environment (a job script, or the Slurm TaskProlog)"
    );
    for s in settings {
        for w in &s.why {
            let _ = writeln!(o, "# {}: {}", s.name, crate::sanitize::text(w));
        }
        match &s.value {
            // A value is made of names read off the node (NIC names): through the one
            // sanitizer too, as the comments are (a capture's names are untrusted).
            Some(v) => {
                let _ = writeln!(o, "export {}={}", s.name, quote(&crate::sanitize::text(v)));
            }
            None => {
                let _ = writeln!(o, "# {} not set", s.name);
            }
        }
    }
    let _ = writeln!(
        o,
        "\n# --- /etc/nccl.conf (read by every NCCL job on the node; the environment overrides it)"
    );
    if etc_unread {
        let _ = writeln!(
            o,
            "# Not a file to write: /etc/nccl.conf is there and gdrdoctor cannot read it. Add these lines to it by hand, where they do not contradict what it sets:"
        );
    }
    let prefix = if etc_unread { "# " } else { "" };
    for s in settings {
        if let Some(v) = &s.value {
            let _ = writeln!(o, "{prefix}{}={}", s.name, crate::sanitize::text(v));
        }
    }
    o
}
