//! The one check that every field of a JSON output is documented in docs/*.md.
#![allow(clippy::disallowed_methods)] // tests read the repository's docs, not a node

use serde_json::Value;
use std::collections::BTreeSet;

/// Which fields of a JSON output a document must name, and how it names them.
#[derive(Default)]
pub struct Fields<'a> {
    /// Where the values sit in the whole output (`inventory.gdr_test`); empty for the top.
    pub prefix: &'a str,
    /// Objects whose keys are data (statuses, codes, variable names), by how their path ends:
    /// their keys are named by the placeholder given (`NAME`), or not walked (`None`).
    pub data_keys: &'a [(&'a str, Option<&'a str>)],
    /// Leading parts of a path a document's row may leave out (a check's section names its
    /// findings' fields as `message`, not `checks[].findings[].message`).
    pub short: &'a [&'a str],
    /// The document names keys, not paths: a row may list several (`.product`, `.board`), so a
    /// key in backticks anywhere counts.
    pub keys_only: bool,
}

/// Asserts that `doc` (a path from the repository root) names every field of every value: a
/// field is its path (`a.b[].c`, `[]` for an array's items), named by a table row
/// ``| `a.b[].c` |``. Returns the paths, for a test that also wants to see some were there.
pub fn assert_json_documented(doc: &str, fields: &Fields, values: &[Value]) -> BTreeSet<String> {
    let text = std::fs::read_to_string(super::crate_dir().join(doc))
        .unwrap_or_else(|e| panic!("{doc}: {e}"));
    let mut paths = BTreeSet::new();
    for v in values {
        walk(v, fields.prefix, fields, &mut paths);
    }
    let named = |path: &String| {
        if fields.keys_only {
            let key = path.rsplit('.').next().unwrap().trim_end_matches("[]");
            return text.contains(&format!("`{key}`")) || text.contains(&format!(".{key}`"));
        }
        let row = |p: &str| text.contains(&format!("| `{p}` |"));
        row(path)
            || fields
                .short
                .iter()
                .any(|s| path.strip_prefix(s).is_some_and(row))
    };
    let missing: Vec<&String> = paths.iter().filter(|p| !named(p)).collect();
    assert!(missing.is_empty(), "undocumented in {doc}: {missing:#?}");
    paths
}

fn walk(v: &Value, path: &str, fields: &Fields, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            let data = fields
                .data_keys
                .iter()
                .find(|(end, _)| !path.is_empty() && path.ends_with(end));
            for (k, child) in map {
                let key = match data {
                    Some((_, None)) => continue,
                    Some((_, Some(placeholder))) => *placeholder,
                    None => k.as_str(),
                };
                let p = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                out.insert(p.clone());
                walk(child, &p, fields, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, &format!("{path}[]"), fields, out);
            }
        }
        _ => {}
    }
}
