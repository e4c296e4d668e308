#!/usr/bin/env python3
"""Idmapped mounts and user namespaces for t_idmap.sh, by the kernel's own calls.

  idmap.py bind SRC DST MAP       clone the mount at SRC, idmap the clone with MAP, attach it
                                  at DST (what util-linux >= 2.39's X-mount.idmap= does)
  idmap.py setattr SRC MAP        idmap a clone of SRC in place and attach nothing: prints
                                  "ok" or the errno's name
  idmap.py run MAP [--mntns] [--pidfile F] -- CMD...
                                  run CMD as root of a new user namespace with MAP (and its
                                  own mount namespace); with --pidfile, CMD's host pid is
                                  written there once it runs

MAP is util-linux's: space-separated [u:|g:|b:]ID-ON-DISK:ID-SHOWN:COUNT, or one argument
with the extents. A namespace's uid_map line is "inside outside count", so an extent is
written as it reads.
"""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)

SYS_open_tree, SYS_move_mount, SYS_mount_setattr = 428, 429, 442
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_FDCWD, AT_EMPTY_PATH = -100, 0x1000
MOVE_MOUNT_F_EMPTY_PATH = 4
MOUNT_ATTR_IDMAP = 0x00100000
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def syscall(*args):
    r = libc.syscall(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def parse_map(text):
    uid, gid = [], []
    for item in text.split():
        kind = "b"
        if item[:2] in ("u:", "g:", "b:"):
            kind, item = item[0], item[2:]
        line = " ".join(item.split(":"))
        if kind in "ub":
            uid.append(line)
        if kind in "gb":
            gid.append(line)
    return uid, gid


def new_userns(text, mntns=False):
    """A child in a new user namespace with the map, stopped until released: (pid, release fd)."""
    uid, gid = parse_map(text)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        flags = CLONE_NEWUSER | (CLONE_NEWNS if mntns else 0)
        ok = libc.unshare(flags) == 0
        os.write(ready_w, b"y" if ok else b"n")
        if not ok or os.read(go_r, 1) != b"g":
            os._exit(1)
        return 0, go_r
    os.close(ready_w)
    os.close(go_r)
    if os.read(ready_r, 1) != b"y":
        raise OSError(errno.EPERM, "unshare(CLONE_NEWUSER) failed")
    for name, lines in (("uid_map", uid), ("gid_map", gid)):
        if lines:
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write("\n".join(lines) + "\n")
    return pid, go_w


def userns_fd(text):
    pid, go = new_userns(text)
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    os.close(go)  # the child ends; the descriptor keeps the namespace
    os.waitpid(pid, 0)
    return fd


def idmapped_clone(src, text):
    fd = syscall(SYS_open_tree, AT_FDCWD, src.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)
    ns = userns_fd(text)
    attr = MountAttr(MOUNT_ATTR_IDMAP, 0, 0, ns)
    try:
        syscall(SYS_mount_setattr, fd, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr))
    finally:
        os.close(ns)
    return fd


def cmd_bind(src, dst, text):
    fd = idmapped_clone(src, text)
    syscall(SYS_move_mount, fd, b"", AT_FDCWD, dst.encode(), MOVE_MOUNT_F_EMPTY_PATH)


def cmd_setattr(src, text):
    try:
        os.close(idmapped_clone(src, text))
        print("ok")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


def cmd_run(args):
    text, mntns, pidfile = args[0], False, None
    rest = args[1:]
    while rest and rest[0] != "--":
        if rest[0] == "--mntns":
            mntns = True
            rest = rest[1:]
        elif rest[0] == "--pidfile":
            pidfile, rest = rest[1], rest[2:]
        else:
            sys.exit(f"idmap.py run: unknown argument {rest[0]}")
    cmd = rest[1:]
    pid, go = new_userns(text, mntns)
    if pid == 0:
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        os.setgroups([])
        os.execvp(cmd[0], cmd)
    if pidfile:
        with open(pidfile, "w") as f:
            f.write(f"{pid}\n")
    os.write(go, b"g")
    os.close(go)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "bind":
        cmd_bind(sys.argv[2], sys.argv[3], " ".join(sys.argv[4:]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "setattr":
        cmd_setattr(sys.argv[2], " ".join(sys.argv[3:]))
    elif len(sys.argv) >= 5 and sys.argv[1] == "run":
        cmd_run(sys.argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
