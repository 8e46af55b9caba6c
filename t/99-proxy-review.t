# The reverse proxy attacked (a review of issue 10): a hostile client, a
# hostile or broken backend, a stop or reload at the worst moment. Each
# case is one that failed before its fix; the commit that fixed it says why.
# Backends are Luxd::Backend, or a scripted one below (raw_backend) where a
# case needs bytes no well-formed server sends.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use IO::Select;
use File::Temp ();
use POSIX ();
use Socket qw(SOL_SOCKET SO_LINGER MSG_PEEK);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr raw_backend kill_backend);

$SIG{PIPE} = 'IGNORE';

# Reads a request head from a backend's socket.
sub read_head {
    my ($c) = @_;
    my $buf = '';
    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($c, $buf, 65536, length $buf);
        last unless $n;
    }
    return $buf;
}

sub proxy_config {
    my ($addr, $keys) = @_;
    $keys = $keys ? ", $keys" : '';
    return qq{upstream "u" { "$addr"$keys }\n}
      . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n};
}

sub rss_kb { my ($pid) = @_; my $v = `ps -o rss= -p $pid`; $v =~ s/\s+//g; return $v || 0 }

subtest 'a stop with upstream connections open: clean exit (TERM and QUIT)' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $a = $be->addr;
    for my $sig (qw(TERM QUIT)) {
        for my $what (qw(pooled in-flight)) {
            my $s = Luxd->new(config => proxy_config($a), server => { workers => 2, drain_timeout => 2 });
            my @c;
            my $seen = () = $be->requests;
            if ($what eq 'pooled') {
                is $s->get('/ok/1')->{status}, 200, "$sig $what: a request leaves a pooled connection" for 1 .. 4;
            } else {
                for my $p ('/sleep/3000', '/slow/100000/100/1000') {
                    my $c = $s->connect;
                    $c->send(Luxd::request(path => $p));
                    push @c, $c;
                }
                # Both requests are at the backend (in flight) before the signal.
                $be->wait_requests($seen + 2, 10);
            }
            $s->signal($sig);
            # drain_timeout is 2 s; a luxd that hangs never exits.
            my $st = $s->wait_exit(15);
            is $st, 0, "$sig with upstream connections $what: luxd exits 0";
            $s->stop(signal => 'KILL');
            $_->close for @c;
        }
    }
    $be->stop;
};

subtest 'a backend sending 1xx after 1xx to a client that does not read: memory stays flat' => sub {
    my $b = raw_backend(sub {
        my ($c) = @_;
        read_head($c);
        my $hint = "HTTP/1.1 103 Early Hints\r\nLink: <" . ('a' x 16000) . ">\r\n\r\n";
        for (1 .. 12000) { syswrite($c, $hint) or last }
        syswrite($c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
        sleep 20;
    });
    my $s = Luxd->new(config => proxy_config($b->[1]));
    my $before = rss_kb($s->pid);
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => '/hints'));
    # 12,000 hints of 16 KB are 190 MB; the backend is done with them
    # in well under the time given here.
    my $max = 0;
    for (1 .. 30) {
        sleep 0.1;
        my $now = rss_kb($s->pid);
        $max = $now if $now > $max;
    }
    cmp_ok $max - $before, '<', 48 * 1024, "luxd's RSS grew by less than 48 MB (" . int(($max - $before) / 1024) . " MB)";
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /HTTP\/1\.1 200 OK\r\n.*\r\n\r\nok\n/s) { $c->_fill(0.5) }
    like $c->{buf}, qr/\AHTTP\/1\.1 103 Early Hints\r\n/, 'the client got the first hints';
    like $c->{buf}, qr/HTTP\/1\.1 200 OK\r\n.*\r\n\r\nok\n\z/s, 'and then the final response, whole';
    $c->close;
    $s->stop;
    kill_backend($b);
};

subtest 'more than 64 servers, none up, max_fails = 0: one 502 after trying each once' => sub {
    # Bound and not listening: a connect is refused, and no port repeats.
    my @held = map { IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die $! } 1 .. 66;
    my @ports = map { $_->sockport } @held;
    my $list = join ', ', map { qq{"127.0.0.1:$_"} } @ports;
    my $s = Luxd->new(config => qq{upstream "u" { $list, max_fails = 0 }\n}
        . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n});
    my $t0 = time;
    my $r = $s->http(path => '/x', timeout => 5);
    is $r->{status}, 502, 'Bad Gateway';
    # 66 refused connects take milliseconds; one per try timeout (or a
    # retry back-off) would take far longer than this.
    cmp_ok time - $t0, '<', 5, 'at once';
    my $refused = sub { my $k = () = $s->error_log =~ /connect to 127\.0\.0\.1:\d+: connection refused/g; $k };
    my $deadline = time + 10;
    sleep 0.05 while $refused->() < 66 && time < $deadline;
    my $n = $refused->();
    is $n, 66, 'each server tried once';
    $s->stop;
};

