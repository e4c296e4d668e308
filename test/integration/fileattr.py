#!/usr/bin/env python3
"""Inode flags, birth time and what the kernel keeps from a FUSE server (t_fileattr.sh).

fileattr.py CASE DIR... prints what a user would check, one line per step. The test runs a case
in a native ext4 directory and in views of several kinds and compares the lines. Cases:
  root DIR        chattr-like changes as root and what ext4 then refuses (append-only,
                  immutable, on files and directories), and the other flags
  user DIR        the same by an ordinary user (run under setpriv): owner and capability rules
  fsx DIR         FS_IOC_FSGETXATTR / FSSETXATTR (xfs_io's chattr and lsproj)
  casefold DIR    the casefold flag: what a view owns and a change to it (DIR in a view)
  nocasefold DIR  the casefold flag where names are not folded
  readonly DIR    flags read and changes refused (DIR on a read-only mount)
  immutable FILE  chattr +i and -i by whoever runs it (capabilities as given)
  label DIR [NEW] the file system's label, read, and set to NEW if given
  statx DIR_A DIR_B  birth time asked through A and B (two mounts of one directory)
  limits DIR      operations ext4 has and the kernel keeps from a FUSE server
  shutdown DIR    FS_IOC_SHUTDOWN (DIR in a view: native ext4 would shut down)
"""
import ctypes
import fcntl
import os
import struct
import sys
import time

from transcript import step

LIBC = ctypes.CDLL(None, use_errno=True)

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IOC_FSGETXATTR = 0x801C581F
FS_IOC_FSSETXATTR = 0x401C5820
FS_IOC_FIEMAP = 0xC020660B
FIBMAP = 1
FS_IOC_SHUTDOWN = 0x8004587D
FS_IOC_GETFSUUID = 0x80111500
FS_IOC_GETFSLABEL = 0x81009431
FS_IOC_SETFSLABEL = 0x41009432

FLAG_NAMES = [(0x8, "S"), (0x10, "i"), (0x20, "a"), (0x40, "d"), (0x80, "A"),
              (0x4000, "j"), (0x10000, "D"), (0x80000, "e"), (0x40000000, "F")]
APPEND, IMMUTABLE, NODUMP, NOATIME, SYNC, JOURNAL, CASEFOLD = \
    0x20, 0x10, 0x40, 0x80, 0x8, 0x4000, 0x40000000
FS_XFLAG_APPEND = 0x10
FS_XFLAG_IMMUTABLE = 0x8
FS_XFLAG_NODUMP = 0x800

FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_INSERT_RANGE = 0x20
STATX_BASIC_STATS = 0x7FF
STATX_BTIME = 0x800
AT_EMPTY_PATH = 0x1000
AT_SYMLINK_NOFOLLOW = 0x100
AT_FDCWD = -100


def names(flags):
    return "".join(n for bit, n in FLAG_NAMES if flags & bit) or "-"


def opened(path, fn, flags=os.O_RDONLY | os.O_NONBLOCK):
    """fn(fd) on path opened as chattr and lsattr open it."""
    fd = os.open(path, flags)
    try:
        return fn(fd)
    finally:
        os.close(fd)


def get_flags(path):
    return opened(path, lambda fd: struct.unpack(
        "i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("i", 0)))[0] & 0xFFFFFFFF)


def set_flags(path, flags):
    opened(path, lambda fd: fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("I", flags)))


def chattr(path, add=0, remove=0):
    """chattr(1): the flags read, changed, written back."""
    set_flags(path, (get_flags(path) | add) & ~remove)


def lsattr(path):
    return names(get_flags(path))


def fsx_get(path):
    raw = opened(path, lambda fd: fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28)))
    return struct.unpack("IIIII8s", raw)[:5]  # xflags, extsize, nextents, projid, cowextsize


def fsx_set(path, xflags, projid):
    _, extsize, nextents, _, cow = fsx_get(path)
    raw = struct.pack("IIIII8s", xflags, extsize, nextents, projid, cow, bytes(8))
    opened(path, lambda fd: fcntl.ioctl(fd, FS_IOC_FSSETXATTR, raw))


def write(path, data, flags):
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read().decode()


