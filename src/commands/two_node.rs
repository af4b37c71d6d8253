//! `gdr-test --listen | --peer | --slurm`: the write test between two nodes (docs/two-node.md).

use super::report::OutputArgs;
use super::watchdog::{Stage, stage, stage_on};
use crate::config::Config;
use crate::gdr::wire;
use crate::parse::slurm;
use crate::probe;
use crate::probe::twonode;
use crate::report::{self, Format, format::Unsupported};
use crate::root::Root;
use anyhow::bail;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Between two nodes (docs/two-node.md): one side `--listen`, the other `--peer`, or both
/// `--slurm` under srun.
#[derive(clap::Args, Debug)]
pub struct TwoNodeArgs {
    /// Wait for one peer on ADDR:PORT (default 0.0.0.0:18516), test with it, and end.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["peer", "slurm"])]
    pub listen: Option<String>,
    /// Test with the node listening at HOST[:PORT].
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "slurm")]
    pub peer: Option<String>,
    /// Pair the tasks of a Slurm step (SLURM_PROCID, SLURM_JOB_NODELIST): task 0 listens,
    /// task 1 connects; with more tasks, a ring.
    #[arg(long)]
    pub slurm: bool,
    /// The shared secret, the same file on both nodes (at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The shared secret on the command line (visible in ps: for tests).
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// The rails in order, this node's NICs (default: NCCL_IB_HCA's order, else by name);
    /// rail i is paired with the peer's rail i.
    #[arg(long, value_name = "NIC[:PORT],...", value_delimiter = ',')]
    pub rails: Vec<crate::probe::gdr_test::NicArg>,
    /// How long to wait for the peer to connect or to listen, seconds (0 to 86400).
    // Bounded like --deadline: 2^64-1 used to panic adding it to the clock (issue 25).
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub wait: u64,
}

/// What the two-node test takes of `gdr-test`'s arguments.
pub(super) struct Request<'a> {
    pub two_node: &'a TwoNodeArgs,
    pub memory: Option<crate::gdr::Memory>,
    pub nics: Vec<crate::probe::gdr_test::NicArg>,
    pub gid_index: Option<u32>,
    pub size: u64,
    pub iters: u32,
    pub duration_ms: u64,
    pub format: Format,
    pub output: &'a OutputArgs,
}

pub(super) fn run(config: &Config, root: &Root, args: &Request) -> anyhow::Result<ExitCode> {
    let t = &args.two_node;
    let token = token(t)?;
    let sessions = sessions(t)?;
    let (inv, _) = super::load_node(root, config, probe::Options::default());
    let opts = crate::probe::gdr_test::Options {
        memory: args.memory,
        nics: args.nics.clone(),
        gid_index: args.gid_index,
        ..crate::probe::gdr_test::Options::default()
    };
    let order = if t.rails.is_empty() {
        twonode::nccl_order(std::env::var("NCCL_IB_HCA").ok().as_deref())
            .map_err(|e| anyhow::anyhow!(e))?
    } else {
        t.rails.clone()
    };
    let test = Test {
        rails: twonode::rails(&inv, &opts, &order),
        settings: twonode::Settings {
            size: args.size,
            iters: args.iters,
            duration_ms: args.duration_ms,
            rail_timeout_ms: (config.timeouts.gdr_pair_s * 3000.0) as u64,
            ..twonode::Settings::default()
        },
        host: inv
            .kernel
            .hostname
            .clone()
            .unwrap_or_else(|| "this node".into()),
        token,
        wait: std::time::Duration::from_secs(t.wait),
    };
    let reports = test.run(&sessions);
    write(&reports, args)
}

/// The shared secret: a small private regular file, read within a bound (wire::token_file), or
/// the command line's.
fn token(t: &TwoNodeArgs) -> anyhow::Result<Vec<u8>> {
    Ok(match (&t.token_file, &t.token) {
        (Some(path), _) => {
            stage_on(Stage::ReadingTokenFile, path.display().to_string());
            wire::token_file(path)
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))?
        }
        (None, Some(tok)) => {
            wire::token(tok.as_bytes()).map_err(|e| anyhow::anyhow!("--token: {e}"))?
        }
        (None, None) => bail!(
            "the two-node test needs the token both nodes share: --token-file FILE, readable by its owner only (e.g. `(umask 077; head -c 32 /dev/urandom | base64 > FILE)` on a shared filesystem)"
        ),
    })
}

