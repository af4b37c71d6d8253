//! roce-lossless's branches beyond the seven fixtures, each on a copy of `roce-lossless-ok`
//! with one link of the chain changed: a buffer shared with lossy priorities, ECN off on the
//! lossless priority, pause storms and pauses on a priority without PFC, and NCCL_IB_TC from
//! the job's environment moving the traffic off the lossless priority.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::Path;

fn roce(root: &Path, extra: &[&str]) -> Vec<(String, String, String, String)> {
    let mut args = vec!["--root", root.to_str().unwrap(), "check"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--select", "roce-lossless", "--format", "json"]);
    let out = gdrdoctor(&args);
    all_findings(&json(&out))
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap().to_owned();
            (
                text("code"),
                text("status"),
                text("subject"),
                text("message"),
            )
        })
        .collect()
}

/// Rewrites `gdrdoctor/qos.json` of `root` through `edit` on its JSON value.
fn edit_qos(root: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let path = root.join("gdrdoctor/qos.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (_, nd) in v["netdevs"].as_object_mut().unwrap().iter_mut() {
        edit(nd);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_shared_buffer_warns_and_the_chain_still_holds() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    edit_qos(&root, |nd| {
        nd["dcb"]["ok"]["buffer"]["prio2buffer"] = serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]);
    });
    let found = roce(&root, &[]);
    let shared: Vec<_> = found
        .iter()
        .filter(|f| f.0 == "roce-buffer-shared")
        .collect();
    assert_eq!(shared.len(), 8, "{found:?}");
    assert!(
        shared[0].3.contains(
            "priority 3's receive buffer 0 is shared with lossy priorities 0,1,2,4,5,6,7"
        ),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.0 == "roce-lossless-ok"), "{found:?}");
}

#[test]
fn ecn_off_on_the_lossless_priority_warns() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    std::fs::write(
        root.join("sys/class/net/ens1np0/ecn/roce_rp/enable/3"),
        "0\n",
    )
    .unwrap();
    let found = roce(&root, &[]);
    let off: Vec<_> = found.iter().filter(|f| f.0 == "roce-ecn-off").collect();
    assert_eq!(off.len(), 1, "{found:?}");
    assert_eq!(off[0].2, "mlx5_0 port 1");
    assert!(
        off[0]
            .3
            .contains("reaction point off, notification point on"),
        "{found:?}"
    );
}

#[test]
fn pause_storms_and_pauses_without_pfc_warn() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    edit_qos(&root, |nd| {
        nd["ethtool"]["stats"]["ok"] = serde_json::json!([
            ["rx_prio0_pause", 12],
            ["rx_prio3_pause", 1841],
            ["tx_pause_storm_error_events", 3]
        ]);
    });
    let found = roce(&root, &[]);
    // One reading: history, shown and not judged.
    let storms: Vec<_> = found.iter().filter(|f| f.0 == "roce-pause-storm").collect();
    assert_eq!(storms.len(), 8, "{found:?}");
    assert!(storms.iter().all(|f| f.1 == "skip"), "{found:?}");
    assert!(
        storms[0].3.starts_with("since the driver loaded: "),
        "{found:?}"
    );
    // Pausing on the lossless priority itself is normal and not named.
    assert!(
        storms[0].3.contains("tx_pause_storm_error_events 3")
            && storms[0].3.contains("rx_prio0_pause 12"),
        "{found:?}"
    );
    assert!(!storms[0].3.contains("rx_prio3_pause"), "{found:?}");
}

/// A sample window (`capture --sample`'s recorded second reading): a pause storm that grew
/// fails, pauses that grew on a priority without PFC warn, pausing on the lossless priority is
/// not named.
#[test]
fn pause_counters_that_grow_in_the_window() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    edit_qos(&root, |nd| {
        nd["ethtool"]["stats"]["ok"] = serde_json::json!([
            ["rx_prio0_pause", 0],
            ["rx_prio3_pause", 1841],
            ["tx_pause_storm_error_events", 0]
        ]);
    });
    std::fs::create_dir_all(root.join("gdrdoctor/sample/gdrdoctor")).unwrap();
    std::fs::write(root.join("gdrdoctor/sample/window"), "5.0\n").unwrap();
    std::fs::write(
        root.join("gdrdoctor/sample/gdrdoctor/pause.json"),
        r#"{"ens1np0":[["rx_prio0_pause",12],["rx_prio3_pause",3000],["tx_pause_storm_error_events",2]],
            "ens2np0":[["rx_prio0_pause",7],["rx_prio3_pause",1900],["tx_pause_storm_error_events",0]]}"#,
    )
    .unwrap();
    let found = roce(&root, &[]);
    let storms: Vec<_> = found.iter().filter(|f| f.0 == "roce-pause-storm").collect();
    assert_eq!(storms.len(), 2, "{found:?}");
    assert_eq!(
        (storms[0].1.as_str(), storms[0].2.as_str()),
        ("fail", "mlx5_0 port 1"),
        "{found:?}"
    );
    assert!(
        storms[0].3.contains("in the 5.0 s window: rx_prio0_pause +12 (0 -> 12), tx_pause_storm_error_events +2 (0 -> 2)"),
        "{found:?}"
    );
    assert!(!storms[0].3.contains("rx_prio3_pause"), "{found:?}");
    assert_eq!(
        (storms[1].1.as_str(), storms[1].2.as_str()),
        ("warn", "mlx5_1 port 1"),
        "{found:?}"
    );
}

