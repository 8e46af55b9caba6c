#!/usr/bin/python3
# HTTP/2 sequences a real client library (Debian's python3-h2) makes, sent to
# luxd over h2c, for what curl and nghttp will not do: hostile and limit
# cases. Prints one line of "key=value" words for the test to match.
#
#   h2probe.py PORT get PATH [NAME=VALUE...]   status=200 body=N
#   h2probe.py PORT split PATH                 every cut of the request: ok=N of=M
#   h2probe.py PORT streams N                  N open streams: refused=K answered=J
#   h2probe.py PORT rapid N                    N HEADERS+RST_STREAM: goaway=CODE|none
#   h2probe.py PORT madeyoureset N             N requests reset by the server: goaway=CODE|none
#   h2probe.py PORT continuation N             N CONTINUATIONs: status=S goaway=CODE|none
#   h2probe.py PORT window0 PATH               window 0, then wait: closed_after=S
#   h2probe.py PORT idle                       no request: goaway=CODE closed_after=S
import os
import socket
import sys
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hpack

PORT = int(sys.argv[1])
CMD = sys.argv[2]


def connect(settings=None):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    if settings:
        c.update_settings(settings)
    s.sendall(c.data_to_send())
    return s, c


AUTHORITY = os.environ.get("H2_AUTHORITY", "localhost")
PATH = os.environ.get("H2_PATH", "/")


def req_headers(path, extra=()):
    return [(":method", "GET"), (":scheme", "http"), (":path", path),
            (":authority", AUTHORITY)] + list(extra)


def pump(s, c, until, timeout=20):
    """Reads and feeds events to until(ev) until it returns True; returns
    ('closed'|'done'|'timeout')."""
    s.settimeout(timeout)
    end = time.time() + timeout
    while time.time() < end:
        try:
            data = s.recv(65536)
        except socket.timeout:
            return "timeout"
        except ConnectionResetError:
            return "closed"
        if not data:
            return "closed"
        try:
            events = c.receive_data(data)
        except Exception:
            return "closed"
        out = c.data_to_send()
        if out:
            try:
                s.sendall(out)
            except OSError:
                pass
        for ev in events:
            if until(ev):
                return "done"
    return "timeout"


def get(path, extra):
    s, c = connect()
    c.send_headers(1, req_headers(path, extra), end_stream=True)
    s.sendall(c.data_to_send())
    st = {"status": None, "body": 0}

    def until(ev):
        if isinstance(ev, h2.events.ResponseReceived):
            st["status"] = dict(ev.headers).get(":status")
        elif isinstance(ev, h2.events.DataReceived):
            st["body"] += len(ev.data)
            c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamReset):
            st["status"] = "reset%d" % ev.error_code
            return True
        elif isinstance(ev, h2.events.ConnectionTerminated):
            st["status"] = "goaway%d" % ev.error_code
            return True
        return isinstance(ev, h2.events.StreamEnded)

    pump(s, c, until)
    print("status=%s body=%d" % (st["status"], st["body"]))


def split(path):
    """The whole request, cut in two at every byte, each on its own
    connection: the server must answer every one."""
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.send_headers(1, req_headers(path), end_stream=True)
    data = c.data_to_send()
    ok = 0
    for cut in range(1, len(data)):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        s.sendall(data[:cut])
        time.sleep(0.002)
        s.sendall(data[cut:])
        cc = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        cc.initiate_connection()
        cc.data_to_send()  # the same preface, already sent
        cc.send_headers(1, req_headers(path), end_stream=True)
        cc.data_to_send()
        got = {"status": None}

        def until(ev):
            if isinstance(ev, h2.events.ResponseReceived):
                got["status"] = dict(ev.headers).get(b":status")
            return isinstance(ev, (h2.events.StreamEnded, h2.events.ConnectionTerminated))

        pump(s, cc, until, timeout=10)
        if got["status"] == b"200":
            ok += 1
        s.close()
    print("ok=%d of=%d" % (ok, len(data) - 1))


def streams(n):
    """n requests that each announce a body and send none: all stay open."""
    s, c = connect()
    for i in range(n):
        c.send_headers(1 + 2 * i, [(":method", "POST")] + req_headers("/")[1:], end_stream=False)
    s.sendall(c.data_to_send())
    st = {"refused": 0, "other": 0}

    def until(ev):
        if isinstance(ev, h2.events.StreamReset):
            if ev.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                st["refused"] += 1
            else:
                st["other"] += 1
        return isinstance(ev, h2.events.ConnectionTerminated)

    pump(s, c, until, timeout=2)
    print("refused=%d other=%d" % (st["refused"], st["other"]))


def goaway_after(s, c, timeout=10):
    st = {"code": "none"}

    def until(ev):
        if isinstance(ev, h2.events.ConnectionTerminated):
            st["code"] = int(ev.error_code)
            return True
        return False

    try:
        how = pump(s, c, until, timeout=timeout)
    except Exception:
        how = "closed"
    if st["code"] == "none" and how == "closed":
        return "closed"
    return st["code"]


def rapid(n):
    s, c = connect()
    sent = 0
    try:
        for i in range(n):
            sid = 1 + 2 * i
            c.send_headers(sid, req_headers("/"), end_stream=True)
            c.reset_stream(sid)
            if i % 100 == 99:
                s.sendall(c.data_to_send())
            sent += 1
        s.sendall(c.data_to_send())
    except Exception:
        pass
    print("goaway=%s sent=%d" % (goaway_after(s, c), sent))


