# A break review of 4b61484: a client that resets its connection after a
# complete handshake and response (SO_LINGER 0) now has set_fail() mark
# the connection failed (on_read, n < 0 and not EOF), so lx_tls_close does
# not keep the session and OpenSSL removes it from the shared cache: the
# TLS 1.2 session id no longer resumes. A FIN keeps it (the comment in
# lx_tls_close: "a client that just goes" stays resumable).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;
use File::Temp ();
my $RST = do { my $d = File::Temp::tempdir('rvpy-XXXXXX', TMPDIR => 1, CLEANUP => 1); my $f = "$d/rv_rst.py"; open my $fh, '>', $f or die; print $fh <<'PYEOF'; close $fh; $f };
import socket, ssl, struct, sys, time, urllib.request, re
port = int(sys.argv[1]); rst = sys.argv[2] == "rst"; plain = int(sys.argv[3])
def closed():
    j = urllib.request.urlopen("http://127.0.0.1:%d/status?format=json" % plain).read().decode()
    return int(re.search(r'"connections":\{"accepted":\d+,"refused":\d+,"closed":(\d+)', j).group(1))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.maximum_version = ssl.TLSVersion.TLSv1_2; ctx.options |= ssl.OP_NO_TICKET
def conn(sess=None):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="a.test", session=sess)
    s.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
    d = b""
    while b"hello" not in d:
        x = s.recv(4096)
        if not x: break
        d += x
    return s
s = conn(); sess = s.session
before = closed()
if rst:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
else:
    s.close()
# The server has closed its end (and kept or dropped the session) when
# its count of closed connections moves.
deadline = time.time() + 10
while closed() == before and time.time() < deadline: time.sleep(0.01)
s2 = conn(sess)
print("reused" if s2.session_reused else "new")
PYEOF

my ($c) = TLSTest::certs('a.test');
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]},
  location "/status" { status = true } }\n},
    files => { 'www/index.html' => "hello\n" });
my $plain = $s->port;
my $fin = `timeout 20 python3 $RST $tp fin $plain 2>&1`;
like($fin, qr/^reused/, 'closed with a FIN: the TLS 1.2 session id resumes') or diag $fin;
my $rst = `timeout 20 python3 $RST $tp rst $plain 2>&1`;
like($rst, qr/^reused/, 'closed with a RST after a whole response: it resumes too') or diag $rst;
$s->stop;
done_testing;
