#!/usr/bin/env python3
"""Leases between two paths of one file, as a user sees them: each case prints one line of
results, which t_locks.sh compares between two mounts of native ext4 and two views.

  leases.py CASE PATH_A PATH_B   a holder takes a lease through PATH_A; another process
                                 opens (or truncates) through PATH_B; CASE "all" runs every
                                 case, "ro" those a read-only mount takes part in

The holder gives its lease up HOLD seconds after the kernel's
signal; what is printed is whether the signal came, whether the opener waited for the holder,
and what its call answered. Times are classes (waited for the holder or not), never figures.
"""
import errno
import fcntl
import os
import select
import signal
import sys
import time

F_SETLEASE, F_GETLEASE = 1024, 1025
HOLD = 0.3          # how long the holder keeps its lease after the signal
WAITED = 0.2        # an opener that took longer than this waited for the holder
NAMES = {fcntl.F_RDLCK: "read", fcntl.F_WRLCK: "write", fcntl.F_UNLCK: "none"}


def holder(path, kind, ready, report, done):
    """In a child: opens path, takes the lease, tells ready; on the kernel's signal waits HOLD
    and gives the lease up; reports what it saw."""
    try:
        fd = os.open(path, os.O_RDONLY if kind == fcntl.F_RDLCK else os.O_RDWR)
    except OSError as e:
        os.write(ready, ("open " + errno.errorcode[e.errno]).encode())
        os._exit(0)
    seen = []

    def on_signal(sig, frame):
        seen.append(NAMES.get(fcntl.fcntl(fd, F_GETLEASE), "?"))

    signal.signal(signal.SIGIO, on_signal)
    try:
        fcntl.fcntl(fd, F_SETLEASE, kind)
        os.write(ready, b"ok")
    except OSError as e:
        os.write(ready, errno.errorcode[e.errno].encode())
        os._exit(0)
    # until the signal, or the opener is done (a break signals at once, before the opener
    # can be done)
    while not seen and not select.select([done], [], [], 0.01)[0]:
        pass
    if seen:
        time.sleep(HOLD)
        fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
    os.write(report, ("signalled (F_GETLEASE %s)" % seen[0] if seen else "no signal").encode())
    os._exit(0)


def opener_call(what, path):
    if what == "truncate":
        return lambda: os.truncate(path, 2)
    flags = {"read": os.O_RDONLY, "write": os.O_WRONLY,
             "write_nonblock": os.O_WRONLY | os.O_NONBLOCK}[what]
    return lambda: os.close(os.open(path, flags))


class Interrupted(Exception):
    pass


def on_alarm(sig, frame):
    raise Interrupted()


def one_case(kind, what, a, b, interrupt=False):
    ready_r, ready_w = os.pipe()
    report_r, report_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            holder(a, kind, ready_w, report_w, done_r)
        finally:
            os._exit(1)
    for fd in (ready_w, report_w, done_r):
        os.close(fd)
    took = os.read(ready_r, 100).decode()
    if took != "ok":
        os.waitpid(pid, 0)
        for fd in (ready_r, report_r, done_w):
            os.close(fd)
        return "lease refused %s" % took
    if interrupt:
        # the signal ends the waiting open (its handler raises, so Python does not retry)
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, WAITED / 2)
    start = time.monotonic()
    try:
        opener_call(what, b)()
        answer = "done"
    except Interrupted:
        answer = "interrupted"
    except OSError as e:
        answer = errno.errorcode.get(e.errno, str(e.errno))
    took = time.monotonic() - start
    waited = "waited for the holder" if took > WAITED else "did not wait"
    try:
        os.write(done_w, b"done")
    except BrokenPipeError:
        pass  # the holder had its signal, and is gone
    report = os.read(report_r, 200).decode()
    os.waitpid(pid, 0)
    for fd in (ready_r, report_r, done_w):
        os.close(fd)
    return "%s: %s, %s; holder %s" % (what, answer, waited, report)


CASES = {
    "read_lease_write_open": (fcntl.F_RDLCK, "write"),
    "read_lease_read_open": (fcntl.F_RDLCK, "read"),
    "read_lease_nonblock": (fcntl.F_RDLCK, "write_nonblock"),
    "read_lease_truncate": (fcntl.F_RDLCK, "truncate"),
    "write_lease_read_open": (fcntl.F_WRLCK, "read"),
    "write_lease_write_open": (fcntl.F_WRLCK, "write"),
    "interrupt": (fcntl.F_RDLCK, "write"),
}
# what a holder in a read-only mount can take, and what a read-only mount can open
GROUPS = {"all": list(CASES), "ro": ["read_lease_write_open", "write_lease_read_open"]}


def main():
    group, a, b = sys.argv[1:4]
    for case in GROUPS.get(group, [group]):
        kind, what = CASES[case]
        print("%s: %s" % (case, one_case(kind, what, a, b, interrupt=case == "interrupt")))


if __name__ == "__main__":
    main()
