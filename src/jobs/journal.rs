//! The journal file: JSON lines appended by the Epilogs of jobs that end at once on a node, and
//! read back by `gdrdoctor jobs`.
//!
//! Appending takes an exclusive `flock` on the file, so that lines never interleave; a line that
//! could not be written whole (a full disk) is cut off again, so that the file stays lines of
//! JSON; a journal past its size limit is moved to `FILE.1` (replacing the one before) under the
//! lock, so that the journal takes at most twice the limit on disk.

use crate::model::jobs::{JobRecord, SCHEMA};
use std::io::{self, BufRead as _, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long an append waits for another Epilog's.
const LOCK_WAIT: Duration = Duration::from_secs(10);
/// The longest line read back: a line is at most MAX_RANKS ranks of a few hundred bytes.
pub const MAX_LINE: usize = 4 << 20;

/// What an append did.
#[derive(Debug, Default)]
pub struct Appended {
    /// The previous journal was moved to this path first.
    pub rotated: Option<PathBuf>,
    /// The recent jobs' file could not be rewritten (the line is in the journal all the same).
    pub recent_error: Option<io::Error>,
}

/// Adds `record` to the recent jobs' file at `path` (the last [`RECENT_MAX`], newest last); a
/// file that is not one (or is too large) is started again.
fn update_recent(path: &Path, record: &JobRecord) -> io::Result<()> {
    use crate::model::jobs::{RECENT_MAX, RECENT_SCHEMA, RecentFile, RecentJob, SCHEMA_VERSION};
    let mut jobs = crate::input::read(path, 1 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice::<RecentFile>(&b).ok())
        .filter(|f| f.schema == RECENT_SCHEMA)
        .map(|f| f.jobs)
        .unwrap_or_default();
    // The same job again (an Epilog run twice) replaces its line.
    jobs.retain(|j| j.job != record.job);
    jobs.push(RecentJob::from(record));
    let drop = jobs.len().saturating_sub(RECENT_MAX);
    jobs.drain(..drop);
    let file = RecentFile {
        schema: RECENT_SCHEMA.to_owned(),
        schema_version: SCHEMA_VERSION,
        jobs,
    };
    let mut text = serde_json::to_vec_pretty(&file).map_err(io::Error::other)?;
    text.push(b'\n');
    crate::output::write_atomic(path, &text)
}

fn open(path: &Path) -> io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    crate::sys::fd::set_blocking(&f)?;
    Ok(f)
}

/// Appends `record` as one line to the journal at `path`, moving a journal of `max_bytes` or
/// more to `path.1` first; with `recent`, rewrites that file with the node's last jobs (the
/// `job-history` check's), under the same lock.
#[allow(clippy::disallowed_methods)] // the operator's journal, not the node's files
pub fn append(
    path: &Path,
    record: &JobRecord,
    max_bytes: u64,
    recent: Option<&Path>,
) -> io::Result<Appended> {
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut done = Appended::default();
    for _ in 0..8 {
        let mut f = open(path)?;
        if !crate::sys::dir::lock_exclusive(&f, LOCK_WAIT)? {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "another process held the journal's lock for {} s",
                    LOCK_WAIT.as_secs()
                ),
            ));
        }
        // Moved aside while this one waited for the lock: append to the new one.
        let meta = f.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(now) if now.ino() == meta.ino() && now.dev() == meta.dev() => {}
            _ => continue,
        }
        if meta.len() > 0 && meta.len() + line.len() as u64 > max_bytes {
            let mut old = path.as_os_str().to_owned();
            old.push(".1");
            let old = PathBuf::from(old);
            std::fs::rename(path, &old)?;
            done.rotated = Some(old);
            f = open(path)?;
            crate::sys::dir::lock_exclusive(&f, LOCK_WAIT)?;
        }
        let at = f.metadata()?.len();
        if let Err(e) = f.write_all(&line).and_then(|()| f.flush()) {
            // Never half a line: the next one must start a line of its own.
            let _ = f.set_len(at);
            return Err(e);
        }
        if let Some(r) = recent {
            done.recent_error = update_recent(r, record).err();
        }
        return Ok(done);
    }
    Err(io::Error::other(
        "the journal was moved aside eight times while waiting for it",
    ))
}

/// One line of a journal, or why it is not one.
pub enum Line {
    Record(Box<JobRecord>),
    /// `FILE:LINE: why`.
    Malformed(String),
}

