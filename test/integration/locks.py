#!/usr/bin/env python3
"""Lock behaviour between two paths of one file, as a user sees it: each case prints one line
of results, which t_locks.sh compares between two mounts of native ext4 and two views.

  locks.py CASE PATH_A PATH_B    a holder locks through PATH_A, another process asks through
                                 PATH_B
  locks.py sqlite DIR...         one SQLite writer per directory, one database
"""
import errno
import fcntl
import os
import signal
import struct
import subprocess
import sys
import time

F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38


def flock_struct(kind, start=0, length=0):
    return struct.pack("hhqqi", kind, os.SEEK_SET, start, length, 0)


def unpack(data):
    kind, _, start, length, pid = struct.unpack("hhqqi", data)
    return kind, start, length, pid


def outcome(fn):
    """What a lock call answered: "granted" or the errno's name."""
    try:
        fn()
        return "granted"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def posix(fd, kind, start=0, length=0, cmd=fcntl.F_SETLK):
    return lambda: fcntl.fcntl(fd, cmd, flock_struct(kind, start, length))


def ofd(fd, kind, start=0, length=0, cmd=F_OFD_SETLK):
    return lambda: fcntl.fcntl(fd, cmd, flock_struct(kind, start, length))


def asker(path, code, mode="os.O_RDWR"):
    """Runs code in a new process (another lock owner) with fd open on path, returns its
    stdout: each case prints what the kernel answered."""
    prog = ("import os, sys, fcntl, struct, errno, time, signal\n"
            "sys.path.insert(0, %r)\nfrom locks import *\n"
            "fd = os.open(%r, %s)\n%s\n") % (os.path.dirname(os.path.abspath(__file__)),
                                             path, mode, code)
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
    if r.returncode:
        return "asker failed: " + r.stderr.strip().splitlines()[-1]
    return r.stdout.strip()


def case_posix(a, b):
    fd = os.open(a, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK, 0, 100))
    res = [asker(b, "print(outcome(posix(fd, fcntl.F_WRLCK, 50, 10)),"
                    " outcome(posix(fd, fcntl.F_RDLCK, 0, 1)),"
                    " outcome(posix(fd, fcntl.F_WRLCK, 100, 10)))")]
    # POSIX: any close by the holder's process ends its locks on the file
    other = os.open(a, os.O_RDONLY)
    os.close(other)
    res.append(asker(b, "print('after close', outcome(posix(fd, fcntl.F_WRLCK, 50, 10)))"))
    os.close(fd)
    return " | ".join(res)


def case_split(a, b):
    fd = os.open(a, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK, 0, 100))
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_UNLCK, 40, 20))
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_RDLCK, 90, 20))
    res = asker(b, "print(outcome(posix(fd, fcntl.F_WRLCK, 40, 20)),"
                   " outcome(posix(fd, fcntl.F_WRLCK, 30, 11)),"
                   " outcome(posix(fd, fcntl.F_RDLCK, 95, 10)),"
                   " outcome(posix(fd, fcntl.F_WRLCK, 105, 1)))")
    os.close(fd)
    return res


def case_ofd(a, b):
    fd = os.open(a, os.O_RDWR)
    dup = os.dup(fd)
    fcntl.fcntl(fd, F_OFD_SETLK, flock_struct(fcntl.F_WRLCK))
    res = [asker(b, "print(outcome(ofd(fd, fcntl.F_RDLCK)), outcome(posix(fd, fcntl.F_WRLCK)))")]
    # OFD: the lock belongs to the open file; closing a duplicate keeps it, the last close ends it
    os.close(dup)
    res.append(asker(b, "print('dup closed', outcome(ofd(fd, fcntl.F_WRLCK)))"))
    os.close(fd)
    res.append(asker(b, "print('closed', outcome(ofd(fd, fcntl.F_WRLCK)))"))
    return " | ".join(res)


