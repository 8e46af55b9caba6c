# Review of the spare proxy states and the recycled response parser
# (lx_h1resp_reset), the lazy upstream timer and the LRU trim: hostile
# backend bytes written one byte per segment, so that every read boundary
# falls at every offset of every head, through parsers reused from one
# request to the next (a 1xx then the final response, a HEAD, a head cut
# in the middle, a chunked body with trailers), with one and two workers.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use POSIX ();
use Luxd;

my %RESP = (
    '/many'  => "HTTP/1.1 200 OK\r\n" . join('', map { "X-H$_: v$_\r\n" } 1 .. 40)
              . "Content-Length: 2\r\n\r\nok",
    '/1xx'   => "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nX-Interim: 1\r\n\r\n"
              . "HTTP/1.1 200 OK\r\nX-Final: 1\r\nContent-Length: 3\r\n\r\nxx\n",
    '/head'  => "HTTP/1.1 200 OK\r\nX-Head: 1\r\nContent-Length: 5\r\n\r\n",
    '/plain' => "HTTP/1.1 200 OK\r\nX-Plain: 1\r\nContent-Length: 2\r\n\r\nab",
    '/chunk' => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n"
              . "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-T: t\r\n\r\n",
    '/304'   => "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\nX-304: 1\r\n\r\n",
    '/cut'   => "HTTP/1.1 200 OK\r\nX-Cut: 1\r\nContent-Le",
    '/cutbody' => "HTTP/1.1 200 OK\r\nX-Cutbody: 1\r\nContent-Length: 10\r\n\r\nabc",
);

# A backend that answers each request on a keep-alive connection with the
# bytes above, one byte per write (TCP_NODELAY, a pause between writes);
# /cut and /cutbody close after their bytes.
sub backend {
    my $port = Luxd::free_port();
    my $ls = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
        Listen => 128, ReuseAddr => 1) or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $SIG{CHLD} = 'IGNORE';
        my $parent = getppid;
        while (1) {
            my $c = $ls->accept or next;
            my $k = fork;
            if (defined $k && $k == 0) {
                close $ls;
                setsockopt($c, IPPROTO_TCP, TCP_NODELAY, 1);
                my $buf = '';
                while (1) {
                    while ($buf !~ /\r\n\r\n/) {
                        my $n = sysread($c, $buf, 65536, length $buf);
                        POSIX::_exit(0) unless $n;
                    }
                    $buf =~ s/^(\S+) (\S+).*?\r\n\r\n//s;
                    my $resp = $RESP{$2} // "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
                    for my $i (0 .. length($resp) - 1) {
                        syswrite($c, substr($resp, $i, 1)) or POSIX::_exit(0);
                        select(undef, undef, undef, 0.001);
                    }
                    POSIX::_exit(0) if $2 =~ m{^/cut};
                }
            }
            close $c;
            POSIX::_exit(0) if getppid != $parent;
        }
    }
    close $ls;
    return ($pid, "127.0.0.1:$port");
}

my ($bpid, $baddr) = backend();
END { kill 'KILL', $bpid if $bpid }

# The backend writes a byte per millisecond at best: /many (about 500
# bytes) took over 10 s on the loaded machine. 30 s.
sub final {
    my ($c, %o) = @_;
    while (1) {
        my $r = $c->response(timeout => 30, %o);
        return $r if !$r || !defined $r->{status} || $r->{status} >= 200;
    }
}

