#!/usr/bin/python3
"""Throws bad requests and stalling clients at a strictfs daemon's control socket (contract §6:
a malformed or oversized request gets an error reply and the daemon keeps serving).

usage: control_fuzz.py SOCKET [--requests N] [--clients N] [--seed N]

Phase 1 sends N requests one after another: random bytes, truncated frames, oversized and
wrong-version headers, bad bodies, unknown types, add-view and remount requests with missing
fields or wrong descriptors, each followed by a status request that must be answered.
Phase 2 runs the concurrent clients for a few seconds: a fifth connect and never send, a fifth
send part of a frame and stall, a fifth trickle a frame a byte at a time, and the rest ask
for status in a loop, timing each answer. Prints one JSON object of counts and latencies."""
import argparse
import json
import os
import random
import socket
import struct
import sys
import threading
import time

MAGIC = 0x43534653
VERSION = 1
MSG_MAX = 1 << 20
ADD_VIEW, STATUS, STOP, REMOUNT, REPLY = 1, 2, 3, 4, 100


def frame(typ, body=b"", magic=MAGIC, version=VERSION, length=None):
    return struct.pack("<IHHI", magic, version, typ, len(body) if length is None else length) + body


def fields(**kv):
    return b"".join(k.encode() + b"=" + v.encode() + b"\0" for k, v in kv.items())


