#!/usr/bin/env python3
"""Stand-ins for the live-system tools that gdrdoctor's fix scripts call by bare name.

One script, many names: a harness makes a directory of symlinks (mlnx_qos, dcb, ethtool, ...)
that all point here, puts it first in PATH and sets GDRDOCTOR_ROOT to a COPY of a captured
node root. Each name then does to the copy what the real tool would do to the node, in the files
gdrdoctor reads back (sysfs/procfs copies, gdrdoctor/qos.json, gdrdoctor/nvml.json, etc/, boot/),
so that `gdrdoctor --root COPY check` shows whether a fix clears its finding. See README.md here.

Rules every stand-in keeps:
- it refuses to run (exit 2) without GDRDOCTOR_ROOT, or with it "/": it never touches the system
  it runs on; paths inside the copy are resolved with the copy as "/" (an absolute symlink in
  the copy points back into the copy), and nothing outside the copy is written;
- it is deterministic and idempotent: the same arguments on the same tree write the same bytes
  (no timestamps, sorted directory walks), and a file is rewritten only when its bytes change;
- what it cannot emulate (installing packages, flashing firmware, a daemon we know nothing of)
  it says on stderr, "stand-in: <tool> not emulated ...", and exits 3: the fix is by hand.

Python 3 standard library only. `standin.py --names` lists the names it answers to.
"""

import json
import os
import re
import shlex
import subprocess
import sys

NAMES = [
    "mlnx_qos",
    "dcb",
    "ethtool",
    "modprobe",
    "rmmod",
    "setpci",
    "ip",
    "sysctl",
    "nvidia-smi",
    "systemctl",
    "update-grub",
    "grub-mkconfig",
    "grub2-mkconfig",
    "update-initramfs",
    "dracut",
    "ldconfig",
    "apt-get",
    "apt",
    "dnf",
    "yum",
    "mlxfwreset",
    "mlxconfig",
    "grubby",
    "rdma_topo",
]

# Tools that install software, flash or reset firmware, or rewrite the boot loader in ways the
# copy cannot show: never emulated (exit 3: the harness reports the fix as by hand).
NOT_EMULATED = {"apt-get", "apt", "dnf", "yum", "mlxfwreset", "mlxconfig", "grubby", "rdma_topo"}

EXIT_NOT_EMULATED = 3


class Fail(Exception):
    """The tool's own failure: message on stderr, its exit status."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


class NotEmulated(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# The copy of the node's root
# ------------------------------------------------------------------------------------------------


def the_root():
    r = os.environ.get("GDRDOCTOR_ROOT", "")
    if not r or os.path.realpath(r) == "/":
        sys.stderr.write("stand-in: GDRDOCTOR_ROOT must name a copy of a node root (not unset, not /): refusing\n")
        sys.exit(2)
    if not os.path.isdir(r):
        sys.stderr.write(f"stand-in: GDRDOCTOR_ROOT={r} is not a directory: refusing\n")
        sys.exit(2)
    return os.path.realpath(r)


ROOT = None  # set in main()


def node_path(p):
    """A path as the node sees it ("/sys/..."), from a node path or one already under the root
    (fix scripts pass `${R}/boot/grub2/grub.cfg`)."""
    if p == ROOT or p.startswith(ROOT + "/"):
        p = p[len(ROOT):] or "/"
    else:
        rr = os.environ.get("GDRDOCTOR_ROOT", "").rstrip("/")
        if rr and (p == rr or p.startswith(rr + "/")):
            p = p[len(rr):] or "/"
    return "/" + p.lstrip("/")


def R(p):
    """The file in the copy for node path `p`, symlinks resolved with the copy as "/" (chroot
    style), so that nothing outside the copy is ever reached. The last component may not exist."""
    parts = [c for c in node_path(p).split("/") if c]
    cur = ROOT
    links = 0
    while parts:
        c = parts.pop(0)
        if c == ".":
            continue
        if c == "..":
            if cur != ROOT:
                cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, c)
        if os.path.islink(nxt):
            links += 1
            if links > 40:
                raise Fail(f"{p}: too many levels of symbolic links")
            target = os.readlink(nxt)
            if target.startswith("/"):
                cur = ROOT
            parts = [x for x in target.split("/") if x] + parts
            continue
        cur = nxt
    if cur != ROOT and not cur.startswith(ROOT + "/"):
        raise Fail(f"{p}: resolves outside the root")
    return cur


def exists(p):
    return os.path.exists(R(p))


def read(p, default=None):
    try:
        with open(R(p), "rb") as f:
            return f.read().decode("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return default


def read_bytes(p):
    with open(R(p), "rb") as f:
        return f.read()


def write(p, text):
    """Write only when the bytes differ (a second run changes nothing)."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    path = R(p)
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except (FileNotFoundError, IsADirectoryError):
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return True


def remove_tree(p):
    path = R(p)
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
        return
    if not os.path.isdir(path):
        return
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        for n in filenames:
            os.unlink(os.path.join(dirpath, n))
        for n in dirnames:
            d = os.path.join(dirpath, n)
            if os.path.islink(d):
                os.unlink(d)
            else:
                os.rmdir(d)
    os.rmdir(path)


def listdir(p):
    try:
        return sorted(os.listdir(R(p)))
    except (FileNotFoundError, NotADirectoryError):
        return []


def say(msg):
    sys.stdout.write(msg + "\n")


def warn(msg):
    sys.stderr.write(msg + "\n")


# ------------------------------------------------------------------------------------------------
# JSON answers gdrdoctor recorded (gdrdoctor/qos.json, gdrdoctor/nvml.json), rewritten in the
# layout they were found in
# ------------------------------------------------------------------------------------------------


def _inline_flat_arrays(pretty):
    """The layout `gdrdoctor capture` writes (src/model/qos.rs `inline_flat_arrays`): indented,
    with every array that holds no array or object on one line. Same rule, written anew here."""
    lines = pretty.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.endswith("["):
            items = []
            j = i
            while j < len(lines):
                t = lines[j].strip()
                if t.startswith("]") or t.endswith("[") or t.endswith("{"):
                    break
                items.append(t)
                j += 1
            if j < len(lines) and lines[j].strip().startswith("]"):
                close = lines[j].strip()
                items = [t[:-1] if t.endswith(",") else t for t in items]
                out.append(line + ", ".join(items) + close)
                i = j + 1
                continue
        out.append(line)
    return "\n".join(out)


LAYOUTS = {
    "indent2": lambda d: json.dumps(d, indent=2) + "\n",
    "indent2-utf8": lambda d: json.dumps(d, indent=2, ensure_ascii=False) + "\n",
    "flat-arrays": lambda d: _inline_flat_arrays(json.dumps(d, indent=2, ensure_ascii=False)) + "\n",
    "indent2-no-newline": lambda d: json.dumps(d, indent=2),
}


class JsonFile:
    """A recorded answer file: loaded, changed, written back in the layout that reproduced the
    original bytes (or gdrdoctor capture's layout when none does), so that the bytes nobody
    changed stay as they were."""

    def __init__(self, p):
        self.p = p
        text = read(p)
        if text is None:
            self.data = None
            return
        self.data = json.loads(text)
        self.layout = "flat-arrays"
        for name, f in LAYOUTS.items():
            if f(self.data) == text:
                self.layout = name
                break

    def save(self):
        write(self.p, LAYOUTS[self.layout](self.data))


QOS_JSON = "/gdrdoctor/qos.json"
NVML_JSON = "/gdrdoctor/nvml.json"


def netdev_exists(ifname):
    return exists(f"/sys/class/net/{ifname}")


def qos_netdev(qos, ifname, tool):
    """The recorded answers of `ifname`, or the tool's failure as the real one would report it."""
    if qos.data is None or ifname not in qos.data.get("netdevs", {}):
        if not netdev_exists(ifname):
            raise Fail(f"{tool}: cannot find device \"{ifname}\"", 1)
        raise NotEmulated(f"{tool}: no recorded dcbnl/ethtool answer for {ifname} in {QOS_JSON}")
    return qos.data["netdevs"][ifname]


def dcb_ok(nd, tool, ifname):
    """dcbnl's answer of the netdev; a driver without DCB answers EOPNOTSUPP to a set too."""
    d = nd.get("dcb", {})
    if "ok" not in d:
        err = d.get("error", {})
        raise Fail(f"{tool}: {ifname}: {err.get('message', 'Operation not supported')}", 1)
    return d["ok"]


def pfc_of(dcb, tool, ifname):
    if dcb.get("pfc") is None:
        raise Fail(f"{tool}: {ifname}: the driver answered no PFC configuration (Operation not supported)", 1)
    return dcb["pfc"]


SEL_ETHERTYPE, SEL_STREAM, SEL_DGRAM, SEL_ANY, SEL_DSCP, SEL_PCP = 1, 2, 3, 4, 5, 255


def app_replace(dcb, selector, protocol, priority):
    """One priority for (selector, protocol): an entry that exists is changed in place, else one
    is appended. mlx5 keeps one priority per DSCP (drivers/net/ethernet/mellanox/mlx5/core/
    en_dcbnl.c, mlx5e_dcbnl_ieee_setapp deletes the DSCP's old entry before adding the new);
    the APP table's order means nothing to gdrdoctor, only its entries."""
    app = dcb.setdefault("app", [])
    same = [a for a in app if a["selector"] == selector and a["protocol"] == protocol]
    if same:
        same[0]["priority"] = priority
        for extra in same[1:]:
            app.remove(extra)
    else:
        app.append({"selector": selector, "priority": priority, "protocol": protocol})


def app_del(dcb, selector, protocol=None, priority=None):
    app = dcb.setdefault("app", [])
    dcb["app"] = [
        a
        for a in app
        if not (
            a["selector"] == selector
            and (protocol is None or a["protocol"] == protocol)
            and (priority is None or a["priority"] == priority)
        )
    ]


