# issue 11 review of real_ip and the PROXY protocol: paths t/125-128 do not
# cover. The real_ip answer is per request on a keep-alive connection; a
# dual-stack listener (":PORT") sees IPv4 peers as ::ffff:a.b.c.d and must
# still trust "127.0.0.1"; a PROXY v2 header of 2048 bytes in front of a
# request does not eat into max_header_bytes; and a reload that swaps which
# of two kept addresses takes the PROXY protocol keeps every open
# connection on the setting it was accepted with.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Socket;
use Luxd;

my $WHO = 'policy = function(r) return r:respond(200, r.remote_addr) end';
sub conn {
    my ($port, $from) = @_;
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, LocalAddr => $from // '127.0.0.1',
                                     Proto => 'tcp', Timeout => 5) or die "connect: $!";
    return Luxd::Conn->new($sock);
}
sub ask {
    my ($port, $bytes, $from) = @_;
    my $c = conn($port, $from);
    $c->send($bytes);
    my $r = $c->response(timeout => 3);
    my $closed = $c->wait_closed(2);
    $c->close;
    return $r ? ($r->{status} == 200 ? $r->{body} : "status $r->{status}") : ($closed ? 'closed' : 'none');
}
sub req {
    my ($close, @h) = @_;
    my $x = "GET / HTTP/1.1\r\nHost: localhost\r\n";
    $x .= shift(@h) . ': ' . shift(@h) . "\r\n" while @h;
    return $x . ($close ? "Connection: close\r\n" : '') . "\r\n";
}
my $PP = "PROXY TCP4 203.0.113.4 127.0.0.1 1 80\r\n";

subtest 'keep-alive: the header is read again for each request; a dual-stack listener' => sub {
    my $s = Luxd->new(
        server => { listen => \qq[{ { ":\$PORT", proxy_protocol = true } }], max_header_bytes => 1024,
                    real_ip => \'{ from = { "127.0.0.1" }, header = "X-Forwarded-For" }' },
        config => qq{vhost "localhost" { default = true, root = "\$DIR/www", $WHO }\n},
    );
    my $c = conn($s->port);
    $c->send("PROXY TCP4 127.0.0.1 127.0.0.1 1 80\r\n" . req(0, 'X-Forwarded-For' => '198.51.100.1'));
    my @got = ($c->response(timeout => 3)->{body});
    $c->send(req(0, 'X-Forwarded-For' => '198.51.100.2'));
    push @got, $c->response(timeout => 3)->{body};
    $c->send(req(1));
    push @got, $c->response(timeout => 3)->{body};
    $c->close;
    is_deeply \@got, ['198.51.100.1', '198.51.100.2', '127.0.0.1'], 'three requests, three answers';
    is ask($s->port, $PP . req(1)), '203.0.113.4', 'dual-stack: 127.0.0.1 arrives as ::ffff:127.0.0.1 and is trusted';
    is ask($s->port, "PROXY TCP6 2001:db8::4 ::1 1 80\r\n" . req(1)), '2001:db8::4', 'v1 TCP6 there too';
    is ask($s->port, $PP . req(1, 'X-Forwarded-For' => '198.51.100.3'), '127.0.0.2'), '127.0.0.2',
        'an untrusted IPv4 peer on it: neither PROXY nor header believed';
    # 2048 bytes of v2 in front of a request at the header limit, and one past.
    my $v2 = "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x21, 0x11, 2048)
      . pack('a4a4nn', inet_aton('198.51.100.9'), inet_aton('127.0.0.1'), 1, 80) . ("\0" x 2036);
    my $local = "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x20, 0x00, 0);
    my $base = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Pad: ";
    my ($at) = grep { ask($s->port, $local . $base . ('a' x $_) . "\r\n\r\n") =~ /431/ } 900 .. 1024;
    ok $at, 'behind a 16-byte LOCAL header, a pad of ' . ($at // '?') . ' bytes is the first 431';
    is ask($s->port, $v2 . $base . ('a' x ($at - 1)) . "\r\n\r\n"), '198.51.100.9',
        'after a 2048-byte v2 header: one less is taken';
    is ask($s->port, $v2 . $base . ('a' x $at) . "\r\n\r\n"), 'status 431', 'and that one is refused';
    $s->stop;
};

subtest 'a reload swaps proxy_protocol between two kept addresses' => sub {
    my $p2 = Luxd::free_port();
    my $cfg = join "\n",
      'server {',
      '  listen = { LISTEN },',
      '  workers = 2, error_log = "$DIR/error.log", pid_file = "$DIR/luxd.pid", access_log = false,',
      '  real_ip = { from = "127.0.0.1" }, header_timeout = 5,',
      '}',
      qq{vhost "localhost" { default = true, root = "\$DIR/www", $WHO }}, '';
    my $mk = sub { (my $c = $cfg) =~ s/LISTEN/$_[0]/; $c };
    my $s = Luxd->new(config => $mk->(qq[{ "127.0.0.1:\$PORT", proxy_protocol = true }, "127.0.0.1:$p2"]));
    my $p1 = $s->port;
    is ask($p1, $PP . req(1)) . ' ' . ask($p2, req(1)), '203.0.113.4 127.0.0.1', 'first: PROXY on the first address only';
    my $half = conn($p1);
    $half->send(substr($PP, 0, 10));
    my $ka = conn($p2);
    $ka->send(req(0));
    my $r = $ka->response(timeout => 3);
    is $r && $r->{body}, '127.0.0.1', 'a keep-alive connection on the plain one';
    $s->write_config(Luxd::_subst($mk->(qq[{ "127.0.0.1:$p2", proxy_protocol = true }, "127.0.0.1:\$PORT"]), $p1, $s->dir));
    like $s->reload // 'timeout', qr/^ok generation 2 /, 'reload: the other way round, in the other order';
    $half->send(substr($PP, 10) . req(1));
    $r = $half->response(timeout => 3);
    is $r && $r->{body}, '203.0.113.4', 'a header half sent before the reload is still a PROXY header';
    $half->close;
    $ka->send(req(1));
    $r = $ka->response(timeout => 3);
    is $r && $r->{body}, '127.0.0.1', 'the keep-alive connection still speaks plain HTTP';
    $ka->close;
    my @a = map { ask($p1, req(1)) } 1 .. 4;
    my @b = map { ask($p2, $PP . req(1)) } 1 .. 4;
    is_deeply [@a, @b], [('127.0.0.1') x 4, ('203.0.113.4') x 4], 'new connections: both workers follow the new entries';
    $s->stop;
};

done_testing;
