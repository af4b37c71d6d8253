#!/bin/bash
# gdrdoctor Slurm TaskProlog: have NCCL write its init-time transport decisions (the lines
# `gdrdoctor nccl explain` reads) to a per-job directory, so that the Epilog can say whether the
# job's NCCL used GPUDirect RDMA (issue 42).
#
# slurm.conf:   TaskProlog=/usr/lib/gdrdoctor/slurm-task-prolog
#
# Slurm runs a TaskProlog as the job's user, in the task's environment, before each task, and sets
# in the task every `export NAME=value` line it prints (slurm.conf(5), "TaskProlog"). This one
# prints, only where the job has not set them itself:
#   export NCCL_DEBUG=INFO
#   export NCCL_DEBUG_SUBSYS=INIT,NET,ENV
#   export NCCL_DEBUG_FILE=DIR/JOBID/nccl.%h.%p.log
# INIT,NET is what prints the lines nccl explain needs (NCCL's src/transport/net.cc prints
# `Channel ../.. : a[b] -> c[d] [send] via NET/IB/0/GDRDMA` as NCCL_INIT|NCCL_NET, and
# `GPU Direct RDMA Enabled for GPU ... / HCA ...` as NCCL_NET; src/init.cc the version line as
# NCCL_INIT), ENV the `NCCL_... set by environment to ...` lines (src/misc/param.cc, NCCL_ENV).
# NCCL replaces %h with the host name and %p with the process id (src/debug.cc).
# A job that set NCCL_DEBUG or NCCL_DEBUG_FILE itself keeps them: its directory then holds a file
# `not-recorded` saying why, which the Epilog reports ("not recorded: the job set ...").
#
# Settings (environment, or the shell assignments of ${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor}):
#   GDRDOCTOR_JOBS_DIR=/var/spool/gdrdoctor/jobs   # sticky (1777): packaging/systemd/gdrdoctor-tmpfiles.conf
#   GDRDOCTOR_NCCL_DEBUG_SUBSYS=INIT,NET,ENV       # add GRAPH for the GPU-NIC paths NCCL 2.29+
#                                                  # prints instead of its distance lines
# Only bash and coreutils (mkdir). Never fails the task: every error leaves the job unrecorded.

set -u
GDRDOCTOR_JOBS_DIR=${GDRDOCTOR_JOBS_DIR:-/var/spool/gdrdoctor/jobs}
GDRDOCTOR_NCCL_DEBUG_SUBSYS=${GDRDOCTOR_NCCL_DEBUG_SUBSYS:-INIT,NET,ENV}
defaults=${GDRDOCTOR_DEFAULTS:-/etc/default/gdrdoctor}
if [ -r "$defaults" ]; then
    # shellcheck source=/dev/null
    . "$defaults" 2>/dev/null || true
fi
job=${SLURM_JOB_ID:-}
# A job id is digits (an array task's too: SLURM_JOB_ID is its own job's id).
case "$job" in
    '' | *[!0-9]*) exit 0 ;;
esac
dir=$GDRDOCTOR_JOBS_DIR/$job
# The job's directory, the user's own (mode 0700 under the sticky parent); an existing one must be
# a directory of this user's, never a link.
if [ ! -d "$dir" ] || [ -L "$dir" ]; then
    mkdir -m 0700 -- "$dir" 2>/dev/null || exit 0
fi
# Writable too: NCCL writes its lines to standard output, into the job's own output, when it
# cannot open NCCL_DEBUG_FILE (src/debug.cc), so an unwritable directory records nothing.
[ -O "$dir" ] && [ ! -L "$dir" ] && [ -w "$dir" ] || exit 0

why=
ours=$dir/nccl.%h.%p.log
if [ "${NCCL_DEBUG_FILE:-}" = "$ours" ]; then
    # Ours, inherited: an srun step inside a batch script whose own TaskProlog set it.
    :
elif [ -n "${NCCL_DEBUG_FILE:-}" ]; then
    why="the job set NCCL_DEBUG_FILE"
elif [ -n "${NCCL_DEBUG:-}" ]; then
    why="the job set NCCL_DEBUG=${NCCL_DEBUG//[^A-Za-z]/}"
fi
if [ -n "$why" ]; then
    printf 'not recorded: %s\n' "$why" > "$dir/not-recorded" 2>/dev/null
    exit 0
fi
echo "export NCCL_DEBUG=INFO"
# Only the characters of subsystem lists (INIT,NET,^GRAPH): the line is an export Slurm sets.
[ -n "${NCCL_DEBUG_SUBSYS:-}" ] || echo "export NCCL_DEBUG_SUBSYS=${GDRDOCTOR_NCCL_DEBUG_SUBSYS//[^A-Za-z,^]/}"
echo "export NCCL_DEBUG_FILE=$ours"
exit 0