# ------------------------------------------------------------------------------------------------
# mlnx_qos (Mellanox/mlnx-tools python/mlnx_qos)
# ------------------------------------------------------------------------------------------------


def _list8(s, what, lo=0, hi=7, allow_x=False):
    vals = s.split(",")
    if len(vals) != 8:
        raise Fail(f"{what} list must have 8 items", 1)
    out = []
    for v in vals:
        if allow_x and v.strip().lower() == "x":
            out.append(None)
            continue
        try:
            n = int(v)
        except ValueError:
            raise Fail(f"Invalid {what} value: {v}", 1)
        if not lo <= n <= hi:
            raise Fail(f"{what} value {n} out of range {lo}-{hi}", 1)
        out.append(n)
    return out


def _dscp2prio_sysfs_edit(text, action, dscp, prio):
    """MLNX_OFED's qos/dscp2prio, edited in the form it was found in:
    - `prio:P dscp:D,D,...,` lines under a `dscp2prio mapping:` header (how mlnx_qos prints the
      map, and how gdrdoctor reads it: src/inventory/ofed_qos.rs): the DSCP leaves the line it
      was on and joins priority P's first line, in that line's order (descending where the line
      was, as mlnx_qos prints it);
    - `D P` lines under a header (the kernel file as mlnx_qos' print_dscp2prio_sysfs reads it).
    Other lines and bytes are kept."""
    lines = text.split("\n")
    pat = re.compile(r"^(\s*)prio:(\d+) dscp:(.*)$")
    if any(pat.match(l) for l in lines):
        parsed = []
        for l in lines:
            m = pat.match(l)
            if m:
                toks = [t for t in m.group(3).strip().split(",") if t.strip() != ""]
                parsed.append([m.group(1), int(m.group(2)), toks])
            else:
                parsed.append(l)
        for e in parsed:
            if isinstance(e, list):
                e[2] = [t for t in e[2] if int(t) != dscp]
        if action == "set":
            target = next((e for e in parsed if isinstance(e, list) and e[1] == prio), None)
            if target is None:
                indent = next((e[0] for e in parsed if isinstance(e, list)), "\t")
                target = [indent, prio, []]
                # After the last priority line below P, else after the header.
                at = 0
                for i, e in enumerate(parsed):
                    if isinstance(e, list) and e[1] < prio:
                        at = i + 1
                    elif isinstance(e, str) and e.strip().startswith("dscp2prio") and at == 0:
                        at = i + 1
                parsed.insert(at, target)
            nums = [int(t) for t in target[2]]
            width = 2
            ascending = len(nums) >= 2 and nums[0] < nums[1]
            nums.append(dscp)
            nums.sort(reverse=not ascending)
            target[2] = ["%0*d" % (width, n) for n in nums]
        out = []
        for e in parsed:
            if isinstance(e, list):
                out.append(f"{e[0]}prio:{e[1]} dscp:" + "".join(t + "," for t in e[2]))
            else:
                out.append(e)
        return "\n".join(out)
    # `D P` lines.
    out = []
    placed = False
    pair = re.compile(r"^\s*(\d+)\s+(\d+)\s*$")
    for l in lines:
        m = pair.match(l)
        if m and int(m.group(1)) == dscp:
            if action == "set" and not placed:
                out.append(f"{dscp} {prio}")
                placed = True
            continue
        out.append(l)
    if action == "set" and not placed:
        while out and out[-1] == "":
            out.pop()
        out.append(f"{dscp} {prio}")
        out.append("")
    return "\n".join(out)


def mlnx_qos(argv):
    # Options as mlnx-tools' mlnx_qos (python/mlnx_qos, optparse) defines them.
    opts = {"dscp2prio": []}
    takes = {
        "-i": "intf", "--interface": "intf", "-f": "pfc", "--pfc": "pfc",
        "-F": "specific_pfc", "--specific_pfc": "specific_pfc", "-P": "get_pfc", "--get_pfc": "get_pfc",
        "-p": "prio_tc", "--prio_tc": "prio_tc", "-s": "tsa", "--tsa": "tsa", "-t": "tc_bw", "--tcbw": "tc_bw",
        "-r": "ratelimit", "--ratelimit": "ratelimit", "-d": "dcbx", "--dcbx": "dcbx",
        "--trust": "trust", "--dscp2prio": "dscp2prio", "--cable_len": "cable_len",
        "--prio2buffer": "prio2buffer", "--buffer_size": "buffer_size",
    }
    i = 0
    while i < len(argv):
        a = argv[i]
        key, val = a, None
        if a.startswith("--") and "=" in a:
            key, val = a.split("=", 1)
        elif a.startswith("-") and not a.startswith("--") and len(a) > 2:
            key, val = a[:2], a[2:]
        if key == "-a":
            i += 1
            continue
        if key not in takes:
            raise Fail(f"mlnx_qos: no such option: {a}", 2)
        if val is None:
            i += 1
            if i >= len(argv):
                raise Fail(f"mlnx_qos: {a} option requires an argument", 2)
            val = argv[i]
        name = takes[key]
        if name == "dscp2prio":
            opts["dscp2prio"].append(val)
        else:
            opts[name] = val
        i += 1
    ifname = opts.get("intf")
    if not ifname:
        raise Fail("mlnx_qos: -i <interface> is required", 1)
    if opts.get("ratelimit"):
        raise NotEmulated("mlnx_qos --ratelimit: per-TC rate limits are not recorded")
    net = f"/sys/class/net/{ifname}"
    trust_path, d2p_path = f"{net}/qos/trust", f"{net}/qos/dscp2prio"
    # mlnx_qos: `is_trust_sysfs = os.path.exists(trust_path)`: MLNX_OFED's sysfs files take the
    # trust state and the DSCP map when they exist; dcbnl's APP table otherwise.
    trust_sysfs = exists(trust_path)
    buffer_sysfs = exists(f"{net}/qos/buffer_size")
    if not netdev_exists(ifname):
        raise Fail(f"mlnx_qos: cannot find device \"{ifname}\"", 1)
    qos = JsonFile(QOS_JSON)
    needs_dcb = any(opts.get(k) for k in ("pfc", "specific_pfc", "get_pfc", "prio_tc", "tsa", "tc_bw", "dcbx", "cable_len"))
    needs_dcb = needs_dcb or (opts["dscp2prio"] and not trust_sysfs) or (opts.get("trust") and not trust_sysfs)
    needs_dcb = needs_dcb or ((opts.get("prio2buffer") or opts.get("buffer_size")) and not buffer_sysfs)
    dcb = None
    if needs_dcb:
        dcb = dcb_ok(qos_netdev(qos, ifname, "mlnx_qos"), "mlnx_qos", ifname)
    changed = False
    # --cable_len: the PFC delay (mlnx_qos: set_ieee_pfc with the current pfc_en).
    if opts.get("cable_len"):
        pfc = pfc_of(dcb, "mlnx_qos", ifname)
        pfc["delay"] = int(opts["cable_len"])
        changed = True
    # -P: prints one priority's PFC bit.
    if opts.get("get_pfc"):
        say(str((pfc_of(dcb, "mlnx_qos", ifname)["enabled"] >> int(opts["get_pfc"])) & 1))
        return 0
    # -F: only the priorities not marked x change; -f: the whole pfc_en mask (set_ieee_pfc).
    if opts.get("specific_pfc"):
        pfc = pfc_of(dcb, "mlnx_qos", ifname)
        for prio, v in enumerate(_list8(opts["specific_pfc"], "pfc", 0, 1, allow_x=True)):
            if v is not None:
                pfc["enabled"] = (pfc["enabled"] & ~(1 << prio)) | (v << prio)
        changed = True
    if opts.get("pfc"):
        pfc = pfc_of(dcb, "mlnx_qos", ifname)
        en = 0
        for prio, v in enumerate(_list8(opts["pfc"], "pfc", 0, 1)):
            en |= v << prio
        pfc["enabled"] = en
        changed = True
    # -p/-s/-t: ETS (set_ieee_ets): priority -> TC, the TCs' algorithms and bandwidth.
    if opts.get("prio_tc") or opts.get("tsa") or opts.get("tc_bw"):
        ets = dcb.get("ets")
        if ets is None:
            raise Fail(f"mlnx_qos: {ifname}: the driver answered no ETS configuration", 1)
        if opts.get("prio_tc"):
            ets["prio_tc"] = _list8(opts["prio_tc"], "prio_tc")
        if opts.get("tsa"):
            names = {"strict": 0, "cbs": 1, "ets": 2, "vendor": 255}
            tsa = opts["tsa"].split(",")
            if len(tsa) != 8 or any(t not in names for t in tsa):
                raise Fail("mlnx_qos: tsa list must have 8 items of strict, ets or vendor", 1)
            ets["tc_tsa"] = [names[t] for t in tsa]
        if opts.get("tc_bw"):
            ets["tc_tx_bw"] = _list8(opts["tc_bw"], "tc_bw", 0, 100)
        changed = True
    # -d os|fw: who runs DCBX (DCB_CAP_DCBX_HOST 0x01 vs LLD_MANAGED 0x02), version bits kept.
    if opts.get("dcbx"):
        mode = {"os": 0x01, "fw": 0x02}.get(opts["dcbx"])
        if mode is None:
            raise Fail("mlnx_qos: dcbx mode must be os or fw", 1)
        dcb["dcbx"] = ((dcb.get("dcbx") or 0x08) & ~0x03) | mode
        changed = True
    # --dscp2prio set,D,P / del,D,P / flush; not together with --trust (mlnx_qos exits 1).
    if opts["dscp2prio"] and opts.get("trust"):
        raise Fail("trust and dscp2prio commands cannot be used at the same time.", 1)
    for spec in opts["dscp2prio"]:
        if spec == "flush":
            if trust_sysfs:
                continue  # mlnx_qos does nothing for flush on the sysfs path
            app_del(dcb, SEL_DSCP)
            changed = True
            continue
        try:
            action, d, p = spec.split(",")
            d, p = int(d), int(p)
        except ValueError:
            raise Fail("Invalid dscp2prio command. Refer to the help.", 1)
        if action not in ("set", "del") or d > 63 or p > 7 or d < 0 or p < 0:
            raise Fail("Invalid dscp2prio command. Refer to the help.", 1)
        if trust_sysfs:
            if action == "set":
                # mlnx_qos writes "D P " to qos/dscp2prio; the driver moves D to P.
                text = read(d2p_path, "dscp2prio mapping:\n")
                write(d2p_path, _dscp2prio_sysfs_edit(text, "set", d, p))
            # mlnx_qos ignores del on the sysfs path.
        elif action == "set":
            app_replace(dcb, SEL_DSCP, d, p)
            changed = True
        else:
            app_del(dcb, SEL_DSCP, d, p)
            changed = True
    # --trust pcp|dscp (class Trust): the sysfs file, else the APP table: dscp = 64 default
    # entries DSCP -> DSCP >> 3 (dcbnetlink.py setDefaultAppEntry), pcp = every DSCP entry
    # deleted; nothing happens when the state already is the one asked for.
    if opts.get("trust"):
        t = opts["trust"]
        if t not in ("pcp", "dscp"):
            raise Fail("Invalid trust state command. Refer to the help.", 1)
        if trust_sysfs:
            old = read(trust_path, "")
            nl = "\n" if old.endswith("\n") or old == "" else ""
            if old.strip() != t:
                write(trust_path, t + nl)
        else:
            has_dscp = any(a["selector"] == SEL_DSCP for a in dcb.get("app", []))
            if t == "dscp" and not has_dscp:
                for d in range(64):
                    app_replace(dcb, SEL_DSCP, d, d >> 3)
                changed = True
            elif t == "pcp" and has_dscp:
                app_del(dcb, SEL_DSCP)
                changed = True
    # --prio2buffer / --buffer_size: MLNX_OFED's qos/prio2buffer and qos/buffer_size when
    # qos/buffer_size exists (is_buffer_sysfs), else dcbnl's buffer (set_dcb_buffer).
    if opts.get("prio2buffer") or opts.get("buffer_size"):
        p2b = _list8(opts["prio2buffer"], "prio buffer") if opts.get("prio2buffer") else None
        sizes = None
        if opts.get("buffer_size"):
            sizes = [int(x) for x in opts["buffer_size"].split(",")]
            if len(sizes) > 8:
                raise Fail("Too many items for buffer_size", 1)
        if buffer_sysfs:
            if p2b is not None:
                path = f"{net}/qos/prio2buffer"
                old = read(path, "")
                head = old.split("\n", 1)[0] if old else "Priority\tBuffer"
                write(path, head + "\n" + "".join(f"{p}\t{b}\n" for p, b in enumerate(p2b)))
            if sizes is not None:
                raise NotEmulated("mlnx_qos --buffer_size on MLNX_OFED's sysfs buffer files")
        else:
            buf = dcb.get("buffer")
            if buf is None:
                raise Fail("Buffers commands are not supported on your system", 1)
            if p2b is not None:
                buf["prio2buffer"] = p2b
            if sizes is not None:
                for i, s in enumerate(sizes):
                    buf["buffer_size"][i] = s
            changed = True
    if changed:
        qos.save()
    if not any(opts.get(k) for k in ("pfc", "specific_pfc", "prio_tc", "tsa", "tc_bw", "dcbx", "trust", "cable_len", "prio2buffer", "buffer_size")) and not opts["dscp2prio"]:
        _mlnx_qos_show(ifname, qos, trust_sysfs, trust_path)
    return 0


