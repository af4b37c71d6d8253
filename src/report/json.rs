//! `--format json`: the report as documented in docs/report-json.md.

use super::Report;

pub fn render(report: &Report) -> String {
    // Serialising plain data structures cannot fail; a failure would be a bug worth a loud panic
    // in tests, but never on a node: fall back to an error object.
    serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialise report: {e}\"}}"))
        + "\n"
}