#[test]
fn the_jobs_traffic_class_is_the_one_judged() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    let env = root.join("job.env");
    // DSCP 32: priority 4, which has no PFC on this node.
    std::fs::write(&env, "NCCL_IB_TC=128\n").unwrap();
    let found = roce(&root, &["--nccl-env", env.to_str().unwrap()]);
    let off: Vec<_> = found.iter().filter(|f| f.0 == "roce-pfc-off").collect();
    assert_eq!(off.len(), 8, "{found:?}");
    assert!(
        off[0].3.starts_with("NCCL_IB_TC=128 (")
            && off[0].3.contains("-> DSCP 32 ->")
            && off[0].3.contains("PFC off on 4 (enabled: 3)"),
        "{found:?}"
    );
}

/// This machine: no RoCE port, so nothing to judge, and said so; its NICs' real dcbnl answer
/// (EOPNOTSUPP on virtio-net) is tests/qos.rs's.
#[test]
fn a_node_without_roce_skips_with_the_reason() {
    let found = roce(Path::new("/"), &[]);
    let own: Vec<_> = found.iter().filter(|f| f.0.starts_with("roce-")).collect();
    if own.iter().any(|f| f.0 == "roce-no-port") {
        assert_eq!(own.len(), 1, "{found:?}");
        assert_eq!(own[0].1, "skip");
        // rdma-link comes back as its prerequisite and decides.
        assert!(found.iter().any(|f| f.0 == "rdma-no-device"), "{found:?}");
    }
}

/// CNPs on NCCL's own priority (cnp_dscp 26 -> priority 3) warn; on DSCP 48 (priority 6, the
/// fixture's) they do not.
#[test]
fn cnps_on_the_data_priority_warn() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    assert!(!roce(&root, &[]).iter().any(|f| f.0 == "roce-cnp-shared"));
    std::fs::write(
        root.join("sys/class/net/ens2np0/ecn/roce_np/cnp_dscp"),
        "26\n",
    )
    .unwrap();
    let found = roce(&root, &[]);
    let shared: Vec<_> = found.iter().filter(|f| f.0 == "roce-cnp-shared").collect();
    assert_eq!(shared.len(), 1, "{found:?}");
    assert_eq!(
        (shared[0].1.as_str(), shared[0].2.as_str()),
        ("warn", "mlx5_1 port 1")
    );
    assert!(
        shared[0].3.contains("(cnp_dscp 26 -> priority 3)"),
        "{found:?}"
    );
}

/// NCCL_IB_FIFO_TC on a priority without PFC: NCCL's control messages ride a lossy queue.
#[test]
fn the_control_messages_traffic_class_is_judged_too() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    let env = root.join("job.env");
    std::fs::write(&env, "NCCL_IB_FIFO_TC=0\n").unwrap();
    let found = roce(&root, &["--nccl-env", env.to_str().unwrap()]);
    let fifo: Vec<_> = found
        .iter()
        .filter(|f| f.0 == "roce-fifo-tc-lossy")
        .collect();
    assert_eq!(fifo.len(), 8, "{found:?}");
    assert!(
        fifo[0].3.starts_with("NCCL_IB_FIFO_TC=0 (") && fifo[0].3.contains("PFC off on 0"),
        "{found:?}"
    );
    // The data still lands on priority 3: the chain itself holds.
    assert!(found.iter().any(|f| f.0 == "roce-lossless-ok"), "{found:?}");
}