def _mlnx_qos_show(ifname, qos, trust_sysfs, trust_path):
    nd = qos_netdev(qos, ifname, "mlnx_qos")
    dcb = dcb_ok(nd, "mlnx_qos", ifname)
    dcbx = dcb.get("dcbx") or 0
    say("DCBX mode: " + ("OS controlled" if dcbx & 0x01 else "Firmware controlled"))
    if trust_sysfs:
        trust = read(trust_path, "").strip()
    else:
        trust = "dscp" if any(a["selector"] == SEL_DSCP for a in dcb.get("app", [])) else "pcp"
    say("Priority trust state: " + trust)
    pfc = dcb.get("pfc") or {"enabled": 0, "delay": 0}
    say("Cable len: %d" % pfc.get("delay", 0))
    say("PFC configuration:")
    say("\tpriority    0   1   2   3   4   5   6   7")
    say("\tenabled     " + "".join("%1d   " % ((pfc["enabled"] >> p) & 1) for p in range(8)))


# ------------------------------------------------------------------------------------------------
# dcb (iproute2 dcb/: dcb-pfc(8), dcb-app(8), dcb-ets(8), dcb-buffer(8), dcb-apptrust(8))
# ------------------------------------------------------------------------------------------------


def _dcb_keys(key, n=8):
    """dcb(8) ARRAY PARAMETERS: a key is a number or `all` (ranges a-b accepted too)."""
    if key == "all":
        return list(range(n))
    if "-" in key:
        a, b = key.split("-", 1)
        return list(range(int(a), int(b) + 1))
    return [int(key)]


def _dcb_map(args, start, keywords):
    """KEY:VALUE pairs from args[start] up to the next keyword."""
    pairs = []
    i = start
    while i < len(args) and args[i] not in keywords:
        if ":" not in args[i]:
            raise Fail(f"dcb: expected KEY:VALUE, got \"{args[i]}\"", 1)
        k, v = args[i].rsplit(":", 1)
        pairs.append((k, v))
        i += 1
    return pairs, i


def dcb(argv):
    if len(argv) < 2:
        raise Fail("Usage: dcb [ OPTIONS ] OBJECT { COMMAND | help }", 1)
    obj, cmd = argv[0], argv[1]
    rest = argv[2:]
    if rest[:1] != ["dev"] or len(rest) < 2:
        raise Fail(f"dcb {obj} {cmd}: dev DEV is required", 1)
    ifname = rest[1]
    args = rest[2:]
    if not netdev_exists(ifname):
        raise Fail(f"Cannot find device \"{ifname}\"", 1)
    qos = JsonFile(QOS_JSON)
    d = dcb_ok(qos_netdev(qos, ifname, "dcb"), "dcb", ifname)
    if cmd == "show":
        say(json.dumps(d.get({"pfc": "pfc", "app": "app", "ets": "ets", "buffer": "buffer", "apptrust": "trust"}.get(obj, obj))))
        return 0
    if obj == "pfc" and cmd == "set":
        # dcb-pfc(8): prio-pfc PFC-MAP (keys priorities, values on/off), delay, macsec-bypass;
        # dcb(8): elements not named keep their current value, later ones override earlier.
        pfc = pfc_of(d, "dcb", ifname)
        kw = {"prio-pfc", "delay", "macsec-bypass"}
        i = 0
        while i < len(args):
            if args[i] == "prio-pfc":
                pairs, i = _dcb_map(args, i + 1, kw)
                for k, v in pairs:
                    if v not in ("on", "off"):
                        raise Fail(f"dcb: \"{v}\" is not on or off", 1)
                    for p in _dcb_keys(k):
                        bit = 1 << p
                        pfc["enabled"] = (pfc["enabled"] | bit) if v == "on" else (pfc["enabled"] & ~bit)
            elif args[i] == "delay":
                pfc["delay"] = int(args[i + 1])
                i += 2
            elif args[i] == "macsec-bypass":
                pfc["mbc"] = 1 if args[i + 1] == "on" else 0
                i += 2
            else:
                raise Fail(f"dcb pfc set: unknown parameter \"{args[i]}\"", 1)
    elif obj == "app" and cmd in ("add", "del", "replace", "flush"):
        # dcb-app(8): replace adds the entries not yet present, then removes those of the same
        # selector and protocol with another priority: one priority per (selector, protocol).
        selectors = {
            "dscp-prio": SEL_DSCP, "pcp-prio": SEL_PCP, "ethtype-prio": SEL_ETHERTYPE,
            "stream-port-prio": SEL_STREAM, "dgram-port-prio": SEL_DGRAM, "port-prio": SEL_ANY,
        }
        kw = set(selectors) | {"default-prio"}
        i = 0
        while i < len(args):
            a = args[i]
            if cmd == "flush" and a in selectors:
                app_del(d, selectors[a])
                i += 1
                continue
            if a == "default-prio":
                raise NotEmulated("dcb app default-prio")
            if a not in selectors:
                raise Fail(f"dcb app {cmd}: unknown parameter \"{a}\"", 1)
            pairs, i = _dcb_map(args, i + 1, kw)
            for k, v in pairs:
                if a == "pcp-prio" and k.endswith(("de", "nd")):
                    raise NotEmulated("dcb app pcp-prio with a drop-eligibility suffix")
                proto, prio = int(k, 0), int(v)
                if cmd == "replace":
                    app_replace(d, selectors[a], proto, prio)
                elif cmd == "add":
                    if not any(x["selector"] == selectors[a] and x["protocol"] == proto and x["priority"] == prio for x in d.setdefault("app", [])):
                        d["app"].append({"selector": selectors[a], "priority": prio, "protocol": proto})
                else:
                    app_del(d, selectors[a], proto, prio)
    elif obj == "ets" and cmd == "set":
        ets = d.get("ets")
        if ets is None:
            raise Fail(f"dcb: {ifname}: no ETS configuration (Operation not supported)", 1)
        field = {"prio-tc": "prio_tc", "tc-bw": "tc_tx_bw"}
        kw = set(field) | {"tc-tsa", "willing"}
        i = 0
        while i < len(args):
            if args[i] in field:
                name = field[args[i]]
                pairs, i = _dcb_map(args, i + 1, kw)
                for k, v in pairs:
                    for p in _dcb_keys(k):
                        ets[name][p] = int(v)
            elif args[i] == "tc-tsa":
                names = {"strict": 0, "cbs": 1, "ets": 2, "vendor": 255}
                pairs, i = _dcb_map(args, i + 1, kw)
                for k, v in pairs:
                    for p in _dcb_keys(k):
                        ets["tc_tsa"][p] = names[v]
            elif args[i] == "willing":
                ets["willing"] = 1 if args[i + 1] == "on" else 0
                i += 2
            else:
                raise Fail(f"dcb ets set: unknown parameter \"{args[i]}\"", 1)
    elif obj == "buffer" and cmd == "set":
        buf = d.get("buffer")
        if buf is None:
            raise Fail(f"dcb: {ifname}: no buffer configuration (Operation not supported)", 1)
        kw = {"prio-buffer", "buffer-size"}
        i = 0
        while i < len(args):
            name = args[i]
            if name not in kw:
                raise Fail(f"dcb buffer set: unknown parameter \"{name}\"", 1)
            pairs, i = _dcb_map(args, i + 1, kw)
            for k, v in pairs:
                for p in _dcb_keys(k):
                    if name == "prio-buffer":
                        buf["prio2buffer"][p] = int(v)
                    else:
                        buf["buffer_size"][p] = int(v.rstrip("Bb"))
    elif obj == "apptrust" and cmd == "set":
        # dcb-apptrust(8): `order SEL...`, most trusted first.
        if args[:1] != ["order"]:
            raise Fail("dcb apptrust set: order is required", 1)
        names = {"ethtype": SEL_ETHERTYPE, "stream-port": SEL_STREAM, "dgram-port": SEL_DGRAM, "port": SEL_ANY, "dscp": SEL_DSCP, "pcp": SEL_PCP}
        d["trust"] = [names[n] for n in args[1:]]
    else:
        raise NotEmulated(f"dcb {obj} {cmd}")
    qos.save()
    return 0