for my $workers (1, 2) {
    my $s = Luxd->new(config => qq{workers = $workers\n}
          . qq{upstream "b" { "$baddr", keepalive = 4 }\n}
          . qq{vhost "l" { default = true, location "/" { proxy = "b" } }\n});
    # Each step on a new client connection and again on one kept alive,
    # so that every spare of every loop gets each kind of response.
    for my $round (1 .. 3) {
        my $c = $s->connect;
        my $step = sub {
            my ($method, $path) = @_;
            $c->send("$method $path HTTP/1.1\r\nHost: l\r\n\r\n");
            return final($c, head => $method eq 'HEAD');
        };
        my $r = $step->('GET', '/many');
        is $r && $r->{status}, 200, "w$workers r$round: 40 fields";
        is $r && $r->{body}, 'ok', "w$workers r$round: its body";
        $r = $step->('GET', '/1xx');
        is $r && $r->{status}, 200, "w$workers r$round: 103 then 200";
        is $r && $r->{body}, "xx\n", "w$workers r$round: the final body";
        ok $r && !defined $r->{headers}{'x-h1'} && !defined $r->{headers}{'x-interim'},
            "w$workers r$round: no field of the last response nor of the 1xx in the final head";
        $r = $step->('HEAD', '/head');
        is $r && $r->{status}, 200, "w$workers r$round: HEAD";
        is $r && ($r->{headers}{'content-length'} // ''), '5', "w$workers r$round: HEAD keeps its length";
        $r = $step->('GET', '/plain');
        is $r && $r->{body}, 'ab', "w$workers r$round: GET after HEAD reads its body";
        ok $r && !defined $r->{headers}{'x-head'}, "w$workers r$round: no X-Head leak";
        $r = $step->('GET', '/304');
        is $r && $r->{status}, 304, "w$workers r$round: 304 with a Content-Length";
        $r = $step->('GET', '/chunk');
        is $r && $r->{body}, 'abcde', "w$workers r$round: chunked with extension and trailer";
        $r = $step->('GET', '/plain');
        is $r && $r->{body}, 'ab', "w$workers r$round: after the chunked one";
        $r = $step->('GET', '/cut');
        is $r && $r->{status}, 502, "w$workers r$round: a head cut in the middle is 502";
        $c->close;
        $c = $s->connect;
        $r = $step->('GET', '/plain');
        is $r && $r->{body}, 'ab', "w$workers r$round: the next request after the cut";
        ok $r && !defined $r->{headers}{'x-cut'}, "w$workers r$round: no X-Cut leak";
        $r = $step->('GET', '/cutbody');
        # A body cut after the head was sent: the client's connection is closed.
        ok !$r || !defined $r->{body} || $r->{body} ne 'abc' . ("\0" x 7), "w$workers r$round: cut body not padded";
        $c->close;
        $c = $s->connect;
        $r = $step->('GET', '/many');
        is $r && $r->{body}, 'ok', "w$workers r$round: after a body cut";
        $c->close;
    }
    unlike $s->error_log, qr/\b(assert|crit|emerg)\b/i, "w$workers: no crash/assert in error.log";
    ok $s->alive, "w$workers: alive";
    $s->stop;
}

# ---- reloads: a response in flight, and idle pooled connections --------
use Luxd::Backend qw(body upstream_idle);

{
    my $be = Luxd::Backend->start;
    my $a = $be->addr;
    my $cfg = sub {
        my ($ka) = @_;
        qq{upstream "b" { "$a", keepalive = $ka, keepalive_timeout = 30 }\n}
          . qq{vhost "l" { default = true, location "/status" { status = true }, location "/" { proxy = "b" } }\n};
    };
    my $s = Luxd->new(config => $cfg->(4));
    my ($srvblk) = $s->{config_text} =~ /\A(.*?)\Q$a\E/s; $srvblk =~ s/upstream "b" \{ "\z//;
    { my $o = $cfg; $cfg = sub { $srvblk . $o->(@_) } }
    # A slow response (2 s) with a reload in its middle: it ends whole.
    my $n0 = scalar $be->requests;
    my $c = $s->connect;
    $c->send("GET /slow/20000/200 HTTP/1.1\r\nHost: l\r\n\r\n");
    $be->wait_requests($n0 + 1, 10);    # at the backend: the answer has begun
    $s->write_config($cfg->(1));
    ok defined $s->reload, 'reload during a proxied response';
    my $r = $c->response(timeout => 10);
    is $r && length($r->{body} // ''), 20000, 'the response in flight ends whole';
    ok $r && $r->{body} eq body(20000), 'byte-exact';
    $c->close;
    # Back to keepalive 4: four concurrent requests leave four idle.
    $s->write_config($cfg->(4));
    ok defined $s->reload, 'reload to keepalive 4';
    my @c = map { $s->connect } 1 .. 4;
    $_->send("GET /sleep/1000 HTTP/1.1\r\nHost: l\r\n\r\n") for @c;
    is scalar(grep { my $x = $_->response(timeout => 10); $x && $x->{status} == 200 } @c), 4, '4 concurrent';
    $_->close for @c;
    ok wait_for(sub { upstream_idle($s) == 4 }), '4 idle';
    # The new generation wants 1: with no request after the reload, the
    # pool still goes by the old generation's 4 until keepalive_timeout.
    $s->write_config($cfg->(1));
    { my $m = $s->reload; note "reload: ".($m//"undef"); ok defined $m, 'reload to keepalive 1' };
    # (They are a second past their puts by now, or soon: awaited, up to
    # 10 s; the old generation's keepalive_timeout is 30 s.)
    ok wait_for(sub { upstream_idle($s) == 1 }), 'after a reload to keepalive 1, 1 idle connection is kept'
        or diag 'the pool keeps the old generation\'s keepalive until a put';
    # keepalive = 0: pooling off in the new generation.
    $s->write_config($cfg->(0));
    { my $m = $s->reload; note "reload: ".($m//"undef"); ok defined $m, 'reload to keepalive 0' };
    my $before = scalar $be->requests;
    for (1 .. 2) { $r = $s->get('/ok/10'); is $r->{status}, 200, 'a request with pooling off' }
    my @req = $be->requests;
    my @new = @req[$before .. $#req];
    my %reused = map { $_->{conn} => 1 } grep { $_->{req} > 1 } @new;
    is scalar(keys %reused), 0, 'with keepalive = 0 no request goes on a connection pooled before the reload'
        or diag explain [map { "conn $_->{conn} req $_->{req}" } @new];
    ok wait_for(sub { upstream_idle($s) == 0 }), 'and nothing stays idle';
    $s->stop;
    $be->stop;
}
done_testing;
