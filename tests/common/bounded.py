"""Runs a command under limits and says how it ended: tests/common/command.rs's `Gdrdoctor::run`.

Usage: bounded.py --report FILE --wall SECONDS [--address-space BYTES] [--cpu SECONDS]
                  [--memlock BYTES|unlimited] -- COMMAND [ARG...]

Forks; the child sets the limits given (RLIMIT_AS, RLIMIT_CPU, RLIMIT_MEMLOCK: soft and hard) and
execs COMMAND, with this process's standard input, output and error. The child is killed
(SIGKILL) once the wall time has passed. FILE gets one line: `STATUS MAXRSS_KIB ELAPSED_S KILLED`
(wait4's status and the child's ru_maxrss, the seconds from fork to reap, 1 if it was killed).

Why a process between the test binary and gdrdoctor: Linux starts a child's ru_maxrss at the
peak of the memory it was spawned from, and std's Command spawns with vfork (posix_spawn), so a
child of the test binary, which runs every test in one process, would be measured from that
binary's peak. A child forked from this small process starts at this process's few MiB.
"""
import argparse
import os
import resource
import signal
import time

p = argparse.ArgumentParser()
p.add_argument("--report", required=True)
p.add_argument("--wall", type=float, required=True)
p.add_argument("--address-space", type=int)
p.add_argument("--cpu", type=int)
p.add_argument("--memlock")
p.add_argument("command", nargs="+")
args = p.parse_args()

limits = []
if args.address_space:
    limits.append((resource.RLIMIT_AS, args.address_space))
if args.cpu:
    limits.append((resource.RLIMIT_CPU, args.cpu))
if args.memlock:
    unlimited = args.memlock == "unlimited"
    limits.append((resource.RLIMIT_MEMLOCK, resource.RLIM_INFINITY if unlimited else int(args.memlock)))

start = time.monotonic()
pid = os.fork()
if pid == 0:
    try:
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        os.execv(args.command[0], args.command)
    except BaseException as e:
        os.write(2, f"bounded.py: {e}\n".encode())
    finally:
        os._exit(127)

killed = False


def kill(_signum, _frame):
    global killed
    killed = True
    os.kill(pid, signal.SIGKILL)


signal.signal(signal.SIGALRM, kill)
signal.setitimer(signal.ITIMER_REAL, args.wall)
_, status, usage = os.wait4(pid, 0)  # retried after the handler runs (PEP 475)
signal.setitimer(signal.ITIMER_REAL, 0)
elapsed = time.monotonic() - start
with open(args.report, "w") as f:
    f.write(f"{status} {usage.ru_maxrss} {elapsed:.6f} {int(killed)}\n")
