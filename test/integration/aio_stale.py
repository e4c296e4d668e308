#!/usr/bin/env python3
"""O_DIRECT writes through Linux AIO racing buffered readers (what xfstests' generic/451
checks): `aio_stale.py FILE ROUNDS` writes a new byte pattern over the first 64 KiB of FILE
each round with io_submit on an O_DIRECT descriptor while a child process keeps reading the
file through the page cache; once the write has completed, a fresh buffered read must see
the new pattern. Prints `stale=N`, the rounds in which it did not."""
import ctypes
import mmap
import os
import signal
import struct
import sys

SIZE = 64 * 1024
SYS_io_setup, SYS_io_destroy, SYS_io_getevents, SYS_io_submit = 206, 207, 208, 209
IOCB_CMD_PWRITE = 1

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sys_call(*args):
    rc = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def aio_write(ctx, fd, buf_addr, size, offset):
    # struct iocb: data, key, rw_flags, opcode, reqprio, fildes, buf, nbytes, offset, ...
    iocb = ctypes.create_string_buffer(struct.pack("<QIIHhIQQqQII", 1, 0, 0, IOCB_CMD_PWRITE, 0,
                                                   fd, buf_addr, size, offset, 0, 0, 0))
    ptrs = (ctypes.c_void_p * 1)(ctypes.addressof(iocb))
    sys_call(SYS_io_submit, ctx, 1, ctypes.addressof(ptrs))
    events = ctypes.create_string_buffer(32)
    while sys_call(SYS_io_getevents, ctx, 1, 1, ctypes.addressof(events), 0) != 1:
        pass
    res = struct.unpack("<QQqq", events.raw)[2]
    if res != size:
        raise OSError(-res if res < 0 else 5, "aio write: %d" % res)


def reader(path):
    fd = os.open(path, os.O_RDONLY)
    while True:
        os.pread(fd, SIZE, 0)


def main():
    path, rounds = sys.argv[1], int(sys.argv[2])
    with open(path, "wb") as f:
        f.write(bytes(SIZE))
    ctx_p = ctypes.c_ulong(0)
    sys_call(SYS_io_setup, 1, ctypes.addressof(ctx_p))
    buf = mmap.mmap(-1, SIZE)  # page-aligned, as O_DIRECT wants
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    pid = os.fork()
    if pid == 0:
        try:
            reader(path)
        finally:
            os._exit(0)
    stale = 0
    try:
        for i in range(1, rounds + 1):
            pattern = bytes([i % 251 + 1]) * SIZE
            buf[:] = pattern
            aio_write(ctx_p.value, fd, addr, SIZE, 0)
            with open(path, "rb") as f:
                if f.read(SIZE) != pattern:
                    stale += 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        sys_call(SYS_io_destroy, ctx_p.value)
    print("stale=%d" % stale)


main()