# ------------------------------------------------------------------------------------------------
# ethtool (ethtool(8) -A/--pause, -a/--show-pause)
# ------------------------------------------------------------------------------------------------


def ethtool(argv):
    if len(argv) >= 2 and argv[0] in ("-A", "--pause"):
        ifname = argv[1]
        qos = JsonFile(QOS_JSON)
        nd = qos_netdev(qos, ifname, "ethtool")
        pause = nd["ethtool"]["pause"]
        if "ok" not in pause:
            raise Fail(f"netlink error: {pause.get('error', {}).get('message', 'Operation not supported')}", 1)
        rest = argv[2:]
        if not rest or len(rest) % 2:
            raise Fail("ethtool: bad command line argument(s)", 1)
        for k, v in zip(rest[::2], rest[1::2]):
            if k not in ("autoneg", "rx", "tx") or v not in ("on", "off"):
                raise Fail(f"ethtool: bad command line argument(s): {k} {v}", 1)
            pause["ok"][k] = v == "on"
        qos.save()
        return 0
    if len(argv) == 2 and argv[0] in ("-a", "--show-pause"):
        ifname = argv[1]
        nd = qos_netdev(JsonFile(QOS_JSON), ifname, "ethtool")
        pause = nd["ethtool"]["pause"]
        if "ok" not in pause:
            raise Fail(f"netlink error: {pause.get('error', {}).get('message', 'Operation not supported')}", 1)
        p = pause["ok"]
        say(f"Pause parameters for {ifname}:")
        for k, label in (("autoneg", "Autonegotiate"), ("rx", "RX"), ("tx", "TX")):
            say(f"{label}:\t\t{'on' if p[k] else 'off'}".replace("Autonegotiate:\t\t", "Autonegotiate:\t"))
        return 0
    raise NotEmulated("ethtool " + " ".join(argv[:1]))


# ------------------------------------------------------------------------------------------------
# modprobe / rmmod (kmod: modprobe(8), modprobe.d(5), modules-load.d(5)); /proc/modules as
# proc(5) lays it out; /sys/module/M as the kernel's module sysfs (Documentation/ABI/testing/
# sysfs-module)
# ------------------------------------------------------------------------------------------------

# What each module needs loaded first (modules.dep of the NVIDIA driver packages: nvidia-uvm,
# nvidia-modeset and nvidia-peermem depend on nvidia; nvidia-peermem on ib_core too).
DEPENDS = {
    "nvidia_uvm": ["nvidia"],
    "nvidia_modeset": ["nvidia"],
    "nvidia_drm": ["nvidia_modeset"],
    "nvidia_peermem": ["ib_core", "nvidia"],
    "mlx5_ib": ["ib_core", "mlx5_core"],
    "ib_uverbs": ["ib_core"],
    "rdma_ucm": ["rdma_cm"],
}

PROC_MODULES = "/proc/modules"
MEMORY_PEERS = "/sys/kernel/mm/memory_peers"


def _mod(name):
    return name.replace("-", "_")


def _modules():
    """/proc/modules as [name, size, refcount, used_by(list), rest(str)], in the file's order."""
    text = read(PROC_MODULES, "")
    mods = []
    for line in text.splitlines():
        f = line.split(" ", 4)
        if len(f) < 5:
            mods.append([line, None, None, None, None])
            continue
        used = [] if f[3] == "-" else [u for u in f[3].split(",") if u]
        mods.append([f[0], f[1], int(f[2]) if f[2].isdigit() else f[2], used, f[4]])
    return mods, text.endswith("\n") or text == ""


def _modules_save(mods):
    lines = []
    for m in mods:
        if m[1] is None:
            lines.append(m[0])
        else:
            used = "-" if not m[3] else ",".join(m[3]) + ","
            lines.append(f"{m[0]} {m[1]} {m[2]} {used} {m[4]}")
    write(PROC_MODULES, "".join(l + "\n" for l in lines))


def _loaded(mods, name):
    return next((m for m in mods if m[0] == name), None)


def _builtin(name):
    """Built-in modules have /sys/module/M but no /proc/modules line and no initstate."""
    return exists(f"/sys/module/{name}") and not exists(f"/sys/module/{name}/initstate")


def peer_memory_api():
    """Whether the RDMA core exports the peer-memory API nvidia_peermem registers with
    (ib_register_peer_memory_client: MLNX_OFED / DOCA-OFED's ib_core only; REFERENCE.md 1).
    /proc/kallsyms decides where the copy has it; else the out-of-tree RDMA stack's marks:
    ib_core with a version file (inbox modules have none) or MLNX_OFED's mlx_compat loaded."""
    ks = read("/proc/kallsyms")
    if ks is not None:
        return re.search(r"\sib_register_peer_memory_client(\s|$)", ks) is not None
    mods, _ = _modules()
    return exists("/sys/module/ib_core/version") or _loaded(mods, "mlx_compat") is not None


