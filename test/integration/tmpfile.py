#!/usr/bin/env python3
"""O_TMPFILE through one mount, seen through another (t_tmpfile.sh).

tmpfile.py CASE DIR_A DIR_B prints what a user would check, one line per step, for two mounts
of one file system: DIR_A and DIR_B are the same directory through each (a native ext4 mount
and a bind mount of it, or two strictfs views). The test compares the lines of a pair of
native mounts with those of a pair of views. Cases:
  basic     make, write, link; what the other mount sees; O_EXCL, EEXIST, errors
  acl       a directory with a default ACL: what the new file gets (mode, ACL)
  casefold  names joining a class (DIR_A is a casefolded directory)
"""
import ctypes
import os
import stat
import sys

from transcript import step

LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_FOLLOW = 0x400


def link_fd(fd, dst):
    """linkat(2) of an open file by its /proc link, as `ln` of an O_TMPFILE file is done."""
    if LIBC.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD, dst.encode(),
                   AT_SYMLINK_FOLLOW) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def tmpfile(d, flags=os.O_RDWR, mode=0o640):
    return os.open(d, os.O_TMPFILE | flags, mode)


def show(fd):
    st = os.fstat(fd)
    return f"nlink={st.st_nlink} size={st.st_size} mode={stat.filemode(st.st_mode)}"


def names(d):
    return " ".join(sorted(n for n in os.listdir(d) if n != "lost+found"))


def case_basic(a, b):
    os.umask(0o022)
    step("B sees no 'kept' yet", lambda: os.stat(f"{b}/kept") and "exists")
    fd = tmpfile(a, mode=0o666)
    os.write(fd, b"x" * 5000)
    print("fstat:", show(fd))
    print("names A:", names(a), "| names B:", names(b))
    step("link as kept", lambda: link_fd(fd, f"{a}/kept"))
    print("fstat after link:", show(fd))
    step("B reads kept", lambda: len(open(f"{b}/kept", "rb").read()))
    step("B stat kept", lambda: show(os.open(f"{b}/kept", os.O_RDONLY)))
    step("link again as kept", lambda: link_fd(fd, f"{a}/kept"))
    step("link as second", lambda: link_fd(fd, f"{a}/second"))
    print("fstat with two names:", show(fd))
    os.close(fd)
    fd = tmpfile(a, os.O_WRONLY)
    os.write(fd, b"gone")
    os.close(fd)
    print("names after an unlinked one closed:", names(b))
    fd = tmpfile(a, os.O_RDWR | os.O_EXCL)
    step("link of an O_EXCL one", lambda: link_fd(fd, f"{a}/excl"))
    os.close(fd)
    step("tmpfile O_RDONLY", lambda: tmpfile(a, os.O_RDONLY))
    step("tmpfile in a file", lambda: tmpfile(f"{a}/kept"))
    step("tmpfile in a missing dir", lambda: tmpfile(f"{a}/missing"))
    os.mkdir(f"{a}/sub", 0o755)
    os.chmod(f"{a}/sub", 0o2777)
    fd = tmpfile(f"{a}/sub", mode=0o2755)
    print("in a setgid dir:", show(fd))
    os.close(fd)
    print("names B:", names(b))


def case_acl(a, b):
    os.umask(0o077)
    os.mkdir(f"{a}/d", 0o755)
    os.system(f"setfacl -d -m u:nobody:rwx,g::r-x,o::r-x,m::rwx '{a}/d' 2>/dev/null")
    fd = tmpfile(f"{a}/d", mode=0o666)
    print("fstat:", show(fd))
    link_fd(fd, f"{a}/d/f")
    os.close(fd)
    step("B: mode", lambda: stat.filemode(os.stat(f"{b}/d/f").st_mode))
    step("B: access ACL", lambda: len(os.getxattr(f"{b}/d/f", "system.posix_acl_access")))


def case_casefold(a, b):
    open(f"{a}/Foo", "w").close()
    fd = tmpfile(a)
    os.write(fd, b"cf")
    step("link as FOO", lambda: link_fd(fd, f"{a}/FOO"))
    step("link as Bar", lambda: link_fd(fd, f"{a}/Bar"))
    os.close(fd)
    step("A reads BAR", lambda: open(f"{a}/BAR").read())
    print("names B:", names(b))


def main():
    case, a, b = sys.argv[1:4]
    {"basic": case_basic, "acl": case_acl, "casefold": case_casefold}[case](a, b)


if __name__ == "__main__":
    main()
