#!/bin/bash
# gdrdoctor Slurm Epilog: say what the job's NCCL decided about GPUDirect RDMA on this node, from
# the logs the TaskProlog (task-prolog.sh) had it write, as one JSON line in a journal and the
# last job's metrics for node_exporter's textfile collector; then remove the logs (issue 42).
#
# slurm.conf:   Epilog=/usr/lib/gdrdoctor/slurm-epilog
#
# Runs   gdrdoctor jobs record JOBS_DIR/JOBID --journal FILE --remove [--textfile FILE]
#                  [--predicted REPORT_DIR/prolog.json] [--recent FILE]
# (docs/jobs.md has the journal's fields). It never fails the job or the node: slurmd drains a
# node whose Epilog exits non-zero, so every problem here is logged, a line saying why goes to
# the journal where gdrdoctor could not write one, and the script exits 0.
#
# Settings: shell assignments in ${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor} (optional):
#   GDRDOCTOR=/usr/bin/gdrdoctor
#   GDRDOCTOR_JOBS_DIR=/var/spool/gdrdoctor/jobs     # the TaskProlog's
#   GDRDOCTOR_JOURNAL=/var/lib/gdrdoctor/jobs.jsonl  # moved to .1 at GDRDOCTOR_JOURNAL_MAX_MIB
#   GDRDOCTOR_JOURNAL_MAX_MIB=64
#   GDRDOCTOR_JOBS_RECENT=/var/lib/gdrdoctor/jobs-recent.json  # the job-history check's
#   GDRDOCTOR_TEXTFILE=                 # e.g. /var/lib/node_exporter/textfile/gdrdoctor-job.prom
#   GDRDOCTOR_EPILOG_SECONDS=20         # reading stops after this; the backstop kills 5 s later
#   GDRDOCTOR_REPORT_DIR=/run/gdrdoctor # where the Prolog keeps prolog.json (the prediction)
# Only bash, coreutils (timeout, mkdir, rm, date, stat, truncate) and logger (optional).

set -u
PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

GDRDOCTOR=/usr/bin/gdrdoctor
GDRDOCTOR_JOBS_DIR=/var/spool/gdrdoctor/jobs
GDRDOCTOR_JOURNAL=/var/lib/gdrdoctor/jobs.jsonl
GDRDOCTOR_JOURNAL_MAX_MIB=64
GDRDOCTOR_JOBS_RECENT=/var/lib/gdrdoctor/jobs-recent.json
GDRDOCTOR_TEXTFILE=
GDRDOCTOR_EPILOG_SECONDS=20
GDRDOCTOR_REPORT_DIR=/run/gdrdoctor
defaults=${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor}
if [ -r "$defaults" ]; then
    # shellcheck source=/dev/null
    . "$defaults" 2>/dev/null || true
fi

job=${SLURM_JOB_ID:-}
case "$job" in
    '' | *[!0-9]*) exit 0 ;;
esac
node=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null || echo unknown)}
dir=$GDRDOCTOR_JOBS_DIR/$job

log() {
    printf 'gdrdoctor epilog: %s\n' "$*" >&2
    logger -t gdrdoctor -- "epilog job=$job node=$node: $*" 2>/dev/null || true
}

mkdir -p -- "$(dirname -- "$GDRDOCTOR_JOURNAL")" 2>/dev/null || true

args=(jobs record "$dir" --journal "$GDRDOCTOR_JOURNAL" --remove
      --journal-max-mib "$GDRDOCTOR_JOURNAL_MAX_MIB" --read-seconds "$GDRDOCTOR_EPILOG_SECONDS"
      --job "$job" --node "$node")
[ -n "$GDRDOCTOR_TEXTFILE" ] && args+=(--textfile "$GDRDOCTOR_TEXTFILE")
[ -n "$GDRDOCTOR_JOBS_RECENT" ] && args+=(--recent "$GDRDOCTOR_JOBS_RECENT")
[ -f "$GDRDOCTOR_REPORT_DIR/prolog.json" ] && args+=(--predicted "$GDRDOCTOR_REPORT_DIR/prolog.json")

out=$(timeout -k 2 "$((GDRDOCTOR_EPILOG_SECONDS + 5))" "$GDRDOCTOR" "${args[@]}" 2>&1)
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then
    # 3: the journal line was written, the textfile or the recent jobs' file was not (said in
    # the output).
    log "${out:0:500}"
    exit 0
fi
case $rc in
    124 | 137) why="timed out after $((GDRDOCTOR_EPILOG_SECONDS + 5)) s" ;;
    126 | 127) why="$GDRDOCTOR could not be run (exit $rc)" ;;
    *) why="exit $rc" ;;
esac
log "gdrdoctor jobs record: $why: ${out:0:500}"
# The logs go whatever happened: disk use stays bounded. rm never follows a link, and the jobs
# directory is root's and sticky, so "$dir" is the job's own entry.
rm -rf -- "$dir" 2>/dev/null || true
# A line saying why, so that the journal has one per job and node. Job ids are digits; the
# node name is kept to the characters host names have. One short write with O_APPEND; a write
# cut short (a full disk) is cut off again, so that the journal stays whole lines.
safe_node=${node//[^A-Za-z0-9._-]/_}
size=$(stat -c %s -- "$GDRDOCTOR_JOURNAL" 2>/dev/null || echo 0)
printf '{"schema":"gdrdoctor.job","schema_version":1,"time":%s,"job":"%s","user":null,"node":"%s","job_nodes":null,"status":"error","summary":"not recorded: gdrdoctor jobs record failed (%s); the logs were removed","nccl":null,"connections":{"net":0,"gdr":0,"no_gdr":0},"ranks":[],"ranks_more":0,"causes":[],"env":{},"logs":{"files":0,"bytes":0,"lines":0,"nccl_lines":0,"cut":true,"refused":[],"removed":true},"predicted":null,"contradicted":false}\n' \
    "$(date +%s)" "$job" "$safe_node" "${why//[^A-Za-z0-9 ._()\/-]/_}" >> "$GDRDOCTOR_JOURNAL" 2>/dev/null || {
    log "the journal $GDRDOCTOR_JOURNAL was not written either"
    [ -f "$GDRDOCTOR_JOURNAL" ] && truncate -s "$size" -- "$GDRDOCTOR_JOURNAL" 2>/dev/null
}
exit 0