def file_steps(d, label):
    """What ext4 refuses of a file with flags: the effects a user meets."""
    f = os.path.join(d, label)
    step(f"{label} open for writing", lambda: write(f, b"new", os.O_WRONLY))
    step(f"{label} append", lambda: write(f, b"+", os.O_WRONLY | os.O_APPEND))
    step(f"{label} truncate", lambda: os.truncate(f, 0))
    step(f"{label} chmod", lambda: os.chmod(f, 0o600))
    step(f"{label} utime", lambda: os.utime(f, (1, 1)))
    step(f"{label} setxattr", lambda: os.setxattr(f, "user.k", b"v"))
    step(f"{label} link", lambda: os.link(f, f + ".link"))
    step(f"{label} rename", lambda: os.rename(f, f + ".moved"))
    step(f"{label} unlink", lambda: os.unlink(f))
    step(f"{label} read", lambda: read(f))


def dir_steps(d, label):
    sub = os.path.join(d, label)
    step(f"{label} create in", lambda: write(os.path.join(sub, "new"), b"", os.O_CREAT | os.O_WRONLY))
    step(f"{label} unlink in", lambda: os.unlink(os.path.join(sub, "old")))
    step(f"{label} mkdir in", lambda: os.mkdir(os.path.join(sub, "newdir")))
    step(f"{label} list", lambda: " ".join(sorted(os.listdir(sub))))


