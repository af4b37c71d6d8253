//! The child's side (`gdrdoctor nccl-child --spec JSON`): NCCL and CUDA (or RCCL and HIP)
//! loaded, one communicator over the GPUs of the spec, an all-reduce whose sum is checked, the
//! answer printed as one marked line. The run is written once, over the GPU runtime
//! ([`CollectiveRuntime`]: CUDA's session for NCCL, HIP's for RCCL).

use super::{ChildAnswer, Library, Outcome, RankGpu, Spec, Tried, ms};
use crate::ffi::gpu::{CollectiveGpu, CollectiveRuntime, DeviceMemory, Stream as _};
use crate::ffi::nccl::{Comm, LoadError, Nccl, NcclError, version_text};
use crate::probe::gpu::model::Lib;
use std::time::Instant;

/// Rank `rank`'s value at `index`: a ramp, so that a chunk put in the wrong place or summed
/// twice shows, not only a missing rank.
fn value(rank: u64, index: u64) -> i64 {
    (rank as i64 + 1) * ((index % 1000) as i64 + 1)
}

/// The sum every rank must hold at `index` after the all-reduce over `n` ranks.
fn expected(n: u64, index: u64) -> i64 {
    (n * (n + 1) / 2) as i64 * ((index % 1000) as i64 + 1)
}

/// The child's side (`gdrdoctor nccl-child --spec JSON`): the answer line, marked.
pub fn child_main(spec_json: &str) -> String {
    let started = Instant::now();
    let mut answer = ChildAnswer {
        library: None,
        tried: Vec::new(),
        version: None,
        version_code: None,
        cuda_library: None,
        cuda_driver_version: None,
        hip_library: None,
        hip_driver_version: None,
        gpus: Vec::new(),
        outcome: Outcome::NoLibrary,
        init_ms: None,
        all_reduce_ms: None,
        total_ms: 0.0,
        cleanup_errors: Vec::new(),
    };
    answer.outcome = match serde_json::from_str::<Spec>(spec_json) {
        Ok(spec) => child_run(&spec, &mut answer),
        Err(e) => Outcome::BadSpec {
            error: e.to_string(),
        },
    };
    answer.total_ms = ms(started.elapsed());
    format!(
        "{}{}",
        crate::child::ANSWER,
        serde_json::to_string(&answer).unwrap_or_default()
    )
}

/// A failed call of the GPU runtime, as the outcome of `which`'s run.
fn runtime_error(which: Library, call: String, error: String) -> Outcome {
    match which {
        Library::Nccl => Outcome::CudaError { call, error },
        Library::Rccl => Outcome::HipError { call, error },
    }
}

/// The GPU runtime that could not be used.
fn library_error(which: Library, e: Lib<()>) -> Outcome {
    let (call, error) = match e {
        Lib::NotFound { tried, message } => (
            "dlopen".into(),
            format!("{} cannot be loaded: {message}", tried.join(", ")),
        ),
        Lib::MissingSymbol { library, symbol } => {
            ("dlsym".into(), format!("{library} lacks {symbol}"))
        }
        Lib::Failed { call, error, .. } => (call, error),
        Lib::Ready(()) => ("(none)".into(), "no facts".into()),
    };
    runtime_error(which, call, error)
}

/// Each rank's send buffer (its ramp), receive buffer (zeros) and stream.
type RankBuffers<'g, G> = (
    <G as CollectiveGpu>::Buffer<'g>,
    <G as CollectiveGpu>::Buffer<'g>,
    <G as CollectiveGpu>::Stream<'g>,
);

fn child_run(spec: &Spec, a: &mut ChildAnswer) -> Outcome {
    let nccl = match load(spec, a) {
        Ok(n) => n,
        Err(outcome) => return outcome,
    };
    if spec.version_only {
        return Outcome::Loaded;
    }
    // The library is loaded before its runtime: RCCL brings its own libamdhip64 (a PyTorch
    // wheel's, through its RPATH), which HIP's session then takes (crate::ffi::hip).
    match spec.library {
        Library::Nccl => on::<crate::ffi::cuda::Session>(&nccl, spec, a),
        Library::Rccl => on::<crate::ffi::hip::Session>(&nccl, spec, a),
    }
}

