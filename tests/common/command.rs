//! gdrdoctor as the tests run it: one builder for every way a test starts the binary (its
//! arguments and environment, a fixture as its root, the stand-in libraries it loads, the user
//! it runs as, and the bounds a run is held to).
#![allow(clippy::disallowed_methods)] // tests read what a run wrote, not a node

use super::{fixture, home, stub};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A library path that is never there: a library the run must not find.
pub const MISSING: &str = "/nonexistent/gdrdoctor-test/lib.so";

/// The GPU libraries a run loads, each pointed at a stand-in (tests/stubs) or at nothing, so
/// that a machine that happens to have real GPU libraries gives the same answers; and the
/// stand-ins' own settings (`FAKE_*`).
#[derive(Clone)]
pub struct Libs {
    pub nvml: PathBuf,
    pub cuda: PathBuf,
    pub hip: PathBuf,
    pub hsa: PathBuf,
    pub env: Vec<(&'static str, String)>,
}

impl Libs {
    /// No GPU library at all.
    pub fn none() -> Libs {
        Libs {
            nvml: MISSING.into(),
            cuda: MISSING.into(),
            hip: MISSING.into(),
            hsa: MISSING.into(),
            env: Vec::new(),
        }
    }
    /// NVIDIA's: the stand-in NVML and CUDA.
    pub fn nvidia() -> Libs {
        Libs {
            nvml: stub("nvml", &[]),
            cuda: stub("cuda", &[]),
            ..Libs::none()
        }
    }
    /// AMD's: the stand-in HIP and HSA.
    pub fn amd() -> Libs {
        Libs {
            hip: stub("hip", &[]),
            hsa: stub("hsa", &[]),
            ..Libs::none()
        }
    }
    /// A stand-in's setting (`FAKE_NVML_LINKS`, ...) or any other variable for the run.
    pub fn set(mut self, k: &'static str, v: &str) -> Libs {
        self.env.push((k, v.into()));
        self
    }
}

/// The limits a run gets (`setrlimit` in the child) and the bounds it is held to.
struct Bounds {
    wall: Duration,
    rss_mib: u64,
    address_space: Option<u64>,
    cpu: bool,
    /// `Some(None)`: unlimited.
    memlock: Option<Option<u64>>,
}

/// What a bounded run ([`Gdrdoctor::run`]) gave.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Its own peak resident memory, MiB (wait4's ru_maxrss).
    pub rss_mib: u64,
    pub took: Duration,
}

/// One run of gdrdoctor: in the fixtures' [`home()`], with colour off, unless told otherwise.
#[must_use]
pub struct Gdrdoctor {
    args: Vec<OsString>,
    /// Set (`Some`) or removed (`None`), in order.
    env: Vec<(OsString, Option<OsString>)>,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    nobody: bool,
    wall: Option<Duration>,
    bounds: Option<Bounds>,
}

/// `gdrdoctor ARGS`, run to its end: the usual way a test runs it.
pub fn gdrdoctor(args: &[&str]) -> Output {
    Gdrdoctor::new().args(args).output()
}

impl Default for Gdrdoctor {
    fn default() -> Self {
        Self::new()
    }
}

impl Gdrdoctor {
    pub fn new() -> Gdrdoctor {
        Gdrdoctor {
            args: Vec::new(),
            env: vec![
                ("NO_COLOR".into(), Some("1".into())),
                ("CLICOLOR_FORCE".into(), None),
                ("FORCE_COLOR".into(), None),
                // No libefa unless a test gives one (`.lib("EFA", ...)`): the write test asks
                // libefa about a device of unknown driver, and the machine's own must not
                // answer for the stand-in libibverbs' devices.
                ("GDRDOCTOR_LIBEFA".into(), Some(MISSING.into())),
            ],
            stdin: None,
            stdout: None,
            nobody: false,
            wall: None,
            bounds: None,
        }
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.args.push(a.as_ref().to_owned());
        self
    }

