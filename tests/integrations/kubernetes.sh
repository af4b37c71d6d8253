#!/usr/bin/env bash
# The Kubernetes DaemonSet example (packaging/kubernetes/daemonset.yaml), tested without a cluster.
#
#   tests/integrations/kubernetes.sh
#
# NO KUBERNETES CLUSTER RUNS HERE. What is tested, honestly:
#   1. the YAML parses, and every field in it is a field of the Kubernetes API objects (checked
#      against the models of the official Python client (kubernetes, pinned below), from
#      PyPI into a cached virtual environment): this catches misspelt or misplaced fields, not
#      what an API server or admission would refuse;
#   2. it has what this DaemonSet needs: a Namespace and a DaemonSet, GPU-node affinity,
#      tolerations, the node's / read-only at /host, the NFD features.d directory writable,
#      unprivileged with CAP_SYS_ADMIN only, small limits;
#   3. the container's gdrdoctor command line, taken from the YAML (not retyped), runs with the
#      binary under test against fixtures, with /host rewritten to a fixture and features.d to a
#      temporary directory: the NFD feature file appears with gdr.ready=true for a ready node and
#      gdr.ready=false for a node that is not, and no temporary file is left behind;
#   4. the container's loop script, taken from the YAML, run by /bin/sh: it publishes, it removes
#      the feature file when gdrdoctor could not run (exit 2) and when it is stopped (SIGTERM).
# Not tested: the image, the NVIDIA Container Toolkit, NFD turning the file into labels, the
# privileges on a real node.
#
# The binary under test is $GDRDOCTOR_BIN (default: ${CARGO_TARGET_DIR:-target}/release/gdrdoctor).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