/// Reads the journal at `path` line by line (gzip is not read: rotate with `FILE.1`), handing
/// each to `each`; lines longer than [`MAX_LINE`] are malformed, never held whole.
pub fn read(path: &Path, mut each: impl FnMut(Line)) -> io::Result<()> {
    let input = crate::input::open(path).map_err(io::Error::other)?;
    let mut r = io::BufReader::with_capacity(256 * 1024, input);
    let name = crate::sanitize::text(&path.to_string_lossy()).into_owned();
    let mut buf = Vec::new();
    let mut no = 0u64;
    loop {
        buf.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(());
        }
        no += 1;
        if buf.len() > MAX_LINE && !buf.ends_with(b"\n") {
            // Skip the rest of the long line.
            loop {
                let avail = r.fill_buf()?;
                if avail.is_empty() {
                    break;
                }
                match memchr::memchr(b'\n', avail) {
                    Some(i) => {
                        r.consume(i + 1);
                        break;
                    }
                    None => {
                        let l = avail.len();
                        r.consume(l);
                    }
                }
            }
            each(Line::Malformed(format!(
                "{name}:{no}: a line longer than {MAX_LINE} bytes"
            )));
            continue;
        }
        let text = buf.trim_ascii();
        if text.is_empty() {
            continue;
        }
        match serde_json::from_slice::<JobRecord>(text) {
            Ok(rec) if rec.schema == SCHEMA => each(Line::Record(Box::new(rec))),
            Ok(rec) => each(Line::Malformed(format!(
                "{name}:{no}: schema {:?}, not {SCHEMA}",
                crate::sanitize::cut(&rec.schema, 40)
            ))),
            Err(e) => each(Line::Malformed(format!("{name}:{no}: {e}"))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a scratch directory, not a node
mod tests {
    use super::*;

    fn rec(job: &str) -> JobRecord {
        let line = format!(
            r#"{{"schema":"gdrdoctor.job","schema_version":1,"time":1,"job":"{job}","user":null,"node":"n","job_nodes":null,"status":"gdr","summary":"","nccl":null,"connections":{{"net":1,"gdr":1,"no_gdr":0}},"ranks":[],"ranks_more":0,"causes":[],"env":{{}},"logs":{{"files":1,"bytes":1,"lines":1,"nccl_lines":1,"cut":false,"refused":[],"removed":true}},"predicted":null,"contradicted":false}}"#
        );
        serde_json::from_str(&line).unwrap()
    }

    #[test]
    fn appends_whole_lines_and_rotates_at_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join("jobs.jsonl");
        let recent = d.path().join("recent.json");
        append(&j, &rec("1"), 1 << 20, Some(&recent)).unwrap();
        append(&j, &rec("2"), 1 << 20, Some(&recent)).unwrap();
        append(&j, &rec("2"), 1 << 20, Some(&recent)).unwrap();
        let r: crate::model::jobs::RecentFile =
            serde_json::from_slice(&std::fs::read(&recent).unwrap()).unwrap();
        let ids: Vec<&str> = r.jobs.iter().map(|j| j.job.as_str()).collect();
        assert_eq!(ids, ["1", "2"]);
        let size = std::fs::metadata(&j).unwrap().len();
        // Past the limit: the journal moves to .1, the new line starts a new one.
        let a = append(&j, &rec("3"), size + 10, None).unwrap();
        assert_eq!(
            a.rotated.as_deref(),
            Some(d.path().join("jobs.jsonl.1").as_path())
        );
        let mut jobs = Vec::new();
        for p in [d.path().join("jobs.jsonl.1"), j.clone()] {
            read(&p, |l| match l {
                Line::Record(r) => jobs.push(r.job),
                Line::Malformed(m) => panic!("{m}"),
            })
            .unwrap();
        }
        assert_eq!(jobs, ["1", "2", "2", "3"]);
        // A link in the journal's place is not followed.
        let link = d.path().join("link.jsonl");
        std::os::unix::fs::symlink(d.path().join("elsewhere"), &link).unwrap();
        assert!(append(&link, &rec("4"), 1 << 20, None).is_err());
        assert!(!d.path().join("elsewhere").exists());
    }

    #[test]
    fn reading_says_which_lines_are_not_records() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join("j");
        let good = serde_json::to_string(&rec("7")).unwrap();
        let long = "x".repeat(MAX_LINE + 5);
        std::fs::write(
            &j,
            format!("{good}\nnot json\n\n{long}\n{{\"schema\":\"other\"}}\n{good}"),
        )
        .unwrap();
        let mut seen = Vec::new();
        read(&j, |l| match l {
            Line::Record(r) => seen.push(format!("job {}", r.job)),
            Line::Malformed(m) => seen.push(m.rsplit(": ").last().unwrap_or("").to_owned()),
        })
        .unwrap();
        assert_eq!(seen.len(), 5, "{seen:?}");
        assert_eq!(seen[0], "job 7");
        assert_eq!(seen[4], "job 7");
        assert!(seen[1].ends_with(":2"), "{seen:?}");
        assert!(seen[2].ends_with(":4"), "{seen:?}");
    }
}