# [name, upstream keys, what the client does]: luxd waits on the client
# longer than the upstream's timeouts, which are the backend's.
subtest 'a slow client is not the backend timing out' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $s = Luxd->new(config => proxy_config($be->addr, 'send_timeout = 1, read_timeout = 1'),
        server => { body_timeout => 10, send_timeout => 10 });
    # An upload that pauses for 2 s (body_timeout is 10).
    my $c = $s->connect;
    $c->send("POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n12345");
    sleep 2;
    $c->send("67890");
    my $r = $c->response(timeout => 10);
    is $r && $r->{status}, 200, 'an upload paused longer than send_timeout: answered';
    is $r && $r->{body}, '1234567890', 'with the whole body';
    $c->close;
    is $s->get('/ok/3')->{status}, 200, 'and the backend was not marked down';
    unlike $s->error_log, qr/marked down|timed out/, 'nothing logged against it';
    # A download the client stops reading for 2.5 s (send_timeout is 10).
    my $n = 20_000_000;
    $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => "/ok/$n", close => 1));
    sleep 2.5;
    # Read to the end; give up only after 10 s without a byte.
    my $len = 0;
    my $sel = IO::Select->new($c->sock);
    while ($sel->can_read(10)) {
        my $k = sysread($c->sock, my $buf, 1 << 20);
        last unless $k;
        $len += $k;
    }
    $c->close;
    cmp_ok $len, '>', $n, "a download paused longer than read_timeout: all $n bytes came ($len with the head)";
    unlike $s->error_log, qr/timed out/, 'no timeout logged';
    $s->stop;
    $be->stop;
};

subtest 'an error page served by a backend gets no request body' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $a = $be->addr;
    my $dead = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die $!;
    my $d = '127.0.0.1:' . $dead->sockport;
    my $s = Luxd->new(config => <<"EOF");
upstream "p" { "$a" }
upstream "d" { "$d", max_fails = 0 }
vhost "localhost" { default = true, root = "\$DIR/www", error_pages = { [502] = "/echo" },
  location "/x" { proxy = "d" }, location "/" { proxy = "p" } }
EOF
    my $c = $s->connect;
    $c->send("POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 6\r\n\r\nsecret" . Luxd::request(path => '/ok/3'));
    my @r = $c->responses(2, timeout => 5);
    is $r[0] && $r[0]{status}, 502, 'the failed POST: 502, with the page';
    is $r[0] && $r[0]{body}, '', 'which echoes no body';
    is $r[1] && $r[1]{status}, 200, 'the pipelined request after the dropped body: answered';
    is $r[1] && $r[1]{body}, body(3), 'with its own answer';
    my @q = $be->requests;
    is $q[0]{method} . ' ' . $q[0]{target}, 'GET /echo', 'the page was asked for with GET';
    is hdr($q[0], 'Content-Length'), undef, 'without a Content-Length';
    is $q[0]{body}, '', 'and without the body meant for the other upstream';
    $c->close;
    $s->stop;
    $be->stop;
};

# [name, proxy_headers (Lua), request headers, field => what the backend gets]
my @forwarded = (
    ['X-Forwarded-For on two lines: both kept, in order, ours last', '{}',
     ['X-Forwarded-For' => '6.6.6.6', 'X-Forwarded-For' => '10.0.0.2'],
     {'X-Forwarded-For' => '6.6.6.6, 10.0.0.2, 127.0.0.1'}],
    ['Via on two lines: both kept, ours last', '{}', ['Via' => '1.1 a', 'Via' => '1.1 b'],
     {'Via' => '1.1 a, 1.1 b, 1.1 luxd'}],
    ['proxy_headers X-Forwarded-Proto replaces luxd\'s own', '{ ["X-Forwarded-Proto"] = "https" }', [],
     {'X-Forwarded-Proto' => 'https'}],
    ['proxy_headers X-Forwarded-For = "" removes it', '{ ["X-Forwarded-For"] = "" }',
     ['X-Forwarded-For' => '6.6.6.6'], {'X-Forwarded-For' => undef}],
    ['proxy_headers X-Forwarded-Host and Via replace luxd\'s',
     '{ ["X-Forwarded-Host"] = "example.com", Via = "1.1 edge" }', ['Via' => '1.1 a'],
     {'X-Forwarded-Host' => 'example.com', 'Via' => '1.1 edge'}],
);
subtest 'forwarded fields: every line of a list, and proxy_headers first' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $a = $be->addr;
    for my $c (@forwarded) {
        my ($name, $ph, $hdrs, $want) = @$c;
        my $s = Luxd->new(config => qq{upstream "u" { "$a" }\n}
            . qq{vhost "localhost" { default = true, location "/" { proxy = "u", proxy_headers = $ph } }\n});
        my $r = $s->http(path => '/ok/1', headers => $hdrs);
        is $r->{status}, 200, "$name: answered";
        my $q = ($be->requests)[-1];
        for my $f (sort keys %$want) {
            my @got = hdr($q, $f);
            if (defined $want->{$f}) {
                is_deeply \@got, [$want->{$f}], "$name: one $f line, '$want->{$f}'";
            } else {
                is_deeply \@got, [], "$name: no $f";
            }
        }
        $s->stop;
    }
    $be->stop;
};

