# A TLS connection between requests keeps its record buffers for a second
# after its last byte read (a busy one does not allocate and free 34 KiB of
# OpenSSL's buffers for every request), then lets go of them, and of its
# own record buffer, kept between writes up to 64 KiB (conn.c rest_arm,
# net/tls.c lx_tls_rest).
# keepalive_timeout still runs from the end of the last response, and a
# rested connection serves its next request as before.
use strict;
use warnings;
use Test::More;
use IPC::Open2 qw(open2);
use Time::HiRes qw(time);
use lib 't/lib';
use Luxd;
use TLSTest;

sub rss_kb { Luxd::rss_anon_kb(@_) }

# Buffers of 16 KiB and more are mmap()ed and unmapped at free, so that
# RssAnon shows what is held.
Luxd::heap_visible_env(16384);

my $N = 100;
my ($c) = TLSTest::certs('a.test');
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    server => { keepalive_timeout => 5 },
    files  => { 'www/48k' => 'k' x 49152 },
);

# A client of $N connections: each GETs /48k and keeps the connection;
# "ok" once all have their answer; then, for each line read, each GETs it
# again ("again ok"); on "wait", the time in seconds from the last
# response to the server's close of the first connection.
my $PY = <<'PY';
import socket, ssl, sys, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
port, n = int(sys.argv[1]), int(sys.argv[2])
conns = []
def get(s):
    s.sendall(b"GET /48k HTTP/1.1\r\nHost: a.test\r\n\r\n")
    d = b""
    while not (b"\r\n\r\n" in d and len(d.partition(b"\r\n\r\n")[2]) >= 49152):
        k = s.recv(65536)
        if not k: return False
        d += k
    return d.startswith(b"HTTP/1.1 200")
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="a.test")
    if not get(s): sys.exit("connection %d: no answer" % i)
    conns.append(s)
print("ok", flush=True)
for line in sys.stdin:
    if line.strip() == "wait":
        last = time.time()
        if not get(conns[0]): sys.exit("no answer before the wait")
        last = time.time()
        try:
            while conns[0].recv(100): pass
        except (ConnectionError, ssl.SSLError):
            pass
        print("closed %.3f" % (time.time() - last), flush=True)
        break
    print("again", "ok" if all(get(s) for s in conns) else "failed", flush=True)
PY

my $pid = $s->pid;
my $base = rss_kb($pid);
ok(defined $base, "luxd's RssAnon can be read ($base kB)") or BAIL_OUT('no /proc');
my $cpid = open2(my $out, my $in, 'python3', '-c', $PY, $tp, $N);
is(scalar <$out>, "ok\n", "$N TLS connections have each had 48 KiB");
my $busy = rss_kb($pid) - $base;
note "RssAnon grew $busy kB with $N connections";

# Resting, each holds its SSL object, session and state: some 22 kB here
# (70 under AddressSanitizer); with its record buffers (OpenSSL's two and
# luxd's), about 80 kB (140).
my $per = Luxd::asan_build() ? 100 : 40;
# Awaited for 3.5 s: within keepalive_timeout, so that it is the rest that
# lets go, not the close.
my $rested = Luxd::wait_for(sub { rss_kb($pid) - $base < $N * $per }, 3.5);
my $now = rss_kb($pid) - $base;
ok($rested, "resting, $N idle TLS connections hold less than $per kB each ($now kB in all)");

print $in "again\n";
is(scalar <$out>, "again ok\n", 'each rested connection serves its next request');
print $in "again\n";
is(scalar <$out>, "again ok\n", 'and the one after at once (its buffers kept now)');

print $in "wait\n";
my $line = <$out> // '';
my ($t) = $line =~ /^closed ([\d.]+)/;
ok(defined $t && $t >= 4.9 && $t < 5.8,
   'keepalive_timeout (5 s) counts from the last response, through the rest') or diag("got: $line");
close $in;
waitpid($cpid, 0);
$s->stop;
done_testing();
