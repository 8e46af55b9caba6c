# The test backend of the proxy tests (t/lib/Luxd/Backend.pm), checked
# directly over raw sockets: every behaviour its POD promises, the request
# log, keep-alive and connection numbering, its modes, and that it dies
# with the test. No luxd here: this must pass whatever the proxy does.
use strict;
use warnings;
use Test::More;
use IO::Socket::UNIX;
use POSIX ();
use Socket qw(SOCK_STREAM SHUT_WR);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd qw(refused);
use Luxd::Backend qw(body body_piece hdr);

my $be = Luxd::Backend->start(name => 'be');

sub client {
    my ($b) = @_;
    my $s = $b->path
      ? IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $b->path)
      : IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $b->port, Proto => 'tcp');
    $s or die "connect to the backend: $!";
    $s->autoflush(1);
    return Luxd::Conn->new($s);
}

# Reads until $check accepts the buffer, EOF or $timeout s.
sub read_until {
    my ($c, $check, $timeout) = @_;
    my $deadline = time + ($timeout // 3);
    until ($check->($c->{buf})) {
        last if $c->{eof} || (my $left = $deadline - time) <= 0;
        $c->fill($left);
    }
    return $check->($c->{buf});
}

# An exact response as a regex: {ID} stands for the id fields of the first
# request on a connection.
sub lit {
    my ($s) = @_;
    my $r = join '', map { $_ eq '{ID}' ? "X-Conn: \\d+\r\nX-Req: 1\r\nX-Backend: be\r\n" : quotemeta } split /(\{ID\})/, $s;
    return qr/\A$r\z/s;
}
sub ok200 { my ($len, $extra) = @_; "HTTP/1.1 200 OK\r\n{ID}Content-Type: text/plain\r\nContent-Length: $len\r\n" . ($extra // '') . "\r\n" }
my $OK3 = "Content-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n";
my $bin = join '', map { chr } 0 .. 255;

# name => [request (a path, Luxd::request options, or \raw bytes), expected
# bytes (regex or code), then: keep (a next request on the connection is answered as its
# second) | closed (FIN) | reset, minimum seconds].
my @cases = (
    ['/ok/N'            => '/ok/3000', lit(ok200(3000) . body(3000)), 'keep'],
    ['HEAD /ok/N'       => { method => 'HEAD', path => '/ok/3000' }, lit(ok200(3000)), 'keep'],
    ['/chunked/N/M'     => '/chunked/10/4', lit("HTTP/1.1 200 OK\r\n{ID}Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                            . "4\r\n" . body_piece(0, 4) . "\r\n4\r\n" . body_piece(4, 4) . "\r\n2\r\n" . body_piece(8, 2) . "\r\n0\r\n\r\n"), 'keep'],
    ['chunked trailer'  => '/chunked/5/5?trailer', lit("HTTP/1.1 200 OK\r\n{ID}Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                            . "Trailer: X-Trailer\r\n\r\n5\r\n" . body(5) . "\r\n0\r\nX-Trailer: t\r\n\r\n"), 'keep'],
    ['/close/N'         => '/close/500', lit("HTTP/1.1 200 OK\r\n{ID}Content-Type: text/plain\r\nConnection: close\r\n\r\n" . body(500)), 'closed'],
    ['/slow/N/ms/P'     => '/slow/10/100/5', lit(ok200(10) . body(10)), 'keep', 0.19],
    ['/slow/N/ms'       => '/slow/20/20', lit(ok200(20) . body(20)), 'keep', 0.19],
    ['/sleep/ms'        => '/sleep/300', lit(ok200(10) . "slept 300\n"), 'keep', 0.29],
    ['/reset-mid-body'  => '/reset-mid-body/1000', lit(ok200(1000) . body(500)), 'reset'],
    ['/lie-short'       => '/lie-short/1000', lit(ok200(1000) . body(500)), 'closed'],
    ['/lie-long'        => '/lie-long/10', lit(ok200(10) . body(10) . "HTTP/1.1 200 OK\r\nX-Smuggled: yes\r\nContent-Length: 9\r\n\r\nsmuggled\n"), 'keep'],
    ['/two-cl'          => '/two-cl', lit("HTTP/1.1 200 OK\r\n{ID}Content-Length: 5\r\nContent-Length: 10\r\n\r\n" . body(10)), 'keep'],
    ['/cl-te'           => '/cl-te', lit("HTTP/1.1 200 OK\r\n{ID}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nc\r\nhello cl-te\n\r\n0\r\n\r\n"), 'keep'],
    ['/bare-cr'         => '/bare-cr', lit("HTTP/1.1 200 OK\r\n{ID}X-Bare: one\rX-Two: two\r\n$OK3"), 'keep'],
    ['/obs-fold'        => '/obs-fold', lit("HTTP/1.1 200 OK\r\n{ID}X-Fold: first\r\n second\r\n$OK3"), 'keep'],
    ['/space-colon'     => '/space-colon', lit("HTTP/1.1 200 OK\r\n{ID}X-Space : v\r\n$OK3"), 'keep'],
    ['/huge-headers/N'  => '/huge-headers/20000', sub {
        my $e = index($_[0], "\r\n\r\n");
        $e + 4 == 20000 && substr($_[0], $e + 4) eq "ok\n" && $_[0] =~ /\AHTTP\/1\.1 200 OK\r\n/ && $_[0] =~ /^X-Pad-0019: a+\r$/m
    }, 'keep'],
    ['/huge-headers odd' => '/huge-headers/1234', sub { index($_[0], "\r\n\r\n") + 4 == 1234 && $_[0] =~ /\r\n\r\nok\n\z/ }, 'keep'],
    ['/http2'           => '/http2', lit("HTTP/2.0 200 OK\r\n{ID}$OK3"), 'keep'],
    ['/http09'          => '/http09', lit("hello http/0.9\n"), 'closed'],
    ['GET /head-body'   => '/head-body', lit(ok200(16) . body(16)), 'keep'],
    ['HEAD /head-body'  => { method => 'HEAD', path => '/head-body' }, lit(ok200(16) . body(16)), 'keep'],
    ['/204-body'        => '/204-body', lit("HTTP/1.1 204 No Content\r\n{ID}\r\nbody after 204\n"), 'keep'],
    ['/304-body'        => '/304-body', lit("HTTP/1.1 304 Not Modified\r\n{ID}Content-Length: 15\r\n\r\nbody after 304\n"), 'keep'],
    ['/100'             => '/100', lit("HTTP/1.1 100 Continue\r\n\r\n" . ok200(10) . "after 100\n"), 'keep'],
    ['/103'             => '/103', lit("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n"
                            . ok200(10, "Link: </style.css>; rel=preload; as=style\r\n") . "after 103\n"), 'keep'],
    ['/status/503'      => '/status/503', lit("HTTP/1.1 503 Service Unavailable\r\n{ID}Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nstatus 503\n"), 'keep'],
    ['/status/204'      => '/status/204', lit("HTTP/1.1 204 No Content\r\n{ID}\r\n"), 'keep'],
    ['/status/799'      => '/status/799', qr/\AHTTP\/1\.1 400 /, 'keep'],
    ['/echo binary'     => { method => 'POST', path => '/echo', body => $bin x 300 }, lit(ok200(76800) . ($bin x 300)), 'keep'],
    ['/echo chunked'    => \"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
                           lit(ok200(5) . 'hello'), 'keep'],
    ['/expect no Expect' => { method => 'POST', path => '/expect', body => 'hello' }, lit(ok200(27) . "expect=0 sent_100=0 body=5\n"), 'keep'],
    ['/expect/417'      => { method => 'POST', path => '/expect/417', body => '', headers => ['Expect' => '100-continue', 'Content-Length' => 5] },
                           lit("HTTP/1.1 417 Expectation Failed\r\n{ID}Content-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nstatus 417\n"), 'closed'],
    ['/set-cookie'      => '/set-cookie', lit("HTTP/1.1 200 OK\r\n{ID}Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT\r\n"
                            . "Set-Cookie: c=3; HttpOnly\r\n$OK3"), 'keep'],
    ['/hop'             => '/hop', lit("HTTP/1.1 200 OK\r\n{ID}Connection: X-Foo, Keep-Alive\r\nX-Foo: hop\r\nKeep-Alive: timeout=5, max=100\r\n"
                            . "Upgrade: h2c\r\nTrailer: X-Trailer\r\nProxy-Authenticate: Basic realm=\"hop\"\r\nProxy-Connection: keep-alive\r\n"
                            . "TE: trailers\r\nX-End-To-End: kept\r\n$OK3"), 'keep'],
    ['/ws without Upgrade' => '/ws', qr/\AHTTP\/1\.1 426 /, 'keep'],
    ['/slow-upload'     => { method => 'PUT', path => '/slow-upload/1000/20', body => 'u' x 5000 }, lit(ok200(9) . "got 5000\n"), 'keep', 0.07],
    ['unknown path'     => '/nope', lit("HTTP/1.1 404 Not Found\r\n{ID}Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n"), 'keep'],
    ['HTTP/1.0'         => { path => '/ok/5', version => '1.0' }, lit(ok200(5, '') =~ s/\r\n\r\n\z/\r\nConnection: close\r\n\r\n/r . body(5)), 'closed'],
    ['bad: CL and TE'   => { method => 'POST', path => '/echo', body => 'x', headers => ['Transfer-Encoding' => 'chunked', 'Content-Length' => 1] },
                           qr/\AHTTP\/1\.1 400 Bad Request\r\n.*Connection: close\r\n\r\nbad request: Content-Length and Transfer-Encoding\n\z/s, 'closed'],
);

for my $case (@cases) {
    my ($name, $req, $want, $after, $min) = @$case;
    subtest $name => sub {
        my $c = client($be);
        my $t0 = time;
        $c->send(ref $req eq 'SCALAR' ? $$req : Luxd::request(ref $req ? %$req : (path => $req)));
        my $check = ref $want eq 'CODE' ? $want : sub { $_[0] =~ $want };
        ok(read_until($c, $check, 10), 'the bytes the POD promises')
          or diag(Luxd::_short($c->{buf}));
        cmp_ok(time - $t0, '>=', $min, "took at least $min s") if $min;
        my ($id) = $c->{buf} =~ /^X-Conn: (\d+)\r$/m;
        $c->{buf} = '';
        if ($after eq 'keep') {
            $c->send(Luxd::request(path => '/ok/3'));
            my $r = $c->response(timeout => 10);
            ok($r && $r->{status} == 200 && $r->{body} eq body(3), 'keep-alive: the next request is answered');
            is($r && $r->{headers}{'x-req'}, 2, 'as the second on the connection');
            is($r && $r->{headers}{'x-conn'}, $id, 'on the same connection') if defined $id;
        } else {
            ok($c->wait_closed(10), 'the backend closes');
            is($c->{buf}, '', 'nothing more');
            is($c->{reset} ? 'reset' : 'closed', $after, "it is a $after");
        }
        $c->close;
    };
}

subtest 'the request log: what was received, exactly' => sub {
    my $c = client($be);
    my $head = "POST /echo?q=1&x HTTP/1.1\r\nHost: h.example\r\nx-Odd:   spaced value \r\nX-Dup: 1\r\nX-Dup: 2\r\n"
      . "Transfer-Encoding: chunked\r\n\r\n";
    my $wire = "3\r\n\x00\xff\r\r\n1;ext=1\r\n\n\r\n0\r\nX-Trailer: t\r\n\r\n";
    $c->send($head . $wire);
    my $r = $c->response(timeout => 10);
    is($r && $r->{body}, "\x00\xff\r\n", 'echoed de-chunked');
    # Recorded before the answer was sent: no waiting.
    my ($q) = grep { $_->{conn} == $r->{headers}{'x-conn'} } $be->requests;
    ok($q, 'recorded by the time the answer arrived') or return;
    is_deeply([@$q{qw(method target path version req chunked)}], ['POST', '/echo?q=1&x', '/echo', 'HTTP/1.1', 1, 1], 'request line');
    is($q->{head} . "\r\n\r\n", $head, 'head byte for byte');
    is($q->{header_lines}[1], 'x-Odd:   spaced value ', 'a header line as received');
    is_deeply($q->{headers}[1], ['x-Odd', 'spaced value'], 'parsed: name as sent, value trimmed');
    is(scalar hdr($q, 'x-dup'), '1, 2', 'hdr() joins repeated fields');
    is($q->{body}, "\x00\xff\r\n", 'body de-chunked');
    is($q->{body_raw}, $wire, 'body as on the wire');
    is_deeply($q->{trailers}, ['X-Trailer: t'], 'trailers');
    $c->close;
};

subtest 'keep-alive numbering, pipelining, accept and close records' => sub {
    my $n0 = () = $be->connections;
    my $c = client($be);
    $c->send(join '', map { Luxd::request(path => "/ok/$_") } 1 .. 3);
    my @r = $c->responses(3, timeout => 10);
    is_deeply([map { $_->{body} } @r], [map { body($_) } 1 .. 3], 'three pipelined answers in order');
    is_deeply([map { $_->{headers}{'x-req'} } @r], [1, 2, 3], 'X-Req counts them');
    my $id = $r[0]{headers}{'x-conn'};
    is(scalar(grep { $_->{headers}{'x-conn'} ne $id } @r), 0, 'one X-Conn');
    my $c2 = client($be);
    $c2->send(Luxd::request(path => '/ok/1'));
    is($c2->response(timeout => 10)->{headers}{'x-conn'}, $id + 1, 'the next connection gets the next number');
    is(scalar(() = $be->connections), $n0 + 2, 'two accept records');
    $c->close;
    my $cl = $be->wait_close($id, 10);
    is_deeply($cl && [@$cl{qw(how requests)}], ['peer-eof', 3], 'close record: peer-eof after 3 requests');
    $c2->close;
};

subtest 'Expect: 100-continue' => sub {
    my $c = client($be);
    $c->send("POST /expect HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    ok(read_until($c, sub { $_[0] eq "HTTP/1.1 100 Continue\r\n\r\n" }, 10), '/expect: 100 Continue before the body');
    $c->{buf} = '';
    $c->send('hello');
    like($c->response(timeout => 10)->{body}, qr/^expect=1 sent_100=1 body=5$/, 'then the answer, which says so');
    $c->send("POST /expect-ignore HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    ok(!read_until($c, sub { length $_[0] }, 0.3), '/expect-ignore: no 100 Continue');
    $c->send('hello');
    like($c->response(timeout => 10)->{body}, qr/^expect=1 sent_100=0 body=5$/, 'the body read when it came');
    my @q = $be->requests;
    is_deeply([map { [$_->{expect}, $_->{sent_100}] } @q[-2, -1]], [[1, 1], [1, 0]], 'recorded: asked, and whether 100 was sent');
    $c->close;
};

subtest '/close-after: the idle connection is closed after 50 ms' => sub {
    my $c = client($be);
    $c->send(Luxd::request(path => '/close-after') . Luxd::request(path => '/ok/2'));
    my @r = $c->responses(2, timeout => 10);
    is_deeply([map { $_->{status} } @r], [200, 200], 'a request already there is answered');
    is($r[0]{headers}{connection}, undef, 'no Connection: close');
    my $t0 = time;
    $c->send(Luxd::request(path => '/close-after'));
    ok($c->response, 'answered');
    ok($c->wait_closed(10), 'then closed');
    cmp_ok(time - $t0, '>=', 0.04, 'after about 50 ms');
    $c->close;
    my $cl = $be->wait_close($r[0]{headers}{'x-conn'}, 10);
    is($cl && $cl->{how}, 'idle-close', 'close record: idle-close');
};

subtest '/ws: 101, then bytes echoed both ways until close' => sub {
    my $c = client($be);
    $c->send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\nearly");
    ok(read_until($c, sub { $_[0] =~ /\r\n\r\nearly\z/ }, 10), '101 and the bytes sent with the request echoed');
    like($c->{buf}, qr/\AHTTP\/1\.1 101 Switching Protocols\r\n.*Upgrade: websocket\r\nConnection: Upgrade\r\n/s, '101 head');
    like($c->{buf}, qr/^Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r$/m, 'the RFC 6455 example key');
    my ($id) = $c->{buf} =~ /^X-Conn: (\d+)/m;
    $c->{buf} = '';
    $c->send("\x81\x05hello" x 1000);
    ok(read_until($c, sub { length $_[0] >= 7000 }, 10), 'echoed');
    is($c->{buf}, "\x81\x05hello" x 1000, 'byte for byte');
    shutdown($c->sock, SHUT_WR);
    ok($c->wait_closed(10), 'the backend closes when the peer does');
    my $cl = $be->wait_close($id, 10);
    is($cl && $cl->{echoed}, 7005, 'close record: bytes echoed');
};

subtest 'a peer that goes away during a slow answer' => sub {
    my $c = client($be);
    $c->send(Luxd::request(path => '/slow/100/5000'));
    ok(read_until($c, sub { $_[0] =~ /\r\n\r\n/ }, 10), 'head');
    my ($id) = $c->{buf} =~ /^X-Conn: (\d+)/m;
    my $t0 = time;
    $c->close;
    my $cl = $be->wait_close($id, 10);
    is_deeply($cl && [@$cl{qw(how during)}], ['peer-eof', '/slow/100/5000'], 'recorded: peer-eof during the answer');
    cmp_ok($cl ? $cl->{time} - $t0 : 99, '<', 3, 'noticed within one pause (5 s), at once');
};

subtest 'slow answers on two connections do not wait for each other' => sub {
    my @c = map { client($be) } 1, 2;
    my $t0 = time;
    $_->send(Luxd::request(path => '/sleep/2000')) for @c;
    my @r = map { $_->response(timeout => 10) } @c;
    is(scalar(grep { $_ && $_->{status} == 200 } @r), 2, 'both answered');
    cmp_ok(time - $t0, '<', 3.5, 'in parallel (one after the other: 4 s)');
};

subtest 'unix socket' => sub {
    my $ub = Luxd::Backend->start(unix => 1);
    like($ub->addr, qr{^unix:/.*be\.sock$}, 'addr');
    my $c = client($ub);
    $c->send(Luxd::request(path => '/ok/7'));
    my $r = $c->response(timeout => 10);
    is($r && $r->{body}, body(7), 'answers');
    is(($ub->requests)[0]{path}, '/ok/7', 'records');
    $c->close;
    ok($ub->stop, 'stops cleanly');
    ok(!-S $ub->path || !IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $ub->path), 'and no longer accepts');
};

subtest 'close_idle: every connection closed right after its answer' => sub {
    my $b2 = Luxd::Backend->start(close_idle => 1);
    my $c = client($b2);
    $c->send(Luxd::request(path => '/ok/4'));
    my $r = $c->response(timeout => 10);
    is($r && $r->{headers}{connection}, undef, 'the answer does not say close');
    ok($c->wait_closed(10), 'but the connection is closed');
    $c->close;
    my $cl = $b2->wait_close($r->{headers}{'x-conn'}, 10);
    is($cl && $cl->{how}, 'idle-close', 'recorded');
    $b2->stop;
};

for my $mode (1, 'reset') {
    subtest "drop_reused => $mode: a reused connection's request is read, never answered" => sub {
        my $b2 = Luxd::Backend->start(drop_reused => $mode);
        my $c = client($b2);
        $c->send(Luxd::request(path => '/ok/4'));
        ok($c->response, 'the first request is answered');
        $c->send(Luxd::request(method => 'POST', path => '/echo', body => 'data'));
        ok($c->wait_closed(10), 'the second: the connection ends');
        is($c->{buf}, '', 'without an answer');
        is(!!$c->{reset}, $mode eq 'reset', $mode eq 'reset' ? 'by a reset' : 'by a FIN');
        my @q = $b2->requests;
        is_deeply([map { [$_->{req}, $_->{dropped} // 0, $_->{body}] } @q], [[1, 0, ''], [2, 1, 'data']], 'both recorded, the second dropped');
        $b2->stop;
        $c->close;
    };
}

subtest 'stop, and dying with the test' => sub {
    my $b2 = Luxd::Backend->start;
    my $port = $b2->port;
    ok($b2->stop, 'stop');
    ok(refused($port, 10), 'the port is closed');

    # A test process that forks (and whose child ends through END) keeps
    # its backend.
    my $b3 = Luxd::Backend->start;
    my $kid = fork // die;
    if (!$kid) { exit 0 }
    waitpid($kid, 0);
    ok(!refused($b3->port), 'a forked child of the test exiting leaves the backend alone');
    $b3->stop;

    # A test killed outright takes the backend and its connections along.
    pipe(my $rd, my $wr) or die;
    $kid = fork // die;
    if (!$kid) {
        close $rd;
        my $b4 = Luxd::Backend->start;
        syswrite $wr, $b4->port . ' ' . $b4->pid . ' ' . $b4->{log_file} . "\n";
        sleep 30;
        POSIX::_exit(0);
    }
    close $wr;
    my ($p4, $pid4, $log4) = split ' ', scalar <$rd>;
    my $c = IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $p4, Proto => 'tcp') or die;
    my $conn = Luxd::Conn->new($c);
    $conn->send(Luxd::request(path => '/sleep/20000'));
    # Until the backend has the request (its log holds the path): then the
    # connection is being answered.
    my $t = time + 10;
    sleep 0.02 until (Luxd::_slurp($log4) // '') =~ m{/sleep/20000} || time > $t;
    kill 'KILL', $kid;
    waitpid($kid, 0);
    ok($conn->wait_closed(10), 'the connection being answered ends');
    # Gone or a zombie (whoever inherits orphans may reap them late).
    my $dead = sub { my $st = Luxd::_slurp("/proc/$pid4/stat"); !defined $st || $st =~ /^\d+ \(.*\) Z /s };
    $t = time + 10;
    sleep 0.05 until $dead->() || time > $t;
    ok($dead->(), 'the backend process is gone');
    ok(refused($p4), 'its port is closed');
};

ok($be->stop, 'no Perl errors in the backend');
done_testing;
