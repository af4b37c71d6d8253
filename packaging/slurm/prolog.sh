#!/bin/bash
# gdrdoctor Slurm Prolog: keep jobs off a node that is not ready for GPUDirect RDMA.
#
# slurm.conf:   Prolog=/usr/lib/gdrdoctor/slurm-prolog      (see packaging/slurm/README.md)
#
# Runs   gdrdoctor --deadline N check ARGS --format reason --output json:DIR/prolog.json
# and acts on its exit code:
#   0  ready          -> exit 0, silently; the job runs.
#   1  not ready      -> drain this node with the line gdrdoctor printed ("gdrdoctor: <action>(<codes>) ..."),
#                        then exit 1: Slurm requeues the job (held) instead of running it here.
#   2, a signal, a missing binary (126/127), or the timeout backstop (124/137)
#                     -> GDRDOCTOR_ON_ERROR=drain (default): drain with "gdrdoctor: could not run
#                        (exit N)" or "gdrdoctor: timed out after Ns" and exit 1;
#                        GDRDOCTOR_ON_ERROR=pass: log it and exit 0.
# A reason that someone else set (one not starting with "gdrdoctor:") is never overwritten.
# At most one sinfo and one scontrol call, and only on failure: slurm.conf(5) asks prologs to be
# quick and to spare slurmctld.
#
# Settings: shell assignments in ${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor} (optional):
#   GDRDOCTOR=/usr/bin/gdrdoctor
#   GDRDOCTOR_PROLOG_DEADLINE=15          # seconds; the run is cut short after this
#   GDRDOCTOR_PROLOG_ARGS="--no-gdr-test --sample 1" # split on spaces (no quoting); the fast profile
#   GDRDOCTOR_ON_ERROR=drain              # drain | pass
#   GDRDOCTOR_REPORT_DIR=/run/gdrdoctor   # prolog.json (the full report) and prolog.stderr
# Only bash, coreutils (timeout, mkdir, mktemp, rm, head, sleep), logger (optional) and Slurm's
# sinfo/scontrol.

set -u
# slurmd runs the Prolog with no search path of its own (Prolog and Epilog Guide).
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

GDRDOCTOR=/usr/bin/gdrdoctor
GDRDOCTOR_PROLOG_DEADLINE=15
GDRDOCTOR_PROLOG_ARGS="--no-gdr-test --sample 1"
GDRDOCTOR_ON_ERROR=drain
GDRDOCTOR_REPORT_DIR=/run/gdrdoctor
defaults=${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor}
if [ -r "$defaults" ]; then
    # shellcheck source=/dev/null
    . "$defaults"
fi

BACKSTOP_GRACE=3   # seconds past the deadline before timeout(1) sends TERM
BACKSTOP_KILL=2    # seconds after TERM before KILL
REASON_MAX=250     # keep the node's reason readable in sinfo/scontrol

node=${SLURMD_NODENAME:-}
job=${SLURM_JOB_ID:-none}

log() {
    # stderr: slurmd copies it into slurmd.log when the prolog fails ("prolog failed: rc:1
    # output:..."); syslog for the record.
    printf 'gdrdoctor prolog: %s\n' "$*" >&2
    logger -t gdrdoctor -- "prolog job=$job node=${node:-?}: $*" 2>/dev/null || true
}

# drain REASON: drain $node with REASON unless a reason set by someone else is present.
drain() {
    local want=$1 cur
    if [ -z "$node" ]; then
        node=$(hostname -s 2>/dev/null) || node=
        log "SLURMD_NODENAME is not set; using the host name '${node}'"
        [ -n "$node" ] || { log "no node name: not draining ($want)"; return 1; }
    fi
    # %E is the full reason ("none" when there is none); one line per partition, so take the first.
    if ! cur=$(sinfo -h -N -n "$node" -o '%E' 2>/dev/null | head -n 1); then cur=; fi
    if [ -z "$cur" ]; then
        # Could not read the reason (controller unreachable, node unknown): do not risk
        # overwriting one. The prolog's non-zero exit still makes slurmd drain the node.
        log "could not read the current reason of $node; not draining ($want)"
        return 1
    fi
    if [ "$cur" != none ] && [ "${cur#gdrdoctor:}" = "$cur" ]; then
        log "keeping the reason someone else set on $node: '$cur' (would have been: $want)"
        return 0
    fi
    if [ "$cur" = "$want" ]; then
        log "$node already drained: $want"
        return 0
    fi
    if scontrol update nodename="$node" state=drain reason="$want" >/dev/null 2>&1; then
        log "drained $node: $want"
    else
        log "scontrol could not drain $node ($want)"
        return 1
    fi
}