def read_reply(s):
    """The reply's fields as a dict, or None (no reply: closed, timed out, malformed)."""
    buf = b""
    try:
        while len(buf) < 12:
            b = s.recv(12 - len(buf))
            if not b:
                return None
            buf += b
        magic, ver, typ, n = struct.unpack("<IHHI", buf)
        if magic != MAGIC or ver != VERSION or typ != REPLY or n > MSG_MAX:
            return None
        body = b""
        while len(body) < n:
            b = s.recv(n - len(body))
            if not b:
                return None
            body += b
    except OSError:
        return None
    out = {}
    for f in body.split(b"\0")[:-1]:
        k, _, v = f.partition(b"=")
        out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def connect(path, timeout=5.0):
    """Connects as the strictfs command does: a blocking connect bounded by the send timeout
    (it waits while the daemon's backlog is full; Python's own timeout would fail at once)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                 struct.pack("ll", int(timeout), int(timeout % 1 * 1e6)))
    try:
        s.connect(path)
    except OSError:
        s.close()
        raise
    s.settimeout(timeout)
    return s


def status(path, timeout=5.0):
    """(answered, seconds) for one status request."""
    t0 = time.monotonic()
    try:
        s = connect(path, timeout)
        s.sendall(frame(STATUS))
        r = read_reply(s)
        s.close()
    except OSError:
        r = None
    return (r is not None and r.get("rc") == "0" and "json" in r), time.monotonic() - t0


def bad_request(rng, kind):
    """(bytes, fds to pass) of one bad request of the given kind."""
    good = frame(ADD_VIEW, fields(mountpoint="/nonexistent/x", source="/dev/null", options="noacl"))
    if kind == "random":
        return rng.randbytes(rng.randrange(0, 300)), []
    if kind == "truncated":
        return good[: rng.randrange(1, len(good))], []  # nothing at all is a probe, not a request
    if kind == "oversized":
        return frame(STATUS, length=MSG_MAX + 1 + rng.randrange(0, 1 << 30)), []
    if kind == "bad-version":
        return frame(STATUS, version=rng.choice([0, 2, 99, 0xFFFF])), []
    if kind == "bad-magic":
        return frame(STATUS, magic=rng.randrange(0, 1 << 32) | 1), []
    if kind == "bad-body":
        body = rng.choice([b"ab\0", b"=b\0", b"a=b", b"\0", rng.randbytes(40)])
        return frame(rng.choice([ADD_VIEW, STATUS, REMOUNT]), body), []
    if kind == "unknown-type":
        return frame(rng.choice([0, 5, 99, 101, 0xFFFF]), fields(a="b")), []
    if kind == "short-body":
        return frame(STATUS, b"a=b\0", length=rng.randrange(5, 4096)), []
    if kind == "add-view-no-fds":
        return good, []
    if kind == "add-view-wrong-fds":
        return good, ["null", "null"]
    if kind == "add-view-missing":
        return frame(ADD_VIEW, fields(mountpoint="/x")), ["null", "null"]
    if kind == "remount-unknown":
        return frame(REMOUNT, fields(mountpoint="/nonexistent", options="ro")), ["ns"]
    if kind == "remount-bad-options":
        return frame(REMOUNT, fields(mountpoint="/nonexistent", options="x" * 5000 + ",acl")), ["ns"]
    if kind == "many-fds":  # valid, with more descriptors than any request carries
        return frame(STATUS), ["null"] * 8
    raise ValueError(kind)


KINDS = ["random", "truncated", "oversized", "bad-version", "bad-magic", "bad-body",
         "unknown-type", "short-body", "add-view-no-fds", "add-view-wrong-fds",
         "add-view-missing", "remount-unknown", "remount-bad-options", "many-fds"]


def send_bad(path, data, fds):
    """Sends one bad request; returns 'error-reply', 'ok-reply', 'closed' (no reply)."""
    opened = []
    try:
        s = connect(path, 5.0)
        for f in fds:
            opened.append(os.open("/proc/self/ns/mnt" if f == "ns" else "/dev/null", os.O_RDONLY))
        if data:
            if opened:
                socket.send_fds(s, [data[:1]], opened)
                data = data[1:]
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)  # a truncated frame ends here
        r = read_reply(s)
        s.close()
    except OSError:
        r = None
    finally:
        for f in opened:
            os.close(f)
    if r is None:
        return "closed"
    return "ok-reply" if r.get("rc") == "0" else "error-reply"


def phase1(path, n, rng, out):
    counts = {}
    status_ok = status_fail = 0
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        data, fds = bad_request(rng, kind)
        res = send_bad(path, data, fds)
        counts.setdefault(kind, {}).setdefault(res, 0)
        counts[kind][res] += 1
        if i % 10 == 9:
            ok, _ = status(path)
            status_ok += ok
            status_fail += not ok
    out["requests"] = n
    out["by_kind"] = counts
    out["status_between_ok"] = status_ok
    out["status_between_failed"] = status_fail


def stalled_client(path, mode, hold, stop, counts, lock):
    """idle: connect and never send; partial: half a frame, then stall; trickle: a byte at a
    time, slower than any per-read timeout would notice."""
    try:
        s = connect(path, hold + 5)
    except OSError:
        with lock:
            counts["connect_failed"] += 1
        return
    data = frame(STATUS, fields(pad="x" * 40))
    try:
        if mode == "partial":
            s.sendall(data[: len(data) // 2])
        end = time.monotonic() + hold
        i = 0
        while time.monotonic() < end and not stop.is_set():
            if mode == "trickle" and i < len(data):
                s.send(data[i:i + 1])
                i += 1
            time.sleep(0.3)
    except OSError:
        with lock:
            counts["cut_off"] += 1
    finally:
        s.close()


def status_client(path, stop, lat, lock):
    while not stop.is_set():
        ok, dt = status(path, 15.0)
        with lock:
            lat.append((ok, dt))
        time.sleep(0.05)


def phase2(path, clients, hold, out):
    stop = threading.Event()
    lock = threading.Lock()
    counts = {"connect_failed": 0, "cut_off": 0}
    lat = []
    threads = []
    stalled = clients * 3 // 5
    for i in range(stalled):
        mode = ("idle", "partial", "trickle")[i % 3]
        threads.append(threading.Thread(target=stalled_client,
                                        args=(path, mode, hold, stop, counts, lock)))
    for i in range(clients - stalled):
        threads.append(threading.Thread(target=status_client, args=(path, stop, lat, lock)))
    for t in threads:
        t.start()
    time.sleep(hold)
    stop.set()
    for t in threads:
        t.join()
    answered = [dt for ok, dt in lat if ok]
    out["clients"] = clients
    out["stalled_clients"] = stalled
    out["stalled_cut_off"] = counts["cut_off"]
    out["stalled_connect_failed"] = counts["connect_failed"]
    out["status_requests"] = len(lat)
    out["status_answered"] = len(answered)
    out["status_max_seconds"] = round(max(answered), 3) if answered else None
    out["status_median_seconds"] = round(sorted(answered)[len(answered) // 2], 3) if answered else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--hold", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    out = {"seed": a.seed}
    phase1(a.socket, a.requests, random.Random(a.seed), out)
    phase2(a.socket, a.clients, a.hold, out)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
