#!/usr/bin/env python3
"""Judges one lab scenario's results against its EXPECT lines; prints each failed assertion.

Usage: expect.py OUTDIR EXPECT_FILE HOST_OFFLINE_JSON
OUTDIR holds what the guest sent back (live.json, live.rc, offline.json, kernel-gid-index, ...).
HOST_OFFLINE_JSON `-`: a two-node scenario (NODES=2), whose guests run no `check` and send no
capture; its files are in OUTDIR/a and OUTDIR/b, named a/FILE and b/FILE in the assertions.

EXPECT lines (blank lines and # comments ignored):
  exit N                      gdrdoctor's exit code in the guest
  check ID STATUS             a check's status
  code CODE STATUS            some finding with that code has that status
  nocode CODE                 no finding has that code
  message CODE TEXT           some finding with that code has TEXT in its message
  fix CODE TEXT               some finding with that code has TEXT in one of its fix commands
  gid-index-matches-kernel    the roce-v2-ipv4 finding names the index the guest's sysfs shows
  json PATH VALUE             a value in the report: a.b[2].c, a[key=value].c
  file-code FILE CODE STATUS  the same, in another report the scenario sent (gdr-test's)
  file-nocode FILE CODE
  file-message FILE CODE TEXT
  file-json FILE PATH VALUE
  file-has FILE PATH          the JSON FILE has a value at PATH (any value)
  file-finding FILE CODE SUBJECT | TEXT
                              some finding with that code, in FILE, has SUBJECT in its subject
                              and TEXT in its message (`rxe0 port 1 | rcvd_seq_err +`)
  below FILE SECONDS          FILE holds a number smaller than SECONDS
  rc FILE N                   FILE holds the exit code N (a two-node scenario's a/NAME.rc)
  positive FILE PATH          the number at PATH in the JSON FILE is above zero
  file-contains FILE TEXT     FILE (text the scenario sent) contains TEXT
  file-count FILE TEXT N      TEXT occurs exactly N times in FILE
  same-file A B               A and B hold the same bytes
  perftest-ratio FILE PATH PERFTEST MIN
                              the Gb/s at PATH in FILE divided by ib_write_bw's average
                              (PERFTEST, its client output) is at least MIN; the ratio is
                              written to ratio.txt for BENCHMARKS.md. When the comparator
                              itself failed (perftest-attempts.txt ends "comparator failed",
                              or its output has no iteration), that is recorded as its own
                              line ("comparator failed", in the output and ratio.txt) and the
                              ratio is not evaluated: neither passed nor failed.
Always asserted: the report of the guest's own capture (in the guest, and unpacked on the host)
equals the live report, except for the live-only checks (rdma-access, gdr-test).
"""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def findings(report):
    for check in report["checks"]:
        for f in check["findings"]:
            yield f


def walk(value, path):
    """a.b[2].c, a[key=value].c (dots inside brackets belong to the value)."""
    parts, depth, cur = [], 0, ""
    for ch in path:
        if ch == "." and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "[") - (ch == "]")
        cur += ch
    parts.append(cur)
    for part in parts:
        name, _, rest = part.partition("[")
        if name:
            value = value[name]
        while rest:
            sel, _, rest = rest.partition("]")
            rest = rest.lstrip("[")
            if "=" in sel:
                k, v = sel.split("=", 1)
                matches = [x for x in value if str(x.get(k)) == v]
                if not matches:
                    raise KeyError(f"no element with {k}={v}")
                value = matches[0]
            else:
                value = value[int(sel)]
    return value


def comparable(report):
    """A report without what differs by design between a live run and one on a capture."""
    r = dict(report)
    for key in ("root", "verdict", "counts"):
        r.pop(key, None)
    r["checks"] = [c for c in r["checks"] if c["id"] not in ("rdma-access", "gdr-test")]
    r["inventory"] = {k: v for k, v in r["inventory"].items() if k != "gdr_test"}
    return r