# on_error REASON: could not get an answer from gdrdoctor.
on_error() {
    case "$GDRDOCTOR_ON_ERROR" in
        pass)
            log "$1; GDRDOCTOR_ON_ERROR=pass: letting the job run"
            exit 0 ;;
        drain|'')
            drain "$1"
            exit 1 ;;
        *)
            log "GDRDOCTOR_ON_ERROR='$GDRDOCTOR_ON_ERROR' is neither drain nor pass; draining"
            drain "$1"
            exit 1 ;;
    esac
}

deadline=$GDRDOCTOR_PROLOG_DEADLINE
if [[ $deadline =~ ^[0-9]{1,6}$ ]] && ((10#$deadline > 0)); then
    deadline=$((10#$deadline))
else
    log "GDRDOCTOR_PROLOG_DEADLINE='$deadline' is not a positive integer; using 15"
    deadline=15
fi
limit=$((deadline + BACKSTOP_GRACE))

read -r -a args <<<"$GDRDOCTOR_PROLOG_ARGS"
out_args=()
errfile=/dev/null
if mkdir -p "$GDRDOCTOR_REPORT_DIR" 2>/dev/null && [ -w "$GDRDOCTOR_REPORT_DIR" ]; then
    out_args=(--output "json:$GDRDOCTOR_REPORT_DIR/prolog.json")
    errfile=$GDRDOCTOR_REPORT_DIR/prolog.stderr
else
    log "report directory $GDRDOCTOR_REPORT_DIR is not writable; no JSON report this time"
fi

rm -f "$GDRDOCTOR_REPORT_DIR/prolog.json" 2>/dev/null  # no stale report after a failed run
# gdrdoctor's line goes to a private file, never a pipe: a descendant that escaped the process
# group and holds its stdout cannot hold the prolog, and the exit status is the process's own
# (wait), never a line gdrdoctor's output could forge (issue 41).
tmp=$(mktemp -d 2>/dev/null) || tmp=
if [ -z "$tmp" ]; then
    on_error "gdrdoctor: could not run (no temporary directory)"
fi
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
# timeout(1) is the backstop: TERM at deadline+3 s, KILL 2 s later, to gdrdoctor's process group.
# We stop waiting 2 s after the KILL, so a gdrdoctor stuck in an uninterruptible driver call
# cannot hold the prolog either (it is left behind, and logged).
# In a subshell (not exec-ed into: `; exit`) whose own standard error is dropped: bash reports a
# command a signal ended ("Killed") there, which is not gdrdoctor's to log.
(timeout -k "$BACKSTOP_KILL" "$limit" \
    "$GDRDOCTOR" --deadline "$deadline" check "${args[@]}" --format reason "${out_args[@]}" \
    </dev/null >"$tmp/reason" 2>"$errfile"; exit $?) 2>/dev/null &
pid=$!
end=$((start + limit + BACKSTOP_KILL + 2))
rc=''
while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= end)); then
        break
    fi
    sleep 0.1
done
if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    rc=$?
fi
took=$((SECONDS - start))
if [ -z "$rc" ]; then
    log "gdrdoctor did not end even after KILL (${took}s); left behind"
    rc=124
fi
# The first line of at most 4 KiB, and of it only the characters a reason needs: gdrdoctor's
# line is `gdrdoctor: <action>(<codes>) ...`. Quotes, $( ), backticks and control or bidi
# characters never reach scontrol, sinfo or a log (as the NHC check keeps them out).
line=$(head -c 4096 "$tmp/reason" 2>/dev/null | head -n 1)
line=${line//[^A-Za-z0-9 :,.()+_-]/}
line=${line:0:$REASON_MAX}

case $rc in
    0)
        exit 0 ;;
    1)
        case "$line" in
            gdrdoctor:*) ;;
            *) line="gdrdoctor: not ready" ;;
        esac
        drain "$line"
        exit 1 ;;
    124)
        on_error "gdrdoctor: timed out after ${limit}s" ;;
    137)
        if [ "$took" -ge "$limit" ]; then
            on_error "gdrdoctor: timed out after ${limit}s"
        else
            on_error "gdrdoctor: could not run (exit $rc)"
        fi ;;
    *)
        on_error "gdrdoctor: could not run (exit $rc)" ;;
esac