/// The run on the GPU runtime `R`: its GPUs, buffers and streams, the communicator, the
/// all-reduce, the check of its sum.
fn on<R: CollectiveRuntime>(nccl: &Nccl, spec: &Spec, a: &mut ChildAnswer) -> Outcome {
    let which = spec.library;
    let session = match R::open() {
        Ok(s) => s,
        Err(e) => return library_error(which, e),
    };
    match which {
        Library::Nccl => {
            a.cuda_library = Some(session.library());
            a.cuda_driver_version = session.driver_version();
        }
        Library::Rccl => {
            a.hip_library = Some(session.library());
            a.hip_driver_version = session.driver_version();
        }
    }
    if let Err(e) = session.collective_symbols() {
        return library_error(which, e);
    }
    if spec.gpus.is_empty() {
        return Outcome::BadSpec {
            error: "no GPU to run on".into(),
        };
    }
    let gpus = match take_gpus(&session, spec, a) {
        Ok(g) => g,
        Err(outcome) => return outcome,
    };
    let n = gpus.len() as u64;
    let count = spec.elements.max(1);
    let Ok(len) = usize::try_from(count * 4) else {
        return Outcome::BadSpec {
            error: format!("{count} elements do not fit in memory"),
        };
    };
    let ranks = match buffers(&gpus, spec, count, len) {
        Ok(r) => r,
        Err(outcome) => return outcome,
    };
    let t = Instant::now();
    let comms = match communicators::<R, R::CommGpu<'_>>(nccl, &gpus, which) {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    a.init_ms = Some(ms(t.elapsed()));
    let t = Instant::now();
    if let Err(outcome) = all_reduce::<R, R::CommGpu<'_>>(nccl, &ranks, &comms, count, which) {
        return outcome;
    }
    a.all_reduce_ms = Some(ms(t.elapsed()));
    let (wrong, first) = match check(&gpus, &ranks, n, len, which) {
        Ok(c) => c,
        Err(outcome) => return outcome,
    };
    for comm in comms {
        if let Err(e) = nccl.destroy(comm) {
            a.cleanup_errors.push(format!("{}: {}", e.call, e.error));
        }
    }
    match first {
        None => Outcome::Ok { elements: count },
        Some(Wrong {
            rank,
            index,
            expected,
            got,
        }) => Outcome::Wrong {
            elements: count,
            wrong,
            rank,
            index,
            expected,
            got,
        },
    }
}

/// The first library of the spec that loads, and its version.
fn load(spec: &Spec, a: &mut ChildAnswer) -> Result<Nccl, Outcome> {
    let nccl = match Nccl::open(&spec.libraries) {
        Ok(n) => n,
        Err(LoadError::NotFound(tried)) => {
            a.tried = tried
                .into_iter()
                .map(|(library, error)| Tried { library, error })
                .collect();
            return Err(Outcome::NoLibrary);
        }
        Err(LoadError::MissingSymbol { library, symbol }) => {
            return Err(Outcome::MissingSymbol { library, symbol });
        }
    };
    a.library = Some(nccl.path.clone());
    a.tried = nccl
        .tried
        .iter()
        .map(|(library, error)| Tried {
            library: library.clone(),
            error: error.clone(),
        })
        .collect();
    match nccl.version() {
        Ok(v) => {
            a.version_code = Some(v);
            a.version = Some(version_text(v));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(nccl)
}

/// The GPUs of the spec by PCI address, in rank order.
fn take_gpus<'s, R: CollectiveRuntime>(
    session: &'s R,
    spec: &Spec,
    a: &mut ChildAnswer,
) -> Result<Vec<R::CommGpu<'s>>, Outcome> {
    let mut gpus = Vec::new();
    for (rank, bus) in spec.gpus.iter().enumerate() {
        match session.collective_gpu(bus) {
            Ok(g) => {
                a.gpus.push(RankGpu {
                    rank: rank as u32,
                    bus_id: bus.clone(),
                    ordinal: g.ordinal(),
                });
                gpus.push(g);
            }
            Err(error) => {
                return Err(runtime_error(
                    spec.library,
                    format!("the GPU at {bus}"),
                    error,
                ));
            }
        }
    }
    Ok(gpus)
}

