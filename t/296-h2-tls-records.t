# HTTP/2 over TLS: a DATA frame of a file and its 9-byte header fill one
# TLS record (h2i.h H2_FRAME: 16375 bytes of payload at most), so that the
# transport seals it where it lies, in the buffer the file was read into
# with room left before each frame for its header (emit.c ahead_iov), rather
# than copying it into a staging buffer. What a client sees of that: once
# the connection's first 64 KiB have gone in small records, every record
# of the body holds exactly one whole DATA frame, none over 16 KiB, and
# the body is byte-exact. Files past the memory cache (256 KiB) are read
# so; a file in memory goes in the same frames, copied into records.
# A Python client (Debian's python3-h2, over t/lib/tlsrecords.py) reads
# the records off the socket itself.
use strict;
use warnings;
use Test::More;
use IPC::Open3 qw(open3);
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;
use TLSTest;

sub counted { my ($n) = @_; substr(join('', map { pack 'N', $_ } 0 .. $n / 4), 0, $n) }
my %body = ('read.bin' => counted(600 * 1024 + 5), 'mem.bin' => counted(200 * 1024 + 3), 'empty.bin' => '');
my ($c) = TLSTest::certs('a.test');
my ($s, $tport) = TLSTest::server(
    listen => qq{{ "127.0.0.1:\$PORT", { "127.0.0.1:\$TLSPORT", tls = true, http2 = true } }},
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    files  => { map { ("www/$_" => $body{$_}) } keys %body },
);

# For each path, on one connection, one after the other: per application
# data record of the response, its plain text size and the DATA frames it
# ended (as "size:f1+f2"), then the body's md5. TLS 1.3 with AES-GCM: a
# record's plain text is its length - 17.
my $PY = <<'PY';
import hashlib, sys
import h2.config, h2.connection, h2.events, h2.settings
sys.path.insert(0, "t/lib")
from tlsrecords import Client
t = Client(int(sys.argv[1]), alpn=["h2"])
if t.tls.selected_alpn_protocol() != "h2": sys.exit("no h2")
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection()
c.increment_flow_control_window(1 << 30)
c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
t.write(c.data_to_send())
def get(path):
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":path", path), (":authority", "a.test")], end_stream=True)
    t.write(c.data_to_send())
    recs, body = [], b""
    while True:
        plain = t.open(t.record())
        frames, done = [], False
        for e in c.receive_data(plain):
            if isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
                frames.append(str(len(e.data)))
                body += e.data
                c.acknowledge_received_data(e.flow_controlled_length, sid)
            if isinstance(e, h2.events.StreamEnded) and e.stream_id == sid:
                done = True
        d = c.data_to_send()
        if d: t.write(d)
        if plain: recs.append("%d:%s" % (len(plain), "+".join(frames)))
        if done: return recs, body
for p in sys.argv[2:]:
    recs, body = get(p)
    print(p, ",".join(recs), len(body), hashlib.md5(body).hexdigest())
PY

my $pid = open3(my $in, my $out, undef, '/usr/bin/python3', '-c', $PY, $tport, '/read.bin', '/mem.bin', '/empty.bin', '/read.bin');
close $in;
my $got = do { local $/; <$out> } // '';
waitpid($pid, 0);
is($? >> 8, 0, 'the client read the files') or diag($got);
my @lines = map { [split / /] } split /\n/, $got;
is(scalar @lines, 4, 'four responses') or diag($got);

for my $i (0 .. $#lines) {
    my ($path, $recs, $len, $md5) = @{ $lines[$i] };
    ($recs, $len, $md5) = ('', @{ $lines[$i] }[1, 2]) if @{ $lines[$i] } == 3;    # no DATA record
    my $name = substr($path, 1);
    ok($len == length $body{$name} && $md5 eq md5_hex($body{$name}), "$path ($i): byte-exact");
    my @r = map { my ($n, $f) = split /:/; [$n, [grep { length } split /\+/, $f // '']] } split /,/, $recs;
    ok(!(grep { $_->[0] > 16384 } @r), "$path ($i): no record over 16 KiB");
    ok(!(grep { $_ > 16375 } map { @{ $_->[1] } } @r), "$path ($i): no DATA frame over 16375 bytes");
    # The last response's connection has long passed its first 64 KiB:
    # each full-size record of it is one frame and its header, exactly.
    next unless $i == 3;
    my @full = grep { $_->[0] > 16000 } @r;
    cmp_ok(scalar @full, '>=', 30, "$path ($i): the body went in records of 16 KiB or so") or diag($recs);
    my @odd = grep { @{ $_->[1] } != 1 || $_->[1][0] + 9 != $_->[0] } @full;
    ok(!@odd, "$path ($i): each is one DATA frame and its header, exactly")
      or diag(join ' ', map { "$_->[0]:" . join('+', @{ $_->[1] }) } @odd[0 .. ($#odd < 5 ? $#odd : 5)]);
}

$s->stop;
done_testing();