def case_root(d):
    f = os.path.join(d, "file")
    write(f, b"data", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    step("lsattr", lambda: lsattr(f))
    step("chattr +a", lambda: chattr(f, APPEND))
    step("lsattr +a", lambda: lsattr(f))
    file_steps(d, "file")
    step("chattr -a +i", lambda: chattr(f, IMMUTABLE, APPEND))
    step("lsattr +i", lambda: lsattr(f))
    file_steps(d, "file")
    step("chattr -i", lambda: chattr(f, 0, IMMUTABLE))
    step("content", lambda: read(f))
    step("chattr +dAS", lambda: chattr(f, NODUMP | NOATIME | SYNC))
    step("lsattr +dAS", lambda: lsattr(f))
    step("chattr +j", lambda: chattr(f, JOURNAL))
    step("lsattr +j", lambda: lsattr(f))
    step("chattr = (nothing)", lambda: set_flags(f, get_flags(f) & 0x80000))
    step("lsattr =", lambda: lsattr(f))
    step("chattr -e", lambda: chattr(f, 0, 0x80000))
    for flag, label in ((APPEND, "dir+a"), (IMMUTABLE, "dir+i")):
        sub = os.path.join(d, label)
        os.mkdir(sub)
        write(os.path.join(sub, "old"), b"", os.O_CREAT | os.O_WRONLY)
        step(f"chattr {label}", lambda: chattr(sub, flag))
        dir_steps(d, label)
        step(f"chattr {label} off", lambda: chattr(sub, 0, flag))


def case_nocasefold(d):
    """The casefold flag where the mount does not fold names."""
    sub, f = dir_with_file(d, "plain")
    step("lsattr -d", lambda: lsattr(sub))
    step("chattr +F on a directory", lambda: chattr(sub, CASEFOLD))
    step("chattr +F on a file", lambda: chattr(f, CASEFOLD))
    step("lsattr -d", lambda: lsattr(sub))


def case_user(d):
    """As an ordinary user in DIR (mode 1777) holding root's file 'theirs' (0644)."""
    mine = os.path.join(d, "mine")
    write(mine, b"x", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    theirs = os.path.join(d, "theirs")
    step("lsattr mine", lambda: lsattr(mine))
    step("chattr +d mine", lambda: chattr(mine, NODUMP))
    step("lsattr +d mine", lambda: lsattr(mine))
    step("chattr +A mine", lambda: chattr(mine, NOATIME))
    step("chattr +a mine", lambda: chattr(mine, APPEND))
    step("chattr +i mine", lambda: chattr(mine, IMMUTABLE))
    step("chattr +j mine", lambda: chattr(mine, JOURNAL))
    step("xflag append mine", lambda: fsx_set(mine, FS_XFLAG_APPEND, 0))
    step("xflag nodump mine", lambda: fsx_set(mine, FS_XFLAG_NODUMP, 0))
    step("lsattr mine", lambda: lsattr(mine))
    step("lsattr theirs", lambda: lsattr(theirs))
    step("chattr +d theirs", lambda: chattr(theirs, NODUMP))
    step("chattr -a theirs", lambda: chattr(theirs, 0, APPEND))
    step("append theirs", lambda: write(theirs, b"+", os.O_WRONLY | os.O_APPEND))


def case_immutable(path):
    """chattr +i then -i on one file, by whoever runs this (capabilities as given)."""
    step("chattr +i", lambda: chattr(path, IMMUTABLE))
    step("lsattr", lambda: lsattr(path))
    step("chattr -i", lambda: chattr(path, 0, IMMUTABLE))


def case_label(d, new=None):
    """The file system's label (xfs_io's label, e2label of a mounted file system), read and,
    given new, set."""
    get = lambda: opened(d, lambda fd: fcntl.ioctl(fd, FS_IOC_GETFSLABEL, bytes(256))
                         ).rstrip(b"\0").decode()
    if new is not None:
        step("set label", lambda: opened(d, lambda fd: fcntl.ioctl(
            fd, FS_IOC_SETFSLABEL, new.encode().ljust(256, b"\0")) and None))
    step("label", get)


def case_fsx(d):
    f = os.path.join(d, "fsx")
    write(f, b"data", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    step("fsgetxattr", lambda: "xflags=%#x extsize=%d nextents=%d projid=%d cowextsize=%d"
         % fsx_get(f))
    step("xflags append", lambda: fsx_set(f, FS_XFLAG_APPEND, 0))
    step("lsattr", lambda: lsattr(f))
    step("fsgetxattr", lambda: "xflags=%#x projid=%d" % (fsx_get(f)[0], fsx_get(f)[3]))
    step("write to it", lambda: write(f, b"new", os.O_WRONLY))
    step("xflags immutable", lambda: fsx_set(f, FS_XFLAG_IMMUTABLE, 0))
    step("lsattr", lambda: lsattr(f))
    step("xflags none", lambda: fsx_set(f, 0, 0))
    step("project 0", lambda: fsx_set(f, 0, 0))
    step("project 7", lambda: fsx_set(f, 0, 7))
    step("fsgetxattr of a directory", lambda: "xflags=%#x projid=%d"
         % (fsx_get(d)[0], fsx_get(d)[3]))


def dir_with_file(d, name):
    """A new directory name in d holding an empty 'file'; both paths."""
    sub = os.path.join(d, name)
    os.mkdir(sub)
    f = os.path.join(sub, "file")
    write(f, b"", os.O_CREAT | os.O_WRONLY)
    return sub, f


def case_casefold(d):
    sub, f = dir_with_file(d, "cf")
    step("lsattr -d", lambda: lsattr(sub))
    step("lsattr file", lambda: lsattr(f))
    step("chattr +d (F kept)", lambda: chattr(sub, NODUMP))
    step("lsattr -d", lambda: lsattr(sub))
    step("chattr -F", lambda: chattr(sub, 0, CASEFOLD))
    step("chattr +F on a file", lambda: chattr(f, CASEFOLD))
    step("chattr -d", lambda: chattr(sub, 0, NODUMP))
    step("lsattr -d", lambda: lsattr(sub))


def case_readonly(d):
    f = os.path.join(d, "file")
    step("lsattr", lambda: lsattr(f))
    step("chattr +d", lambda: chattr(f, NODUMP))
    step("xflags nodump", lambda: fsx_set(f, FS_XFLAG_NODUMP, 0))
    step("lsattr -d", lambda: lsattr(d))


class Statx(ctypes.Structure):
    _fields_ = [("raw", ctypes.c_ubyte * 256)]


def statx(path, mask, flags=AT_SYMLINK_NOFOLLOW):
    """(mask got, btime, ctime) of path: statx(2), which Python 3.11 lacks."""
    buf = Statx()
    if LIBC.statx(AT_FDCWD, path.encode(), flags, mask, ctypes.byref(buf)) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    raw = bytes(buf.raw)
    got = struct.unpack_from("I", raw, 0)[0]
    btime = struct.unpack_from("qI", raw, 80)
    ctime = struct.unpack_from("qI", raw, 96)
    return got, btime[0] + btime[1] / 1e9, ctime[0] + ctime[1] / 1e9


def case_statx(a, b):
    made = time.time()
    fa, fb = os.path.join(a, "born"), os.path.join(b, "born")
    write(fa, b"x", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    os.mkdir(os.path.join(a, "bornd"))
    os.symlink("born", os.path.join(a, "bornl"))
    got, btime_a, ctime_a = statx(fa, STATX_BASIC_STATS | STATX_BTIME)
    print("btime reported:", bool(got & STATX_BTIME))
    print("btime at the creation:", abs(btime_a - made) < 5)
    _, btime_b, _ = statx(fb, STATX_BASIC_STATS | STATX_BTIME)
    print("the other mount's btime is the same:", btime_b == btime_a)
    for name in ("bornd", "bornl"):
        got, bt, _ = statx(os.path.join(b, name), STATX_BTIME)
        print(f"{name}: btime reported: {bool(got & STATX_BTIME)}, at the creation:",
              abs(bt - made) < 5)
    time.sleep(0.05)
    os.chmod(fb, 0o600)
    write(fb, b"more", os.O_WRONLY | os.O_APPEND)
    got, btime2, ctime2 = statx(fa, STATX_BASIC_STATS | STATX_BTIME)
    print("after a change elsewhere: btime kept:", btime2 == btime_a, "ctime moved:",
          ctime2 > ctime_a)
    fd = os.open(fa, os.O_RDONLY)
    buf = Statx()
    rc = LIBC.statx(fd, b"", AT_EMPTY_PATH, STATX_BTIME, ctypes.byref(buf))
    os.close(fd)
    print("btime of an open file:", rc == 0 and struct.unpack_from("q", bytes(buf.raw), 80)[0]
          == int(btime_a))
    got, _, _ = statx(fa, STATX_BASIC_STATS)
    print("stat's fields alone:", got & STATX_BASIC_STATS == STATX_BASIC_STATS)


def fallocate(path, mode, off, length):
    fd = os.open(path, os.O_RDWR)
    try:
        if LIBC.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(length)) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def fiemap_extents(path):
    # struct fiemap: start, length, flags, mapped_extents, extent_count, reserved; 8 extents
    buf = bytearray(32 + 8 * 56)
    struct.pack_into("QQIIII", buf, 0, 0, (1 << 64) - 1, 0, 0, 8, 0)
    opened(path, lambda fd: fcntl.ioctl(fd, FS_IOC_FIEMAP, buf))
    return struct.unpack_from("I", buf, 20)[0]


def case_limits(d):
    f = os.path.join(d, "three")
    write(f, b"a" * 4096 + b"b" * 4096 + b"c" * 4096, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    opened(f, os.fsync)
    step("collapse range", lambda: fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 4096, 4096))
    step("insert range", lambda: fallocate(f, FALLOC_FL_INSERT_RANGE, 0, 4096))
    step("size", lambda: os.stat(f).st_size)
    step("fiemap extents", lambda: fiemap_extents(f))
    step("file system uuid", lambda: len(opened(d, lambda fd: fcntl.ioctl(
        fd, FS_IOC_GETFSUUID, bytes(17))).rstrip(b"\0")) > 1)


def case_shutdown(d):
    """FS_IOC_SHUTDOWN with 'no flush' (2): on native ext4 the end of the mount, so only a
    view is asked."""
    step("shutdown", lambda: opened(d, lambda fd: fcntl.ioctl(fd, FS_IOC_SHUTDOWN,
                                                             struct.pack("I", 2))))
    step("still serving", lambda: len(os.listdir(d)) >= 0)


CASES = {"root": case_root, "user": case_user, "fsx": case_fsx, "casefold": case_casefold,
         "nocasefold": case_nocasefold,
         "readonly": case_readonly, "immutable": case_immutable,
         "label": case_label, "statx": case_statx, "limits": case_limits,
         "shutdown": case_shutdown}

if __name__ == "__main__":
    CASES[sys.argv[1]](*sys.argv[2:])
