# shellcheck shell=bash
# A private single-node Slurm, sourced by slurm.sh and nhc.sh: Debian's slurm-wlm and munge with
# every file under the caller's lab directory, so nothing of the host's configuration is read or
# changed. The caller sets LAB (a directory others can enter: munged runs as user munge), NODE,
# PORT (slurmctld's; slurmd takes the next one), exports SLURM_CONF=$LAB/slurm.conf, defines die,
# sources claims.sh (now, ms), and an array PIDS, to which the daemons' PIDs are added.

# slurm_ports_free: slurmctld's PORT and slurmd's PORT+1 must be free, or the lab stops here.
slurm_ports_free() {
  local p
  for p in "$PORT" $((PORT + 1)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then die "port $p is in use (set SLURM_LAB_PORT)"; fi
  done
}

# slurm_install: Debian's slurm-wlm and munge, when they are missing.
slurm_install() {
  local s
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && return 0
  s=$(now)
  apt-get update -qq >/dev/null || die "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null \
    || die "apt-get install slurm-wlm munge"
  echo "TIME install slurm-wlm munge: $(ms "$s") ms"
}

# slurm_start LINE...: a private munged, slurm.conf with the caller's LINEs (Prolog=,
# HealthCheckProgram=, ...), slurmctld and slurmd; returns once the node is idle.
slurm_start() {
  local s
  mkdir -p "$LAB"/{state,spool,log,run,munge}
  chown munge:munge "$LAB/munge"; chmod 0711 "$LAB/munge"   # 0700: "Socket is inaccessible"
  dd if=/dev/urandom of="$LAB/munge/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$LAB/munge/munge.key"; chmod 0400 "$LAB/munge/munge.key"
  runuser -u munge -- /usr/sbin/munged --key-file="$LAB/munge/munge.key" --socket="$LAB/munge/munge.socket" \
    --pid-file="$LAB/munge/munged.pid" --log-file="$LAB/munge/munged.log" --seed-file="$LAB/munge/munged.seed" \
    || die "munged did not start"
  PIDS+=("$(cat "$LAB/munge/munged.pid")")
  {
    cat <<EOF
ClusterName=gdrdoctorlab
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
AuthInfo=socket=$LAB/munge/munge.socket
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
EOF
    printf '%s\n' "$@"
    echo "NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN"
    echo "PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP"
  } > "$SLURM_CONF"
  # slurmd initialises a cgroup plugin even with proctrack/linuxproc and task/none, and its
  # autodetection fails with "No filesystem mounted on /sys/fs/cgroup" in a chroot whose /sys was
  # bind-mounted without its sub-mounts (../shared/fresh/fresh-debian.sh). Neither plugin here
  # uses cgroups, and the v1 plugin starts without a cgroup filesystem: name it only then.
  if ! mountpoint -q /sys/fs/cgroup; then
    echo "CgroupPlugin=cgroup/v1" > "$LAB/cgroup.conf"
  fi
  s=$(now)
  slurmctld -D -i > "$LAB/log/slurmctld.out" 2>&1 & PIDS+=($!)
  slurmd -D -N "$NODE" > "$LAB/log/slurmd.out" 2>&1 & PIDS+=($!)
  wait_state idle || die "node not idle after start (see $LAB/log)"
  echo "TIME daemons to idle: $(ms "$s") ms"
}

reason() { sinfo -h -N -n "$NODE" -o '%E' | head -n 1; }   # "none" when there is none
state()  { sinfo -h -N -n "$NODE" -o '%T' | head -n 1; }   # idle / drained / ...
# wait_state STATE [POLLS]: poll the node's state every 0.25 s (default 60 s). The waits are on
# slurmctld and slurmd (and what they run), never on gdrdoctor alone, and are generous for a
# loaded machine: a failure means the node never got there.
wait_state() { for _ in $(seq 1 "${2:-240}"); do [ "$(state)" = "$1" ] && return 0; sleep 0.25; done; return 1; }

# lab_procs: the processes Slurm started for this lab (prologs, job steps, health checks): their
# environment names our slurm.conf. Leaves out this shell and the subshell doing the listing.
lab_procs() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}; pid=${pid%/environ}
    [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ] && continue
    grep -qszxF "SLURM_CONF=$SLURM_CONF" "$f" && echo "$pid"
  done
}
alive() { case "$(ps -o stat= -p "$1" 2>/dev/null)" in ""|Z*) return 1 ;; esac; }
# slurm_stop: TERM to what Slurm started for the lab and to PIDS (the daemons, and whatever the
# caller added); KILL to what is left after 5 s.
slurm_stop() {
  local p left='' procs=()
  read -r -a procs <<<"$(lab_procs | tr '\n' ' ')"
  procs+=("${PIDS[@]}")
  for p in "${procs[@]}"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 1 20); do
    left=''
    for p in "${procs[@]}"; do alive "$p" && left+=" $p"; done
    [ -z "$left" ] && break
    sleep 0.25
  done
  for p in $left; do kill -9 "$p" 2>/dev/null; done
  [ -n "$left" ] && echo "cleanup: had to KILL$left"
}
