# issue 11, behind a balancer: the PROXY protocol, v1 and v2, on a listener
# with proxy_protocol = true. The header is taken split at any byte; the
# bytes after it are the first request (pipelined ones too); a missing or
# malformed header closes the connection (logged at info); LOCAL, UNKNOWN
# and AF_UNIX keep the peer; and a header from a peer real_ip does not
# trust (127.0.0.2) is read and ignored: a forged one changes nothing.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Luxd;

my $FMT = '$remote_addr|$realip_remote_addr|$status|$request_uri';
my $plain_port = Luxd::free_port();
my $s = Luxd->new(
    server => {
        listen            => \qq[{ { "127.0.0.1:\$PORT", proxy_protocol = true }, "127.0.0.1:$plain_port" }],
        real_ip           => \'{ from = { "127.0.0.1" } }',
        access_log        => { path => '$DIR/access.log', format => $FMT },
        access_log_buffer => 0,
        # 10 s for the exchanges (one byte per read takes a while on a
        # loaded machine); the header_timeout cases below reload to 1 s.
        header_timeout    => 10,
    },
    config => <<'EOF',
vhost "localhost" {
  default = true, root = "$DIR/www",
  policy = function(r) if r.path == "/who" then return r:respond(200, r.remote_addr) end end,
  access = { deny { prefix = "/secret", from = "192.0.2.0/24" } },
}
EOF
    files => { 'www/index.html' => "home\n", 'www/secret/index.html' => "secret\n" },
);

sub conn {
    my ($from, $port) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $port // $s->port, LocalAddr => $from // '127.0.0.1',
        Proto => 'tcp', Timeout => 5,
    ) or die "connect: $!";
    setsockopt($sock, Socket::IPPROTO_TCP(), Socket::TCP_NODELAY(), 1);
    return Luxd::Conn->new($sock);
}
my $WHO = "GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n";
my $WHO_CLOSE = "GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