def madeyoureset(n, mode):
    """n requests, each followed by a frame that makes the server reset the
    stream itself: MadeYouReset, CVE-2025-8671. Written by hand (h2 would
    not send them), 50 streams at a time, so that the server's limit of
    concurrent streams does not refuse them first."""
    s, c = connect()
    enc = hpack.Encoder()
    frames = bytearray()
    sent = 0
    try:
        for i in range(n):
            sid = 1 + 2 * i
            if mode == "cl":  # a body longer than its content-length: PROTOCOL_ERROR
                block = enc.encode([(":method", "POST")] + req_headers(PATH)[1:] + [("content-length", "1")])
                frames += len(block).to_bytes(3, "big") + b"\x01\x04" + sid.to_bytes(4, "big") + block
                frames += (2).to_bytes(3, "big") + b"\x00\x01" + sid.to_bytes(4, "big") + b"xy"
            else:
                block = enc.encode(req_headers("/"))
                frames += len(block).to_bytes(3, "big") + b"\x01\x05" + sid.to_bytes(4, "big") + block
                if mode == "data":  # DATA on a stream the client ended: STREAM_CLOSED
                    frames += (1).to_bytes(3, "big") + b"\x00\x00" + sid.to_bytes(4, "big") + b"x"
                else:  # WINDOW_UPDATE with increment 0
                    frames += (4).to_bytes(3, "big") + b"\x08\x00" + sid.to_bytes(4, "big") + (0).to_bytes(4, "big")
            sent += 1
            if sent % 50 == 0:
                s.sendall(bytes(frames))
                frames = bytearray()
                time.sleep(0.01)
        s.sendall(bytes(frames))
    except OSError:
        pass
    st = {"code": "none", "resets": 0}

    def until(ev):
        if isinstance(ev, h2.events.ConnectionTerminated):
            st["code"] = int(ev.error_code)
            return True
        return False

    # The client library did not open these streams: read raw frames.
    s.settimeout(5)
    buf = b""
    end = time.time() + 10
    while time.time() < end:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not d:
            break
        buf += d
        while len(buf) >= 9:
            ln = int.from_bytes(buf[0:3], "big")
            if len(buf) < 9 + ln:
                break
            typ = buf[3]
            if typ == 3:
                st["resets"] += 1
            if typ == 7:
                st["code"] = int.from_bytes(buf[13:17], "big")
            buf = buf[9 + ln:]
        if st["code"] != "none":
            break
    print("goaway=%s resets=%d sent=%d" % (st["code"], st["resets"], sent))


def continuation(n):
    """A HEADERS frame without END_HEADERS, then n CONTINUATION frames, the
    last with END_HEADERS, written by hand: the header block is whole, so
    only a bound on the frames can refuse it."""
    s, c = connect()
    # The client library opens stream 1 (its bytes are dropped), so that it
    # takes the answer; the block sent is a fresh encoder's, as the
    # server's decoder has seen nothing yet.
    c.send_headers(1, req_headers("/"), end_stream=True)
    c.data_to_send()
    block = hpack.Encoder().encode(req_headers("/"))
    frames = bytearray()
    frames += len(block).to_bytes(3, "big") + b"\x01\x01" + (1).to_bytes(4, "big") + block
    for i in range(n):
        flags = b"\x04" if i == n - 1 else b"\x00"
        frames += (0).to_bytes(3, "big") + b"\x09" + flags + (1).to_bytes(4, "big")
    try:
        s.sendall(bytes(frames))
    except OSError:
        pass
    st = {"status": None, "code": "none"}

    def until(ev):
        if isinstance(ev, h2.events.ResponseReceived):
            st["status"] = dict(ev.headers).get(":status")
        if isinstance(ev, h2.events.ConnectionTerminated):
            st["code"] = int(ev.error_code)
            return True
        return isinstance(ev, h2.events.StreamEnded)

    try:
        pump(s, c, until, timeout=10)
    except Exception:
        pass
    print("status=%s goaway=%s" % (st["status"], st["code"]))


def window0(path):
    """Says it takes no DATA (initial window 0), asks for a file, then reads
    nothing more: the server must give up on it."""
    s, c = connect({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.send_headers(1, req_headers(path), end_stream=True)
    s.sendall(c.data_to_send())
    t0 = time.time()
    s.settimeout(60)
    closed = "no"
    while time.time() - t0 < 60:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            closed = "reset"
            break
        if not d:
            closed = "yes"
            break
    print("closed=%s after=%.1f" % (closed, time.time() - t0))


def idle():
    s, c = connect()
    t0 = time.time()
    code = goaway_after(s, c, timeout=30)
    s.settimeout(30)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    print("goaway=%s closed_after=%.1f" % (code, time.time() - t0))


if CMD == "get":
    get(sys.argv[3], [tuple(a.split("=", 1)) for a in sys.argv[4:]])
elif CMD == "split":
    split(sys.argv[3])
elif CMD == "streams":
    streams(int(sys.argv[3]))
elif CMD == "rapid":
    rapid(int(sys.argv[3]))
elif CMD == "madeyoureset":
    madeyoureset(int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "window")
elif CMD == "continuation":
    continuation(int(sys.argv[3]))
elif CMD == "window0":
    window0(sys.argv[3])
elif CMD == "idle":
    idle()
else:
    sys.exit("unknown command " + CMD)
