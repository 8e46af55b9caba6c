#!/usr/bin/python3
# The break review's reproductions of HTTP/2 defects (t/293), each printing
# one line for the test to match. Usage: h2review.py PORT CASE [N]
import socket
import struct
import sys
import time

import hpack

sys.path.insert(0, "t/lib")
from h2raw import *  # noqa: E402,F401,F403

PORT = int(sys.argv[1])
CASE = sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 0


def uaf():
    """A proxied response streams in small pieces; the client resets its TCP
    connection while they come (luxd once freed its h2 state under the
    write that failed: a heap use-after-free)."""
    for i in range(N):
        try:
            c = Conn(PORT)
        except ConnectionRefusedError:
            print("gone after %d" % i)
            return
        c.send(c.req(1, "/slow/2000000/1/2000", authority="be.test"))
        c.read_frames(2, until=lambda f: f is None or f[0] == DATA)
        time.sleep((i % 10) / 1000.0)
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.s.close()
    print("survived %d" % N)


def window_leak():
    """N cancelled uploads (HEADERS, 16000 body bytes, RST_STREAM) before
    the proxy reads them, then ten uploads of 10000 bytes that keep to the
    connection's window: they must all complete (the cancelled bytes once
    kept the window shut for good)."""
    c = Conn(PORT)
    c.read_frames(0.1)
    win = 65535
    for i in range(N):
        sid = 1 + 2 * i
        c.send(c.req(sid, "/echo", method="POST", authority="be.test", end_stream=False)
               + c.data(sid, b"x" * 16000) + c.rst(sid))
        win -= 16000
    sid = 1 + 2 * N

    def grab(fr):
        nonlocal win
        for f in fr:
            if f and f[0] == WU and f[2] == 0:
                win += int.from_bytes(f[3], "big")

    grab(c.read_frames(0.5))
    done = 0
    for k in range(10):
        c.send(c.req(sid, "/echo", method="POST", authority="be.test",
                     extra=[("content-length", "10000")], end_stream=False))
        left, t0, answered = 10000, time.time(), False
        while time.time() - t0 < 5 and not answered:
            n = min(left, win)
            if n > 0:
                c.send(c.data(sid, b"y" * n, end=(n == left)))
                left -= n
                win -= n
            fr = c.read_frames(0.3)
            grab(fr)
            for f in fr:
                if f and f[2] == sid and f[0] == DATA and len(f[3]):
                    c.send(c.wu(0, len(f[3])) + c.wu(sid, len(f[3])))
                if f and f[2] == sid and f[1] & 1 and f[0] in (DATA, HEADERS):
                    answered = True
        if not answered:
            break
        done += 1
        sid += 2
    print("uploads=%d" % done)


def stream_stall():
    """50 proxied downloads whose windows never open (initial window 0)
    while the connection goes on with a small request every 0.5 s: each
    stalled stream is reset at send_timeout, the connection lives on."""
    c = Conn(PORT, settings={4: 0})
    c.read_frames(0.1)
    c.send(b"".join(c.req(1 + 2 * i, "/ok/500000", authority="be.test") for i in range(50)))
    c.read_frames(0.5)
    sid, t0, rst, ended = 101, time.time(), 0, False
    while time.time() - t0 < 12 and rst < 50:
        c.send(c.req(sid, "/index.html") + c.wu(sid, 100) + c.wu(0, 100))
        sid += 2
        for f in c.read_frames(0.5):
            if f is None or f[0] == GOAWAY:
                ended = True
            elif f[0] == RST and f[2] < 101:
                rst += 1
        if ended:
            break
    print("reset=%d ended=%s after=%.1f" % (rst, "yes" if ended else "no", time.time() - t0))


def late_trailers():
    """luxd answers stream 1 before its body ends and resets it (NO_ERROR);
    N streams later the client's trailers for it come: ignored, not a
    connection error (RFC 9113 5.4.2)."""
    c = Conn(PORT)
    c.autowu = True
    c.read_frames(0.05)
    c.send(c.req(1, "/t/body?early=1", method="POST", end_stream=False) + c.data(1, b"part"))
    c.read_frames(2.0, until=lambda f: f is None or f[0] == RST)
    for i in range(N):
        sid = 3 + 2 * i
        c.send(c.req(sid, "/index.html"))
        c.read_frames(2.0, until=lambda f: f is None or (f[2] == sid and f[1] & 1))
    c.send(c.headers(1, [("x-trailer", "1")], end_stream=True))
    last = 3 + 2 * N
    c.send(c.req(last, "/index.html"))
    fr = c.read_frames(2.0, until=lambda f: f is None or f[0] == GOAWAY or (f[2] == last and f[1] & 1))
    s = summary([f for f in fr if f is None or f[0] in (GOAWAY, HEADERS)])
    print("after=%s" % " ".join(s))


