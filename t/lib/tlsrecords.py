# A TLS 1.3 client over memory BIOs that reads the records off the socket
# itself, for tests of the records luxd sends (t/280, t/296): how big each
# is, and what its plain text holds.
import socket
import ssl
import sys


class Client:
    def __init__(self, port, alpn=None, ciphers=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        if ciphers:
            ctx.set_ciphers(ciphers)
        if alpn:
            ctx.set_alpn_protocols(alpn)
        self.raw = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out, server_hostname="a.test")
        self.pend = b""
        while True:
            try:
                self.tls.do_handshake()
                self.flush()
                break
            except ssl.SSLWantReadError:
                self.flush()
                d = self.raw.recv(65536)
                if not d:
                    sys.exit("closed in the handshake")
                self.inc.write(d)

    def flush(self):
        d = self.out.read()
        if d:
            self.raw.sendall(d)

    def write(self, data):
        self.tls.write(data)
        self.flush()

    def record(self):
        """The next record off the socket, whole, header included."""
        while len(self.pend) < 5 or len(self.pend) < 5 + int.from_bytes(self.pend[3:5], "big"):
            d = self.raw.recv(65536)
            if not d:
                sys.exit("closed")
            self.pend += d
        n = 5 + int.from_bytes(self.pend[3:5], "big")
        r, self.pend = self.pend[:n], self.pend[n:]
        return r

    def open(self, r):
        """The plain text of record r (which may be empty: a ticket)."""
        self.inc.write(r)
        plain = b""
        try:
            while True:
                plain += self.tls.read(65536)
        except ssl.SSLWantReadError:
            pass
        return plain
