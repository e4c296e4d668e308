#!/usr/bin/env python3
"""locks_try.py PATH: exits 0 if a write lock on all of PATH is granted at once, else 1."""
import fcntl
import sys

with open(sys.argv[1], "r+") as f:
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        sys.exit("%s: %s" % (sys.argv[1], e.strerror))
