//! Path text as the root keys it: what the resolver and the recording share.

/// `//sys///class/` -> `/sys/class`: one slash between parts, none at the end, `/` for nothing.
pub(super) fn normalise_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for part in path.split('/').filter(|p| !p.is_empty()) {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}