def myr_window():
    """MadeYouReset by WINDOW_UPDATE: each stream's window is made to
    overflow (2^31-1 more), and luxd resets it (FLOW_CONTROL_ERROR) while
    its response streams; at most 50 at a time."""
    c = Conn(PORT)
    c.read_frames(0.3)
    sid, rst, inflight, goaway = 1, 0, 0, "none"
    try:
        for i in range(N):
            c.send(c.req(sid, "/t/stream?bytes=10000000&piece=16384") + c.wu(sid, 0x7fffffff))
            sid += 2
            inflight += 1
            while inflight >= 50:
                for f in c.read_frames(2.0, until=lambda f: True):
                    if f is None:
                        raise EOFError()
                    if f[0] == RST:
                        rst += 1
                        inflight -= 1
                    if f[0] == GOAWAY:
                        goaway = int.from_bytes(f[3][4:8], "big")
                        raise EOFError()
    except (EOFError, OSError):
        pass
    print("goaway=%s resets=%d" % (goaway, rst))


def hints():
    """A backend sends thousands of large 103s to a client that reads
    nothing (a 4 KiB receive buffer), then its 200: the client, reading
    after N seconds, gets some hints and the final response whole."""
    c = Conn(PORT, rcvbuf=4096)
    c.send(c.req(1, "/hints", authority="hints.test"))
    time.sleep(N)
    c.autowu = True
    st, n103 = None, 0
    for f in c.read_frames(15.0, until=lambda f: f is None or (f[2] == 1 and f[1] & 1)):
        if f and f[0] == HEADERS and f[2] == 1:
            s = dict(f[3]).get(b":status", dict(f[3]).get(":status"))
            s = s.decode() if isinstance(s, bytes) else s
            if s == "103":
                n103 += 1
            else:
                st = s
    print("final=%s hints=%s" % (st, "some" if n103 else "none"))


def first_answer(c, sid, timeout, ack=True):
    """The first HEADERS :status or RST_STREAM on sid, and when (s)."""
    t0 = time.time()
    for f in c.read_frames(timeout, until=lambda f: f is None or (f[2] == sid and f[0] in (HEADERS, RST)),
                           ack=ack):
        if f is None:
            return "closed", time.time() - t0
        if f[2] == sid and f[0] == RST:
            return "rst%d" % int.from_bytes(f[3], "big"), time.time() - t0
        if f[2] == sid and f[0] == HEADERS:
            return dict(f[3]).get(":status"), time.time() - t0
    return "none", time.time() - t0


def slow_head():
    """A header block that never ends (no CONTINUATION comes)."""
    c = Conn(PORT)
    c.send(c.headers(1, [(":method", "GET"), (":scheme", "http"), (":path", "/"),
                         (":authority", "localhost")], end_stream=True, end_headers=False))
    a, t = first_answer(c, 1, 15, ack=False)  # no SETTINGS ACK inside a header block
    print("answer=%s after=%.1f" % (a, t))


def slow_body():
    """A POST whose announced body never comes."""
    c = Conn(PORT)
    c.send(c.req(1, "/t/body", method="POST", extra=[("content-length", "10")], end_stream=False))
    a, t = first_answer(c, 1, 15)
    print("answer=%s after=%.1f" % (a, t))


def cut():
    """A backend that says 100 bytes and sends 50: the stream must not end
    cleanly."""
    c = Conn(PORT)
    c.autowu = True
    c.send(c.req(1, "/lie-short/100", authority="be.test"))
    end = "none"
    got = 0
    for f in c.read_frames(10, until=lambda f: f is None or (f[2] == 1 and (f[0] == RST or f[1] & 1))):
        if f is None:
            end = "closed"
        elif f[2] == 1 and f[0] == DATA:
            got += len(f[3])
            if f[1] & 1:
                end = "end_stream"
        elif f[2] == 1 and f[0] == RST:
            end = "rst"
    print("end=%s data=%d" % (end, got))


def crumbs():
    """N one-byte cookie crumbs per request (a few KiB of HPACK), 100 streams."""
    c = Conn(PORT)
    c.autowu = True
    for i in range(100):
        c.send(c.req(1 + 2 * i, "/", extra=[("cookie", "a")] * N))
    st = {}
    for f in c.read_frames(10, until=lambda f: f is None or (f[0] == HEADERS and f[2] == 199)):
        if f and f[0] == HEADERS:
            k = dict(f[3]).get(":status")
            st[k] = st.get(k, 0) + 1
    print(" ".join("%s=%d" % kv for kv in sorted(st.items())))


def authority():
    """:authority with a Host field naming the same host in another case,
    and with the port."""
    out = []
    for host in ("LOCALHOST", "localhost:%d" % PORT, "other.test"):
        c = Conn(PORT)
        c.send(c.req(1, "/", authority="localhost", extra=[("host", host)]))
        out.append(first_answer(c, 1, 5)[0])
    print(" ".join(out))