def _version_of(name):
    if name in ("nvidia_peermem", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"):
        v = read("/sys/module/nvidia/version")
        if v is not None:
            return v
        nv = read("/proc/driver/nvidia/version", "")
        m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", nv)
        if m:
            return m.group(1) + "\n"
    return None


def modprobe_load(name, quiet=False):
    name = _mod(name)
    mods, _ = _modules()
    if _loaded(mods, name) or _builtin(name):
        return 0  # modprobe(8): loading a module that is loaded already succeeds, doing nothing
    for dep in DEPENDS.get(name, []):
        modprobe_load(dep, quiet=True)
    mods, _ = _modules()
    for dep in DEPENDS.get(name, []):
        m = _loaded(mods, dep)
        if m and m[1] is not None and isinstance(m[2], int):
            m[2] += 1
            if name not in m[3]:
                m[3].append(name)
    taint = " (O)" if name.startswith("nvidia") else ""
    # The kernel lists the most recently loaded module first.
    mods.insert(0, [name, "16384", 0, [], f"Live 0x0000000000000000{taint}"])
    _modules_save(mods)
    write(f"/sys/module/{name}/initstate", "live\n")
    write(f"/sys/module/{name}/refcnt", "0\n")
    v = _version_of(name)
    if v is not None:
        write(f"/sys/module/{name}/version", v)
    if name in ("nvidia_peermem", "nv_peer_mem"):
        # nvidia-peermem's init registers the client "nv_mem" with the RDMA core's peer-memory
        # API, which then shows /sys/kernel/mm/memory_peers/nv_mem/ (nccl#1939, DeepEP#151);
        # without the API (an inbox RDMA stack) nothing is registered (REFERENCE.md 1).
        if peer_memory_api():
            write(f"{MEMORY_PEERS}/nv_mem/version", v or "1.0\n")
        elif not quiet:
            warn(f"stand-in modprobe: {name} loaded, but this RDMA core has no peer-memory API: no nv_mem registered")
    return 0


def modprobe_remove(name):
    name = _mod(name)
    mods, _ = _modules()
    m = _loaded(mods, name)
    if m is None:
        if _builtin(name):
            raise Fail(f"modprobe: FATAL: Module {name} is builtin.", 1)
        return 0
    if isinstance(m[2], int) and m[2] > 0:
        raise Fail(f"modprobe: FATAL: Module {name} is in use.", 1)
    mods.remove(m)
    for other in mods:
        if other[3] and name in other[3]:
            other[3].remove(name)
            if isinstance(other[2], int) and other[2] > 0:
                other[2] -= 1
    _modules_save(mods)
    remove_tree(f"/sys/module/{name}")
    if name in ("nvidia_peermem", "nv_peer_mem"):
        remove_tree(f"{MEMORY_PEERS}/nv_mem")
    return 0


def modprobe(argv):
    remove = False
    quiet = False
    all_names = False
    names = []
    for a in argv:
        if a in ("-r", "--remove"):
            remove = True
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-a", "--all"):
            all_names = True
        elif a in ("-v", "--verbose", "-b", "--use-blacklist"):
            continue
        elif a.startswith("-"):
            raise NotEmulated(f"modprobe {a}")
        else:
            names.append(a)
    if not names:
        raise Fail("modprobe: ERROR: missing module name.", 1)
    # Without -a/-r the words after the module name are its parameters (modprobe(8)).
    if not remove and not all_names:
        names = names[:1]
    for n in names:
        if remove:
            modprobe_remove(n)
        else:
            modprobe_load(n, quiet)
    return 0


def rmmod(argv):
    names = [a for a in argv if not a.startswith("-")]
    for n in names:
        modprobe_remove(n)
    return 0


# ------------------------------------------------------------------------------------------------
# setpci (pciutils setpci.c, setpci(8))
# ------------------------------------------------------------------------------------------------

ECAPS = {
    "AER": 0x01, "VC": 0x02, "DSN": 0x03, "PB": 0x04, "RCLINK": 0x05, "RCILINK": 0x06, "RCEC": 0x07,
    "MFVC": 0x08, "VC2": 0x09, "RBCB": 0x0A, "VNDR": 0x0B, "ACS": 0x0D, "ARI": 0x0E, "ATS": 0x0F,
    "SRIOV": 0x10, "MRIOV": 0x11, "MCAST": 0x12, "PRI": 0x13, "REBAR": 0x15, "DPA": 0x16, "TPH": 0x17,
    "LTR": 0x18, "SECPCI": 0x19, "PMUX": 0x1A, "PASID": 0x1B, "LNR": 0x1C, "DPC": 0x1D, "L1PM": 0x1E,
    "PTM": 0x1F, "DVSEC": 0x23, "16GT": 0x26,
}
CAPS = {
    "PM": 0x01, "AGP": 0x02, "VPD": 0x03, "SLOTID": 0x04, "MSI": 0x05, "CHSWP": 0x06, "PCIX": 0x07,
    "HT": 0x08, "VNDR": 0x09, "DBG": 0x0A, "CCRC": 0x0B, "HOTPLUG": 0x0C, "SSVID": 0x0D, "AGP3": 0x0E,
    "SECURE": 0x0F, "EXP": 0x10, "MSIX": 0x11, "SATA": 0x12, "AF": 0x13, "EA": 0x14,
}
# setpci's named header registers, with their widths (lib/header.h offsets).
REGS = {
    "VENDOR_ID": (0x00, 2), "DEVICE_ID": (0x02, 2), "COMMAND": (0x04, 2), "STATUS": (0x06, 2),
    "REVISION": (0x08, 1), "CLASS_PROG": (0x09, 1), "CLASS_DEVICE": (0x0A, 2), "CACHE_LINE_SIZE": (0x0C, 1),
    "LATENCY_TIMER": (0x0D, 1), "HEADER_TYPE": (0x0E, 1), "BIST": (0x0F, 1),
    "BASE_ADDRESS_0": (0x10, 4), "BASE_ADDRESS_1": (0x14, 4), "BASE_ADDRESS_2": (0x18, 4),
    "BASE_ADDRESS_3": (0x1C, 4), "BASE_ADDRESS_4": (0x20, 4), "BASE_ADDRESS_5": (0x24, 4),
    "CAPABILITY_LIST": (0x34, 1), "INTERRUPT_LINE": (0x3C, 1), "INTERRUPT_PIN": (0x3D, 1),
    "BRIDGE_CONTROL": (0x3E, 2),
}


def _bdf(s):
    m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", s)
    if not m:
        raise Fail(f"setpci: -s: Invalid slot number \"{s}\"", 1)
    dom = int(m.group(1) or "0", 16)
    return "%04x:%02x:%02x.%d" % (dom, int(m.group(2), 16), int(m.group(3), 16), int(m.group(4)))


def _find_ecap(cfg, cap_id, index=0):
    """The extended capability list: headers from 0x100, ID bits 0-15, next offset bits 20-31,
    the end at next = 0 (PCIe base spec; REFERENCE.md 3). A loop ends the walk."""
    pos, seen, n = 0x100, set(), 0
    while pos and pos + 4 <= len(cfg) and pos not in seen:
        seen.add(pos)
        hdr = int.from_bytes(cfg[pos:pos + 4], "little")
        if hdr in (0, 0xFFFFFFFF):
            return None
        if hdr & 0xFFFF == cap_id:
            if n == index:
                return pos
            n += 1
        pos = (hdr >> 20) & 0xFFC
    return None


def _find_cap(cfg, cap_id, index=0):
    if len(cfg) < 0x40 or not (int.from_bytes(cfg[6:8], "little") & 0x10):
        return None
    pos, seen, n = cfg[0x34] & 0xFC, set(), 0
    while pos and pos + 2 <= len(cfg) and pos not in seen:
        seen.add(pos)
        if cfg[pos] == cap_id:
            if n == index:
                return pos
            n += 1
        pos = cfg[pos + 1] & 0xFC
    return None


def _setpci_op(cfg, op, bdf):
    """One operation `REG[+off][.w][=VALUE[:MASK][,VALUE...]]`: (address, width, values)."""
    reg, _, values = op.partition("=")
    width = None
    m = re.fullmatch(r"(.+?)(?:\.([bBwWlL]))?", reg)
    name, wch = m.group(1), m.group(2)
    if wch:
        width = {"b": 1, "w": 2, "l": 4}[wch.lower()]
    offset = 0
    if "+" in name:
        name, off = name.split("+", 1)
        offset = int(off, 16)
    index = 0
    if "@" in name:
        name, idx = name.split("@", 1)
        index = int(idx)
    up = name.upper()
    if re.fullmatch(r"(0X)?[0-9A-F]+", up):
        base = int(up, 16)
    elif up.startswith("ECAP"):
        rest = up[4:].lstrip("_")
        cid = ECAPS.get(rest) if not re.fullmatch(r"[0-9A-F]+", rest) or rest in ECAPS else int(rest, 16)
        if cid is None:
            raise Fail(f"setpci: Unknown register \"{name}\"", 1)
        base = _find_ecap(cfg, cid, index)
        if base is None:
            raise Fail(f"setpci: Extended capability {cid:04x} not found on {bdf}", 1)
    elif up.startswith("CAP"):
        rest = up[3:].lstrip("_")
        cid = CAPS.get(rest) if not re.fullmatch(r"[0-9A-F]+", rest) or rest in CAPS else int(rest, 16)
        if cid is None:
            raise Fail(f"setpci: Unknown register \"{name}\"", 1)
        base = _find_cap(cfg, cid, index)
        if base is None:
            raise Fail(f"setpci: Capability {cid:02x} not found on {bdf}", 1)
    elif up in REGS:
        base, w = REGS[up]
        width = width or w
    else:
        raise Fail(f"setpci: Unknown register \"{name}\"", 1)
    if width is None:
        raise Fail(f"setpci: Missing width for register \"{name}\"", 1)
    vals = []
    if values:
        for v in values.split(","):
            d, _, mk = v.partition(":")
            dv = int(d, 16)
            mv = int(mk, 16) if mk else (1 << (8 * width)) - 1
            if dv >> (8 * width) or mv >> (8 * width):
                raise Fail(f"setpci: Value \"{v}\" is out of range", 1)
            vals.append((dv, mv))
    return base + offset, width, vals, bool(values)


def setpci(argv):
    bdf = None
    ops = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-s":
            bdf = _bdf(argv[i + 1])
            i += 2
            continue
        if a.startswith("-s") and len(a) > 2:
            bdf = _bdf(a[2:])
        elif a in ("-r", "-f", "-v"):
            pass  # -r skips the bus scan (setpci(8)); -f, -v change nothing here
        elif a == "-D":
            raise NotEmulated("setpci -D")
        elif a == "-d":
            raise NotEmulated("setpci -d (select by vendor:device)")
        else:
            ops.append(a)
        i += 1
    if bdf is None:
        raise NotEmulated("setpci without -s (bus scan)")
    cfg_path = f"/sys/bus/pci/devices/{bdf}/config"
    if not exists(cfg_path):
        raise Fail(f"setpci: Device {bdf} not found", 1)
    cfg = bytearray(read_bytes(cfg_path))
    changed = False
    for op in ops:
        addr, width, vals, is_write = _setpci_op(cfg, op, bdf)
        if not is_write:
            if addr + width > len(cfg):
                raise Fail(f"setpci: {bdf}: register 0x{addr:x} beyond the readable config space", 1)
            x = int.from_bytes(cfg[addr:addr + width], "little")
            say("%0*x" % (2 * width, x))
            continue
        for dv, mv in vals:
            if addr + width > len(cfg):
                raise Fail(f"setpci: {bdf}: register 0x{addr:x} beyond the readable config space", 1)
            # setpci.c: x = (old & ~mask) | value, a read-modify-write of the register.
            old = int.from_bytes(cfg[addr:addr + width], "little")
            x = (old & ~mv) | dv
            cfg[addr:addr + width] = x.to_bytes(width, "little")
            changed = True
            addr += width
    if changed:
        write(cfg_path, bytes(cfg))
    return 0


# ------------------------------------------------------------------------------------------------
# ip link set (iproute2 ip-link(8); include/uapi/linux/if.h IFF_UP = 0x1)
# ------------------------------------------------------------------------------------------------


def _ib_ports_of(ifname):
    """The RDMA ports whose netdev is `ifname` (RoCE): (device, port)."""
    out = []
    dev_port = read(f"/sys/class/net/{ifname}/dev_port", "0").strip() or "0"
    for dev in listdir("/sys/class/infiniband"):
        if ifname in listdir(f"/sys/class/infiniband/{dev}/device/net"):
            port = str(int(dev_port, 0) + 1)
            if read(f"/sys/class/infiniband/{dev}/ports/{port}/link_layer", "").strip() == "Ethernet":
                out.append((dev, port))
    return out


def ip(argv):
    args = list(argv)
    while args and args[0].startswith("-"):
        args.pop(0)  # -4/-6/-d... change nothing for `link set`
    if len(args) < 3 or args[0] not in ("link", "l", "li", "lin") or args[1] not in ("set", "s", "se"):
        raise NotEmulated("ip " + " ".join(argv[:2]))
    args = args[2:]
    if args[0] == "dev":
        args = args[1:]
    ifname, args = args[0], args[1:]
    net = f"/sys/class/net/{ifname}"
    if not exists(net):
        raise Fail(f"Cannot find device \"{ifname}\"", 1)
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("up", "down"):
            flags_text = read(f"{net}/flags")
            if flags_text is None:
                # No flags file in the copy: start from what an Ethernet netdev shows
                # (IFF_BROADCAST|IFF_MULTICAST) where `type` says Ethernet (1).
                flags = 0x1002 if read(f"{net}/type", "1").strip() == "1" else 0
            else:
                flags = int(flags_text.strip(), 16)
            flags = (flags | 0x1) if a == "up" else (flags & ~0x1)
            write(f"{net}/flags", "0x%x\n" % flags)
            carrier = (read(f"{net}/carrier") or "").strip()
            if a == "up" and carrier == "1":
                # Documentation/networking/operstates.rst: an administratively up interface
                # with carrier goes to operstate "up".
                write(f"{net}/operstate", "up\n")
                # mlx5's RoCE port state follows its netdev (drivers/infiniband/hw/mlx5/main.c,
                # mlx5_query_port_roce: running with carrier = ACTIVE/LinkUp).
                for dev, port in _ib_ports_of(ifname):
                    write(f"/sys/class/infiniband/{dev}/ports/{port}/state", "4: ACTIVE\n")
                    write(f"/sys/class/infiniband/{dev}/ports/{port}/phys_state", "5: LinkUp\n")
            elif a == "down":
                write(f"{net}/operstate", "down\n")
                for dev, port in _ib_ports_of(ifname):
                    write(f"/sys/class/infiniband/{dev}/ports/{port}/state", "1: DOWN\n")
                    write(f"/sys/class/infiniband/{dev}/ports/{port}/phys_state", "3: Disabled\n")
            i += 1
        elif a == "mtu":
            n = int(args[i + 1])
            if not 68 <= n <= 65535:
                raise Fail(f"Error: mtu {n} out of range.", 2)
            write(f"{net}/mtu", f"{n}\n")
            i += 2
        else:
            raise NotEmulated(f"ip link set ... {a}")
    return 0


# ------------------------------------------------------------------------------------------------
# sysctl (procps sysctl(8): a key's dots are /proc/sys's slashes)
# ------------------------------------------------------------------------------------------------


def _sysctl_path(key):
    key = key.strip()
    if "/" not in key or "." in key.split("/")[0]:
        key = key.replace(".", "/")
    return "/proc/sys/" + key.lstrip("/")


def _sysctl_set(key, value, quiet):
    p = _sysctl_path(key)
    if not exists(p):
        raise Fail(f"sysctl: cannot stat {p}: No such file or directory", 255)
    write(p, value.strip() + "\n")
    if not quiet:
        say(f"{key.strip()} = {value.strip()}")


def _sysctl_file(path, quiet):
    text = read(path)
    if text is None:
        raise Fail(f"sysctl: cannot open \"{path}\": No such file or directory", 255)
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if "=" in line:
            k, v = line.split("=", 1)
            _sysctl_set(k.lstrip("-"), v, quiet)


def sysctl(argv):
    quiet = False
    write_mode = False
    show_value_only = False
    items = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-w", "--write"):
            write_mode = True
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-n", "--values"):
            show_value_only = True
        elif a in ("-p", "--load") or a.startswith("--load="):
            f = a.split("=", 1)[1] if "=" in a else (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else "/etc/sysctl.conf")
            if "=" not in a and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1
            _sysctl_file(f, quiet)
            return 0
        elif a == "--system":
            # sysctl(8) --system: sysctl.d directories in order, then /etc/sysctl.conf.
            seen = {}
            for d in ("/usr/lib/sysctl.d", "/run/sysctl.d", "/etc/sysctl.d"):
                for n in listdir(d):
                    if n.endswith(".conf"):
                        seen[n] = f"{d}/{n}"
            for n in sorted(seen):
                _sysctl_file(seen[n], quiet)
            if exists("/etc/sysctl.conf"):
                _sysctl_file("/etc/sysctl.conf", quiet)
            return 0
        elif a.startswith("-"):
            raise NotEmulated(f"sysctl {a}")
        else:
            items.append(a)
        i += 1
    for it in items:
        if "=" in it:
            k, v = it.split("=", 1)
            _sysctl_set(k, v, quiet)
        elif write_mode:
            raise Fail(f"sysctl: \"{it}\" must be of the form name=value", 255)
        else:
            v = read(_sysctl_path(it))
            if v is None:
                raise Fail(f"sysctl: cannot stat {_sysctl_path(it)}: No such file or directory", 255)
            say(v.strip() if show_value_only else f"{it} = {v.strip()}")
    return 0


# ------------------------------------------------------------------------------------------------
# nvidia-smi (nvidia-smi(1): -pm, --query-gpu, -r) on the recorded NVML answer
# ------------------------------------------------------------------------------------------------


def _nvml():
    f = JsonFile(NVML_JSON)
    if f.data is None:
        if not exists("/proc/driver/nvidia/version"):
            raise Fail("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                       "Make sure that the latest NVIDIA driver is installed and running.", 9)
        raise NotEmulated(f"nvidia-smi: no recorded NVML answer ({NVML_JSON}) in this copy")
    nvml = f.data.get("nvml", {})
    if nvml.get("status") != "ready":
        raise Fail(f"NVIDIA-SMI has failed: NVML {nvml.get('status')}", 9)
    return f, nvml.get("devices", [])


def _norm_bus(b):
    """`00000000:3A:00.0` (NVML) or `3a:00.0` / `0000:3a:00.0` -> `0000:3a:00.0`."""
    b = b.strip().lower()
    if b.count(":") == 1:
        b = "0:" + b
    dom, rest = b.split(":", 1)
    return "%04x:%s" % (int(dom, 16), rest)


def _nvml_select(devices, sel):
    if sel is None:
        return devices
    out = []
    for s in sel.split(","):
        s = s.strip()
        for d in devices:
            if s.isdigit() and d.get("index") == int(s):
                out.append(d)
            elif ":" in s and _norm_bus(d.get("bus_id", "0:0")) == _norm_bus(s):
                out.append(d)
    if not out:
        raise Fail(f"No devices were found matching \"{sel}\"", 6)
    return out


def set_persistence(on, sel=None, quiet=False):
    f, devices = _nvml()
    for d in _nvml_select(devices, sel):
        d["persistence_mode"] = bool(on)
        if not quiet:
            say(f"{'Enabled' if on else 'Disabled'} persistence mode for GPU {d.get('bus_id')}.")
    f.save()
    if not quiet:
        say("All done.")


def nvidia_smi(argv):
    sel = None
    pm = None
    query = None
    fmt = None
    reset = False
    i = 0
    while i < len(argv):
        a = argv[i]
        val = None
        if "=" in a and a.startswith("--"):
            a, val = a.split("=", 1)
        if a in ("-i", "--id"):
            sel = val if val is not None else argv[i + 1]
            i += 1 if val is not None else 2
            continue
        if a in ("-pm", "--persistence-mode"):
            pm = val if val is not None else argv[i + 1]
            i += 1 if val is not None else 2
            continue
        if a in ("--query-gpu",):
            query = val if val is not None else argv[i + 1]
            i += 1 if val is not None else 2
            continue
        if a == "--format":
            fmt = val if val is not None else argv[i + 1]
            i += 1 if val is not None else 2
            continue
        if a in ("-r", "--gpu-reset"):
            reset = True
            i += 1
            continue
        raise NotEmulated(f"nvidia-smi {a}")
    if pm is not None:
        on = {"1": True, "ENABLED": True, "0": False, "DISABLED": False}.get(pm.upper())
        if on is None:
            raise Fail(f"Invalid persistence mode \"{pm}\"", 2)
        set_persistence(on, sel)
        return 0
    if query is not None:
        f, devices = _nvml()
        fields = [q.strip() for q in query.split(",")]
        opts = (fmt or "").split(",")
        if "csv" not in opts:
            raise NotEmulated("nvidia-smi --query-gpu without --format=csv")
        getters = {
            "persistence_mode": lambda d: "[N/A]" if d.get("persistence_mode") is None else ("Enabled" if d["persistence_mode"] else "Disabled"),
            "index": lambda d: str(d.get("index")),
            "pci.bus_id": lambda d: d.get("bus_id", "").upper(),
            "name": lambda d: d.get("name", ""),
            "driver_version": lambda d: f.data["nvml"].get("driver_version", ""),
        }
        for q in fields:
            if q not in getters:
                raise NotEmulated(f"nvidia-smi --query-gpu={q}")
        if "noheader" not in opts:
            say(", ".join(fields))
        for d in _nvml_select(devices, sel):
            say(", ".join(getters[q](d) for q in fields))
        return 0
    if reset:
        # A GPU reset's effect (a recovered GPU, cleared errors) cannot be shown in the copy:
        # nothing recorded changes; nvidia-smi's message only.
        if exists(NVML_JSON):
            _nvml_select(_nvml()[1], sel)
        say(f"GPU {sel or 'all'} was successfully reset. (stand-in: nothing recorded changed)")
        return 0
    raise NotEmulated("nvidia-smi " + " ".join(argv))


# ------------------------------------------------------------------------------------------------
# systemctl (systemd systemctl(1), systemd.unit(5), systemd.service(5))
# ------------------------------------------------------------------------------------------------

UNIT_DIRS = ["/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"]


def _unit(name):
    # systemctl(1): a name without a unit type suffix means .service.
    known = (".service", ".socket", ".target", ".timer", ".mount", ".path", ".device", ".slice", ".scope", ".swap", ".automount")
    return name if name.endswith(known) else name + ".service"


def _unit_file(unit):
    for d in UNIT_DIRS:
        p = f"{d}/{unit}"
        if exists(p):
            return p
    return None


def _unit_sections(unit):
    p = _unit_file(unit)
    if p is None:
        return {}
    out = {}
    section = None
    for line in (read(p) or "").splitlines():
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            continue
        if "=" in s and section:
            k, v = s.split("=", 1)
            out.setdefault(section, []).append((k.strip(), v.strip()))
    return out


def _wanted_by(unit):
    # systemd.unit(5) [Install] WantedBy=: enable links the unit into TARGET.wants/.
    targets = []
    for k, v in _unit_sections(unit).get("Install", []):
        if k in ("WantedBy", "RequiredBy"):
            suffix = ".wants" if k == "WantedBy" else ".requires"
            targets += [t + suffix for t in v.split()]
    return targets or ["multi-user.target.wants"]


def _enabled_markers(unit):
    out = []
    for d in ("/etc/systemd/system",):
        for sub in listdir(d):
            if sub.endswith((".wants", ".requires")) and os.path.lexists(R(f"{d}/{sub}") + f"/{unit}"):
                out.append(f"{d}/{sub}/{unit}")
    return out


def is_enabled(unit):
    return bool(_enabled_markers(unit))


def unit_start(unit, from_reboot=False):
    """What starting the unit does to the node, where the copy can show it."""
    if unit == "nvidia-persistenced.service":
        # nvidia-persistenced(1): the daemon keeps the GPUs initialised, which nvidia-smi and
        # NVML report as persistence mode Enabled; --no-persistence-mode leaves them off.
        exec_lines = [v for k, v in _unit_sections(unit).get("Service", []) if k == "ExecStart"]
        if any("--no-persistence-mode" in l for l in exec_lines):
            return 0
        set_persistence(True, quiet=True)
        return 0
    service = _unit_sections(unit).get("Service")
    if service is None:
        raise NotEmulated(f"systemctl start {unit}: no unit file in the copy, and its effect is unknown")
    lines = [v for k, v in service if k in ("ExecStartPre", "ExecStart", "ExecStartPost")]
    for line in lines:
        # systemd.service(5): ExecStart= may start with the prefixes @ - : + ! (ignore failure,
        # credentials...), which are not part of the command.
        ignore = False
        while line and line[0] in "@-:+!":
            ignore = ignore or line[0] == "-"
            line = line[1:]
        words = shlex.split(line)
        if not words:
            continue
        tool = os.path.basename(words[0])
        if tool not in HANDLERS:
            raise NotEmulated(f"systemctl start {unit}: its command {tool} is not a stand-in")
        rc = run_tool(tool, words[1:])
        if rc and not ignore:
            raise Fail(f"Job for {unit} failed because the control process exited with error code.", 1)
    return 0


def systemctl(argv):
    args = [a for a in argv if not a.startswith("-")]
    flags = [a for a in argv if a.startswith("-")]
    quiet = "--quiet" in flags or "-q" in flags
    now = "--now" in flags
    if not args:
        raise NotEmulated("systemctl (list units)")
    cmd, units = args[0], [_unit(u) for u in args[1:]]
    if cmd == "daemon-reload":
        return 0  # systemctl(1): re-reads unit files; the copy's files are read fresh each time
    if cmd == "is-enabled":
        # systemctl(1) is-enabled: exit 0 when enabled, non-zero otherwise; --quiet prints nothing.
        rc = 0
        for u in units:
            on = is_enabled(u)
            if not quiet:
                say("enabled" if on else ("disabled" if _unit_file(u) else "not-found"))
            rc = rc or (0 if on else 1)
        return rc
    if cmd == "enable":
        # systemctl(1) enable: the [Install] section's links; here a plain file in TARGET.wants
        # naming the unit (no symlink in the copy); --now starts it too.
        for u in units:
            for t in _wanted_by(u):
                write(f"/etc/systemd/system/{t}/{u}", f"{u}\n")
        if now:
            for u in units:
                unit_start(u)
        return 0
    if cmd == "disable":
        for u in units:
            for p in _enabled_markers(u):
                os.unlink(R(p))
        if now:
            raise NotEmulated("systemctl disable --now (stopping a unit)")
        return 0
    if cmd in ("start", "restart", "reload-or-restart", "try-restart"):
        for u in units:
            unit_start(u)
        return 0
    if cmd == "reboot":
        return reboot()
    raise NotEmulated(f"systemctl {cmd}")


def reboot():
    """A reboot of the copy: the kernel command line the boot loader would pass, the modules of
    modules-load.d loaded (systemd-modules-load.service, modules-load.d(5)), blacklisted
    modules not autoloaded (modprobe.d(5) blacklist), every enabled unit started.
    Runtime state the copy recorded (setpci writes, ip/sysctl/mlnx_qos settings) is NOT reverted:
    the copy cannot say what firmware and boot defaults would put back (README.md)."""
    cmdline = boot_cmdline()
    if cmdline is not None:
        captured_cmdline()
        write("/proc/cmdline", cmdline + "\n")
        iommu_default_domain(cmdline)
    # blacklist M in modprobe.d: udev's modalias autoload does not load M at boot.
    mods, _ = _modules()
    for m in blacklisted():
        # The devices it drove come up without it: no driver link (whether another driver
        # claims them is the kernel's probe, which the copy cannot show).
        for bdf in listdir("/sys/bus/pci/devices"):
            link = R(f"/sys/bus/pci/devices/{bdf}") + "/driver"
            if os.path.islink(link) and os.path.basename(os.readlink(link)) == m:
                target = os.readlink(link)
                os.unlink(link)
                # Another driver for the device claims it at boot where it is loaded (udev's
                # modalias autoload; the NVIDIA GPU nouveau gave up goes to nvidia, whose
                # pci_driver matches every 10de display/3D device).
                other = {"nouveau": "nvidia", "radeon": "amdgpu"}.get(m)
                if other and (_loaded(_modules()[0], other) or os.path.isdir(R(f"/sys/bus/pci/drivers/{other}"))):
                    os.symlink(target[: -len(m)] + other, link)
        if _loaded(mods, m):
            try:
                modprobe_remove(m)
            except Fail as e:
                warn(f"stand-in reboot: {m} stays loaded ({e})")
    for conf in _conf_files(("/etc/modules-load.d", "/run/modules-load.d", "/usr/lib/modules-load.d")):
        for line in (read(conf) or "").splitlines():
            line = line.split("#", 1)[0].split(";", 1)[0].strip()
            if line:
                modprobe_load(line, quiet=True)
    for d in ("/etc/systemd/system",):
        units = set()
        for sub in listdir(d):
            if sub.endswith((".wants", ".requires")):
                units.update(n for n in listdir(f"{d}/{sub}") if "." in n)
        for u in sorted(units):
            try:
                unit_start(u, from_reboot=True)
            except NotEmulated as e:
                warn(f"stand-in reboot: {u} not started ({e})")
            except Fail as e:
                warn(f"stand-in reboot: {u} failed ({e})")
    return 0


def iommu_default_domain(cmdline):
    """The IOMMU groups' default domain type as the booted command line sets it
    (Documentation/admin-guide/kernel-parameters.txt: iommu=pt / iommu.passthrough=1 make DMA
    untranslated, "identity"; iommu=nopt / iommu.passthrough=0 translate, with iommu.strict=1
    "DMA" and else the lazy "DMA-FQ"; Documentation/ABI/testing/sysfs-kernel-iommu_groups).
    A command line without those words leaves the types as captured (the kernel's built-in
    default is not in the copy); blocked and unmanaged (vfio) groups keep theirs."""
    passthrough = strict = None
    for w in shlex.split(cmdline, posix=False):
        k, _, v = w.partition("=")
        if k == "iommu" and v in ("pt", "nopt"):
            passthrough = v == "pt"
        elif k == "iommu.passthrough" and v in ("0", "1", "on", "off", "y", "n"):
            passthrough = v in ("1", "on", "y")
        elif k == "iommu.strict" and v in ("0", "1", "on", "off", "y", "n"):
            strict = v in ("1", "on", "y")
    if passthrough is None:
        return
    want = "identity" if passthrough else ("DMA" if strict else "DMA-FQ")
    for g in listdir("/sys/kernel/iommu_groups"):
        t = read(f"/sys/kernel/iommu_groups/{g}/type")
        if t is not None and t.strip() in ("identity", "DMA", "DMA-FQ"):
            write(f"/sys/kernel/iommu_groups/{g}/type", want + "\n")


def _conf_files(dirs):
    # modules-load.d(5)/modprobe.d(5): files by name across the directories, /etc overriding.
    seen = {}
    for d in reversed(dirs):
        for n in listdir(d):
            if n.endswith(".conf"):
                seen[n] = f"{d}/{n}"
    return [seen[n] for n in sorted(seen)]


def blacklisted():
    out = set()
    for conf in _conf_files(("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")):
        for line in (read(conf) or "").splitlines():
            w = line.split("#", 1)[0].split()
            if len(w) >= 2 and w[0] == "blacklist":
                out.add(_mod(w[1]))
    return sorted(out)


# ------------------------------------------------------------------------------------------------
# The boot loader: grub-mkconfig / update-grub (grub util/grub-mkconfig.in, util/grub.d/
# 10_linux.in), BLS entries (boot/loader/entries, the Boot Loader Specification)
# ------------------------------------------------------------------------------------------------

GRUB_CFG = "/boot/grub/grub.cfg"
GRUB_HEADER = "# written by gdrdoctor's grub-mkconfig stand-in (tests/fixes/standin.py)\n"


def _grub_vars():
    """GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT as grub-mkconfig sees them: it sources
    /etc/default/grub and then /etc/default/grub.d/*.cfg in a shell (grub-mkconfig.in)."""
    files = []
    seed = ""
    if exists("/etc/default/grub"):
        files.append(R("/etc/default/grub"))
    else:
        # A node that runs update-grub has /etc/default/grub; a copy without it was captured
        # without it. The nearest thing to what it held is the running command line (less what
        # grub adds itself: BOOT_IMAGE=, root=, ro), which then seeds GRUB_CMDLINE_LINUX.
        words = [w for w in shlex.split(captured_cmdline(), posix=False)
                 if not w.startswith(("BOOT_IMAGE=", "root=")) and w != "ro"]
        seed = " ".join(words)
        warn("stand-in grub-mkconfig: no /etc/default/grub in the copy: GRUB_CMDLINE_LINUX seeded from /proc/cmdline")
    files += [R(f"/etc/default/grub.d/{n}") for n in listdir("/etc/default/grub.d") if n.endswith(".cfg")]
    script = 'set -e; for f in "$@"; do . "$f"; done; printf "%s\\0%s\\0%s\\0" "${GRUB_CMDLINE_LINUX-}" "${GRUB_CMDLINE_LINUX_DEFAULT-}" "${GRUB_ENABLE_BLSCFG-}"'
    script = 'GRUB_CMDLINE_LINUX=$GDRDOCTOR_STANDIN_SEED; ' + script
    res = subprocess.run(
        ["bash", "-c", script, "grub-mkconfig"] + files,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "GDRDOCTOR_STANDIN_SEED": seed},
        cwd=ROOT,
    )
    if res.returncode != 0:
        raise Fail("grub-mkconfig: sourcing /etc/default/grub failed: " + res.stderr.decode(errors="replace").strip(), 1)
    linux, default, bls = res.stdout.decode(errors="surrogateescape").split("\0")[:3]
    return linux, default, bls


STATE = "/.gdrdoctor-standin"


def captured_cmdline():
    """/proc/cmdline as the copy had it before any simulated reboot: kept once in the copy
    (STATE/cmdline), so that a second run seeds the same words, not the ones its first run's
    reboot added."""
    kept = read(f"{STATE}/cmdline")
    if kept is None:
        kept = (read("/proc/cmdline") or "").strip() + "\n"
        write(f"{STATE}/cmdline", kept)
    return kept.strip()


def _root_words():
    """root=... and ro, which 10_linux.in puts before the variables: taken from the current
    command line (grub-probe would find the same root device)."""
    cur = (read("/proc/cmdline") or "").split()
    return [w for w in cur if w.startswith("root=")][:1] + (["ro"] if "ro" in cur else [])


def grub_mkconfig(argv):
    out = None
    update_bls = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "--output"):
            out = argv[i + 1]
            i += 2
            continue
        if a.startswith("--output="):
            out = a.split("=", 1)[1]
        elif a == "--update-bls-cmdline":
            update_bls = True
        else:
            raise NotEmulated(f"grub-mkconfig {a}")
        i += 1
    linux, default, _bls = _grub_vars()
    args = " ".join(w for w in [" ".join(_root_words()), linux.strip(), default.strip()] if w)
    text = GRUB_HEADER + "menuentry 'Linux' {\n\tlinux /vmlinuz " + args + "\n}\n"
    if out is None:
        sys.stdout.write(text)
    else:
        write(node_path(out), text)
    if update_bls:
        for e in listdir("/boot/loader/entries"):
            if e.endswith(".conf"):
                p = f"/boot/loader/entries/{e}"
                lines = (read(p) or "").split("\n")
                lines = [("options " + args) if l.startswith("options ") else l for l in lines]
                write(p, "\n".join(lines))
    return 0


