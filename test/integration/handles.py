#!/usr/bin/env python3
"""File handles as open_by_handle_at(2) users and NFS servers keep them.

`handles.py encode PATH` prints PATH's handle (name_to_handle_at) as TYPE:HEX.
`handles.py read MOUNTPOINT TYPE:HEX` opens the handle through the filesystem mounted at
MOUNTPOINT and prints what it reads (at most 4 KiB), or the errno name it failed with.
`handles.py list MOUNTPOINT TYPE:HEX` does the same for a directory and prints its sorted names."""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
MAX_HANDLE_SZ = 128


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def encode(path):
    fh = FileHandle(MAX_HANDLE_SZ, 0)
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0) < 0:
        raise OSError(ctypes.get_errno(), path)
    return "%d:%s" % (fh.handle_type, bytes(fh.f_handle[:fh.handle_bytes]).hex())


def open_handle(mountpoint, text, flags):
    kind, hexa = text.split(":")
    raw = bytes.fromhex(hexa)
    fh = FileHandle(len(raw), int(kind))
    ctypes.memmove(fh.f_handle, raw, len(raw))
    mfd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), flags)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "open_by_handle_at")
        return fd
    finally:
        os.close(mfd)


def main():
    cmd = sys.argv[1]
    try:
        if cmd == "encode":
            print(encode(sys.argv[2]))
        elif cmd == "read":
            fd = open_handle(sys.argv[2], sys.argv[3], os.O_RDONLY)
            print(os.read(fd, 4096).decode(errors="replace"), end="")
            os.close(fd)
        elif cmd == "list":
            fd = open_handle(sys.argv[2], sys.argv[3], os.O_RDONLY | os.O_DIRECTORY)
            print(" ".join(sorted(os.listdir(fd))))
            os.close(fd)
        else:
            sys.exit("handles.py: unknown command " + cmd)
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)))


if __name__ == "__main__":
    main()
