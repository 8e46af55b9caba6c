#!/usr/bin/python3
# Many HTTP/2 downloads at once, every body checked byte for byte (t/295).
# Usage: h2files.py [tls:]PORT CONNS STREAMS PAUSE PATH...
# Opens CONNS connections with windows larger than everything asked for,
# sends STREAMS requests on each (cycling through the PATHs), reads nothing
# for PAUSE seconds (luxd's writes stall, its output waits in its buffers),
# then reads every connection to the end. Prints "PATH md5 length" once per
# distinct body seen per PATH, then "streams=N ended=M".
import hashlib
import select
import socket
import ssl
import sys
import time

sys.path.insert(0, "t/lib")
from h2raw import *  # noqa: E402,F401,F403
import hpack  # noqa: E402

tls = sys.argv[1].startswith("tls:")
port = int(sys.argv[1][4:] if tls else sys.argv[1])
nconn, nstream, pause = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
paths = sys.argv[5:]
WINDOW = struct.pack(">HI", 4, (1 << 31) - 1)  # SETTINGS_INITIAL_WINDOW_SIZE


def connect():
    if not tls:
        return Conn(port, settings={4: (1 << 31) - 1})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    c = Conn.__new__(Conn)
    c.s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
    assert c.s.selected_alpn_protocol() == "h2"
    c.enc, c.dec, c.buf, c.autowu = hpack.Encoder(), hpack.Decoder(), b"", False
    c.send(PREFACE + frame(SETTINGS, 0, 0, WINDOW))
    return c


conns = []
for i in range(nconn):
    c = connect()
    c.send(c.wu(0, (1 << 31) - 1 - 65535))
    c.bodies, c.paths, c.ended = {}, {}, set()
    reqs = []
    for k in range(nstream):
        sid = 2 * k + 1
        c.paths[sid] = paths[k % len(paths)]
        c.bodies[sid] = []
        reqs.append(c.req(sid, c.paths[sid]))
    c.send(b"".join(reqs))
    conns.append(c)
time.sleep(pause)

deadline = time.time() + 120
live = list(conns)
while live and time.time() < deadline:
    r = [c for c in live if tls and c.s.pending()]
    if not r:
        r, _, _ = select.select([c.s for c in live], [], [], 5)
    for c in [c for c in live if c.s in r or c in r]:
        d = c.s.recv(1 << 20)
        if not d:
            live.remove(c)
            continue
        c.buf += d
        off = 0
        while len(c.buf) - off >= 9:
            ln = int.from_bytes(c.buf[off:off + 3], "big")
            if len(c.buf) - off < 9 + ln:
                break
            t, fl = c.buf[off + 3], c.buf[off + 4]
            sid = int.from_bytes(c.buf[off + 5:off + 9], "big") & 0x7FFFFFFF
            p = c.buf[off + 9:off + 9 + ln]
            off += 9 + ln
            if t == SETTINGS and not fl & ACK:
                c.send(c.settings_ack())
            elif t == HEADERS:
                c.dec.decode(p)
            elif t == DATA:
                c.bodies[sid].append(p)
            elif t in (RST, GOAWAY):
                print("frame %s on %d" % (NAMES[t], sid))
            if t in (DATA, HEADERS) and fl & END_STREAM:
                c.ended.add(sid)
        c.buf = c.buf[off:]
        if len(c.ended) == nstream:
            live.remove(c)

seen = {}
for c in conns:
    for sid, parts in c.bodies.items():
        b = b"".join(parts)
        seen.setdefault(c.paths[sid], set()).add("%s %d" % (hashlib.md5(b).hexdigest(), len(b)))
for p in paths:
    for v in sorted(seen.get(p, ())):
        print(p, v)
print("streams=%d ended=%d" % (nconn * nstream, sum(len(c.ended) for c in conns)))