def update_grub(argv):
    # Debian's update-grub: `exec grub-mkconfig -o /boot/grub/grub.cfg "$@"`.
    return grub_mkconfig(["-o", GRUB_CFG] + list(argv))


def boot_cmdline():
    """The command line the next boot gets: a BLS entry's options line where entries exist (the
    newest by file name, as grub's blscfg sorts them first), else the first `linux` line of the
    grub.cfg the stand-in (or anyone) wrote; BOOT_IMAGE= as grub adds it. None: no boot
    configuration in the copy, the command line stays."""
    entries = sorted((e for e in listdir("/boot/loader/entries") if e.endswith(".conf")), reverse=True)
    if entries:
        text = read(f"/boot/loader/entries/{entries[0]}") or ""
        opts = [l[len("options"):].strip() for l in text.splitlines() if l.startswith("options")]
        image = [l.split(None, 1)[1].strip() for l in text.splitlines() if l.startswith("linux ")]
        if opts:
            return " ".join(w for w in [f"BOOT_IMAGE={image[0]}" if image else "", opts[0]] if w)
    for cfg in (GRUB_CFG, "/boot/grub2/grub.cfg"):
        text = read(cfg)
        if text is None:
            continue
        for l in text.splitlines():
            w = l.strip().split(None, 2)
            if w and w[0] in ("linux", "linuxefi") and len(w) >= 2:
                return f"BOOT_IMAGE={w[1]}" + (" " + w[2] if len(w) > 2 else "")
    return None


