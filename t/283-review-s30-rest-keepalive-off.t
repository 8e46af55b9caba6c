# A break review (s30, the TLS rest): an idle TLS connection rested after
# 1 s (then conn.c conn_rest) and set its keepalive_timeout from the
# generation in force at the rest. A reload that turns keep-alive off
# (keepalive_timeout = 0) within that second made it set no deadline at
# all: the connection stayed open for ever, while a plain connection idle
# since the same moment closed at the keepalive_timeout it was given. The
# rest is now a deadline of its own beside the connection's (rest_arm):
# keepalive_timeout runs as for plain HTTP.
use strict;
use warnings;
use Test::More;
use IPC::Open2 qw(open2);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c) = TLSTest::certs('a.test');
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    server => { keepalive_timeout => 2 },
    files  => { 'www/x' => "x\n" },
);
my $port = $s->port;

# One plain and one TLS connection, each answered once; "ok"; on "go",
# how long after it each one was closed by the server (or "open" after 6 s).
my $PY = <<'PY';
import socket, ssl, sys, time, select
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
port, tport = int(sys.argv[1]), int(sys.argv[2])
def get(s):
    s.sendall(b"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n")
    d = b""
    while not d.endswith(b"\r\n\r\nx\n"):
        k = s.recv(4096)
        if not k: return False
        d += k
    return d.startswith(b"HTTP/1.1 200")
p = socket.create_connection(("127.0.0.1", port), timeout=10)
t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", tport), timeout=10), server_hostname="a.test")
if not (get(p) and get(t)): sys.exit("no answer")
print("ok", flush=True)
sys.stdin.readline()
start = time.time()
res = {}
for name, s in (("plain", p), ("tls", t)):
    s.settimeout(max(0.01, 6 - (time.time() - start)))
    try:
        while s.recv(100): pass
        res[name] = "%.2f" % (time.time() - start)
    except socket.timeout:
        res[name] = "open"
    except (ConnectionError, ssl.SSLError):
        res[name] = "%.2f" % (time.time() - start)
print("plain", res["plain"], "tls", res["tls"], flush=True)
PY

my $cpid = open2(my $out, my $in, 'python3', '-c', $PY, $port, $tp);
is(scalar <$out>, "ok\n", 'a plain and a TLS connection, each answered once');
# Within the TLS connection's first second of rest: keep-alive off.
(my $cfg = $s->{config_text}) =~ s/keepalive_timeout = 2,/keepalive_timeout = 0,/ or die 'no keepalive_timeout';
$s->write_config($cfg);
like($s->reload // '', qr/^ok/, 'reload: keepalive_timeout = 0');
print $in "go\n";
my $line = <$out> // ""; chomp $line;
my ($pl, $tl) = $line =~ /^plain (\S+) tls (\S+)/;
isnt($pl // 'open', 'open', "the plain connection closes at its keepalive_timeout ($line)");
isnt($tl // 'open', 'open', 'the TLS connection closes too (not kept for ever because it rested after the reload)')
  or diag("got: $line");
close $in;
waitpid($cpid, 0);
$s->stop;
done_testing();
