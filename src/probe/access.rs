//! What this process may do with RDMA, probed on a live root only: the verbs device nodes, the
//! locked-memory limit, and whether libibverbs and a provider for every device load.

use crate::ffi::verbs;
use crate::inventory::{Fact, RdmaDevice};
use crate::model::access::{Access, CLASS_VERBS, DEV_INFINIBAND, UverbsNode};
use crate::parse::kernel::{Limit, proc_limit};
use crate::root::Root;

/// Probes this process's access to RDMA: the verbs device nodes, the locked-memory limit, and
/// libibverbs with a provider for every device.
pub fn load(root: &Root, rdma: &[RdmaDevice]) -> Access {
    let mut uverbs = Vec::new();
    let mut uverbs_error = None;
    match root.read_dir(CLASS_VERBS) {
        Ok(l) => {
            for name in l.names.into_iter().filter(|n| n.starts_with("uverbs")) {
                let ibdev = root.read_text(&format!("{CLASS_VERBS}/{name}/ibdev")).ok();
                let open = root.probe_device(&format!("{DEV_INFINIBAND}/{name}"));
                uverbs.push(UverbsNode { name, ibdev, open });
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => uverbs_error = Some(e),
    }
    let rdma_cm = root.kind(&format!("{DEV_INFINIBAND}/rdma_cm")).is_ok();
    let memlock = memlock(root);
    let verbs = if rdma.is_empty() {
        verbs::load_only()
    } else {
        verbs::probe()
    };
    let rdma_core = verbs
        .library
        .is_ok()
        .then(|| root.read_text("/proc/self/maps").ok())
        .flatten()
        .and_then(|m| rdma_core_release(&m));
    Access {
        uverbs,
        uverbs_error,
        rdma_cm,
        memlock,
        verbs,
        rdma_core,
    }
}

/// RLIMIT_MEMLOCK, keeping only its line of `/proc/self/limits` as the evidence.
fn memlock(root: &Root) -> Fact<Limit> {
    const NAME: &str = "Max locked memory";
    let mut fact = Fact::read(root, "/proc/self/limits".into(), |s| proc_limit(s, NAME));
    if let Ok(text) = &fact.raw {
        let line = text
            .lines()
            .find(|l| l.starts_with(NAME))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "));
        fact.raw = Ok(line.unwrap_or_else(|| format!("<no {NAME} line>")));
    }
    fact
}

/// `/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0` in `/proc/self/maps` -> (44, path).
fn rdma_core_release(maps: &str) -> Option<(u32, String)> {
    maps.lines().find_map(|line| {
        let path = line.split_whitespace().nth(5)?;
        let file = path.rsplit('/').next()?;
        let rest = file.strip_prefix("libibverbs.so.1.")?;
        let release = rest.split('.').nth(1)?.parse().ok()?;
        Some((release, path.to_owned()))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn rdma_core_from_maps() {
        let maps = "7f0000000000-7f0000001000 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0\n";
        assert_eq!(
            super::rdma_core_release(maps),
            Some((
                44,
                "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0".into()
            ))
        );
        assert_eq!(
            super::rdma_core_release("7f00-7f01 r--p 0 0:0 0 /lib/libc.so.6\n"),
            None
        );
    }
}