/// PCP trust with RoCE over a VLAN (the RoCE v2 GID belongs to `IF.VID`): NCCL_IB_SL is the
/// PCP, so NCCL_IB_SL=3 reaches the lossless priority where untagged RoCE would not.
#[test]
fn pcp_trust_over_a_vlan_takes_nccl_ib_sl() {
    let (_dir, root) = fixture_copy("roce-trust-pcp-untagged");
    let gid_ndev = root.join("sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3");
    assert_eq!(
        std::fs::read_to_string(&gid_ndev).unwrap().trim(),
        "ens1np0"
    );
    std::fs::write(&gid_ndev, "ens1np0.100\n").unwrap();
    std::fs::write(root.join("etc/nccl.conf"), "NCCL_IB_TC=106\nNCCL_IB_SL=3\n").unwrap();
    let found = roce(&root, &[]);
    let port0: Vec<_> = found.iter().filter(|f| f.2 == "mlx5_0 port 1").collect();
    assert_eq!(port0.len(), 1, "{found:?}");
    assert_eq!(port0[0].0, "roce-lossless-ok", "{found:?}");
    assert!(
        port0[0].3.contains(
            "priority 3 (PCP trust, tagged over ens1np0.100, VLAN 100 on ens1np0 (/sys/class/net/ens1np0.100/uevent: absent; a VLAN by its name only): NCCL_IB_SL=3 (/etc/nccl.conf))"
        ),
        "{found:?}"
    );
    // The untagged ports still land on 0.
    assert!(
        found
            .iter()
            .any(|f| f.0 == "roce-trust-pcp" && f.2 == "mlx5_1 port 1"),
        "{found:?}"
    );
}

/// Older MLNX_OFED keeps the DSCP map out of dcbnl's APP table: `qos/trust` and `qos/dscp2prio`
/// decide the priority, are named in the chain and shown as evidence, and the fix offers no
/// NCCL_IB_TC when the map leaves the PFC priority without a DSCP.
#[test]
fn ofed_dscp_map_decides_the_priority() {
    let root = fixture_path("roce-ofed-dscp2prio");
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--select",
        "roce-lossless",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let fails = findings_with(&r, "roce-pfc-off");
    assert_eq!(fails.len(), 8, "{:?}", codes(&r));
    let f = fails[0];
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("trust dscp (/sys/class/net/ens1np0/qos/trust) -> priority 4 (/sys/class/net/ens1np0/qos/dscp2prio: dscp 26 -> 4) -> PFC off on 4 (enabled: 3)"),
        "{m}"
    );
    let ev = f["evidence"].to_string();
    assert!(
        ev.contains("/sys/class/net/ens1np0/qos/dscp2prio") && ev.contains("dscp 26 -> priority 4"),
        "{ev}"
    );
    let fix = f["fix"].to_string();
    assert!(
        fix.contains("enable PFC on priority 4") && !fix.contains("NCCL_IB_TC="),
        "{fix}"
    );

    // The same map, with 24-31 back on 3: the chain holds through it, and a fix that moves
    // NCCL_IB_TC names a DSCP the map really puts on the PFC priority.
    let (_dir, copy) = fixture_copy("roce-ofed-dscp2prio");
    let map = std::fs::read_to_string(copy.join("sys/class/net/ens1np0/qos/dscp2prio")).unwrap();
    let back = map
        .replace(
            "\tprio:3 dscp:\n",
            "\tprio:3 dscp:31,30,29,28,27,26,25,24,\n",
        )
        .replace(
            "\tprio:4 dscp:39,38,37,36,35,34,33,32,31,30,29,28,27,26,25,24,\n",
            "\tprio:4 dscp:39,38,37,36,35,34,33,32,\n",
        );
    assert_ne!(back, map);
    std::fs::write(copy.join("sys/class/net/ens1np0/qos/dscp2prio"), back).unwrap();
    let found = roce(&copy, &[]);
    let ok: Vec<_> = found.iter().filter(|f| f.0 == "roce-lossless-ok").collect();
    assert_eq!(ok.len(), 1, "{found:?}");
    assert!(
        ok[0].3.contains("qos/dscp2prio: dscp 26 -> 3) -> PFC on 3"),
        "{ok:?}"
    );
}

