"""Runs a command under limits and says how it ended: tests/common/command.rs's `Gdrdoctor::run`.

Usage: bounded.py REPORT ADDRESS_SPACE CPU_S WALL_S -- COMMAND [ARG...]

Forks; the child sets RLIMIT_AS to ADDRESS_SPACE bytes and RLIMIT_CPU to CPU_S seconds (0: left
as they are) and execs COMMAND, with this process's standard input, output and error. The child
is killed (SIGKILL) once WALL_S seconds have passed. REPORT gets one line:
`STATUS MAXRSS_KIB ELAPSED_S KILLED` (wait4's status and the child's ru_maxrss, the seconds from
fork to reap, 1 if it was killed at WALL_S).

Why a process between the test binary and gdrdoctor: Linux starts a child's ru_maxrss at the
peak of the memory it was spawned from, and std's Command spawns with vfork (posix_spawn), so a
child of the test binary, which runs every test in one process, would be measured from that
binary's peak. A child forked from this small process starts at this process's few MiB.
"""
import os
import resource
import signal
import sys
import time

report, address_space, cpu, wall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
assert sys.argv[5] == "--", sys.argv
argv = sys.argv[6:]

start = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if cpu:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        os.execv(argv[0], argv)
    finally:
        os._exit(127)

killed = False


def kill(_signum, _frame):
    global killed
    killed = True
    os.kill(pid, signal.SIGKILL)


signal.signal(signal.SIGALRM, kill)
signal.setitimer(signal.ITIMER_REAL, wall)
_, status, usage = os.wait4(pid, 0)  # retried after the handler runs (PEP 475)
signal.setitimer(signal.ITIMER_REAL, 0)
elapsed = time.monotonic() - start
with open(report, "w") as f:
    f.write(f"{status} {usage.ru_maxrss} {elapsed:.6f} {int(killed)}\n")
