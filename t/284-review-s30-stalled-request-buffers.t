# A break review (s30, the TLS rest): SSL_MODE_RELEASE_BUFFERS went from
# the server contexts, and at first only a connection idle between
# requests let go of OpenSSL's record buffers and luxd's own. A connection
# that stalled anywhere else kept them for as long as it stalled: here a
# client that has had a response and then sends part of its next
# request's head (slowloris, within header_timeout): ~108 kB each, where a
# resting one holds ~22 kB. The same held for a WebSocket or CONNECT
# tunnel, a request body read slowly, a long poll waiting on its upstream.
# Now the rest comes 1 s after the last byte read, whatever the
# connection waits in (conn.c rest_arm).
use strict;
use warnings;
use Test::More;
use IPC::Open2 qw(open2);
use lib 't/lib';
use Luxd;
use TLSTest;

# Buffers of 16 KiB and more are mmap()ed and unmapped at free, so that
# RssAnon shows what is held.
Luxd::heap_visible_env(16384);

my $N = 100;
my ($c) = TLSTest::certs('a.test');
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    server => { keepalive_timeout => 30, header_timeout => 30 },
    files  => { 'www/200k' => 'k' x 204800 },
);

# $N connections, each GETs /200k; with "partial", each then sends part
# of a next request's head and stops. A first round (closed) warms the heap.
my $PY = <<'PY';
import socket, ssl, sys, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
port, n = int(sys.argv[1]), int(sys.argv[2])
def conn():
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="a.test")
    s.sendall(b"GET /200k HTTP/1.1\r\nHost: a.test\r\n\r\n")
    d = b""
    while not (b"\r\n\r\n" in d and len(d.partition(b"\r\n\r\n")[2]) >= 204800):
        k = s.recv(65536)
        if not k: sys.exit("no answer")
        d += k
    return s
for s in [conn() for _ in range(n)]: s.close()
time.sleep(1.5)
print("warm", flush=True)
sys.stdin.readline()
conns = []
for i in range(n):
    s = conn()
    s.sendall(b"GET /200k HTTP/1.1\r\nHost: a.")
    conns.append(s)
print("stalled", flush=True)
sys.stdin.readline()
PY

my $pid = $s->pid;
my $cpid = open2(my $out, my $in, 'python3', '-c', $PY, $tp, $N);
is(scalar <$out>, "warm\n", 'a first round of connections came and went');
my $base = Luxd::rss_anon_kb($pid);
print $in "go\n";
is(scalar <$out>, "stalled\n", "$N TLS connections, each answered once, then stalled in a head");
# Awaited (the rest comes 1 s after the last byte), well within
# header_timeout.
# The bound is t/281's (AddressSanitizer's heap holds more per object).
my $max = Luxd::asan_build() ? 100 : 40;
my $per;
Luxd::wait_for(sub { $per = (Luxd::rss_anon_kb($pid) - $base) / $N; $per < $max }, 8);
note sprintf 'a stalled connection holds %.1f kB', $per;
cmp_ok($per, '<', $max, "a TLS connection stalled mid-head holds no record buffers after its rest (less than $max kB, as a rested one)");
print $in "end\n";
close $in;
waitpid($cpid, 0);
$s->stop;
done_testing();
