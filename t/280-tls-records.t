# The records a TLS response goes out in (net/tls.c encrypt): a response's
# head and a short body share one record, not one each (the head of a long
# body goes alone, the body's records sealed in place); the first 64 KiB
# of a connection go in records of at most 4 KiB (so a client can use the
# first bytes before a 16 KiB record is whole), the rest in full 16 KiB
# records. A Python client does the handshake over memory BIOs and reads
# the records' headers off the socket itself.
use strict;
use warnings;
use Test::More;
use IPC::Open3 qw(open3);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c) = TLSTest::certs('a.test');
my $k1 = 'a' x 1024;
my $k200 = join('', map { chr(65 + $_ % 26) } 0 .. 204799);
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    files  => { 'www/1k' => $k1, 'www/200k' => $k200 },
);

# For each path (in order, one keep-alive connection, each response read
# whole before the next request): the plain text sizes of the application
# data records it came in, and the body's length, as "path n1,n2,... len".
# TLS 1.3 with AES-GCM: a record's plain text is its length - 17 (16 tag
# bytes and the inner content type). Tickets (TLS 1.3 sends them after the
# handshake, in records of the same outer type) are read by a first
# request whose records are not reported.
my $PY = <<'PY';
import sys
sys.path.insert(0, "t/lib")
from tlsrecords import Client
c = Client(int(sys.argv[1]), ciphers="ECDHE+AESGCM")
def get(path):
    c.write(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: a.test\r\n\r\n")
    sizes, plain = [], b""
    while True:
        r = c.record()
        sizes.append(len(r) - 5 - 17)
        plain += c.open(r)
        head, sep, body = plain.partition(b"\r\n\r\n")
        if sep:
            cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if cl and len(body) >= int(cl[0].split(b":")[1]):
                return sizes, len(body)
for i, p in enumerate(sys.argv[2:]):
    sizes, n = get(p)
    if i: print(p, ",".join(map(str, sizes)), n)
PY

sub records {
    my (@paths) = @_;
    my $pid = open3(my $in, my $out, undef, 'python3', '-c', $PY, $tp, '/1k', @paths);
    close $in;
    local $/;
    my $got = <$out> // '';
    waitpid($pid, 0);
    is($? >> 8, 0, "the client read @paths") or diag($got);
    return { map { my ($p, $sz, $n) = split / /; ($p => { sizes => [ split /,/, $sz ], len => $n }) } split /\n/, $got };
}

my $r = records('/1k', '/200k');
is($r->{'/1k'}{len}, 1024, 'the 1 KiB body came whole');
is(scalar @{ $r->{'/1k'}{sizes} }, 1, 'a response head and a 1 KiB body: one record')
  or diag("records: @{ $r->{'/1k'}{sizes} }");

my @z = @{ $r->{'/200k'}{sizes} };
is($r->{'/200k'}{len}, 204800, 'the 200 KiB body came whole');
# The connection has sent some 1.2 KiB before (the responses to /1k):
# records stay small until 64 KiB have gone, then are full.
my ($small, $sum) = (0, 0);
$small++, $sum += $z[$small - 1] while $small < @z && $z[$small] <= 4096;
ok($sum >= 56 * 1024 && $sum <= 68 * 1024, 'records of at most 4 KiB for the first 64 KiB or so')
  or diag("$small small records, $sum bytes: @z");
# Before a body piece of a record or more, the head goes in a record of its
# own, so that the body is sealed where it lies rather than copied to
# share a record with it (its records then all have the full size).
ok($z[0] > 100 && $z[0] < 1024 && $z[1] == 4096, 'the head in a record of its own, then the body in full records')
  or diag("first: $z[0], $z[1]");
ok(!(grep { $_ != 16384 } @z[$small .. $#z - 1]), 'then full 16 KiB records') or diag("records: @z");
ok(!(grep { $_ > 16384 } @z), 'no record over 16 KiB');

$s->stop;
done_testing();