# Sends the pieces (a short pause between them, so that each is its own
# read) and returns the bodies of the responses and whether it closed.
sub exchange {
    my ($pieces, %o) = @_;
    my $c = conn($o{from});
    for my $i (0 .. $#$pieces) {
        sleep 0.01 if $i;
        $c->send($pieces->[$i]);
    }
    my @r = $c->responses($o{n} // 1, timeout => 10);
    # Well under header_timeout (10 s): a close seen is Connection: close.
    my $closed = $c->wait_closed($o{wait} // 5);
    $c->close;
    return ([map { $_->{status} == 200 ? $_->{body} : "status $_->{status}" } @r], $closed);
}

sub v1 { my ($src, $dst, $sp, $dp, $p) = @_; "PROXY " . ($p // 'TCP4') . " $src $dst $sp $dp\r\n" }
sub v2 {
    my ($cmd, $fam, $body) = @_;
    "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x20 | $cmd, $fam, length $body) . $body;
}
sub v2_tcp4 { my ($src, $dst) = @_; v2(1, 0x11, pack('a4a4nn', Socket::inet_aton($src), Socket::inet_aton($dst), 51000, 80)) }
sub v2_tcp6 {
    my ($src, $dst) = @_;
    v2(1, 0x21, pack('a16a16nn', Socket::inet_pton(Socket::AF_INET6(), $src), Socket::inet_pton(Socket::AF_INET6(), $dst), 51000, 80));
}

sub last_log {
    my $want = shift;
    my $t = time + 10;
    my @l;
    while (time < $t) {
        @l = split /\n/, $s->access_log;
        last if @l >= $want;
        sleep 0.02;
    }
    return split /\|/, $l[-1] // '';
}
my $n = 0;

subtest 'v1 and v2 from a trusted balancer' => sub {
    my ($b) = exchange([v1('203.0.113.7', '127.0.0.1', 51000, 80) . $WHO_CLOSE]);
    is_deeply $b, ['203.0.113.7'], 'v1 TCP4: r.remote_addr is the PROXY source';
    my @f = last_log(++$n);
    is_deeply [@f[0, 1]], ['203.0.113.7', '127.0.0.1'], '$remote_addr the client, $realip_remote_addr the balancer';
    ($b) = exchange([v1('2001:db8::7', '::1', 51000, 443, 'TCP6') . $WHO_CLOSE]);
    is_deeply $b, ['2001:db8::7'], 'v1 TCP6';
    ($b) = exchange([v2_tcp4('198.51.100.20', '127.0.0.1') . $WHO_CLOSE]);
    is_deeply $b, ['198.51.100.20'], 'v2 TCP4';
    ($b) = exchange([v2_tcp6('2001:db8:1::20', '::1') . $WHO_CLOSE]);
    is_deeply $b, ['2001:db8:1::20'], 'v2 TCP6';
    # TLVs after the addresses: a unique id (0x05) and padding (0x04).
    my $tlv = pack('Cn', 0x05, 16) . ('u' x 16) . pack('Cn', 0x04, 100) . ("\0" x 100);
    ($b) = exchange([v2(1, 0x11, pack('a4a4nn', Socket::inet_aton('198.51.100.21'), Socket::inet_aton('127.0.0.1'), 1, 80) . $tlv) . $WHO_CLOSE]);
    is_deeply $b, ['198.51.100.21'], 'v2 with TLVs: skipped';
    $n += 4;
};

subtest 'LOCAL, UNKNOWN and AF_UNIX keep the peer' => sub {
    my ($b) = exchange([v2(0, 0x00, '') . $WHO_CLOSE]);
    is_deeply $b, ['127.0.0.1'], 'v2 LOCAL (a balancer\'s health check)';
    ($b) = exchange([v2(0, 0x11, pack('a4a4nn', Socket::inet_aton('203.0.113.1'), Socket::inet_aton('127.0.0.1'), 1, 80)) . $WHO_CLOSE]);
    is_deeply $b, ['127.0.0.1'], 'v2 LOCAL with addresses: they are ignored';
    ($b) = exchange(["PROXY UNKNOWN\r\n" . $WHO_CLOSE]);
    is_deeply $b, ['127.0.0.1'], 'v1 UNKNOWN';
    ($b) = exchange([v2(1, 0x31, "\0" x 216) . $WHO_CLOSE]);
    is_deeply $b, ['127.0.0.1'], 'v2 AF_UNIX';
    $n += 4;
};

subtest 'split at every byte, and the request in the same read' => sub {
    for my $h (['v1', v1('203.0.113.8', '127.0.0.1', 4242, 80)], ['v2', v2_tcp4('203.0.113.9', '127.0.0.1')]) {
        my ($name, $hdr) = @$h;
        my $all = $hdr . $WHO_CLOSE;
        my ($want) = $hdr =~ /(203\.0\.113\.\d)/ ? ($1) : ('203.0.113.9');
        my @bad;
        for my $cut (1 .. length($hdr) + 5) {
            my ($b) = exchange([substr($all, 0, $cut), substr($all, $cut)]);
            push @bad, "$cut: @$b" unless "@$b" eq $want;
        }
        is "@bad", '', "$name: cut at each of the first " . (length($hdr) + 5) . " bytes, the same client";
        my @one = split //, $hdr;
        my ($b) = exchange([@one, $WHO_CLOSE]);
        is_deeply $b, [$want], "$name: one byte per read";
        $n += length($hdr) + 6;
    }
    # Pipelined requests after the header, in one write.
    my ($b, $closed) = exchange([v1('203.0.113.10', '127.0.0.1', 1, 80) . $WHO . $WHO . $WHO_CLOSE], n => 3);
    is_deeply $b, ['203.0.113.10', '203.0.113.10', '203.0.113.10'], 'three pipelined requests after the header';
    ok $closed, 'closed after the last';
    $n += 3;
};

subtest 'a forged header from an untrusted peer is ignored' => sub {
    my ($b) = exchange([v1('192.0.2.99', '127.0.0.1', 1, 80) . $WHO_CLOSE], from => '127.0.0.2');
    is_deeply $b, ['127.0.0.2'], 'v1 from 127.0.0.2: the peer stands';
    my @f = last_log(++$n);
    is_deeply [@f[0, 1]], ['127.0.0.2', '127.0.0.2'], 'and the log shows the peer';
    ($b) = exchange([v2_tcp4('192.0.2.99', '127.0.0.1') . "GET /secret/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"],
                    from => '127.0.0.2');
    is_deeply $b, ["secret\n"], 'deny from 192.0.2.0/24 does not apply to a forged v2 source';
    ($b) = exchange([v2_tcp4('192.0.2.99', '127.0.0.1') . "GET /secret/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"]);
    is_deeply $b, ['status 403'], 'the same header from the trusted balancer: 403';
    @f = last_log(++$n + 1);
    is_deeply [@f[0, 1, 2]], ['192.0.2.99', '127.0.0.1', '403'], 'the log shows who was denied';
    $n++;
};

subtest 'no header, a malformed one, or one too slow: closed' => sub {
    my $before = () = $s->access_log =~ /\n/g;
    my @cases = (
        ['a plain HTTP request' => $WHO_CLOSE],
        ['lower-case proxy' => "proxy TCP4 203.0.113.1 127.0.0.1 1 80\r\n$WHO_CLOSE"],
        ['bare LF' => "PROXY TCP4 203.0.113.1 127.0.0.1 1 80\n$WHO_CLOSE"],
        ['a bad address' => "PROXY TCP4 203.0.113.256 127.0.0.1 1 80\r\n$WHO_CLOSE"],
        ['v1 at 108 bytes' => "PROXY UNKNOWN " . ('x' x 92) . "\r\n$WHO_CLOSE"],
        ['v2 version 3' => "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x31, 0x11, 12) . ("\0" x 12) . $WHO_CLOSE],
        ['v2 longer than 2048' => "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x21, 0x11, 2049) . ("\0" x 2049) . $WHO_CLOSE],
        ['a broken v2 signature' => "\r\n\r\n\0\r\nQUIX\n" . pack('CCn', 0x21, 0x11, 12) . ("\0" x 12) . $WHO_CLOSE],
        ['binary garbage' => join('', map { chr(($_ * 37) % 256) } 1 .. 300)],
    );
    for my $case (@cases) {
        my ($name, $bytes) = @$case;
        my $c = conn();
        $c->send($bytes);
        ok $c->wait_closed(5), "$name: closed";
        is $c->buffered, '', "$name: nothing sent (no HTTP answer to a client that did not speak it)";
        $c->close;
    }
    # The limits at the edge: 107 bytes and 2048 of v2 are taken.
    my ($b) = exchange(["PROXY UNKNOWN " . ('x' x 91) . "\r\n" . $WHO_CLOSE]);
    is_deeply $b, ['127.0.0.1'], 'v1 at 107 bytes: taken';
    ($b) = exchange([v2(1, 0x11, pack('a4a4nn', Socket::inet_aton('203.0.113.3'), Socket::inet_aton('127.0.0.1'), 1, 80) . ("\0" x 2036)) . $WHO_CLOSE]);
    is_deeply $b, ['203.0.113.3'], 'v2 of 2048 bytes: taken';
    $n += 2;
    # A header cut short, then the client closes its side, or says nothing more.
    my $c = conn();
    $c->send(substr(v1('203.0.113.1', '127.0.0.1', 1, 80), 0, 20));
    shutdown($c->sock, 1);
    ok $c->wait_closed(5), 'a header cut short by the client\'s close: closed';
    $c->close;
    # header_timeout 1 s from here on. The deadline runs from the accept,
    # after t0; the upper bound tells it from no deadline at all.
    (my $cfg = $s->file('luxd.lua')) =~ s/header_timeout = 10,/header_timeout = 1,/ or die 'no header_timeout in the config';
    $s->write_config($cfg);
    like $s->reload // $s->reload_error, qr/^ok /, 'reload to header_timeout = 1';
    my $t0 = time;
    $c = conn();
    $c->send(substr(v1('203.0.113.1', '127.0.0.1', 1, 80), 0, 20));
    ok $c->wait_closed(10), 'a header that never ends: closed';
    my $dt = time - $t0;
    ok $dt > 0.9 && $dt < 8, sprintf('by header_timeout (1 s): %.2f s', $dt);
    $c->close;
    # The header alone, then nothing: the first request's header_timeout.
    $t0 = time;
    $c = conn();
    $c->send(v1('203.0.113.1', '127.0.0.1', 1, 80));
    ok $c->wait_closed(10), 'a header and no request: closed';
    $dt = time - $t0;
    ok $dt > 0.9 && $dt < 8, sprintf('by header_timeout too: %.2f s', $dt);
    is $c->buffered, '', 'without a 408 (no request began)';
    $c->close;
    my $after = () = $s->access_log =~ /\n/g;
    is $after - $before, 2, 'only the two edge requests were logged';
    like $s->error_log, qr/\[info\].*PROXY protocol: not a PROXY protocol header from 127\.0\.0\.1; connection closed/,
        'a connection without a header is logged at info';
    like $s->error_log, qr/PROXY protocol: v1: no CRLF within 107 bytes from 127\.0\.0\.1/, 'with why';
};

subtest 'a listener without proxy_protocol takes the header for a request' => sub {
    my $c = conn('127.0.0.1', $plain_port);
    $c->send(v1('203.0.113.1', '127.0.0.1', 1, 80) . $WHO_CLOSE);
    my $r = $c->response(timeout => 5);
    is $r && $r->{status}, 400, 'plain listener: "PROXY ..." is a bad request line';
    $c->close;
    $c = conn('127.0.0.1', $plain_port);
    $c->send($WHO_CLOSE);
    $r = $c->response(timeout => 5);
    is $r && $r->{body}, '127.0.0.1', 'and plain HTTP works there';
};

$s->stop;
done_testing;
