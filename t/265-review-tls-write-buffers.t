# A break review of the TLS transport (db3f70a): (1) a record buffer kept
# after one of our writes was taken for 64 KiB whatever its size, and the
# next records overran it (heap overflow: 300 small responses then two of
# 1 MiB to a client that reads nothing for a while); (2) a response whose
# last records were still in a write of ours when the connection closed
# (Connection: close) was cut short, where a plain socket's kernel would
# still have sent them. A client here reads nothing for a second, then
# everything.
use strict;
use warnings;
use Test::More;
use IPC::Open3 qw(open3);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c) = TLSTest::certs('a.test');
my $k10 = 'x' x 10240;
my $m1 = join('', map { chr(65 + $_ % 26) } 0 .. 1048575);
my $m4 = 'y' x (4 * 1048576 + 123);
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    files  => { 'www/10k' => $k10, 'www/1m' => $m1, 'www/4m' => $m4, 'www/index.html' => "end\n" },
);

# Sends $req over TLS (Python's ssl, a 4 KiB receive buffer), reads
# nothing for a second, then all until the server closes.
my $PY = <<'PY';
import socket, ssl, sys, time
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
raw = socket.socket(); raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
raw.connect(("127.0.0.1", int(sys.argv[1])))
s = ctx.wrap_socket(raw, server_hostname="a.test")
s.sendall(sys.stdin.buffer.read())
time.sleep(1)
s.settimeout(20)
out = sys.stdout.buffer
try:
    while True:
        d = s.recv(65536)
        if not d: break
        out.write(d)
except Exception as e:
    pass
PY
sub slow_client {
    my ($req) = @_;
    my $pid = open3(my $in, my $out, undef, 'timeout', '60', 'python3', '-c', $PY, $tp);
    binmode $out;
    binmode $in;
    print $in $req;
    close $in;
    local $/;
    my $got = <$out> // '';
    waitpid $pid, 0;
    return $got;
}

my $req = "GET /10k HTTP/1.1\r\nHost: a.test\r\n\r\n" x 300 . "GET /1m HTTP/1.1\r\nHost: a.test\r\n\r\n" x 2
        . "GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
my $got = slow_client($req);
my $bodies = () = $got =~ /\r\n\r\n\Q$k10\E/g;
is($bodies, 300, '300 small responses to a client that stalled');
is(scalar(() = $got =~ /\r\n\r\n\Q$m1\E/g), 2, 'then both 1 MiB ones, whole');
like($got, qr/\r\n\r\nend\n\z/, 'and the last, before the close');

for my $i (1 .. 3) {
    $got = slow_client("GET /4m HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    my ($body) = $got =~ /\r\n\r\n(.*)\z/s;
    is(length($body // ''), length($m4), "Connection: close, 4 MiB to a stalled client, whole ($i)");
}
is($s->curl('-k', "https://127.0.0.1:$tp/index.html"), "end\n", 'the server is up');
$s->stop;
done_testing;
