//! `gdrdoctor nccl explain`: what NCCL decided about GPUDirect RDMA, read from its own
//! `NCCL_DEBUG=INFO` output, and why, in the terms of gdrdoctor's checks.
//!
//! Everything else gdrdoctor says is a prediction of what NCCL will do; this reads what it did.
//! A [`Collector`] takes the log line by line from any reader (a file, standard input, a pipe
//! from NCCL itself) and keeps only what the explanation needs, in memory bounded by the number
//! of nodes, GPUs and NICs, never by the length of the log; [`Collector::finish`] gives the
//! [`Explanation`]: per node, the NCCL version, the network, each NIC's GDR decision, each
//! GPU-NIC distance decision, the connections with and without GDR; then, for every place GDR
//! was not used, the cause and the gdrdoctor check and code that explain it, with the fix.
//!
//! In steps: [`reader`] splits inputs (plain or gzip) into lines and hands NCCL's to the line
//! parser (`parse::nccl_log`), what it made of a prefix or a message kept for when the same
//! comes again ([`repeats`]); [`collector`] keeps what each line says, within bounds;
//! [`explanation`] builds the answer from it, reading distances in the numbering of the NCCL
//! release that wrote them ([`release`]); [`diagnosis`] says why GDR was not used; [`model`] is
//! the answer's types, as printed by `report::nccl::explain` and documented in
//! docs/nccl-explain-json.md.

mod collector;
mod diagnosis;
mod evidence;
mod explanation;
mod reader;
mod release;
mod repeats;

#[cfg(test)]
use crate::model::nccl::explain::see;
pub use crate::model::nccl::explain::{
    ConnGroup, Diagnosis, Explanation, GpuNic, Input, NcclVersion, NetPath, Nic, Node, NotNcclLog,
    See, Unrecognised, Verdict, Warning, bus_id_of, nic_index,
};
pub use collector::Collector;

/// Longest line kept. NCCL's own lines are at most 1 KiB plus the launcher's prefix (its
/// message buffer is 1024 bytes, src/debug.cc); longer lines are counted and skipped, never held.
pub const MAX_LINE: usize = 64 * 1024;
/// Distinct things kept across all nodes (connection groups, GPU-NIC decisions, NICs, nodes):
/// a log that names more (a hostile one) gets the rest counted as dropped.
const MAX_KEPT: usize = 100_000;
/// Peers and channels listed per connection group.
const MAX_LIST: usize = 64;
/// Distinct warnings kept.
const MAX_WARNINGS: usize = 1_000;
/// Examples kept of lines that were not understood.
const MAX_SAMPLES: usize = 3;
/// Longest text quoted from the log.
const MAX_TEXT: usize = 300;

/// The environment variables that change NCCL's GDR decisions (NCCL's docs, env.html).
const ENV_KEPT: &[&str] = &[
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_NET_GDR_C2C",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_DMABUF_ENABLE",
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_TOPO_FILE",
    "NCCL_SOCKET_IFNAME",
    "NCCL_CROSS_NIC",
    "NCCL_PXN_DISABLE",
];

/// Where the message bodies quoted without NCCL's prefix are put: one node, as nothing tells
/// which host or rank printed them.
pub const BARE_NODE: &str = "(no prefix: host and rank unknown)";

/// Text from the log, made safe to print: hostile characters escaped by the one sanitizer,
/// long text cut.
fn clean(s: &str) -> String {
    crate::sanitize::cut(s, MAX_TEXT)
}

/// [`clean`], borrowed when the text is shown as it is (nearly always): to look up what was
/// kept without a copy per line.
fn clean_cow(s: &str) -> std::borrow::Cow<'_, str> {
    crate::sanitize::cut_cow(s, MAX_TEXT)
}

/// A host name as nodes are told apart: whole up to MAX_TEXT characters, cut there as every
/// other name from a log is (`clean`), the cut marked. No host name is that long (DNS allows 253
/// bytes); a log whose hosts agree that far and differ after is hostile, and its nodes are one.
/// Kept whole, 30,000 lines with 60 KB host prefixes held 3.6 GB (issue 25).
fn host_key(host: &str) -> std::borrow::Cow<'_, str> {
    if host.len() <= MAX_TEXT {
        return host.into();
    }
    // The one sanitizer's cut, so that the key is already the name shown.
    crate::sanitize::cut(host, MAX_TEXT).into()
}

