#!/usr/bin/env python3
"""Change notices (inotify) seen through one path of a directory while changes are made
through another, as a user of inotifywait sees them: one line per change, which t_locks.sh
compares between two mounts of native ext4 and two views.

  notices.py WATCH_DIR ACT_DIR [CARRIED...]

WATCH_DIR and ACT_DIR are one directory seen two ways. Watches are set on WATCH_DIR (events
of its entries) and on some of its entries (f, victim, linked, over, sub); then each change is made through
ACT_DIR and the events that reach the watches within a moment are printed. With CARRIED
event names, only those are printed: what the kernel lets a FUSE server cause (doc/kernel.md
§4.14), so the native line can be compared with a view's.
"""
import ctypes
import os
import select
import struct
import sys

IN_NAMES = {
    0x1: "ACCESS", 0x2: "MODIFY", 0x4: "ATTRIB", 0x8: "CLOSE_WRITE", 0x10: "CLOSE_NOWRITE",
    0x20: "OPEN", 0x40: "MOVED_FROM", 0x80: "MOVED_TO", 0x100: "CREATE", 0x200: "DELETE",
    0x400: "DELETE_SELF", 0x800: "MOVE_SELF", 0x8000: "IGNORED", 0x40000000: "ISDIR",
}
IN_ALL_EVENTS = 0xFFF
SETTLE = 0.15  # events of a change arrive within this (they are queued before it returns)

libc = ctypes.CDLL(None, use_errno=True)


def watch(fd, path):
    wd = libc.inotify_add_watch(fd, os.fsencode(path), IN_ALL_EVENTS)
    if wd < 0:
        raise OSError(ctypes.get_errno(), "inotify_add_watch " + path)
    return wd


def events(fd, labels):
    """The events queued now, as sorted "label:NAME[|NAME] entry" strings."""
    out = []
    while select.select([fd], [], [], SETTLE)[0]:
        buf = os.read(fd, 65536)
        i = 0
        while i < len(buf):
            wd, mask, _, n = struct.unpack_from("iIII", buf, i)
            name = buf[i + 16:i + 16 + n].rstrip(b"\0").decode()
            i += 16 + n
            names = "|".join(v for k, v in sorted(IN_NAMES.items()) if mask & k)
            out.append(("%s:%s %s" % (labels.get(wd, "?"), names, name)).strip())
    return sorted(set(out))


def carried_only(evs, carried):
    if carried is None:
        return evs
    keep = []
    for e in evs:
        label, rest = e.split(":", 1)
        names = rest.split(" ")[0].split("|")
        if any(n in carried for n in names):
            keep.append(e)
    return keep


def main():
    watch_dir, act = sys.argv[1:3]
    carried = set(sys.argv[3:]) or None
    for name in ("f", "victim", "linked", "over", "g2"):
        with open(os.path.join(act, name), "w") as f:
            f.write("x\n")
    os.link(os.path.join(act, "linked"), os.path.join(act, "linked2"))
    os.mkdir(os.path.join(act, "sub"))
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    labels = {watch(fd, watch_dir): "dir"}
    for name in ("f", "victim", "linked", "over", "sub"):
        labels[watch(fd, os.path.join(watch_dir, name))] = name
    a = lambda name: os.path.join(act, name)
    changes = [
        ("read f", lambda: open(a("f")).read()),
        ("append f", lambda: open(a("f"), "a").write("y\n")),
        ("truncate f", lambda: os.truncate(a("f"), 1)),
        ("chmod f", lambda: os.chmod(a("f"), 0o600)),
        ("setxattr f", lambda: os.setxattr(a("f"), "user.k", b"v")),
        ("create g", lambda: open(a("g"), "w").close()),
        ("rename g h", lambda: os.rename(a("g"), a("h"))),
        ("mkdir e", lambda: os.mkdir(a("e"))),
        ("unlink victim", lambda: os.unlink(a("victim"))),
        ("unlink linked (one of two links)", lambda: os.unlink(a("linked"))),
        ("rename g2 over", lambda: os.rename(a("g2"), a("over"))),
        ("rmdir sub", lambda: os.rmdir(a("sub"))),
    ]
    events(fd, labels)
    for what, change in changes:
        change()
        print("%s: %s" % (what, " ".join(carried_only(events(fd, labels), carried)) or "-"))
    os.close(fd)


if __name__ == "__main__":
    main()