def case_flock(a, b):
    fd = os.open(a, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    res = [asker(b, "print(outcome(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),"
                    " outcome(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),"
                    " outcome(posix(fd, fcntl.F_WRLCK)))")]
    fcntl.flock(fd, fcntl.LOCK_EX)
    res.append(asker(b, "print('ex', outcome(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)))"))
    os.close(fd)
    res.append(asker(b, "print('closed', outcome(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)))"))
    return " | ".join(res)


def case_getlk(a, b):
    fd = os.open(a, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK, 10, 20))
    res = asker(b, "k, s, l, p = unpack(fcntl.fcntl(fd, fcntl.F_GETLK, flock_struct(fcntl.F_RDLCK, 0, 0)))\n"
                   "print(k == fcntl.F_WRLCK and 'write' or k, s, l, 'holder' if p == os.getppid() else p)\n"
                   "k, s, l, p = unpack(fcntl.fcntl(fd, fcntl.F_GETLK, flock_struct(fcntl.F_WRLCK, 30, 5)))\n"
                   "print('free' if k == fcntl.F_UNLCK else k)")
    os.close(fd)
    return res.replace("\n", " ")


def case_ro(a, b):
    """A writer's lock through a; b is a read-only mount."""
    fd = os.open(a, os.O_RDWR)
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK, 0, 10))
    res = asker(b, "print(outcome(posix(fd, fcntl.F_RDLCK, 0, 1)), outcome(posix(fd, fcntl.F_WRLCK, 20, 1)),"
                   " outcome(posix(fd, fcntl.F_RDLCK, 20, 1)),"
                   " outcome(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)))", "os.O_RDONLY")
    os.close(fd)
    return res


def case_ro_holder(a, b):
    """A reader's locks through a, a read-only mount; a writer asks through b."""
    fd = os.open(a, os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_RDLCK, 0, 100))
    fcntl.flock(fd, fcntl.LOCK_SH)
    res = asker(b, "print(outcome(posix(fd, fcntl.F_WRLCK, 0, 1)), outcome(posix(fd, fcntl.F_RDLCK, 0, 1)),"
                   " outcome(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)))")
    os.close(fd)
    return res


WAITER = """
import threading
granted = []
def wait():
    fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct(fcntl.F_WRLCK))
    granted.append(time.monotonic())
t = threading.Thread(target=wait, daemon=True)
t.start()
time.sleep(1.0)
print('waiting' if not granted else 'not waiting', flush=True)
os.kill(int(os.environ['HOLDER']), signal.SIGKILL)
killed = time.monotonic()
t.join(10)
print('granted after holder died' if granted and granted[0] >= killed else 'not granted')
"""


def hold_in_child(path, code="fcntl.fcntl(fd, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK))"):
    """A holder process with a lock through path, until it is killed; returns it."""
    prog = ("import os, sys, fcntl, time\nsys.path.insert(0, %r)\nfrom locks import *\n"
            "fd = os.open(%r, os.O_RDWR)\n%s\nprint('held', flush=True)\ntime.sleep(120)\n") % (
                os.path.dirname(os.path.abspath(__file__)), path, code)
    p = subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "held":
        raise SystemExit("the holder could not lock")
    return p


def case_setlkw(a, b):
    holder = hold_in_child(a)
    os.environ["HOLDER"] = str(holder.pid)
    res = asker(b, WAITER)
    holder.wait()
    return res.replace("\n", " ")


def case_flock_wait(a, b):
    holder = hold_in_child(a, "fcntl.flock(fd, fcntl.LOCK_EX)")
    os.environ["HOLDER"] = str(holder.pid)
    res = asker(b, WAITER.replace("fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct(fcntl.F_WRLCK))",
                                  "fcntl.flock(fd, fcntl.LOCK_EX)"))
    holder.wait()
    return res.replace("\n", " ")


INTERRUPTED = """
class Alarm(Exception):
    pass
def on_alarm(sig, frame):
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.5)
start = time.monotonic()
try:
    fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct(fcntl.F_WRLCK))
    print('granted')
except Alarm:
    print('interrupted by its signal' if time.monotonic() - start < 5 else 'interrupted late')
print(outcome(posix(fd, fcntl.F_WRLCK)))
"""


