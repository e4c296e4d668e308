#!/usr/bin/env python3
"""Which accesses move atime on a mount: `atime_steps.py ROOT OTHER` makes a few objects under
ROOT, then for each step prints `STEP=Y` or `STEP=N` (did the step move the atime ROOT shows)
and `STEP.other=Y|N` (does OTHER, another mount of the same file system, show that same atime
right after). The integration tests run it on a native ext4 mount and on a view with the same
options and compare. Timestamps here are nanoseconds, so short pauses separate the steps."""
import mmap
import os
import sys
import time

PAUSE = 0.1


def atime(path):
    return os.stat(path, follow_symlinks=False).st_atime_ns


def step(name, root, other, rel, action):
    path = os.path.join(root, rel)
    time.sleep(PAUSE)
    before = atime(path)
    action(path)
    after = atime(path)
    print("%s=%s" % (name, "Y" if after != before else "N"))
    print("%s.other=%s" % (name, "Y" if atime(os.path.join(other, rel)) == after else "N"))


def read_new_open(path):
    with open(path, "rb") as f:
        f.read()


def read_cached_in_open(path):
    """One open: the first read fills the cache, the second is answered from it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.pread(fd, 1, 0)
        time.sleep(PAUSE)
        os.pread(fd, 1, 0)
    finally:
        os.close(fd)


def map_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
            m[0]
    finally:
        os.close(fd)


def main():
    root, other = sys.argv[1], sys.argv[2]
    j = lambda *p: os.path.join(root, *p)
    with open(j("f"), "wb") as f:
        f.write(b"aaa\n")
    with open(j("page"), "wb") as f:
        f.write(b"p" * 4096)
    os.mkdir(j("d"))
    open(j("d", "x"), "wb").close()
    os.symlink("f", j("l"))

    step("first_read", root, other, "f", read_new_open)
    step("second_read", root, other, "f", read_new_open)
    step("read_in_open", root, other, "f", read_cached_in_open)
    step("read_after_full_page_write", root, other, "page", read_new_open)
    os.chmod(j("f"), 0o640)
    step("read_after_chmod", root, other, "f", read_new_open)
    step("mmap", root, other, "page", map_file)
    step("first_list", root, other, "d", os.listdir)
    step("second_list", root, other, "d", os.listdir)
    step("first_readlink", root, other, "l", os.readlink)
    step("second_readlink", root, other, "l", os.readlink)


main()
