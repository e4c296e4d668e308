#!/usr/bin/python3
# One system call, its outcome on stdout: "OK" (perhaps with what it returned or left behind)
# or the errno name. t_security.sh runs it as a test user against a native ext4 path and the
# same path in a view, and compares the two lines. Usage: probe.py OP ARGS...
import ctypes
import errno
import grp
import os
import pwd
import stat
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def uid_of(s):
    return int(s) if s.lstrip("-").isdigit() else pwd.getpwnam(s).pw_uid


def gid_of(s):
    return int(s) if s.lstrip("-").isdigit() else grp.getgrnam(s).gr_gid


def modes(p):
    st = os.lstat(p)
    return "mode=%o" % stat.S_IMODE(st.st_mode)


def owner(p):
    st = os.lstat(p)
    return "%s:%s %s" % (pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, modes(p))


def renameat2(a, b, flags):
    check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags))


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]


def handle_of(path):
    fh = FileHandle()
    fh.handle_bytes = 128
    mnt = ctypes.c_int()
    check(libc.name_to_handle_at(AT_FDCWD, path.encode(), ctypes.byref(fh), ctypes.byref(mnt), 0))
    return fh


def open_handle(fh, mountpoint):
    mfd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return check(libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY))
    finally:
        os.close(mfd)


def read_some(fd):
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            return "dir:" + ",".join(sorted(os.listdir(fd)))
        return os.read(fd, 64).decode(errors="replace").strip()
    finally:
        os.close(fd)


def run(op, a):
    if op == "create":
        os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif op == "create_mode":  # then the mode it got
        os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, int(a[1], 8)))
        return "OK " + owner(a[0])
    elif op == "mkdir_mode":
        os.mkdir(a[0], int(a[1], 8))
        return "OK " + owner(a[0])
    elif op == "mkdir":
        os.mkdir(a[0])
    elif op == "mknod_chr":
        os.mknod(a[0], 0o644 | stat.S_IFCHR, os.makedev(1, 3))
    elif op == "symlink":
        os.symlink(a[0], a[1])
    elif op == "unlink":
        os.unlink(a[0])
    elif op == "rmdir":
        os.rmdir(a[0])
    elif op == "rename":
        os.rename(a[0], a[1])
    elif op == "exchange":
        renameat2(a[0], a[1], RENAME_EXCHANGE)
    elif op == "noreplace":
        renameat2(a[0], a[1], RENAME_NOREPLACE)
    elif op == "link":
        os.link(a[0], a[1], follow_symlinks=False)
    elif op == "read":
        return "OK " + read_some(os.open(a[0], os.O_RDONLY))
    elif op == "exec":  # run it (the kernel opens it for exec: MAY_EXEC, not MAY_READ)
        rc = subprocess.run([a[0]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL).returncode
        return "OK" if rc == 0 else "exit %d" % rc
    elif op == "open_w":
        os.close(os.open(a[0], os.O_WRONLY))
    elif op == "open_trunc":
        os.close(os.open(a[0], os.O_WRONLY | os.O_TRUNC))
    elif op == "open_noatime":
        os.close(os.open(a[0], os.O_RDONLY | os.O_NOATIME))
    elif op == "append":
        fd = os.open(a[0], os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
    elif op == "truncate":
        os.truncate(a[0], int(a[1]))
    elif op == "chmod":
        os.chmod(a[0], int(a[1], 8))
        return "OK " + modes(a[0])
    elif op == "chown":
        os.chown(a[0], uid_of(a[1]), gid_of(a[2]), follow_symlinks=False)
        return "OK " + owner(a[0])
    elif op == "utimes":
        os.utime(a[0], (1, 1))
    elif op == "touch_now":
        os.utime(a[0], None)
    elif op == "setxattr":
        os.setxattr(a[0], a[1], a[2].encode(), follow_symlinks=False)
    elif op == "setcap":  # security.capability: cap_net_bind_service+ep, a valid v2 blob
        blob = (0x02000001).to_bytes(4, "little") + (1 << 10).to_bytes(4, "little") + bytes(12)
        os.setxattr(a[0], "security.capability", blob, follow_symlinks=False)
    elif op == "setacl":  # system.posix_acl_access u::rw-,g::r--,o::r-- (a valid blob)
        blob = (2).to_bytes(4, "little")
        for tag, perm in ((1, 6), (4, 4), (0x20, 4)):
            blob += tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + (0xFFFFFFFF).to_bytes(4, "little")
        os.setxattr(a[0], "system.posix_acl_access", blob, follow_symlinks=False)
    elif op == "getxattr":
        v = os.getxattr(a[0], a[1], follow_symlinks=False)
        return "OK " + (v.decode() if v.isascii() and v.decode().isprintable() else v.hex())
    elif op == "removexattr":
        os.removexattr(a[0], a[1], follow_symlinks=False)
    elif op == "listxattr":
        return "OK " + ",".join(sorted(os.listxattr(a[0], follow_symlinks=False)))
    elif op == "handle":  # name_to_handle_at(a[0]) only
        handle_of(a[0])
    elif op == "open_handle":  # handle of a[0], opened relative to mountpoint a[1]
        fh = handle_of(a[0])
        return "OK " + read_some(open_handle(fh, a[1]))
    elif op == "stat":
        return "OK " + owner(a[0])
    else:
        print("probe.py: unknown op " + op, file=sys.stderr)
        sys.exit(2)
    return "OK"


def main():
    try:
        print(run(sys.argv[1], sys.argv[2:]))
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


main()