fn node_name(host: &str) -> String {
    if host.is_empty() {
        "(no host in the log)".to_owned()
    } else if host == collector::BARE_KEY {
        BARE_NODE.to_owned()
    } else {
        clean(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explain(text: &str) -> Explanation {
        let mut c = Collector::new();
        c.read("test", text.as_bytes());
        c.finish().expect("an NCCL log")
    }

    #[test]
    fn graph_paths_to_the_networks_are_kept_per_gpu_and_nic() {
        // 2.28.9 on the one-GPU machine (REFERENCE.md section 9), printed by two ranks; and
        // NVIDIA/nccl#879's 2.x line with three NETs.
        let e = explain(
            "h:1:2 [0] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) \n\
             h:1:3 [1] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) \n\
             h:1:3 [1] NCCL INFO GPU/49000 :GPU/49000 (0/5000.000000/LOC) NET/0 (6/24.000000/PHB) NET/2 (4/24.000000/PXB) NET/4 (7/9.000000/SYS)\n",
        );
        let p = &e.nodes[0].paths;
        let seen: Vec<String> = p
            .iter()
            .map(|x| {
                let bus = x.bus_id.as_deref().unwrap_or("?");
                format!("{bus} {} {:?} {} {}", x.net, x.nic, x.path, x.lines)
            })
            .collect();
        assert_eq!(
            seen,
            [
                "0000:00:06.0 0-0 Some(0) PHB 2",
                "0000:49:00.0 0 Some(0) PHB 1",
                "0000:49:00.0 2 Some(2) PXB 1",
                "0000:49:00.0 4 Some(4) SYS 1",
            ]
        );
        assert_eq!(bus_id_of("0-3b000").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(bus_id_of("CE000").as_deref(), Some("0000:ce:00.0"));
        assert_eq!(bus_id_of("zz"), None);
    }

    #[test]
    fn distance_in_a_2_4_log() {
        // Mellanox/nv_peer_memory#56 (NCCL 2.4.7).
        let e = explain(
            "NCCL version 2.4.7+cuda10.0\n\
             master_node:11717:11986 [2] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 2[2] / HCA 0 (distance 3 >= 2)\n\
             master_node:11717:11986 [2] NCCL INFO Ring 00 : 6 -> 2 [receive] via NET/IB/0\n",
        );
        assert_eq!(e.verdict.exit_code, 1);
        let d = &e.diagnoses[0];
        assert_eq!(d.cause, "distance");
        assert_eq!(d.see, vec![see("pcie-placement", "gpu-nic-too-far")]);
        assert!(
            d.message
                .contains("3 (NODE) >= level 2 (PHB, NCCL's default)"),
            "{}",
            d.message
        );
        assert!(d.fix.contains("NCCL_NET_GDR_LEVEL=4"), "{}", d.fix);
    }

    #[test]
    fn the_environment_level_picks_the_numbering() {
        // NVIDIA/DeepLearningExamples#383: level 4 named PHB is 2.6-2.7's numbering, so 5 is SYS.
        let e = explain(
            "node-1:32726:33054 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB\n\
             node-1:32726:33054 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 18000 / HCA 0 (distance 5 > 4)\n",
        );
        assert_eq!(e.nodes[0].gpu_nic[0].distance_name, "SYS");
        assert_eq!(e.nodes[0].gpu_nic[0].level_name, "PHB");
        assert_eq!(e.diagnoses[0].cause, "distance");
    }

    #[test]
    fn all_gdr_is_exit_0() {
        let e = explain(
            "h:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
        );
        assert_eq!((e.verdict.exit_code, e.verdict.with_gdr), (0, 1));
        assert!(e.diagnoses.is_empty());
    }

    #[test]
    fn not_nccl() {
        let mut c = Collector::new();
        c.read("junk", &b"\x00\x01binary\xff\n"[..]);
        assert!(c.finish().is_err());
    }

    #[test]
    fn long_lines_are_counted_not_held() {
        let mut text = "x".repeat(MAX_LINE + 10);
        text.push('\n');
        text.push_str(
            "h:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
        );
        let e = explain(&text);
        assert_eq!(e.inputs[0].long_lines_skipped, 1);
        assert_eq!(e.inputs[0].lines, 2);
        assert_eq!(e.verdict.with_gdr, 1);
    }

    /// Host names are kept to MAX_TEXT characters, as every other name from a log: distinct
    /// hosts of 60 KB each were each held whole, twice (issue 25).
    #[test]
    fn long_host_names_are_cut_as_names_are() {
        let mut c = Collector::new();
        for i in 0..50 {
            let host = format!("{i:03}{}", "h".repeat(60_000));
            c.feed_line(format!("{host}:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0").as_bytes());
        }
        c.feed_line(b"short:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0");
        assert_eq!(c.nodes.len(), 51);
        assert!(c.nodes.iter().all(|n| n.key.len() <= MAX_TEXT + 3));
        assert!(c.by_host.keys().all(|k| k.len() <= MAX_TEXT + 3));
        let e = c.finish().unwrap();
        let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
        assert!(names.contains(&"short"), "{names:?}");
        let cut = crate::sanitize::cut(&format!("000{}", "h".repeat(60_000)), MAX_TEXT);
        assert!(
            cut.ends_with('…') && cut.chars().count() == MAX_TEXT,
            "{cut}"
        );
        assert!(names.contains(&cut.as_str()), "{:?}", &names[..2]);
    }
}
