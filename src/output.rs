//! Writing a report file so that a reader never sees half of it: node_exporter's textfile
//! collector, an NFD worker or a prolog may read it at any moment.

use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory (named so that no
/// collector picks it up: `.NAME.tmp.PID`), flushed to disk, then renamed over `path`. The
/// directory must exist. Mode 0644.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a scratch directory, not a node
mod tests {
    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gdrdoctor.prom");
        super::write_atomic(&p, b"a 1\n").unwrap();
        super::write_atomic(&p, b"a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("gdrdoctor.prom")]);
        let err = super::write_atomic(&dir.path().join("missing/x"), b"").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
