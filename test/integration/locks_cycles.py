#!/usr/bin/env python3
"""locks_cycles.py ROUNDS DIR_A DIR_B: opens 1,000 files, alternately in DIR_A and DIR_B
(created if missing), takes and drops a POSIX lock on each ROUNDS times, a flock once if
ROUNDS > 0, and closes them all."""
import fcntl
import os
import struct
import sys

rounds, a, b = int(sys.argv[1]), sys.argv[2], sys.argv[3]
fds = [os.open(os.path.join(a if i % 2 else b, "f%d" % i), os.O_RDWR | os.O_CREAT, 0o644)
       for i in range(1000)]
for r in range(rounds):
    for fd in fds:
        fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, r, 10, 0))
        fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_UNLCK, 0, r, 10, 0))
for fd in fds:
    if rounds:
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.close(fd)
