#!/usr/bin/env python3
"""The client of bench/tls_stalled.sh: stalled TLS handshakes.

Usage: tls_stalled.py PORT CONNS BATCH CAP_S DETAILS_FILE

Opens CONNS connections to 127.0.0.1:PORT, BATCH at a time. Each sends a
real ClientHello (made by Python's ssl module through a MemoryBIO: the
SSLObject's first do_handshake() writes it; SNI bench.test, TLS 1.2 and
1.3, OpenSSL's default groups) and then never answers: the server's
first flight (ServerHello ... Finished in TLS 1.3) is read from the
socket so it does not sit in the kernel, but never handed to the TLS
object. A batch is done when each of its connections has had at least
one byte from the server, or was closed, or after 10 s; then the next
batch. Then it prints

    ready answered=A closed=C failed=F bytes=B open_ms=T

(answered: had bytes from the server and is still open; closed: closed
by the server before the line; failed: connect failed or closed before
any byte; bytes: the median server bytes per answered connection) and
goes on reading until the server has closed every connection, or
CAP_S seconds after the last one was opened, then prints

    done closed=N eof=E rst=R open=O min=S med=S max=S

(the time from a connection's connect to the server's close, EOF or
reset, over the connections it closed). DETAILS_FILE gets one line per
connection: index, connect time, first server byte, close, bytes, how.
"""
import errno
import selectors
import socket
import ssl
import statistics
import sys
import time


def client_hello(ctx):
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_side=False, server_hostname="bench.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class Conn:
    __slots__ = ("i", "sock", "t_open", "t_answer", "t_close", "nbytes", "how", "hello")

    def __init__(self, i, sock, hello):
        self.i, self.sock, self.hello = i, sock, hello
        self.t_open = time.monotonic()
        self.t_answer = self.t_close = None
        self.nbytes = 0
        self.how = ""


def main():
    port, nconns, batch, cap = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    details = sys.argv[5]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sel = selectors.DefaultSelector()
    conns = []
    live = 0

    def close(c, how):
        nonlocal live
        c.t_close = time.monotonic()
        c.how = how
        sel.unregister(c.sock)
        c.sock.close()
        live -= 1

    def step(timeout):
        for key, ev in sel.select(timeout):
            c = key.data
            if ev & selectors.EVENT_WRITE:
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    close(c, "connect:" + errno.errorcode.get(err, str(err)))
                    continue
                try:
                    c.sock.send(c.hello)  # a few hundred bytes into an empty socket buffer
                except OSError as e:
                    close(c, "send:" + errno.errorcode.get(e.errno, str(e.errno)))
                    continue
                sel.modify(c.sock, selectors.EVENT_READ, c)
                continue
            try:
                data = c.sock.recv(65536)
            except ConnectionResetError:
                close(c, "rst")
                continue
            except BlockingIOError:
                continue
            if not data:
                close(c, "eof")
                continue
            if c.t_answer is None:
                c.t_answer = time.monotonic()
            c.nbytes += len(data)

    t0 = time.monotonic()
    for start in range(0, nconns, batch):
        group = []
        for i in range(start, min(start + batch, nconns)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            c = Conn(i, s, client_hello(ctx))
            rc = s.connect_ex(("127.0.0.1", port))
            if rc not in (0, errno.EINPROGRESS):
                c.t_close, c.how = time.monotonic(), "connect:" + errno.errorcode.get(rc, str(rc))
                s.close()
            else:
                sel.register(s, selectors.EVENT_WRITE, c)
                live += 1
            conns.append(c)
            group.append(c)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(c.t_answer is None and c.t_close is None for c in group):
            step(0.1)
    t_opened = time.monotonic()
    answered = [c for c in conns if c.t_answer is not None and c.t_close is None]
    closed = [c for c in conns if c.t_answer is not None and c.t_close is not None]
    failed = [c for c in conns if c.t_answer is None]
    med_bytes = statistics.median(c.nbytes for c in conns if c.t_answer is not None) if answered or closed else 0
    print(f"ready answered={len(answered)} closed={len(closed)} failed={len(failed)} bytes={med_bytes:.0f} "
          f"open_ms={(t_opened - t0) * 1000:.0f}", flush=True)

    last_open = max(c.t_open for c in conns)
    while live > 0 and time.monotonic() < last_open + cap:
        step(0.2)
    for c in conns:
        if c.t_close is None:
            c.how = "open"
    times = [c.t_close - c.t_open for c in conns if c.t_answer is not None and c.how in ("eof", "rst")]
    eof = sum(1 for c in conns if c.t_answer is not None and c.how == "eof")
    rst = sum(1 for c in conns if c.t_answer is not None and c.how == "rst")
    still = sum(1 for c in conns if c.how == "open")
    if times:
        stats = f"min={min(times):.2f} med={statistics.median(times):.2f} max={max(times):.2f}"
    else:
        stats = "min=- med=- max=-"
    with open(details, "w") as f:
        f.write("conn\topen_s\tfirst_byte_s\tclose_s\tbytes\thow\n")
        for c in conns:
            rel = lambda t: "-" if t is None else f"{t - t0:.3f}"
            f.write(f"{c.i}\t{rel(c.t_open)}\t{rel(c.t_answer)}\t{rel(c.t_close)}\t{c.nbytes}\t{c.how}\n")
    print(f"done closed={len(times)} eof={eof} rst={rst} open={still} {stats}", flush=True)
    for c in conns:
        if c.how == "open":
            c.sock.close()


if __name__ == "__main__":
    main()