/// The upstream mlx5 driver: the CNPs' DSCP from its root-only debugfs; as another user the
/// file is unreadable and the chain says the CNPs' priority was not read, naming the file.
#[test]
fn upstream_cnp_dscp_from_debugfs() {
    let found = roce(&fixture_path("roce-upstream-cnp-shared"), &[]);
    let shared: Vec<_> = found.iter().filter(|f| f.0 == "roce-cnp-shared").collect();
    assert_eq!(shared.len(), 8, "{found:?}");
    assert!(
        shared[0].3.contains("(cnp_dscp 26 -> priority 3)"),
        "{shared:?}"
    );

    let (d, root) = fixture_copy("roce-upstream-cnp-shared");
    let file = root.join("sys/kernel/debug/mlx5/0000:19:00.0/cc_params/np_cnp_dscp");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    for p in [d.path(), &root] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let Some(out) = Gdrdoctor::new()
        .root_at(&root)
        .args(["check", "--select", "roce-lossless", "--format", "json"])
        .unprivileged()
        .try_output()
    else {
        return;
    };
    let r = json(&out);
    let ok: Vec<_> = findings_with(&r, "roce-lossless-ok")
        .into_iter()
        .filter(|f| f["subject"] == "mlx5_0 port 1")
        .collect();
    assert_eq!(ok.len(), 1, "{:?}", codes(&r));
    assert!(
        ok[0]["message"].as_str().unwrap().contains(
            "the CNPs' priority not read: /sys/kernel/debug/mlx5/0000:19:00.0/cc_params/np_cnp_dscp needs root"
        ),
        "{}",
        ok[0]
    );
}

/// The VLANs of `root`'s eight ports renamed as `vlan5`..`vlan12`, as `ip link add link IF name
/// vlan5 type vlan id 5` (or vconfig's VLAN_PLUS_VID_NO_PAD naming, vconfig(8):
/// https://manpages.ubuntu.com/manpages/bionic/man8/vconfig.8.html) names them: the kernel
/// says VLAN in the netdev's `uevent` (`DEVTYPE=vlan`: net/8021q/vlan_dev.c's device type) and
/// in `/proc/net/vlan/config` (net/8021q/vlanproc.c: `NAME | VID | LOWER`), never in the name.
/// `uevent`: with it, or with only the /proc file.
fn vlans_named_vlan_n(root: &Path, uevent: bool) -> Vec<String> {
    let mut config =
        String::from("VLAN Dev name\t | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n");
    let mut names = Vec::new();
    let ib = root.join("sys/class/infiniband");
    let mut devs: Vec<_> = std::fs::read_dir(&ib)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    devs.sort();
    for (i, dev) in devs.iter().enumerate() {
        let ndev = ib.join(dev).join("ports/1/gid_attrs/ndevs/3");
        let lower = std::fs::read_to_string(&ndev).unwrap().trim().to_owned();
        let vid = 5 + i;
        let name = format!("vlan{vid}");
        std::fs::write(&ndev, format!("{name}\n")).unwrap();
        if uevent {
            let dir = root.join("sys/class/net").join(&name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("uevent"),
                format!("DEVTYPE=vlan\nINTERFACE={name}\nIFINDEX={}\n", 20 + i),
            )
            .unwrap();
        }
        config.push_str(&format!("{name:<15}| {vid}  | {lower}\n"));
        names.push(name);
    }
    std::fs::create_dir_all(root.join("proc/net/vlan")).unwrap();
    std::fs::write(root.join("proc/net/vlan/config"), config).unwrap();
    names
}

/// Issue 40: PCP trust, PFC on 3, RoCE over VLANs named `vlan5`.. and NCCL_IB_SL=3 holds on every
/// rail, as it does for `IF.VID` names: the kernel's files say VLAN, the name does not.
#[test]
fn pcp_trust_over_vlans_the_kernel_names_not_their_names() {
    for uevent in [true, false] {
        let (_dir, root) = fixture_copy("roce-trust-pcp-untagged");
        let names = vlans_named_vlan_n(&root, uevent);
        std::fs::write(root.join("etc/nccl.conf"), "NCCL_IB_SL=3\n").unwrap();
        let found = roce(&root, &[]);
        let ok: Vec<_> = found.iter().filter(|f| f.0 == "roce-lossless-ok").collect();
        assert_eq!(ok.len(), 8, "uevent {uevent}: {found:?}");
        assert!(
            ok[0].3.contains(&format!(
                "priority 3 (PCP trust, tagged over {}, VLAN 5 on ens1np0",
                names[0]
            )) && ok[0].3.contains("NCCL_IB_SL=3 (/etc/nccl.conf))"),
            "{found:?}"
        );
        let told = if uevent {
            "(/sys/class/net/vlan5/uevent: DEVTYPE=vlan)"
        } else {
            "(/proc/net/vlan/config: vlan5 | 5 | ens1np0)"
        };
        assert!(ok[0].3.contains(told), "{found:?}");
    }
}