def case_interrupt(a, b):
    holder = hold_in_child(a)
    res = asker(b, INTERRUPTED)
    holder.kill()
    holder.wait()
    return res.replace("\n", " ")


def case_many_waiters(a, b, n=24, cpu=None):
    """n processes wait through b for a lock held through a; meanwhile the file system
    answers; each is granted once the holder dies (one at a time, each dropping it). With
    cpu, the waiters and the requests made while they wait all run on that CPU (over
    io_uring: one queue)."""
    holder = hold_in_child(a)
    pin = "os.sched_setaffinity(0, {%d})\n" % cpu if cpu is not None else ""
    prog = ("import os, sys, fcntl\nsys.path.insert(0, %r)\nfrom locks import *\n%s"
            "fd = os.open(%r, os.O_RDWR)\nprint('asking', flush=True)\n"
            "fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct(fcntl.F_WRLCK))\nprint('granted')\n") % (
                os.path.dirname(os.path.abspath(__file__)), pin, b)
    ws = [subprocess.Popen([sys.executable, "-c", prog], stdout=subprocess.PIPE, text=True)
          for _ in range(n)]
    for w in ws:
        w.stdout.readline()
    time.sleep(1.0)
    early = sum(w.poll() is not None for w in ws)
    mine = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    t = time.monotonic()
    os.stat(b)
    with open(os.path.join(os.path.dirname(b), "served-while-waiting"), "w") as f:
        f.write("x")
    served = time.monotonic() - t < 5
    os.sched_setaffinity(0, mine)
    holder.kill()
    holder.wait()
    granted = 0
    for w in ws:
        try:
            out, _ = w.communicate(timeout=30)
            granted += out.strip() == "granted"
        except subprocess.TimeoutExpired:
            w.kill()
    return "%d granted early, served while waiting: %s, %d of %d granted after" % (
        early, served, granted, n)


def reap(pids, seconds):
    """Waits up to seconds for pids to end, then kills those left and gives them 5 s more:
    how many are still there (a process waiting for a request that never comes)."""
    left = list(pids)
    for limit, kill in ((seconds, False), (5, True)):
        if kill:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        until = time.monotonic() + limit
        while left and time.monotonic() < until:
            left = [p for p in left if os.waitpid(p, os.WNOHANG) == (0, 0)]
            time.sleep(0.05)
    return len(left)