yaml_file=packaging/kubernetes/daemonset.yaml
k8s_client_version=33.1.0   # Kubernetes 1.33 API
pyyaml_version=6.0.2
cache=${GDRDOCTOR_CACHE:-$HOME/.cache/gdrdoctor-tests}
venv=$cache/kubernetes-venv
bin=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case $bin in /*) ;; *) bin=$repo/$bin ;; esac

step() { printf '\n== kubernetes: %s\n' "$*"; }
die() { echo "kubernetes: FAIL: $*" >&2; exit 1; }
. tests/integrations/venv.sh

[ -x "$bin" ] || die "$bin missing: cargo build --release, or set GDRDOCTOR_BIN"

step "PyYAML and the Kubernetes API models (kubernetes==$k8s_client_version) in $venv"
venv_with "$venv" 'import kubernetes, yaml; print(kubernetes.__version__)' "$k8s_client_version" \
  "kubernetes==$k8s_client_version" "PyYAML==$pyyaml_version"

work=$(mktemp -d "${TMPDIR:-/tmp}/gdrdoctor-k8s.XXXXXX")
loop_pid=
cleanup() {
  if [ -n "$loop_pid" ]; then kill "$loop_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step "the YAML: API fields, and what this DaemonSet needs"
# Writes the container's loop script, its $0, the gdrdoctor argv and the features.d mount path
# (NUL-separated) into $work.
"$venv/bin/python" - "$yaml_file" "$work" <<'EOF'
import sys
import yaml
from kubernetes.client import models

path, out = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
errors = []


def check(value, typ, where):
    """value against the client's openapi type string: unknown fields and wrong scalar types."""
    if typ.startswith("list["):
        if not isinstance(value, list):
            return errors.append("%s: not a list" % where)
        for i, v in enumerate(value):
            check(v, typ[5:-1], "%s[%d]" % (where, i))
    elif typ.startswith("dict("):
        if not isinstance(value, dict):
            return errors.append("%s: not a mapping" % where)
        inner = typ[typ.index(",") + 1:-1].strip()
        for k, v in value.items():
            check(v, inner, "%s.%s" % (where, k))
    elif typ == "str":
        if not isinstance(value, str):
            errors.append("%s: %r is not a string (quote it)" % (where, value))
    elif typ == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            errors.append("%s: %r is not an integer" % (where, value))
    elif typ == "bool":
        if not isinstance(value, bool):
            errors.append("%s: %r is not a boolean" % (where, value))
    elif typ == "object":
        pass  # int-or-string, quantities, free-form
    else:
        cls = getattr(models, typ)
        if not isinstance(value, dict):
            return errors.append("%s: not a mapping (%s)" % (where, typ))
        by_json = {j: p for p, j in cls.attribute_map.items()}
        for k, v in value.items():
            if k not in by_json:
                errors.append("%s.%s: not a field of %s" % (where, k, typ))
            else:
                check(v, cls.openapi_types[by_json[k]], "%s.%s" % (where, k))


kinds = {}
for d in docs:
    api, kind = d.get("apiVersion"), d.get("kind")
    model = {("v1", "Namespace"): "V1Namespace", ("apps/v1", "DaemonSet"): "V1DaemonSet"}.get((api, kind))
    if model is None:
        errors.append("unexpected object %s %s" % (api, kind))
        continue
    check(d, model, kind)
    kinds[kind] = d
if errors:
    sys.exit("API fields:\n  " + "\n  ".join(errors))
print("every field is a Kubernetes API field (%s)" % ", ".join(sorted(kinds)))

ns, ds = kinds.get("Namespace"), kinds.get("DaemonSet")
assert ns and ds, "a Namespace and a DaemonSet, got %s" % sorted(kinds)
assert ds["metadata"]["namespace"] == ns["metadata"]["name"], "the DaemonSet is not in the Namespace"
spec = ds["spec"]
tmpl_labels = spec["template"]["metadata"]["labels"]
for k, v in spec["selector"]["matchLabels"].items():
    assert tmpl_labels.get(k) == v, "the selector does not match the pod labels"
pod = spec["template"]["spec"]
terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
assert terms and all(t["matchExpressions"] for t in terms), "no GPU node affinity"
assert {"operator": "Exists"} in pod["tolerations"], "GPU nodes' taints are not tolerated"
assert not pod.get("hostPID") and not pod.get("hostIPC"), "host PID/IPC namespaces are not needed"
(c,) = pod["containers"]
sc = c["securityContext"]
assert sc.get("privileged") is False, "the container must not be privileged"
assert sc["capabilities"]["drop"] == ["ALL"] and sc["capabilities"]["add"] == ["SYS_ADMIN"], sc
assert sc.get("readOnlyRootFilesystem") is True, sc
for kind in ("cpu", "memory"):
    assert kind in c["resources"]["limits"] and kind in c["resources"]["requests"], c["resources"]

volumes = {v["name"]: v for v in pod["volumes"]}
mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
host = mounts["/host"]
assert volumes[host["name"]]["hostPath"]["path"] == "/", "/host is not the node's /"
assert host.get("readOnly") is True, "/host must be read-only"
nfd_dir = "/etc/kubernetes/node-feature-discovery/features.d"
nfd = mounts[nfd_dir]
assert volumes[nfd["name"]]["hostPath"]["path"] == nfd_dir, "features.d is not the node's"
assert not nfd.get("readOnly"), "features.d must be writable"

cmd, args = c["command"], c["args"]
assert cmd[:2] == ["/bin/sh", "-c"] and len(cmd) == 4, "command is not /bin/sh -c SCRIPT NAME: %s" % cmd
assert args[0] == "gdrdoctor", args
assert args[args.index("--root") + 1] == "/host", args
i = args.index("check")
assert args.index("--root") < i and args.index("--deadline") < i, "global options after check: %s" % args
for flag in ("--gpu-probe", "--no-gdr-test"):
    assert flag in args[i:], "%s missing: %s" % (flag, args)
outputs = [args[j + 1] for j, a in enumerate(args) if a == "--output"]
assert outputs == ["nfd:" + nfd_dir + "/gdrdoctor"], "one --output, nfd: into features.d: %s" % outputs

with open(out + "/script", "w") as f:
    f.write(cmd[2])
with open(out + "/argv0", "w") as f:
    f.write(cmd[3])
with open(out + "/args", "w") as f:
    f.write("".join(a + "\0" for a in args))
with open(out + "/nfd_dir", "w") as f:
    f.write(nfd_dir)
print("structure ok; container command: %s" % " ".join(args))
EOF

mapfile -d '' -t args < "$work/args"
script=$(cat "$work/script")
argv0=$(cat "$work/argv0")
nfd_dir=$(cat "$work/nfd_dir")

if command -v shellcheck > /dev/null; then
  shellcheck -s sh "$work/script" || die "the container's loop script (shellcheck -s sh)"
  echo "loop script: shellcheck -s sh ok"
else
  echo "shellcheck not installed: the loop script was NOT linted"
fi

# The container's argv with the node replaced by a fixture ($1) and features.d by a directory ($2);
# further arguments: FROM=TO replacements of whole arguments. Prints NUL-separated.
rewrite() {
  local root=$1 dir=$2 a r
  shift 2
  printf '%s\0' "$bin"
  for a in "${args[@]:1}"; do
    case $a in
      /host) a=$root ;;
      "nfd:$nfd_dir"/*) a="nfd:$dir/${a#"nfd:$nfd_dir"/}" ;;
    esac
    for r in "$@"; do [ "$a" = "${r%%=*}" ] && a=${r#*=}; done
    printf '%s\0' "$a"
  done
}

# run FIXTURE DIR [FROM=TO...]: the container's gdrdoctor command; sets rc.
run() {
  local cmd
  mapfile -d '' -t cmd < <(rewrite "$@")
  echo "\$ ${cmd[*]}"
  set +e
  "${cmd[@]}" > "$work/human.txt" 2> "$work/stderr.txt"
  rc=$?
  set -e
  tail -n 1 "$work/human.txt"
  cat "$work/stderr.txt"
}

# expect_file DIR KEY=VALUE...: DIR holds exactly the feature file `gdrdoctor`, with these lines.
expect_file() {
  local dir=$1 kv
  shift
  [ -f "$dir/gdrdoctor" ] || die "no feature file $dir/gdrdoctor"
  for kv in "$@"; do
    grep -qx "feature.node.kubernetes.io/$kv" "$dir/gdrdoctor" || { cat "$dir/gdrdoctor" >&2; die "$dir/gdrdoctor lacks $kv"; }
  done
  # Every line a comment or key=value (NFD's format); nothing else left in the directory.
  if grep -Ev '^(#.*|feature\.node\.kubernetes\.io/[A-Za-z0-9][A-Za-z0-9_.-]*=[A-Za-z0-9_.-]*)$' "$dir/gdrdoctor"; then
    die "lines above are not NFD key=value lines"
  fi
  local left
  left=$(find "$dir" -mindepth 1 ! -name gdrdoctor)
  [ -z "$left" ] || die "left in $dir: $left"
}

# The fixtures it runs on, as directories (generated, not committed: fixtures/README.md).
fixtures=$work/fixtures
for f in healthy-8gpu-roce acs-redirect-on-path config-unprivileged; do
  "$repo/fixtures/build.sh" "$f" "$fixtures/$f" >/dev/null || die "fixtures/build.sh $f"
done
features=$work/features.d
mkdir "$features"

step "the container's command, as written (--gpu-probe asks this machine's GPU libraries)"
run "$fixtures/healthy-8gpu-roce" "$features"
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || die "exit $rc"
if [ "$rc" -eq 0 ]; then
  expect_file "$features" gdr.ready=true
else
  # No NVIDIA driver libraries here (none were mounted in, as the NVIDIA Container Toolkit would):
  # the fixture's GPUs cannot be asked, and the node must read not ready for that reason alone.
  expect_file "$features" gdr.ready=false gdr.check.gpu=fail
  if grep -v '^feature.node.kubernetes.io/gdr.check.gpu=' "$features/gdrdoctor" | grep -q '=fail$'; then
    die "another check than gpu failed"
  fi
  grep -q 'nvidia-library-missing' "$work/human.txt" || die "not ready for another reason than the GPU libraries"
  echo "as expected here: no NVIDIA libraries in this machine, so gpu fails (nvidia-library-missing)"
fi

step "the same command with --no-gpu-probe (the only change besides the paths): ready fixture"
rm -rf "$features" && mkdir "$features"
run "$fixtures/healthy-8gpu-roce" "$features" --gpu-probe=--no-gpu-probe
[ "$rc" -eq 0 ] || die "exit $rc, expected 0 (ready)"
expect_file "$features" gdr.ready=true gdr.verified=true gdr.path=dmabuf gdr.check.acs=pass
grep -q "^# +expiry-time=20[0-9-]*T[0-9:]*Z$" "$features/gdrdoctor" || die "no NFD expiry line (--nfd-expiry)"
echo "ok: gdr.ready=true, with # +expiry-time"

step "not-ready fixture, into the same directory: the file is replaced"
run "$fixtures/acs-redirect-on-path" "$features" --gpu-probe=--no-gpu-probe
[ "$rc" -eq 1 ] || die "exit $rc, expected 1 (not ready)"
expect_file "$features" gdr.ready=false gdr.check.acs=fail
if grep -qx 'feature.node.kubernetes.io/gdr.ready=true' "$features/gdrdoctor"; then die "gdr.ready=true left over"; fi
echo "ok: gdr.ready=false"

step "unverified fixture (what a container without CAP_SYS_ADMIN sees: ACS unreadable)"
run "$fixtures/config-unprivileged" "$features" --gpu-probe=--no-gpu-probe
[ "$rc" -eq 0 ] || die "exit $rc, expected 0 (ready but unverified)"
expect_file "$features" gdr.ready=true gdr.verified=false gdr.check.acs=unknown
echo "ok: gdr.ready=true gdr.verified=false gdr.check.acs=unknown"

step "features.d missing: gdrdoctor could not write (exit 2)"
run "$fixtures/healthy-8gpu-roce" "$work/no-such-dir" --gpu-probe=--no-gpu-probe
[ "$rc" -eq 2 ] || die "exit $rc, expected 2"
[ ! -e "$work/no-such-dir" ] || die "gdrdoctor created the missing directory"

# loop DIR FIXTURE: the container's script with the rewritten argv, by /bin/sh, every second.
loop() {
  local dir=$1 root=$2 cmd
  mapfile -d '' -t cmd < <(rewrite "$root" "$dir" --gpu-probe=--no-gpu-probe)
  GDRDOCTOR_INTERVAL_S=1 /bin/sh -c "$script" "$argv0" "${cmd[@]}" > "$work/loop.log" 2>&1 &
  loop_pid=$!
}
# wait_for SECONDS CONDITION...: poll until the command succeeds.
wait_for() {
  local n=$(($1 * 10))
  shift
  while ! "$@"; do
    n=$((n - 1))
    [ "$n" -gt 0 ] || return 1
    sleep 0.1
  done
}
stop_loop() {
  kill -TERM "$loop_pid"
  local rc=0
  wait "$loop_pid" || rc=$?
  loop_pid=
  [ "$rc" -eq 0 ] || { cat "$work/loop.log" >&2; die "the loop exited $rc on SIGTERM"; }
}

step "the container's loop script (/bin/sh): publishes, and unpublishes on SIGTERM"
rm -rf "$features" && mkdir "$features"
loop "$features" "$fixtures/healthy-8gpu-roce"
wait_for 20 grep -qsx feature.node.kubernetes.io/gdr.ready=true "$features/gdrdoctor" ||
  { cat "$work/loop.log" >&2; die "the loop did not publish gdr.ready=true"; }
wait_for 20 grep -q 'gdrdoctor-loop: exit 0; next run in 1s' "$work/loop.log" ||
  { cat "$work/loop.log" >&2; die "the loop did not log its first run"; }
runs() { grep -c 'gdrdoctor-loop: exit 0' "$work/loop.log"; }
runs_before=$(runs)
ran_again() { [ "$(runs)" -gt "$runs_before" ]; }
wait_for 20 ran_again ||
  { cat "$work/loop.log" >&2; die "the loop did not run again"; }
stop_loop
[ ! -e "$features/gdrdoctor" ] || die "the feature file is still there after SIGTERM"
grep -q 'removed .*: the pod is stopping' "$work/loop.log" || die "the loop did not say it unpublished"
left=$(find "$features" -mindepth 1)
[ -z "$left" ] || die "left in features.d: $left"
grep -q 'READY' "$work/loop.log" || die "no human report in the loop's log"
echo "ok: published, ran again, removed on SIGTERM"

step "the loop script: a stale gdr.ready=true is removed when gdrdoctor cannot run (exit 2)"
printf 'feature.node.kubernetes.io/gdr.ready=true\n' > "$features/gdrdoctor"
loop "$features" "$work/no-such-root"
wait_for 20 test ! -e "$features/gdrdoctor" ||
  { cat "$work/loop.log" >&2; die "the stale feature file was not removed"; }
grep -q 'gdrdoctor could not run (exit 2)' "$work/loop.log" || die "the loop did not say why"
stop_loop
echo "ok: removed after exit 2"

echo
echo "kubernetes: all passed (NO Kubernetes cluster ran: the YAML was checked against the API models"
echo "and its command and loop were run on fixtures)"