# ------------------------------------------------------------------------------------------------
# update-initramfs / dracut (initramfs-tools update-initramfs(8), dracut(8)): the initramfs
# carries /etc/modprobe.d, so a blacklist takes effect in early boot only after a rebuild
# ------------------------------------------------------------------------------------------------

INITRD = "/boot/initrd.img-standin"


def build_initramfs():
    parts = []
    for conf in _conf_files(("/etc/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")):
        parts.append(f"# {conf}\n" + (read(conf) or ""))
        if not parts[-1].endswith("\n"):
            parts[-1] += "\n"
    write(INITRD, "# initramfs stand-in: the modprobe.d it carries\n" + "".join(parts))
    return 0


def update_initramfs(argv):
    if "-u" not in argv and "-c" not in argv:
        raise NotEmulated("update-initramfs " + " ".join(argv))
    return build_initramfs()


def dracut(argv):
    return build_initramfs()


# ------------------------------------------------------------------------------------------------
# ldconfig (glibc ldconfig(8)): -p prints the cache; here the libraries the configured
# directories hold, as a rebuilt cache would list them
# ------------------------------------------------------------------------------------------------


def _ld_dirs(path, depth=0):
    out = []
    text = read(path)
    if text is None or depth > 8:
        return out
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            pat = line.split(None, 1)[1].strip()
            d, base = os.path.split(pat)
            rx = re.compile("^" + re.escape(base).replace("\\*", ".*") + "$")
            for n in listdir(d):
                if rx.match(n):
                    out += _ld_dirs(f"{d}/{n}", depth + 1)
        else:
            out.append(line)
    return out


