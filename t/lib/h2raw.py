# Raw HTTP/2 frames for hostile clients (t/293): no protocol enforcement on
# our side, so frames a client library would refuse to send can be sent.
# Written for a break review of luxd's HTTP/2 (helper-43).
import socket, struct, time, hpack, select
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WU, CONT = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 1, 1, 4, 8, 0x20
NAMES = {0:'DATA',1:'HEADERS',2:'PRIORITY',3:'RST',4:'SETTINGS',5:'PUSH',6:'PING',7:'GOAWAY',8:'WU',9:'CONT'}

def frame(t, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", sid) + payload

class Conn:
    def __init__(self, port, settings=None, host="127.0.0.1", rcvbuf=None):
        self.s = socket.socket()
        if rcvbuf: self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.connect((host, port))
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.autowu = False
        st = b"".join(struct.pack(">HI", k, v) for k, v in (settings or {}).items())
        self.send(PREFACE + frame(SETTINGS, 0, 0, st))
    def send(self, b):
        self.s.sendall(b)
    def headers(self, sid, hdrs, end_stream=True, end_headers=True, raw=None):
        block = raw if raw is not None else self.enc.encode(hdrs)
        fl = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
        return frame(HEADERS, fl, sid, block)
    def req(self, sid, path, method="GET", authority="localhost", extra=(), end_stream=True):
        h = [(":method", method), (":scheme", "http"), (":path", path), (":authority", authority)] + list(extra)
        return self.headers(sid, h, end_stream)
    def data(self, sid, payload, end=False):
        return frame(DATA, END_STREAM if end else 0, sid, payload)
    def rst(self, sid, code=8):
        return frame(RST, 0, sid, struct.pack(">I", code))
    def wu(self, sid, inc):
        return frame(WU, 0, sid, struct.pack(">I", inc))
    def settings_ack(self):
        return frame(SETTINGS, ACK, 0)
    def read_frames(self, timeout=2.0, until=None, ack=True):
        """Reads frames until timeout with no data or until(f) true. Returns list of (type, flags, sid, payload); None entry on close."""
        out = []
        end = time.time() + timeout
        while True:
            while len(self.buf) >= 9:
                ln = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + ln: break
                t, fl = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
                p = self.buf[9:9+ln]
                self.buf = self.buf[9+ln:]
                if t in (HEADERS,):
                    try:
                        blk = p
                        if fl & PADDED: blk = blk[1:len(blk)-blk[0]]
                        if fl & PRIO: blk = blk[5:]
                        p = self.dec.decode(blk)
                    except Exception as e:
                        p = ("decode-error", str(e))
                if t == SETTINGS and not (fl & ACK) and ack:
                    self.send(self.settings_ack())
                f = (t, fl, sid, p)
                if t == DATA and self.autowu and len(p):
                    self.send(self.wu(0, len(p)) + self.wu(sid, len(p)))
                out.append(f)
                if until and until(f): return out
            rem = end - time.time()
            if rem <= 0: return out
            r, _, _ = select.select([self.s], [], [], rem)
            if not r: return out
            try:
                d = self.s.recv(1 << 20)
            except (ConnectionResetError, OSError):
                d = b""
            if not d:
                out.append(None); return out
            self.buf += d

def summary(frames):
    res = []
    for f in frames:
        if f is None: res.append("CLOSED"); continue
        t, fl, sid, p = f
        if t == HEADERS:
            st = dict(p).get(":status") if isinstance(p, list) else p
            res.append(f"H{sid}:{st}{'E' if fl & 1 else ''}")
        elif t == DATA: res.append(f"D{sid}:{len(p)}{'E' if fl & 1 else ''}")
        elif t == RST: res.append(f"RST{sid}:{int.from_bytes(p,'big')}")
        elif t == GOAWAY: res.append(f"GOAWAY(last={int.from_bytes(p[:4],'big')},err={int.from_bytes(p[4:8],'big')},{p[8:]!r})")
        else: res.append(f"{NAMES.get(t,t)}{sid}")
    return res