/// The same VLANs with NCCL_IB_SL unset: tagged frames carry PCP 0, which has no PFC. The fix is
/// NCCL_IB_SL=3 where NCCL reads it (the port's trust stays), and it is proven by checking again.
#[test]
fn a_vlan_without_nccl_ib_sl_is_fixed_by_nccl_ib_sl() {
    let (_dir, root) = fixture_copy("roce-trust-pcp-untagged");
    vlans_named_vlan_n(&root, true);
    let _ = std::fs::remove_file(root.join("etc/nccl.conf"));
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--select",
        "roce-lossless",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let fails = findings_with(&r, "roce-pfc-off");
    assert_eq!(fails.len(), 8, "{:?}", codes(&r));
    let f = fails[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("priority 0 (PCP trust, tagged over vlan5"),
        "{f}"
    );
    let fix = f["fix"].to_string();
    assert!(fix.contains("Set NCCL_IB_SL=3"), "{fix}");
    assert!(fix.contains("NCCL_IB_SL=3"), "{fix}");
    assert!(!fix.contains("--trust dscp"), "{fix}");
    assert!(
        codes(&r).iter().all(|c| c.0 != "roce-trust-pcp"),
        "{:?}",
        codes(&r)
    );
    // Applied (the nccl.conf edit is a file edit under the root), checked again: it holds.
    let applied = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "fix",
        "--apply",
        "--class",
        "persistent",
        "--yes",
    ]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let found = roce(&root, &[]);
    assert_eq!(
        found.iter().filter(|f| f.0 == "roce-lossless-ok").count(),
        8,
        "{found:?}"
    );
}

/// Untagged RoCE under PCP trust with NCCL_IB_TC unset: trusting DSCP alone would leave NCCL on
/// DSCP 0 (priority 0, or every packet's DSCP mapped to the lossless priority); the fix gives NCCL
/// DSCP 26 (NCCL_IB_TC=106) and maps that.
#[test]
fn the_trust_dscp_fix_moves_nccl_off_dscp_0() {
    let (_dir, root) = fixture_copy("roce-trust-pcp-untagged");
    let _ = std::fs::remove_file(root.join("etc/nccl.conf"));
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--select",
        "roce-lossless",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let f = findings_with(&r, "roce-trust-pcp")[0];
    let fix = f["fix"].to_string();
    assert!(fix.contains("dscp-prio 26:3"), "{fix}");
    assert!(fix.contains("NCCL_IB_TC=106"), "{fix}");
    assert!(!fix.contains("dscp-prio 0:"), "{fix}");
}

/// Issue 40: NCCL_IB_TC=0 with PFC on priority 0 is lossless on paper, but priority 0 is where
/// DSCP 0 lands, TCP's and every untagged packet's: "0 is used for the default common lossy
/// traffic group" (Cavium FastLinQ 45000 user manual, "Configuring DCQCN",
/// https://manualshive.com/ru/manual/cavium/fastlinq-45000-series/fastlinq-45000-series_user-manual_2574993-190.html);
/// the Mellanox quick start puts RoCE on DSCP 26, priority 3, `--pfc 0,0,0,1,0,0,0,0`
/// (https://kubernetes.recipes/recipes/networking/ets-pfc-dscp-trust-mellanox-quickstart/).
/// A warning whose fix gives NCCL DSCP 26 on priority 3 with PFC there only.
#[test]
fn nccl_on_the_default_priority_with_pfc_warns() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    std::fs::write(root.join("etc/nccl.conf"), "NCCL_IB_TC=0\n").unwrap();
    edit_qos(&root, |nd| {
        nd["dcb"]["ok"]["pfc"]["enabled"] = serde_json::json!(1)
    });
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--select",
        "roce-lossless",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let shared = findings_with(&r, "roce-priority-shared");
    assert_eq!(shared.len(), 8, "{:?}", codes(&r));
    let f = shared[0];
    assert_eq!(f["status"], "warn");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("NCCL_IB_TC=0") && m.contains("PFC on 0") && m.contains("PFC pauses TCP"),
        "{m}"
    );
    let fix = f["fix"].to_string();
    assert!(
        fix.contains("dscp-prio 26:3")
            && fix.contains("--pfc 0,0,0,1,0,0,0,0")
            && fix.contains("NCCL_IB_TC=106"),
        "{fix}"
    );
    // The chain itself holds: a warning, not a failure.
    assert_eq!(findings_with(&r, "roce-lossless-ok").len(), 8);
    // As shipped (NCCL_IB_TC=106, PFC on 3) nothing is shared.
    let (_dir2, ok) = fixture_copy("roce-lossless-ok");
    assert!(roce(&ok, &[]).iter().all(|f| f.0 != "roce-priority-shared"));
}
