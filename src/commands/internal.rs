//! The hidden commands gdrdoctor runs as its own children: the GPU probe (`probe-gpu`), a GPU's
//! worker (`gpu-worker`), one GPU-NIC pair of the write test (`gdr-pair`), and NCCL's run
//! (`nccl-child`). Each answers its parent in JSON on standard output.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct SpecArgs {
    #[arg(long)]
    spec: String,
}

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    #[arg(long)]
    nvml: bool,
    #[arg(long)]
    cuda: bool,
    #[arg(long)]
    hip: bool,
    #[arg(long)]
    export: bool,
}

/// `gdr-pair --spec`: one pair of the write test (src/gdr).
pub fn gdr_pair(args: &SpecArgs) -> ExitCode {
    outln!("{}", crate::gdr::child_main(&args.spec));
    ExitCode::SUCCESS
}

/// `nccl-child --spec`: NCCL on the spec's GPUs (src/nccl/verify.rs).
pub fn nccl_child(args: &SpecArgs) -> ExitCode {
    outln!("{}", crate::probe::nccl::child_main(&args.spec));
    ExitCode::SUCCESS
}

/// `gpu-worker --spec`: one GPU's worker (src/gpu/worker.rs); never returns.
pub fn gpu_worker(args: &SpecArgs) -> ExitCode {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    crate::probe::gpu::worker::worker_main(&args.spec, &mut input, &mut out);
    // Its answers are written and flushed (a parent that is gone ends it the same way): the
    // kernel frees the GPU faster than the libraries' teardown would.
    use std::io::Write as _;
    let flushed = out.flush().is_ok();
    crate::sys::process::exit_without_teardown(if flushed { 0 } else { 2 })
}

/// `probe-gpu`: the GPU libraries asked about every GPU, in one process.
pub fn probe_gpu(args: &ProbeArgs) -> ExitCode {
    let ask = crate::probe::gpu::Ask {
        nvml: args.nvml,
        cuda: args.cuda,
        hip: args.hip,
        export: args.export,
    };
    outln!("{}", crate::probe::gpu::child_main(ask));
    // Standard output is written unbuffered: the answer is out. NVML's shutdown and CUDA's exit
    // handlers would only delay the parent's report. (An answer that could not be written goes
    // the usual way, so that `main` says why.)
    if crate::stdio::failed() {
        return ExitCode::SUCCESS;
    }
    crate::sys::process::exit_without_teardown(0)
}