def upload_beside():
    """Stream 1 sends a whole stream window of body to a handler that reads
    nothing for 3 s; stream 3's small upload must not wait for it."""
    c = Conn(PORT)
    c.send(c.req(1, "/t/async?ms=3000", method="POST", extra=[("content-length", "65535")],
                 end_stream=False))
    for i in range(4):
        c.send(c.data(1, b"a" * 16383))
    c.send(c.data(1, b"a" * 3))
    c.read_frames(0.3)
    c.send(c.req(3, "/t/body", method="POST", extra=[("content-length", "10")], end_stream=False)
           + c.data(3, b"0123456789", end=True))
    a, t = first_answer(c, 3, 10)
    print("answer=%s after=%.1f" % (a, t))


def no_request():
    """The preface and SETTINGS, then nothing: GOAWAY and the close at
    header_timeout (shorter than keepalive_timeout here), as an HTTP/1
    connection that sends no request is closed."""
    c = Conn(PORT)
    t0 = time.time()
    fr = c.read_frames(30, until=lambda f: f is None)
    ga = [struct.unpack(">I", f[3][4:8])[0] for f in fr if f and f[0] == GOAWAY]
    print("closed=%s goaway=%s after=%.1f" % ("yes" if fr and fr[-1] is None else "no",
                                              ga[0] if ga else "none", time.time() - t0))


def mem(pid):
    d = {}
    for line in open("/proc/%d/status" % pid):
        k = line.split(":")[0]
        if k in ("VmRSS", "VmSize"):
            d[k] = int(line.split()[1])
    return d


def rst_hold():
    """Four connections whose writes are stuck (a 16 MiB file, more than
    the socket buffers take, to a client that reads nothing), then on each 900 streams of a copied body (a 404
    page) opened and reset at once: the buffers of answers never sent go
    back at once (they were held until the stuck write ended, 64 KiB each:
    +27 MB). Args: PID PATH. Prints the growth in KiB."""
    pid, path = int(sys.argv[3]), sys.argv[4]
    conns = []
    for i in range(4):
        c = Conn(PORT, rcvbuf=4096)
        c.send(c.wu(0, 1 << 30) + c.req(1, "/stall.bin") + c.wu(1, 1 << 30))
        conns.append(c)
    time.sleep(1)
    m0 = mem(pid)
    for c in conns:
        for b in range(18):
            c.send(b"".join(c.req(3 + 2 * k, path) + c.rst(3 + 2 * k) for k in range(b * 50, b * 50 + 50)))
            time.sleep(0.005)
    conns[0].read_frames(0.5)
    m1 = mem(pid)
    print("rss+%d vsz+%d" % (m1["VmRSS"] - m0["VmRSS"], m1["VmSize"] - m0["VmSize"]))


def small_window():
    """Twenty connections of 100 streams of a 256 KiB file, whose windows
    open 600 bytes at a time, and which read nothing: a 600-byte frame is
    not read into a 64 KiB buffer of its own that the output would hold
    (+54 MB of address space). Args: PID. Prints the growth in KiB."""
    pid = int(sys.argv[3])
    m0 = mem(pid)
    conns = []
    for i in range(20):
        c = Conn(PORT, settings={4: 600}, rcvbuf=4096)
        c.send(c.wu(0, 1 << 30) + b"".join(c.req(2 * k + 1, "/big.bin") for k in range(100)))
        conns.append(c)
    time.sleep(0.5)
    wus = b"".join(Conn.wu(None, 2 * k + 1, 600) for k in range(100))
    for r in range(200):
        for c in conns:
            try:
                c.send(wus)
            except OSError:
                pass
        time.sleep(0.005)
    conns[0].read_frames(0.5)
    m1 = mem(pid)
    print("rss+%d vsz+%d" % (m1["VmRSS"] - m0["VmRSS"], m1["VmSize"] - m0["VmSize"]))


def pp_h2c():
    """A PROXY protocol v1 header, then the h2 preface and a request."""
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall(b"PROXY TCP4 192.0.2.1 127.0.0.1 1 80\r\n")
    c = Conn.__new__(Conn)
    c.s, c.enc, c.dec, c.buf, c.autowu = s, hpack.Encoder(), hpack.Decoder(), b"", False
    c.send(PREFACE + frame(SETTINGS, 0, 0))
    c.send(c.req(1, "/"))
    print("answer=%s" % first_answer(c, 1, 5)[0])


{"uaf": uaf, "hints": hints, "slow_head": slow_head, "slow_body": slow_body, "cut": cut,
 "crumbs": crumbs, "authority": authority, "upload_beside": upload_beside, "pp_h2c": pp_h2c, "no_request": no_request, "rst_hold": rst_hold, "small_window": small_window, "window_leak": window_leak, "stream_stall": stream_stall,
 "late_trailers": late_trailers, "myr_window": myr_window}[CASE]()