def case_waiters_and_stats_at_once(a, b, n=32, cpu=0):
    """n processes on one CPU, released at once ahead of everything else there (real-time
    priority): half wait through b for a lock held through a, half stat a file beside b. The
    stats are answered while the lock is held, and every waiter is granted once the holder
    dies. Over io_uring all their requests reach one queue before the daemon runs, so the
    queue's entries end up waiting and its spares register with requests already queued."""
    holder = hold_in_child(a)
    d = os.path.dirname(b)
    for i in range(n // 2):
        open(os.path.join(d, "s%d" % i), "w").close()
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    kids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.close(done_r)
            os.sched_setaffinity(0, {cpu})
            fd = os.open(b, os.O_RDWR)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            os.read(go_r, 1)
            if i % 2:
                os.stat(os.path.join(d, "s%d" % (i // 2)))
                os.write(done_w, b"s")
            else:
                fcntl.fcntl(fd, fcntl.F_SETLKW, flock_struct(fcntl.F_WRLCK))
                os.write(done_w, b"w")
            os._exit(0)
        kids.append(pid)
    os.close(go_r)
    os.close(done_w)
    time.sleep(1.0)
    os.close(go_w)  # every child's read returns at once
    seen = b""
    os.set_blocking(done_r, False)
    until = time.monotonic() + 10
    while time.monotonic() < until and seen.count(b"s") < n // 2:
        time.sleep(0.05)
        try:
            seen += os.read(done_r, 64)
        except BlockingIOError:
            pass
    stats, early = seen.count(b"s"), seen.count(b"w")
    holder.kill()
    holder.wait()
    stuck = reap(kids, 30)
    os.set_blocking(done_r, False)
    try:
        seen += os.read(done_r, 64)
    except BlockingIOError:
        pass
    os.close(done_r)
    return ("%d of %d stats answered while the lock was held, %d waiters granted early, "
            "%d of %d after, %d processes stuck" % (
                stats, n // 2, early, seen.count(b"w") - early, n - n // 2, stuck))


def case_sqlite(dirs, rows, wal=False):
    """One writer process per directory (one mount each) inserts rows into one database,
    a commit per row; the last directory's mount counts and checks them."""
    import sqlite3
    dbs = [os.path.join(d, "t.db") for d in dirs]
    con = sqlite3.connect(dbs[0])
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (w INTEGER, i INTEGER)")
    con.commit()
    con.close()
    # each row its own write transaction, begun IMMEDIATE as a writer shared with others
    # should (a deferred one that finds another writer fails at once, by SQLite's design)
    prog = ("import sqlite3, sys\n"
            "con = sqlite3.connect(sys.argv[1], timeout=120, isolation_level=None)\n"
            "for i in range(%d):\n"
            "    con.execute('BEGIN IMMEDIATE')\n"
            "    con.execute('INSERT INTO t VALUES (?, ?)', (int(sys.argv[2]), i))\n"
            "    con.execute('COMMIT')\n") % rows
    ps = [subprocess.Popen([sys.executable, "-c", prog, db, str(k)],
                           stderr=subprocess.PIPE, text=True) for k, db in enumerate(dbs)]
    errors = [p.communicate()[1].strip().splitlines()[-1:] for p in ps]
    con = sqlite3.connect(dbs[-1])
    n = con.execute("SELECT count(*) FROM t").fetchone()[0]
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    failed = [e[0] for e in errors if e]
    return "%d of %d rows, integrity %s%s" % (n, len(dbs) * rows, ok,
                                              ", errors: " + "; ".join(failed) if failed else "")


def case_dpkg(a, b):
    """dpkg's own lock: a package manager holds the frontend lock of an admin directory through
    A (fcntl, as apt and dpkg take it), and dpkg is run on it through B. The holder's pid in
    dpkg's message is named as such."""
    adm_a, adm_b = (os.path.join(os.path.dirname(p), "dpkg-admin") for p in (a, b))
    for d in ("updates", "info"):
        os.makedirs(os.path.join(adm_a, d), exist_ok=True)
    open(os.path.join(adm_a, "status"), "a").close()
    fd = os.open(os.path.join(adm_a, "lock-frontend"), os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    r = subprocess.run(["dpkg", "--admindir=" + adm_b, "--configure", "-a"],
                       capture_output=True, text=True, timeout=60)
    os.close(fd)
    first = (r.stderr.strip().splitlines() or ["(nothing)"])[0]
    first = first.replace("pid %d" % os.getpid(), "the holder's pid")
    after = subprocess.run(["dpkg", "--admindir=" + adm_b, "--configure", "-a"],
                           capture_output=True, text=True, timeout=60)
    return "held: exit %d, %s; released: exit %d" % (r.returncode, first, after.returncode)


CASES = {
    "dpkg": case_dpkg,
    "posix": case_posix, "split": case_split, "ofd": case_ofd, "flock": case_flock,
    "getlk": case_getlk, "setlkw": case_setlkw, "flock_wait": case_flock_wait,
    "interrupt": case_interrupt, "many_waiters": case_many_waiters,
    "many_waiters_one_cpu": lambda a, b: case_many_waiters(a, b, 40, cpu=0),
    "waiters_and_stats_at_once": case_waiters_and_stats_at_once,
    "ro": case_ro, "ro_holder": case_ro_holder,
}
# a database written through every directory given
MANY = {
    "sqlite": lambda dirs: case_sqlite(dirs, 1500),
    "sqlite_wal": lambda dirs: case_sqlite(dirs, 400, wal=True),
}

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] in CASES:
        print(CASES[sys.argv[1]](sys.argv[2], sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[1] in MANY:
        print(MANY[sys.argv[1]](sys.argv[2:]))
    else:
        sys.exit("usage: locks.py {%s} PATH_A PATH_B | {%s} DIR..." % ("|".join(CASES), "|".join(MANY)))
