# Break review of 60b3f4e: over a TLS upstream (a Python ssl backend), an
# upgraded connection (101, then bytes both ways), and an 8 MiB response
# read by a slow client (the proxy turns upstream reading off and on,
# lx_tls_read_stop/start with records kept), with workers = 2.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;
use TLSTest;
use File::Temp ();
my $TLSBE = do { my $d = File::Temp::tempdir('rvpy-XXXXXX', TMPDIR => 1, CLEANUP => 1); my $f = "$d/rv_tlsbe.py"; open my $fh, '>', $f or die; print $fh <<'PYEOF'; close $fh; $f };
import socket, ssl, sys, threading
port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(64)
BIG = bytes((i * 7) & 255 for i in range(8 << 20))
def serve(raw):
    try:
        c = ctx.wrap_socket(raw, server_side=True)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d: return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            path = head.split(b" ")[1]
            if path.startswith(b"/ws"):
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                if buf: c.sendall(buf)
                while True:
                    d = c.recv(65536)
                    if not d: break
                    c.sendall(d)
                c.close(); return
            if path.startswith(b"/keyupdate"):
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                continue
            n = len(BIG)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n + BIG)
    except Exception as e:
        sys.stderr.write("be: %r\n" % e)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PYEOF

my ($dir) = File::Temp::tempdir('luxd-rv4-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $bec = TLSTest::cert($dir, 'be.test');
my $bp = Luxd::free_port();
my $pid = fork // die;
if (!$pid) { exec 'timeout', '300', 'python3', $TLSBE, $bp, $bec->{cert}, $bec->{key}; exit 127 }
Luxd::wait_for(sub { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $bp) }) or die 'backend';
my $big = join '', map { chr(($_ * 7) & 255) } 0 .. (8 << 20) - 1;

my $s = Luxd->new(server => { workers => 2 }, config => qq{
upstream "be" { "127.0.0.1:$bp", tls = { ca = "$bec->{cert}", name = "be.test" } }
vhost "fe" { default = true, root = "\$DIR/www", proxy = "be" }
}, files => { 'www/x' => 'x' });

# Upgrade.
for my $round (1 .. 3) {
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port) or die;
    print $c "GET /ws HTTP/1.1\r\nHost: fe\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    my $head = '';
    while ($head !~ /\r\n\r\n/) { my $n = sysread($c, my $b, 4096); last unless $n; $head .= $b }
    like($head, qr/^HTTP\/1\.1 101/, "round $round: 101 over a TLS upstream");
    my $payload = join '', map { chr(65 + $_ % 26) } 1 .. 300000;
    my $got = '';
    my $w = 0;
    $c->blocking(0);
    my $t0 = time;
    while (length($got) < length($payload) && time - $t0 < 20) {
        if ($w < length $payload) { my $n = syswrite($c, $payload, 16384, $w); $w += $n if $n }
        my $n = sysread($c, my $b, 65536);
        $got .= $b if $n;
        sleep 0.001;
    }
    is(length $got, length $payload, "round $round: 300 KB echoed through the tunnel");
    ok($got eq $payload, "round $round: byte for byte");
    close $c;
}

# A slow reader of 8 MiB.
for my $round (1 .. 2) {
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port) or die;
    print $c "GET /big HTTP/1.1\r\nHost: fe\r\n\r\n";
    my $all = '';
    my $t0 = time;
    while (time - $t0 < 60) {
        my $n = sysread($c, my $b, 262144);
        last unless $n;
        $all .= $b;
        last if $all =~ /\r\n\r\n/ && length($all) >= index($all, "\r\n\r\n") + 4 + length $big;
        sleep 0.003;
    }
    my ($h, $body) = split /\r\n\r\n/, $all, 2;
    is(md5_hex($body // ''), md5_hex($big), "round $round: 8 MiB to a slow reader, byte for byte");
    close $c;
}
is($s->get('/x')->{status}, 200, 'still serving');
$s->stop;
kill 'TERM', $pid;
waitpid $pid, 0;
done_testing;
