# Keep-alive, HTTP/1.0, keepalive_requests, keepalive_timeout, pipelining.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $big = join '', map { chr(($_ * 7 + ($_ >> 8)) & 0xff) } 0 .. 200_000 - 1;
my %files = (
    'www/index.html' => "<h1>home</h1>\n",
    'www/a.txt'      => "aaa\n",
    'www/b.txt'      => "bbbbbb\n",
    'www/big.bin'    => $big,
);

sub req { my ($path, %o) = @_; Luxd::request(path => $path, %o) }

{
    my $s = Luxd->new(files => \%files, server => { keepalive_requests => 3, keepalive_timeout => 30 });
    # keepalive_timeout is far longer than any wait below: a close seen here
    # is the one the test asks for, not the idle deadline.

    subtest 'HTTP/1.1 keep-alive: several requests on one socket, then keepalive_requests' => sub {
        my $c = $s->connect;
        for my $i (1 .. 3) {
            $c->send(req('/a.txt'));
            my $r = $c->response;
            check_response($r, { status => 200, body => "aaa\n" }, "request $i");
            if ($i < 3) {
                isnt(lc($r->{headers}{connection} // ''), 'close', "request $i: no Connection: close");
            } else {
                is(lc($r->{headers}{connection} // ''), 'close', 'request 3 (= keepalive_requests): Connection: close');
            }
        }
        ok($c->wait_closed(10), 'server closes after the last allowed request');
        is($c->buffered, '', 'nothing after the last response');
        $c->close;
    };

    subtest 'HTTP/1.1 Connection: close' => sub {
        my $c = $s->connect;
        $c->send(req('/a.txt', close => 1));
        my $r = $c->response;
        check_response($r, { status => 200, body => "aaa\n", headers => { connection => qr/^close$/i } }, 'close');
        ok($c->wait_closed(10), 'server closes');
        $c->close;
    };

    subtest 'HTTP/1.0 without keep-alive closes' => sub {
        my ($raw, $info) = $s->raw("GET /a.txt HTTP/1.0\r\n\r\n", timeout => 10);
        my @r = parse_responses($raw);
        is(scalar @r, 1, 'one response');
        check_response($r[0], { status => 200, body => "aaa\n" }, 'HTTP/1.0 GET');
        like($r[0]{version}, qr{^HTTP/1\.[01]$}, 'HTTP/1.x version');
        isnt(lc($r[0]{headers}{connection} // ''), 'keep-alive', 'no Connection: keep-alive');
        ok($info->{closed}, 'closed by the server') or diag("elapsed $info->{elapsed}");
    };

    subtest 'HTTP/1.0 with Connection: keep-alive' => sub {
        my $c = $s->connect;
        $c->send("GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        my $r = $c->response;
        check_response($r, { status => 200, body => "aaa\n", headers => { connection => qr/^keep-alive$/i,
            'content-length' => 4 } }, 'first');
        $c->send("GET /b.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        $r = $c->response;
        check_response($r, { status => 200, body => "bbbbbb\n", headers => { connection => qr/^keep-alive$/i } },
            'second on the same connection');
        $c->send("GET /a.txt HTTP/1.0\r\n\r\n");
        $r = $c->response;
        check_response($r, { status => 200, body => "aaa\n" }, 'third without keep-alive');
        ok($c->wait_closed(10), 'closed after the HTTP/1.0 request without keep-alive');
        $c->close;
    };

    subtest 'keep-alive survives 404 and HEAD' => sub {
        my $c = $s->connect;
        $c->send(req('/nope'));
        my $r = $c->response;
        is($r->{status}, 404, 'GET /nope: 404');
        isnt(lc($r->{headers}{connection} // ''), 'close', '404 keeps the connection');
        $c->send(req('/a.txt', method => 'HEAD'));
        $r = $c->response(head => 1);
        is($r->{status}, 200, 'HEAD on the same connection');
        is($r->{headers}{'content-length'}, 4, 'HEAD Content-Length');
        $c->send(req('/b.txt', close => 1));
        check_response($c->response, { status => 200, body => "bbbbbb\n" }, 'GET after HEAD: body not shifted');
        ok($c->wait_closed(10), 'closed');
        $c->close;
    };

    subtest 'pipelined requests answered in order' => sub {
        my $c = $s->connect;
        $c->send(req('/a.txt') . req('/b.txt', method => 'HEAD') . req('/nope', close => 1));
        my $raw = $c->read_all(10);
        ok($c->eof, 'closed after the last (Connection: close)');
        my @r = parse_responses($raw, head => [0, 1, 0]);
        is(scalar @r, 3, 'three responses');
        check_response($r[0], { status => 200, body => "aaa\n" }, 'first: GET /a.txt');
        check_response($r[1], { status => 200, body => '', headers => { 'content-length' => 7 } }, 'second: HEAD /b.txt');
        check_response($r[2], { status => 404 }, 'third: 404');
        $c->close;
    };

    subtest 'pipelined requests split at odd places' => sub {
        my $all = req('/a.txt') . req('/b.txt') . req('/a.txt', close => 1);
        my @pieces;
        for (my $i = 0; $i < length $all; $i += 7) { push @pieces, substr($all, $i, 7) }
        my ($raw) = $s->raw(undef, pieces => \@pieces, delay => 0.005, timeout => 10);
        my @r = parse_responses($raw);
        is(join(',', map { $_->{status} } @r), '200,200,200', 'three 200s');
        is(join('', map { $_->{body} } @r), "aaa\nbbbbbb\naaa\n", 'bodies in order');
    };
    $s->stop;
}

{
    # Many pipelined requests for a large file: responses must stay in order and
    # complete even when the client reads slowly.
    my $s = Luxd->new(files => \%files, server => { keepalive_requests => 100 });
    my $c = $s->connect;
    my $n = 12;
    my $reqs = join '', map { req($_ % 3 ? '/big.bin' : '/a.txt') } 1 .. $n - 1;
    $c->send($reqs . req('/b.txt', close => 1));
    sleep 0.5;
    my @r = $c->responses($n, timeout => 10);
    is(scalar @r, $n, "$n pipelined responses");
    my $good = 0;
    for my $i (1 .. $n - 1) {
        my $want = $i % 3 ? $big : "aaa\n";
        $good++ if $r[$i - 1] && $r[$i - 1]{status} == 200 && $r[$i - 1]{body} eq $want;
    }
    is($good, $n - 1, 'each big/small response complete and in order');
    is($r[-1]{body}, "bbbbbb\n", 'last response') if @r == $n;
    $c->close;

    # keepalive_requests is large, so 20 requests on one socket all keep it.
    $c = $s->connect;
    my $closes = 0;
    for (1 .. 20) {
        $c->send(req('/a.txt'));
        my $r = $c->response;
        $closes++ if !$r || lc($r->{headers}{connection} // '') eq 'close';
    }
    is($closes, 0, '20 sequential keep-alive requests on one socket');
    $c->close;
    $s->stop;
}

{
    my $s = Luxd->new(files => \%files, server => { keepalive_timeout => 1, header_timeout => 2, defer_accept => \'false' });
    subtest 'keepalive_timeout closes an idle connection' => sub {
        my $c = $s->connect;
        # t0 before the request: the idle deadline starts after the answer,
        # so dt >= 1 s; the upper bound only has to tell "closed by
        # keepalive_timeout" from "never closed" on a loaded machine.
        my $t0 = time;
        $c->send(req('/a.txt'));
        my $r = $c->response;
        is($r->{status}, 200, 'answered');
        ok($c->wait_closed(8), 'idle connection closed by the server');
        my $dt = time - $t0;
        ok($dt >= 0.9 && $dt <= 5, 'after about 1 s') or diag("closed after $dt s");
        $c->close;
    };
    subtest 'a connection that never sends is closed too' => sub {
        # defer_accept is off here, so the server sees the connection at once.
        my $c = $s->connect;
        my $t0 = time;
        ok($c->wait_closed(10), 'closed without any request');
        my $dt = time - $t0;
        ok($dt >= 0.7 && $dt <= 6, 'after about 1-2 s (keepalive_timeout 1 s or header_timeout 2 s)') or diag("closed after $dt s");
        like($c->buffered, qr{^(|HTTP/1\.1 408 .*)$}s, 'with no answer or a 408');
        $c->close;
    };
    $s->stop;
}

{
    my $s = Luxd->new(files => \%files, server => { keepalive_timeout => 0 });
    subtest 'keepalive_timeout = 0 turns keep-alive off' => sub {
        my $c = $s->connect;
        $c->send(req('/a.txt'));
        my $r = $c->response;
        check_response($r, { status => 200, body => "aaa\n", headers => { connection => qr/^close$/i } }, 'GET');
        ok($c->wait_closed(10), 'closed after one request');
        $c->close;
    };
    $s->stop;
}

done_testing;