def perftest_result(path):
    """ib_write_bw's client table, `#bytes #iterations BW peak BW average MsgRate`:
    (iterations, average Gb/s), or None without a result row."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    rows = [l.split() for l in lines if l.strip() and l.split()[0].isdigit() and len(l.split()) >= 4]
    if not rows:
        return None
    return int(rows[-1][1]), float(rows[-1][3])


def comparator(out, perf):
    """The comparator's runs: (Gb/s or None when it failed, what the attempts were). The guest
    (guest/lib.sh comparator_write_bw) retries a run that completes nothing with a longer
    duration and writes perftest-attempts.txt; a failed comparator says nothing about gdrdoctor."""
    try:
        attempts = open(os.path.join(out, "perftest-attempts.txt")).read().split("\n")
        attempts = [a for a in attempts if a.strip()]
    except OSError:
        attempts = []
    tried = "; ".join(a for a in attempts if a.startswith("attempt"))
    result = perftest_result(os.path.join(out, perf))
    if attempts and attempts[-1] == "comparator failed":
        return None, tried
    if result is None:
        return None, tried or f"no result row in {perf}"
    iterations, gbps = result
    if iterations <= 0 or gbps <= 0:
        return None, tried or f"{iterations} iterations, {gbps} Gb/s"
    return gbps, tried


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'live' if k in a else 'copy'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
    elif isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
    elif a != b:
        return f"{path}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"
    return None


def main():
    out, expect_file, host_offline = sys.argv[1:4]
    two_node = host_offline == "-"
    if two_node:
        live, rc = {"checks": [], "inventory": {}}, None
    else:
        live = load(os.path.join(out, "live.json"))
        rc = int(open(os.path.join(out, "live.rc")).read().strip())
    failures = []
    notes = []  # what the comparator did: retries, and a failure that left an assertion unjudged
    passed = 0
    not_evaluated = 0

    def check(ok, line, detail):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failures.append(f"  FAILED `{line}`: {detail}")

    for raw in open(expect_file):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, arg = line.partition(" ")
        try:
            if word == "exit":
                check(rc == int(arg), line, f"exit {rc}")
            elif word == "check":
                cid, status = arg.split()
                got = next((c["status"] for c in live["checks"] if c["id"] == cid), "missing")
                check(got == status, line, f"{cid} is {got}")
            elif word == "code":
                code, status = arg.split()
                got = sorted({f["status"] for f in findings(live) if f["code"] == code})
                check(status in got, line, f"{code}: {got or 'no such finding'}")
            elif word == "nocode":
                got = [f["subject"] for f in findings(live) if f["code"] == arg]
                check(not got, line, f"present for {got}")
            elif word in ("message", "fix"):
                code, text = arg.split(" ", 1)
                fs = [f for f in findings(live) if f["code"] == code]
                if word == "message":
                    texts = [f["message"] for f in fs]
                else:
                    texts = [c["run"] for f in fs if f.get("fix") for c in f["fix"]["commands"]]
                check(any(text in t for t in texts), line, f"{word}s: {texts or 'no such finding'}")
            elif word == "gid-index-matches-kernel":
                kernel = open(os.path.join(out, "kernel-gid-index")).read().strip()
                msgs = [f["message"] for f in findings(live) if f["code"] == "roce-v2-ipv4"]
                check(
                    kernel != "none" and any(f"NCCL_IB_GID_INDEX={kernel}" in m for m in msgs),
                    line,
                    f"kernel shows index {kernel}; gdrdoctor says {msgs}",
                )
            elif word == "json":
                path, want = arg.split(" ", 1)
                got = walk(live, path)
                check(json.dumps(got) == want or str(got) == want, line, f"{path} = {json.dumps(got)}")
            elif word == "file-nocode":
                name, code = arg.split()
                got = [f["subject"] for f in findings(load(os.path.join(out, name))) if f["code"] == code]
                check(not got, line, f"present for {got}")
            elif word == "file-finding":
                name, rest = arg.split(" ", 1)
                code, rest = rest.split(" ", 1)
                subject, text = (x.strip() for x in rest.split(" | ", 1))
                fs = [f for f in findings(load(os.path.join(out, name))) if f["code"] == code]
                check(
                    any(subject in f["subject"] and text in f["message"] for f in fs),
                    line,
                    f"findings: {[(f['subject'], f['message']) for f in fs] or 'no such finding'}",
                )
            elif word in ("file-code", "file-message", "file-json"):
                name, rest = arg.split(" ", 1)
                other = load(os.path.join(out, name))
                if word == "file-code":
                    code, status = rest.split()
                    got = sorted({f["status"] for f in findings(other) if f["code"] == code})
                    check(status in got, line, f"{code}: {got or 'no such finding'}")
                elif word == "file-message":
                    code, text = rest.split(" ", 1)
                    texts = [f["message"] for f in findings(other) if f["code"] == code]
                    check(any(text in t for t in texts), line, f"messages: {texts or 'no such finding'}")
                else:
                    path, want = rest.split(" ", 1)
                    got = walk(other, path)
                    check(json.dumps(got) == want or str(got) == want, line, f"{path} = {json.dumps(got)}")
            elif word == "file-has":
                name, path = arg.split(" ", 1)
                try:
                    walk(load(os.path.join(out, name)), path)
                    check(True, line, "")
                except (KeyError, IndexError, TypeError, ValueError, OSError) as e:
                    check(False, line, f"{path}: {e!r}")
            elif word in ("file-contains", "file-count"):
                name, rest = arg.split(" ", 1)
                text = open(os.path.join(out, name), errors="replace").read()
                if word == "file-contains":
                    check(rest in text, line, f"{name}: {text[-400:]!r}")
                else:
                    needle, n = rest.rsplit(" ", 1)
                    got = text.count(needle)
                    check(got == int(n), line, f"{got} times in {name}: {text[-400:]!r}")
            elif word == "same-file":
                a, b = arg.split()
                check(open(os.path.join(out, a), "rb").read() == open(os.path.join(out, b), "rb").read(), line, "they differ")
            elif word == "below":
                name, limit = arg.split()
                got = float(open(os.path.join(out, name)).read().split()[0])
                check(got < float(limit), line, f"{got}")
            elif word == "positive":
                name, path = arg.split()
                got = walk(load(os.path.join(out, name)), path)
                check(isinstance(got, (int, float)) and got > 0, line, f"{path} = {json.dumps(got)}")
            elif word == "rc":
                name, want = arg.split()
                got = open(os.path.join(out, name)).read().strip()
                check(got == want, line, f"{name} holds {got!r}")
            elif word == "perftest-ratio":
                name, path, perf, minimum = arg.split()
                ours = float(walk(load(os.path.join(out, name)), path))
                theirs, tried = comparator(os.path.join(out, os.path.dirname(perf)), os.path.basename(perf))
                if theirs is None:
                    not_evaluated += 1
                    msg = f"comparator failed: ib_write_bw ({tried}); gdrdoctor {ours} Gb/s; ratio not evaluated"
                    notes.append(f"  {msg}: `{line}`")
                    with open(os.path.join(out, "ratio.txt"), "w") as f:
                        f.write(msg + "\n")
                    continue
                if tried.count("attempt") > 1:
                    notes.append(f"  comparator retried: ib_write_bw ({tried})")
                ratio = ours / theirs
                with open(os.path.join(out, "ratio.txt"), "w") as f:
                    f.write(f"gdrdoctor {ours} Gb/s, ib_write_bw {theirs} Gb/s, ratio {ratio:.2f}\n")
                check(ratio >= float(minimum), line, f"gdrdoctor {ours} Gb/s / ib_write_bw {theirs} Gb/s = {ratio:.2f}")
            else:
                failures.append(f"  unknown assertion `{line}`")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            failures.append(f"  FAILED `{line}`: {type(e).__name__}: {e}")

    # The capture round trip, in the guest and on the host.
    captures = () if two_node else (
        ("the guest's check on its capture", os.path.join(out, "offline.json")),
        ("the host's check on the unpacked capture", host_offline),
    )
    for name, path in captures:
        try:
            diff = first_difference(comparable(live), comparable(load(path)))
        except (OSError, ValueError) as e:
            diff = f"no report: {e}"
        check(diff is None, f"capture equals live ({name})", diff)

    if failures:
        print("\n".join(failures))
    if notes:
        print("\n".join(notes))
    unjudged = f", {not_evaluated} not evaluated (comparator failed)" if not_evaluated else ""
    print(f"  {passed} assertions passed, {len(failures)} failed{unjudged}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