def ldconfig(argv):
    if "-p" not in argv and "--print-cache" not in argv:
        return 0  # rebuilding the cache changes nothing gdrdoctor reads
    dirs = _ld_dirs("/etc/ld.so.conf")
    if not exists("/etc/ld.so.conf"):
        for n in listdir("/etc/ld.so.conf.d"):
            if n.endswith(".conf"):
                dirs += _ld_dirs(f"/etc/ld.so.conf.d/{n}")
    arch = (read("/proc/sys/kernel/arch") or "x86_64").strip()
    tag = {"x86_64": "libc6,x86-64", "aarch64": "libc6,AArch64"}.get(arch, "libc6")
    libs = []
    for d in dict.fromkeys(dirs):
        for n in listdir(d):
            if ".so" in n and n.startswith("lib"):
                libs.append((n, f"{d}/{n}"))
    libs.sort(key=lambda x: (x[0], x[1]), reverse=True)
    say(f"{len(libs)} libs found in cache `/etc/ld.so.cache'")
    for n, p in libs:
        say(f"\t{n} ({tag}) => {p}")
    return 0


# ------------------------------------------------------------------------------------------------


def not_emulated(tool):
    def run(argv):
        raise NotEmulated(f"{tool} " + " ".join(argv[:2]))
    return run


HANDLERS = {
    "mlnx_qos": mlnx_qos,
    "dcb": dcb,
    "ethtool": ethtool,
    "modprobe": modprobe,
    "rmmod": rmmod,
    "setpci": setpci,
    "ip": ip,
    "sysctl": sysctl,
    "nvidia-smi": nvidia_smi,
    "systemctl": systemctl,
    "update-grub": update_grub,
    "grub-mkconfig": grub_mkconfig,
    "grub2-mkconfig": grub_mkconfig,
    "update-initramfs": update_initramfs,
    "dracut": dracut,
    "ldconfig": ldconfig,
}
for _t in NOT_EMULATED:
    HANDLERS[_t] = not_emulated(_t)
assert sorted(HANDLERS) == sorted(NAMES), "NAMES and the handlers differ"


def run_tool(tool, argv):
    try:
        return HANDLERS[tool](argv) or 0
    except NotEmulated as e:
        warn(f"stand-in: {tool} not emulated ({e})")
        return EXIT_NOT_EMULATED
    except Fail as e:
        warn(str(e))
        return e.code
    except (ValueError, IndexError) as e:
        warn(f"{tool}: bad arguments ({e})")
        return 1


def main(argv):
    global ROOT
    tool = os.path.basename(argv[0])
    if tool not in HANDLERS:
        if argv[1:] == ["--names"]:
            sys.stdout.write("".join(n + "\n" for n in NAMES))
            return 0
        if len(argv) >= 2 and argv[1] in HANDLERS:
            tool, argv = argv[1], argv[1:]  # `standin.py TOOL ARGS...`
        else:
            warn("usage: standin.py --names | a symlink named after a tool (see README.md)")
            return 2
    ROOT = the_root()
    return run_tool(tool, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