    pub fn args<A: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = A>) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--root` the fixture `name` (see [`fixture`]).
    pub fn root(self, name: &str) -> Self {
        self.arg("--root").arg(fixture(name))
    }

    /// `--root` a tree or archive the test made.
    pub fn root_at(self, path: &Path) -> Self {
        self.arg("--root").arg(path)
    }

    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Self {
        self.env
            .push((k.as_ref().to_owned(), Some(v.as_ref().to_owned())));
        self
    }

    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    pub fn env_remove(mut self, k: impl AsRef<OsStr>) -> Self {
        self.env.push((k.as_ref().to_owned(), None));
        self
    }

    /// Library `name` (`GDRDOCTOR_LIB<NAME>`: IBVERBS, CUDA, NVML, HIP, HSA, NCCL) loaded from
    /// `path`: a stand-in ([`stub`]) or [`MISSING`].
    pub fn lib(self, name: &str, path: impl AsRef<OsStr>) -> Self {
        self.env(format!("GDRDOCTOR_LIB{name}"), path)
    }

    /// The GPU libraries of `libs`, and their settings.
    pub fn libs(self, libs: &Libs) -> Self {
        self.lib("NVML", &libs.nvml)
            .lib("CUDA", &libs.cuda)
            .lib("HIP", &libs.hip)
            .lib("HSA", &libs.hsa)
            .envs(libs.env.iter().map(|(k, v)| (k, v)))
    }

    /// The stand-in libibverbs, with its one device `fake0` (tests/stubs/ibverbs.c).
    pub fn verbs(self) -> Self {
        self.lib("IBVERBS", stub("ibverbs", &[]))
    }

    /// The stand-in libibverbs with its device as AWS EFA, `rdmap79s0` (FAKE_IBV_EFA), and the
    /// stand-in libefa (tests/stubs/efa.c).
    pub fn efa(self) -> Self {
        self.verbs()
            .lib("EFA", stub("efa", &[]))
            .env("FAKE_IBV_EFA", "1")
    }

    pub fn stdin(mut self, s: impl Into<Stdio>) -> Self {
        self.stdin = Some(s.into());
        self
    }

    pub fn stdout(mut self, s: impl Into<Stdio>) -> Self {
        self.stdout = Some(s.into());
        self
    }

    /// As root, runs as root without capabilities (setpriv), for the cases about what a user
    /// cannot read: root reads anything. Files to be unreadable get mode 000, which binds both.
    /// As anyone else, runs as that user.
    pub fn unprivileged(mut self) -> Self {
        self.nobody = effective_uid() == 0;
        self
    }

    /// Killed past `wall`, failing the test: a hang (a FIFO read, a link loop) is a failure,
    /// not a stuck test run. Standard output and error go to files, so a large report cannot
    /// block it on a pipe.
    pub fn wall(mut self, wall: Duration) -> Self {
        self.wall = Some(wall);
        self
    }

    /// Held to `wall` and `rss_mib` (its own peak resident memory) by [`Gdrdoctor::run`].
    pub fn within(mut self, wall: Duration, rss_mib: u64) -> Self {
        let b = self.bounds.get_or_insert(Bounds {
            wall,
            rss_mib,
            address_space: None,
            cpu: false,
            memlock: None,
        });
        (b.wall, b.rss_mib) = (wall, rss_mib);
        self
    }

    /// With at most `bytes` of address space (RLIMIT_AS): a run that would grow past it fails
    /// its allocation (and the test) instead of hurting the machine.
    pub fn address_space(mut self, bytes: u64) -> Self {
        self.bounds.as_mut().expect("within() first").address_space = Some(bytes);
        self
    }

    /// With RLIMIT_MEMLOCK at `bytes` (`None`: unlimited), soft and hard: what the rdma-access
    /// check judges. Only root may raise it.
    pub fn memlock(mut self, bytes: Option<u64>) -> Self {
        self.bounds.as_mut().expect("within() first").memlock = Some(bytes);
        self
    }

    /// With a CPU-time limit (RLIMIT_CPU) a second past the wall bound.
    pub fn cpu_limit(mut self) -> Self {
        self.bounds.as_mut().expect("within() first").cpu = true;
        self
    }

    /// The command, for a test that starts and talks to the process itself (pipes, signals).
    pub fn command(self) -> Command {
        self.into_command(&[])
    }

    /// The command, run by `runner` (the bounded run's) when that is not empty.
    fn into_command(self, runner: &[OsString]) -> Command {
        let mut argv: Vec<OsString> = runner.to_vec();
        if self.nobody {
            // Root without its capabilities: no CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH, so a
            // file of mode 000 is as unreadable to it as to any user. Not another user: the
            // checkout may sit in a home directory of mode 0700, and a chroot's own / may be
            // 0700 too (../shared/fresh/fresh-debian.sh's), where nobody cannot even load libc
            // (issue 41: "libgcc_s.so.1: Permission denied").
            argv.extend(["setpriv", "--bounding-set=-all", "--inh-caps=-all"].map(Into::into));
        }
        argv.push(env!("CARGO_BIN_EXE_gdrdoctor").into());
        argv.extend(self.args);
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]).current_dir(home());
        for (k, v) in &self.env {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(s) = self.stdin {
            c.stdin(s);
        }
        if let Some(s) = self.stdout {
            c.stdout(s);
        }
        c
    }

    /// Runs it to its end (killed past [`Gdrdoctor::wall`] if set, failing the test).
    pub fn output(self) -> Output {
        match self.wall {
            None => self.command().output().expect("run gdrdoctor"),
            Some(wall) => self.output_within(wall),
        }
    }

    /// [`Gdrdoctor::output`] after [`Gdrdoctor::unprivileged`]: `None` (and a line on standard
    /// error) where setpriv could not run it (not installed, or not allowed to change user).
    pub fn try_output(self) -> Option<Output> {
        let nobody = self.nobody;
        let out = self.output_or_none();
        if out.is_none() && nobody {
            eprintln!("setpriv unavailable: permission case not exercised as root");
        }
        out
    }

    fn output_or_none(self) -> Option<Output> {
        let nobody = self.nobody;
        let out = match self.wall {
            None => self.command().output().ok()?,
            Some(wall) => self.output_within(wall),
        };
        let setpriv_failed = nobody && out.stderr.starts_with(b"setpriv:");
        (out.status.code().is_some() && !setpriv_failed).then_some(out)
    }

    fn output_within(mut self, wall: Duration) -> Output {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
        self.stdin.get_or_insert_with(Stdio::null);
        self.stdout
            .get_or_insert_with(|| std::fs::File::create(&out).unwrap().into());
        let mut c = self.command();
        c.stderr(std::fs::File::create(&err).unwrap());
        let mut child = c.spawn().expect("run gdrdoctor");
        let end = Instant::now() + wall;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{c:?} still ran after {wall:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            status,
            stdout: std::fs::read(&out).unwrap_or_default(),
            stderr: std::fs::read(&err).unwrap(),
        }
    }

    /// Runs it held to its bounds ([`Gdrdoctor::within`]), measured: fails the test on a signal
    /// (a crash, or a limit), a panic, a run past the wall bound (killed there) or over the
    /// memory bound. Standard output and error go to files (a pipe nobody reads could stall it).
    pub fn run(mut self) -> Ran {
        let bounds = self.bounds.take().expect("a bounded run needs within()");
        let shown = self.shown_args();
        let dir = tempfile::tempdir().unwrap();
        let (out, err, report) = (
            dir.path().join("stdout"),
            dir.path().join("stderr"),
            dir.path().join("report"),
        );
        let mut runner: Vec<OsString> = vec![
            python3().into(),
            super::crate_dir().join("tests/common/bounded.py").into(),
            "--report".into(),
            report.clone().into(),
            "--wall".into(),
            bounds.wall.as_secs_f64().to_string().into(),
        ];
        if let Some(bytes) = bounds.address_space {
            runner.extend(["--address-space".into(), bytes.to_string().into()]);
        }
        if bounds.cpu {
            runner.extend([
                "--cpu".into(),
                (bounds.wall.as_secs() + 1).to_string().into(),
            ]);
        }
        if let Some(limit) = bounds.memlock {
            let limit = limit.map_or("unlimited".to_owned(), |b| b.to_string());
            runner.extend(["--memlock".into(), limit.into()]);
        }
        runner.push("--".into());
        self.stdin.get_or_insert_with(Stdio::null);
        self.stdout = Some(std::fs::File::create(&out).unwrap().into());
        let status = self
            .into_command(&runner)
            .stderr(std::fs::File::create(&err).unwrap())
            .status()
            .expect("python3 runs tests/common/bounded.py");
        let stdout = String::from_utf8_lossy(&std::fs::read(&out).unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&std::fs::read(&err).unwrap()).into_owned();
        let line = std::fs::read_to_string(&report)
            .unwrap_or_else(|e| panic!("bounded.py ({status}) left no report ({e}):\n{stderr}"));
        let f: Vec<&str> = line.split_whitespace().collect();
        let (wait_status, maxrss_kib, secs, killed): (i32, u64, f64, bool) = (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3] == "1",
        );
        let head = |s: &str| s.chars().take(4000).collect::<String>();
        assert!(
            !killed,
            "{shown:?} did not end within {:?}; stderr:\n{}",
            bounds.wall,
            head(&stderr)
        );
        assert!(
            libc::WIFEXITED(wait_status),
            "{shown:?} was killed by signal {} (a crash, or a limit: {:?} bytes of address space); stderr:\n{}",
            libc::WTERMSIG(wait_status),
            bounds.address_space,
            head(&stderr)
        );
        let code = libc::WEXITSTATUS(wait_status);
        assert!(
            code != 101 && !stderr.contains("panicked at"),
            "{shown:?} panicked:\n{}",
            head(&stderr)
        );
        let rss_mib = maxrss_kib / 1024;
        assert!(
            rss_mib <= bounds.rss_mib,
            "{shown:?} held {rss_mib} MiB, over the {} MiB bound",
            bounds.rss_mib
        );
        Ran {
            code,
            stdout,
            stderr,
            rss_mib,
            took: Duration::from_secs_f64(secs),
        }
    }

    /// The arguments as a person can read them in a failure: some are 100 KB long.
    fn shown_args(&self) -> Vec<String> {
        self.args
            .iter()
            .map(|a| {
                let a = a.to_string_lossy();
                match a.char_indices().nth(120) {
                    Some((cut, _)) => format!("{}... ({} bytes)", &a[..cut], a.len()),
                    None => a.into_owned(),
                }
            })
            .collect()
    }
}

/// python3 from this process's PATH (a test may give gdrdoctor a PATH of its own).
fn python3() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
        .expect("python3 (tests/common/bounded.py runs the bounded cases)")
}

/// The effective user, from /proc/self/status (no libc call needed in a test).
pub fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    uid.split_whitespace().nth(2).unwrap().parse().unwrap()
}