/// Who to talk to: (role, address) per session; a ring has two.
fn sessions(t: &TwoNodeArgs) -> anyhow::Result<Vec<(twonode::Role, String)>> {
    let mut sessions = Vec::new();
    if t.slurm {
        let p = slurm::pairing(&|k| std::env::var(k).ok(), twonode::DEFAULT_PORT)
            .map_err(|e| anyhow::anyhow!("--slurm: {e}"))?;
        if let Some(port) = p.listen {
            sessions.push((twonode::Role::Listener, format!("0.0.0.0:{port}")));
        }
        if let Some((host, port)) = p.peer {
            sessions.push((twonode::Role::Connector, format!("{host}:{port}")));
        }
    } else if let Some(l) = &t.listen {
        sessions.push((twonode::Role::Listener, twonode::listen_addr(Some(l))));
    } else if let Some(p) = &t.peer {
        sessions.push((twonode::Role::Connector, twonode::peer_addr(p)));
    }
    Ok(sessions)
}

/// What every session of this node tests.
struct Test {
    rails: Vec<twonode::Rail>,
    settings: twonode::Settings,
    host: String,
    token: Vec<u8>,
    wait: std::time::Duration,
}

impl Test {
    /// Runs the sessions, those of a ring at the same time (each waits for the other node's).
    fn run(&self, sessions: &[(twonode::Role, String)]) -> Vec<twonode::Report> {
        // Waiting for the peer, named (`to connect to 0.0.0.0:18516`, `at node-b:18516`), until
        // every session has its channel (or gave up): then the test itself.
        let on: Vec<String> = sessions
            .iter()
            .map(|(role, addr)| match role {
                twonode::Role::Listener => format!("to connect to {addr}"),
                twonode::Role::Connector => format!("at {addr}"),
            })
            .collect();
        stage_on(Stage::WaitingForPeer, on.join(" and "));
        let waiting = AtomicUsize::new(sessions.len());
        std::thread::scope(|scope| {
            let handles: Vec<_> = sessions
                .iter()
                .map(|(role, addr)| {
                    let waiting = &waiting;
                    scope.spawn(move || self.session(*role, addr, waiting))
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        })
    }

    /// One session: its channel, then the test over it. The last to have its channel (or give
    /// up) moves the stage on.
    fn session(&self, role: twonode::Role, addr: &str, waiting: &AtomicUsize) -> twonode::Report {
        let settings = self.settings.clone();
        let ch = match role {
            twonode::Role::Listener => twonode::listen(addr, &self.token, self.wait),
            twonode::Role::Connector => twonode::connect(addr, &self.token, self.wait),
        };
        if waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            stage(Stage::TwoNodeTest);
        }
        match ch {
            Ok(mut ch) => twonode::run(
                &mut ch,
                role,
                &self.host,
                &self.rails,
                settings,
                &twonode::Verbs,
            ),
            Err(e) => twonode::Report::failed(&self.host, role, settings, addr, &e),
        }
    }
}

/// The reports on standard output, then into the `--output` files; the worst session's exit
/// code.
fn write(reports: &[twonode::Report], args: &Request) -> anyhow::Result<ExitCode> {
    // The check report's formats but NFD, which has no two-node test's labels: refused here,
    // as `gdr-test` offers it for the one-node test.
    let text = |f: Format| {
        f.render(reports, &report::format::Options::default())
            .map_err(|Unsupported(f)| {
                anyhow::anyhow!(
                    "the two-node test has no {} format (use json, junit or prometheus)",
                    f.name().to_uppercase()
                )
            })
    };
    out!("{}", text(args.format)?);
    for (f, path) in &args.output.outputs {
        if let Err(e) = crate::output::write_atomic(path, text(*f)?.as_bytes()) {
            errln!("gdrdoctor: error: cannot write {}: {e}", path.display());
            return Ok(ExitCode::from(2));
        }
    }
    let worst = reports.iter().map(|r| r.exit_code()).max().unwrap_or(2);
    Ok(ExitCode::from(worst))
}
