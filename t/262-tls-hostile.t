# What a hostile or broken client does to the TLS transport (issue 19): a
# real ClientHello (openssl's) cut at every byte boundary still gets its
# ServerHello; garbage and a ClientHello with a broken server_name get an
# alert or a close and nothing else; a client that stops mid-handshake is
# closed at handshake_timeout while another is served at once; a plain
# request's 400 does not wait for the handshake timeout. The server stays
# up throughout.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c) = TLSTest::certs('a.test');
my ($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n},
    files  => { 'www/index.html' => "a\n" },
    server => { tls => \'{ handshake_timeout = 1 }' },
);

# A ClientHello as openssl sends it: caught by a listener of our own.
my $l = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die $!;
my $pid = fork // die;
if ($pid == 0) {
    open STDIN, '<', '/dev/null';
    open STDOUT, '>', '/dev/null';
    open STDERR, '>', '/dev/null';
    exec 'timeout', '10', 'openssl', 's_client', '-connect', '127.0.0.1:' . $l->sockport, '-servername', 'a.test';
    exit 127;
}
my $a = $l->accept or die "accept: $!";
my $hello = read_record($a, 10);
close $a;
kill 'TERM', $pid;
waitpid $pid, 0;
ok(length($hello) > 100 && substr($hello, 0, 1) eq "\x16", 'a ClientHello caught (' . length($hello) . ' bytes)');

# Every cut: the first part, a moment, the rest; a ServerHello comes back.
my @bad;
for my $k (1 .. length($hello) - 1) {
    my $sock = conn();
    syswrite $sock, substr($hello, 0, $k);
    sleep 0.002;
    syswrite $sock, substr($hello, $k);
    my $rec = read_record($sock, 5);
    push @bad, $k unless length($rec) >= 6 && substr($rec, 0, 1) eq "\x16" && substr($rec, 5, 1) eq "\x02";
    close $sock;
}
is("@bad", '', 'a ServerHello after the ClientHello cut at each of ' . (length($hello) - 1) . ' places');

# The same ClientHello in records of one payload byte each (its message
# header cut across four records), and in records of 1 to 8 bytes: the
# ClientHello length check reads across records; a ServerHello comes back.
for my $size (1 .. 8) {
    my $msg = substr($hello, 5);
    my $wire = '';
    $wire .= "\x16\x03\x01" . pack('n', length($_)) . $_ for unpack("(a$size)*", $msg);
    my $sock = conn();
    syswrite $sock, $wire;
    my $rec = read_record($sock, 5);
    push @bad, "records of $size" unless length($rec) >= 6 && substr($rec, 5, 1) eq "\x02";
    close $sock;
}
is("@bad", '', 'a ServerHello after the ClientHello in records of 1 to 8 bytes');

# Garbage: an alert or a close, never an answer of another kind.
srand(1);
for my $i (1 .. 50) {
    my $junk = "\x16\x03\x01" . pack('n', 200) . join('', map { chr int rand 256 } 1 .. 200);
    my $sock = conn();
    syswrite $sock, $junk;
    my $rec = read_record($sock, 5);
    push @bad, $i if length $rec && substr($rec, 0, 1) ne "\x15";    # an alert record, or nothing
    close $sock;
}
is("@bad", '', 'random handshake bytes: an alert or a close');

# A server_name extension that lies about its lengths: decode_error.
(my $lie = $hello) =~ s/(\x00\x00)(..)(..)\x00(..)a\.test/$1$2$3\x00\xff\xffa.test/s;
isnt($lie, $hello, 'a ClientHello whose host_name length is 65535');
my $sock = conn();
syswrite $sock, $lie;
my $rec = read_record($sock, 5);
is(substr($rec, 0, 1), "\x15", 'gets an alert');
is(ord(substr($rec, 6, 1)), 50, 'decode_error') if length $rec >= 7;
close $sock;

# Stopped mid-handshake: closed at handshake_timeout (1 s), and meanwhile a
# whole handshake and request go through at once.
my @stalled = map { my $x = conn(); syswrite $x, substr($hello, 0, 40); $x } 1 .. 20;
my $t0 = time;
like($s->curl('-k', "https://127.0.0.1:$tp/"), qr/^a$/, 'a client beside 20 stalled handshakes is served');
ok(time - $t0 < 1, 'at once (' . sprintf('%.3f', time - $t0) . ' s)');
my $closed = 0;
for my $x (@stalled) {
    my $sel = IO::Select->new($x);
    $closed++ if $sel->can_read(5) && !sysread($x, my $b, 10);
}
is($closed, 20, 'the stalled ones are closed (handshake_timeout 1 s)');
ok(time - $t0 < 5, 'within the timeout and a little');

$sock = conn();
$t0 = time;
syswrite $sock, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
my $ans = read_record($sock, 5, 1);
like($ans, qr/^HTTP\/1\.1 400 /, 'plain HTTP: the 400 at once');
ok(time - $t0 < 0.9, 'not after the handshake timeout');

is($s->curl('-k', "https://127.0.0.1:$tp/"), "a\n", 'the server is still up');
$s->stop;
done_testing;

sub conn {
    my $x = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $tp, Proto => 'tcp', Timeout => 5)
      or die "connect: $!";
    setsockopt($x, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
    return $x;
}

# One TLS record from $fh (the 5-byte head says its length), or what came
# before a close or $timeout seconds; $raw: whatever comes, until close.
sub read_record {
    my ($fh, $timeout, $raw) = @_;
    my $buf = '';
    my $sel = IO::Select->new($fh);
    my $end = time + $timeout;
    while (time < $end) {
        last if !$raw && length($buf) >= 5 && length($buf) >= 5 + unpack('n', substr($buf, 3, 2));
        last unless $sel->can_read($end - time);
        my $n = sysread($fh, $buf, 65536, length $buf);
        last unless $n;
    }
    return $buf;
}