# [path, the backend's answer, status the client gets, the client's body (a
# regex, or undef), whether the upstream connection is used again]. The
# backend answers /probe with its connection and request number.
my @answers = (
    ['bigcl', "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\nhello", 502, undef, 0],
    ['maxcl', "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nhello", 200, undef, 0],
    ['te10', "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
     200, qr/\Ahello\z/, 0],
    ['cl10', "HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello", 200, qr/\Ahello\z/, 1],
    ['nul', "HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 5\r\n\r\nhello", 502, undef, 0],
    ['crname', "HTTP/1.1 200 OK\r\nX\rY: 1\r\nContent-Length: 5\r\n\r\nhello", 502, undef, 0],
    ['lf', "HTTP/1.1 200 OK\nContent-Length: 5\n\nhello", 502, undef, 0],
    ['identity', "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello", 502, undef, 0],
    ['after204', "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled", 204, qr/\A\z/, 0],
    ['te304', "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 304, qr/\A\z/, 0],
);
subtest 'response framing: what the client gets, and whether the connection is used again' => sub {
    my %ans = map { $_->[0] => $_->[1] } @answers;
    my $b = raw_backend(sub {
        my ($c, $conn) = @_;
        my ($buf, $k) = ('', 0);
        while (1) {
            while ($buf !~ /\r\n\r\n/) { my $n = sysread($c, $buf, 65536, length $buf); return unless $n }
            $buf =~ s/\A(.*?\r\n\r\n)//s;
            my ($p) = $1 =~ m{\A\S+ /(\w+)};
            $k++;
            syswrite $c, $p eq 'probe'
              ? "HTTP/1.1 200 OK\r\nX-Conn: $conn\r\nX-Req: $k\r\nContent-Length: 5\r\n\r\nprobe"
              : $ans{$p};
        }
    });
    my $s = Luxd->new(config => proxy_config($b->[1], 'read_timeout = 1'));
    for my $c (@answers) {
        my ($path, undef, $status, $body, $reused) = @$c;
        my $r = $s->http(path => "/$path", timeout => 4);
        is $r->{status}, $status, "/$path: $status";
        like $r->{body} // '', $body, "/$path: the body" if $body;
        my $p = $s->get('/probe');
        is $p->{body}, 'probe', "/$path: the next request gets its own answer";
        is !!($p->{headers}{'x-req'} && $p->{headers}{'x-req'} > 1), !!$reused,
          "/$path: the connection " . ($reused ? 'is' : 'is not') . ' used again';
    }
    $s->stop;
    kill_backend($b);
};

subtest 'a POST that meets the idle-close race: 502, and the server stays up' => sub {
    my $be = Luxd::Backend->start(name => 'd', drop_reused => 1);
    my $s = Luxd->new(config => proxy_config($be->addr));
    is $s->get('/ok/5')->{status}, 200, 'a first request leaves a pooled connection';
    is $s->http(method => 'POST', path => '/echo', body => 'abc')->{status}, 502,
      'the POST on it, which the backend drops: 502, not retried';
    is $s->get('/ok/5')->{status}, 200, 'the next request is answered';
    unlike $s->error_log, qr/marked down/, 'the server was not marked down';
    $s->stop;
    $be->stop;
};

# [name, the request's start, what follows it (undef: nothing, the client
# stalls), status]. The core answers each itself once the body has begun
# to flow to the backend; the proxy must let go at once.
my @body_fails = (
    ['a malformed chunk', "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "zz\r\n", 400],
    ['a chunked body over max_body_bytes', "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
     "800\r\n" . ('x' x 2048) . "\r\n", 413],
    ['a body that stops coming (body_timeout)', "Content-Length: 10\r\n\r\nhello", undef, 408],
);
subtest 'a request body that fails while it streams to the backend' => sub {
    my $gen = 1;
    for my $c (@body_fails) {
        my ($name, $start, $then, $status) = @$c;
        # The backend answers once told to (a file appears), which is after
        # the client has had luxd's own answer: an answer that must not
        # reach a request already answered.
        my $dir = File::Temp::tempdir(CLEANUP => 1);
        my $b = raw_backend(sub {
            my ($c) = @_;
            read_head($c);
            Luxd::_write_file("$dir/head", '');
            my $deadline = time + 30;
            sleep 0.01 until -e "$dir/go" || time > $deadline;
            syswrite $c, "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nBACKEND-BYTES";
            Luxd::_write_file("$dir/answered", '');
            sleep 3;
        });
        # body_timeout: 1 s where it is the failure (well after the reload),
        # else 10 s, so that a slow reload cannot turn the 400 or 413 into 408.
        my $s = Luxd->new(config => proxy_config($b->[1], 'read_timeout = 20'),
            server => { body_timeout => ($status == 408 ? 1 : 10), max_body_bytes => 1000 });
        my $conn = $s->connect;
        $conn->send("POST /x HTTP/1.1\r\nHost: localhost\r\n$start");
        my $deadline = time + 10;
        sleep 0.01 until -e "$dir/head" || time > $deadline;
        ok(-e "$dir/head", "$name: the request reached the backend");
        # A reload now: the request's generation is retired, and freed when
        # the request ends. What the proxy touches after that is freed memory.
        like $s->reload // 'timeout', qr/^ok generation 2 /, "$name: reloaded meanwhile";
        $conn->send($then) if defined $then;
        my $t0 = time;
        $conn->_fill(0.1) while $conn->{buf} !~ /\r\n\r\n/ && !$conn->{eof} && time - $t0 < 10;
        like $conn->{buf}, qr/\AHTTP\/1\.1 $status /, "$name: $status";
        # Now the backend answers; the connection is kept open past that
        # (luxd lingers on it) until luxd closes it, 3 s at most.
        Luxd::_write_file("$dir/go", '');
        $t0 = time;
        sleep 0.01 until -e "$dir/answered" || time - $t0 > 10;
        $t0 = time;
        $conn->_fill(0.1) while !$conn->{eof} && time - $t0 < 3;
        unlike $conn->{buf}, qr/BACKEND-BYTES/, "$name: and nothing of the backend's later answer";
        $conn->close;
        ok $s->alive, "$name: luxd is alive";
        $s->stop;
        kill_backend($b);
    }
};

# Under `make tsan` (this file runs several workers): the first proxied
# request of each worker set the handler's slot, a data race.
subtest 'two workers proxy their first requests at once' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $s = Luxd->new(config => proxy_config($be->addr), server => { workers => 2 });
    my @c = map { $s->connect } 1 .. 40;
    $_->send(Luxd::request(path => '/ok/10')) for @c;
    my $ok = grep { my $r = $_->response(timeout => 10); $r && $r->{status} == 200 } @c;
    is $ok, 40, 'all 40 answered';
    $_->close for @c;
    $s->stop;
    $be->stop;
};

# The backend's 100 Continue and its final answer in one write, to a
# request whose Expect luxd forwarded: the 100 starts the body inside the
# parser's callback, and what that does must not leave the parser going on.
subtest '100 Continue and the answer in one piece' => sub {
    my $b = raw_backend(sub {
        my ($c) = @_;
        sysread($c, my $buf, 100);    # not the whole head: the 100 comes early
        syswrite $c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nBACKEND-BYTES";
        sleep 1;
        1 while sysread($c, $buf, 1 << 20);
    });
    my $s = Luxd->new(config => proxy_config($b->[1]), server => { max_header_bytes => 8_000_000 });
    # A head of 6.6 MB: its write to the backend is still in flight when the
    # 100 comes; the body waits for it (it went out at once: -EBUSY, 502).
    my $big = join '', map { "X-Pad-$_: " . ('p' x 70_000) . "\r\n" } 1 .. 95;
    my $c = $s->connect;
    $c->send("POST /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n$big\r\nhello");
    my $t0 = time;
    $c->_fill(0.3) while time - $t0 < 10 && $c->{buf} !~ /BACKEND-BYTES/ && !$c->{eof};
    like $c->{buf}, qr/\AHTTP\/1\.1 200 OK\r\n.*\r\n\r\nBACKEND-BYTES\z/s, 'a 100 before the head is out: the answer, not 502';
    $c->close;
    # The body is broken (a malformed chunk, already buffered): starting it
    # answers 400 and lets go; the 200 after the 100 must not reach the client.
    $c = $s->connect;
    $c->send("POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
           . "5\r\nhello\r\nzz\r\n");
    # The backend's 100 and 200 come at once, before luxd has the body;
    # read until luxd closes (10 s at most).
    $t0 = time;
    $c->_fill(0.1) while !$c->{eof} && time - $t0 < 10;
    like $c->{buf}, qr/\AHTTP\/1\.1 400 /, 'a body that breaks when the 100 starts it: 400';
    unlike $c->{buf}, qr/BACKEND-BYTES|200 OK/, 'and nothing of the answer that followed the 100';
    $c->close;
    ok $s->alive, 'luxd is alive';
    $s->stop;
    kill_backend($b);
};

done_testing;