/// Each rank's send buffer (its ramp), receive buffer (zeros) and stream.
fn buffers<'g, G: CollectiveGpu>(
    gpus: &'g [G],
    spec: &Spec,
    count: u64,
    len: usize,
) -> Result<Vec<RankBuffers<'g, G>>, Outcome> {
    let mut ranks = Vec::new();
    for (r, g) in gpus.iter().enumerate() {
        let step = (|| {
            g.make_current()?;
            let send = g.buffer(len)?;
            let recv = g.buffer(len)?;
            let ramp: Vec<u8> = (0..count)
                .flat_map(|i| (value(r as u64, i) as i32).to_ne_bytes())
                .collect();
            send.write(&ramp)?;
            recv.write(&vec![0u8; len])?;
            let stream = g.stream()?;
            Ok::<_, String>((send, recv, stream))
        })();
        match step {
            Ok(x) => ranks.push(x),
            Err(error) => {
                return Err(runtime_error(
                    spec.library,
                    format!("buffers and stream on rank {r} ({})", spec.gpus[r]),
                    error,
                ));
            }
        }
    }
    Ok(ranks)
}

/// One communicator over all the GPUs: a one-rank one for a single GPU.
fn communicators<R: CollectiveRuntime, G: CollectiveGpu>(
    nccl: &Nccl,
    gpus: &[G],
    which: Library,
) -> Result<Vec<Comm>, Outcome> {
    let comms = if gpus.len() == 1 {
        if let Err(error) = gpus[0].make_current() {
            return Err(runtime_error(which, R::MAKE_CURRENT.into(), error));
        }
        nccl.init_one().map(|c| vec![c])
    } else {
        let ordinals: Vec<i32> = gpus.iter().map(|g| g.ordinal()).collect();
        nccl.init_all(&ordinals)
    };
    comms.map_err(Outcome::from)
}

/// The all-reduce on every rank, waited for, and NCCL asked whether it failed.
fn all_reduce<R: CollectiveRuntime, G: CollectiveGpu>(
    nccl: &Nccl,
    ranks: &[RankBuffers<'_, G>],
    comms: &[Comm],
    count: u64,
    which: Library,
) -> Result<(), Outcome> {
    // One process drives every GPU, so the calls are one group (NCCL's documented pattern for
    // a single thread with several devices); a single rank needs none.
    let launched = (|| {
        if comms.len() > 1 {
            nccl.group_start()?;
        }
        for ((send, recv, stream), comm) in ranks.iter().zip(comms) {
            nccl.all_reduce_i32(send, recv, count as usize, comm, stream)?;
        }
        if comms.len() > 1 {
            nccl.group_end()?;
        }
        Ok::<_, NcclError>(())
    })();
    launched?;
    for (r, (_, _, stream)) in ranks.iter().enumerate() {
        if let Err(error) = stream.synchronize() {
            return Err(runtime_error(
                which,
                format!("{} on rank {r}", R::SYNCHRONIZE),
                error,
            ));
        }
    }
    for comm in comms {
        nccl.async_error(comm)?;
    }
    Ok(())
}

/// The first element of a result that is not the sum.
struct Wrong {
    rank: u32,
    index: u64,
    expected: i64,
    got: i64,
}

/// Every rank's result against the sum it must hold: how many elements are wrong, and the
/// first.
fn check<G: CollectiveGpu>(
    gpus: &[G],
    ranks: &[RankBuffers<'_, G>],
    n: u64,
    len: usize,
    which: Library,
) -> Result<(u64, Option<Wrong>), Outcome> {
    let mut wrong = 0u64;
    let mut first = None;
    for (r, (g, (_, recv, _))) in gpus.iter().zip(ranks).enumerate() {
        let mut out = vec![0u8; len];
        if let Err(error) = g.make_current().and_then(|()| recv.read(&mut out)) {
            return Err(runtime_error(
                which,
                format!("reading rank {r}'s result"),
                error,
            ));
        }
        for (i, chunk) in out.chunks_exact(4).enumerate() {
            let got = i64::from(i32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]));
            let want = expected(n, i as u64);
            if got != want {
                wrong += 1;
                first.get_or_insert(Wrong {
                    rank: r as u32,
                    index: i as u64,
                    expected: want,
                    got,
                });
            }
        }
    }
    Ok((wrong, first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_of_the_ramps() {
        for n in 1..=8u64 {
            for i in [0u64, 1, 999, 1000, 123_456] {
                let sum: i64 = (0..n).map(|r| value(r, i)).sum();
                assert_eq!(sum, expected(n, i), "n {n} i {i}");
            }
        }
        // 64 ranks stay far from int32's limit.
        assert!(expected(64, 999) < i64::from(i32::MAX));
    }
}
