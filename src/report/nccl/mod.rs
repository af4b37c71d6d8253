//! What the NCCL commands print: `nccl explain` ([`explain`]), `nccl verify` ([`verify`]) and
//! `gdrdoctor nccl`'s settings ([`settings`]), for people and as JSON. The analysis they print
//! is `crate::nccl`'s; nothing here decides anything.

pub mod explain;
pub mod settings;
pub mod verify;

use crate::nccl::explain::See;
use std::fmt::Write;

/// `0-3,8,10-11`.
fn ranges(v: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if end == start {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{end}");
        }
        i += 1;
    }
    out
}

fn sees(s: &[See]) -> String {
    s.iter()
        .map(|x| format!("{} ({})", x.check, x.code))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A document as pretty JSON with a final newline; an error (none is expected) as a JSON object.
pub(super) fn pretty_json<T: serde::Serialize>(doc: &T) -> String {
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_else(|err| {
        format!(
            "{{\"error\": {}}}",
            serde_json::Value::String(err.to_string())
        )
    });
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[5]), "5");
    }
}
