# The reverse proxy against a misbehaving backend (t/lib/Luxd/Backend.pm):
# for each thing a backend can do, what the client gets and whether luxd
# used the upstream connection again. A connection is reused when the next
# request reaches the backend on the same connection (its log's `conn`).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr);

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $s = Luxd->new(config => <<"EOF");
upstream "be" { "$addr", keepalive = 4, read_timeout = 10 }
upstream "quick" { "$addr", read_timeout = 1 }
vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "be" } }
vhost "quick" { root = "\$DIR/www", location "/" { proxy = "quick" } }
EOF

sub last_conn { my @r = $be->requests; @r ? $r[-1]{conn} : 0 }

# Asks for /ok/3 after a case: on which backend connection does it come?
sub probe {
    my $r = $s->get('/ok/3');
    is $r->{status}, 200, '  probe answered';
    unlike $r->{raw}, qr/X-Smuggled/, '  probe got no stray response';
    return last_conn();
}

# [name, request options, status, body check, reused]
# body: a string (exact), a regex, or undef (not checked).
my @cases = (
    ['Content-Length body',   {path => '/ok/1024'}, 200, body(1024), 1],
    ['HEAD',                  {method => 'HEAD', path => '/ok/1024'}, 200, '', 1],
    ['chunked, re-chunked',   {path => '/chunked/5000/1000'}, 200, body(5000), 1],
    ['chunked with trailer',  {path => '/chunked/5/5?trailer'}, 200, body(5), 1],
    ['close-delimited',       {path => '/close/3000'}, 200, body(3000), 0],
    ['lies long: smuggled response dropped', {path => '/lie-long/10'}, 200, body(10), 0],
    ['two Content-Length',    {path => '/two-cl'}, 502, undef, 0],
    ['CL and TE',             {path => '/cl-te'}, 502, undef, 0],
    ['bare CR in a header',   {path => '/bare-cr'}, 502, undef, 0],
    ['obs-fold',              {path => '/obs-fold'}, 502, undef, 0],
    ['space before colon',    {path => '/space-colon'}, 502, undef, 0],
    ['head at the limit',     {path => '/huge-headers/32768'}, 200, "ok\n", 1],
    ['head one past the limit', {path => '/huge-headers/32769'}, 502, undef, 0],
    ['HTTP/2.0 status line',  {path => '/http2'}, 502, undef, 0],
    ['HTTP/0.9 answer',       {path => '/http09'}, 502, undef, 0],
    ['GET /head-body',        {path => '/head-body'}, 200, body(16), 1],
    ['HEAD answered with a body', {method => 'HEAD', path => '/head-body'}, 200, '', 0],
    ['204 with a body',       {path => '/204-body'}, 204, '', 0],
    ['304 with a body',       {path => '/304-body'}, 304, '', 0],
    ['unasked 100, then 200', {path => '/100'}, 200, "after 100\n", 1],
    ['backend error status relayed', {path => '/status/503'}, 503, "status 503\n", 1],
    ['POST body echoed',      {method => 'POST', path => '/echo', body => body(100_000)}, 200, body(100_000), 1],
    ['unknown path 404 relayed', {path => '/nope'}, 404, "not found\n", 1],
);

for my $c (@cases) {
    my ($name, $req, $status, $want, $reused) = @$c;
    subtest $name => sub {
        my $r = $s->http(%$req, timeout => 6);
        is $r->{status}, $status, "status $status";
        if (defined $want) {
            ok defined $r->{body} && $r->{body} eq $want, 'body as expected'
              or diag "got " . length($r->{body} // '') . " bytes: " . substr($r->{body} // '', 0, 80);
        }
        my $used = last_conn();
        my $next = probe();
        if ($reused) { is $next, $used, 'upstream connection reused' }
        else         { isnt $next, $used, 'upstream connection not reused' }
    };
}

subtest 'a body cut short: client sees a short body and a close' => sub {
    for my $p ('/lie-short/1000', '/reset-mid-body/1000') {
        my ($raw, $info) = $s->raw(Luxd::request(path => $p), timeout => 10);
        like $raw, qr{\AHTTP/1\.1 200 OK\r\n}, "$p: the head went out";
        my ($body) = $raw =~ /\r\n\r\n(.*)\z/s;
        ok length($body) < 1000, "$p: fewer bytes than announced (" . length($body) . ")";
        ok $info->{closed}, "$p: and the connection closed";
        like $raw, qr/^Content-Length: 1000\r$/m, "$p: the backend's length was kept";
    }
    ok $s->wait_log(qr/upstream be: .*(closed|reset)/, 10), 'logged';
};

subtest 'request fields: hop-by-hop out, X-Forwarded-*, Via' => sub {
    my $r = $s->http(path => '/ok/1?q=1', host => 'localhost:' . $s->port,
        headers => ['Connection' => 'keep-alive, X-Secret', 'X-Secret' => 's', 'Keep-Alive' => '300',
                    'TE' => 'trailers', 'Upgrade' => 'h2c', 'Proxy-Authorization' => 'x',
                    'X-Forwarded-For' => '10.0.0.1', 'Via' => '1.0 edge', 'X-Keep' => 'k']);
    is $r->{status}, 200, 'answered';
    my $q = ($be->requests)[-1];
    is $q->{target}, '/ok/1?q=1', 'target';
    is hdr($q, 'Host'), 'localhost:' . $s->port, 'client Host forwarded';
    is hdr($q, 'X-Forwarded-For'), '10.0.0.1, 127.0.0.1', 'X-Forwarded-For appended';
    is hdr($q, 'X-Forwarded-Proto'), 'http', 'X-Forwarded-Proto';
    is hdr($q, 'X-Forwarded-Host'), 'localhost:' . $s->port, 'X-Forwarded-Host';
    is hdr($q, 'Via'), '1.0 edge, 1.1 luxd', 'Via appended';
    is hdr($q, 'X-Keep'), 'k', 'end-to-end field kept';
    is hdr($q, $_), undef, "$_ removed" for qw(Connection X-Secret Keep-Alive TE Upgrade Proxy-Authorization);
};

# luxd keeps up to 8 names Connection lists (proxy_fields.c CONN_NAMES) and
# compares every field with the whole value past that: both ways must drop
# exactly the listed fields.
subtest 'Connection listing 8 names, and 9' => sub {
    for my $n (8, 9) {
        my @names = map { "X-L$_" } 1 .. $n;
        my $r = $s->http(path => '/ok/1',
            headers => ['Connection' => join(', ', 'keep-alive', @names), (map { ($_ => 'v') } @names), 'X-Kept' => 'k']);
        is $r->{status}, 200, "$n names: answered";
        my $q = ($be->requests)[-1];
        is scalar(grep { defined hdr($q, $_) } @names), 0, "$n names: every listed field removed";
        is hdr($q, 'X-Kept'), 'k', "$n names: an unlisted field kept";
    }
};

subtest 'response fields: hop-by-hop out, Set-Cookie kept apart' => sub {
    my $r = $s->get('/hop');
    is $r->{status}, 200, 'answered';
    is $r->{headers}{'x-end-to-end'}, 'kept', 'end-to-end field kept';
    ok !exists $r->{headers}{$_}, "$_ removed"
      for qw(x-foo keep-alive upgrade trailer proxy-authenticate proxy-connection te);
    $r = $s->get('/set-cookie');
    is_deeply $r->{hlist}{'set-cookie'}, ['a=1; Path=/', 'b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT', 'c=3; HttpOnly'],
      'three Set-Cookie fields';
    my @srv = @{ $r->{hlist}{server} };
    is_deeply \@srv, ['luxd'], 'one Server field, luxd\'s';
};

subtest '103 Early Hints relayed to HTTP/1.1, not to 1.0' => sub {
    my $raw = $s->raw(Luxd::request(path => '/103', close => 1), timeout => 10);
    like $raw, qr{\AHTTP/1\.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\nHTTP/1\.1 200 OK\r\n}, 'interim then final';
    $raw = $s->raw(Luxd::request(path => '/103', version => '1.0'), timeout => 10);
    like $raw, qr{\AHTTP/1\.1 200 OK\r\n}, 'HTTP/1.0: the final only';
};

subtest 'chunked request body relayed byte-exact' => sub {
    my $data = body(70_000);
    my $chunked = join('', map { sprintf("%x\r\n%s\r\n", length $_, $_) } unpack('(a7000)*', $data)) . "0\r\n\r\n";
    my $r = $s->http(method => 'POST', path => '/echo', headers => ['Transfer-Encoding' => 'chunked'], body => $chunked);
    is $r->{status}, 200, 'answered';
    ok $r->{body} eq $data, 'byte-exact';
    my $q = ($be->requests)[-1];
    is $q->{chunked}, 1, 'sent on chunked';
};

subtest 'Expect: 100-continue end to end' => sub {
    my $c = $s->connect;
    $c->send("POST /expect HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    my $got = '';
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr{\AHTTP/1\.1 100 Continue\r\n\r\n}, 'the client is told to go on once the backend said so';
    $c->{buf} = '';
    $c->send("hello");
    my $r = $c->response(timeout => 10);
    is $r->{status}, 200, 'answered';
    is $r->{body}, "expect=1 sent_100=1 body=5\n", 'the backend was asked and sent 100';
    $c->close;

    # The backend refuses before the body: the client never sends it.
    $c = $s->connect;
    $c->send("POST /expect/417 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    $r = $c->response(timeout => 10);
    is $r->{status}, 417, 'the backend\'s refusal reaches the client';
    unlike $r->{raw} // '', qr/100 Continue/, 'with no 100 before it';
    $c->close;
};

subtest 'read_timeout: 504' => sub {
    my $t0 = time;
    my $r = $s->http(path => '/sleep/10000', host => 'quick', timeout => 12);
    my $dt = time - $t0;
    is $r->{status}, 504, 'Gateway Timeout';
    ok $dt >= 0.9 && $dt < 6, sprintf('after about read_timeout (%.2f s), not the backend\'s 10 s', $dt);
};

subtest 'a client that goes away closes the upstream connection' => sub {
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/slow/200000/50/1000'));
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr/\AHTTP\/1\.1 200/, 'the response began';
    my $conn = last_conn();
    my $tc = time;
    $c->close;
    my $rec = $be->wait_close($conn, 15);
    ok $rec, 'the backend saw its connection close';
    is $rec->{how}, 'peer-eof', 'luxd closed it' if $rec;
    ok $rec->{sent} < 200000, 'mid-response' if $rec;
    cmp_ok $rec->{time} - $tc, '<', 5, 'at once, not at read_timeout (10 s)' if $rec;
};

subtest 'WebSocket: 101 makes a tunnel, both ways, closed together' => sub {
    my $c = $s->connect;
    $c->send("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr{\AHTTP/1\.1 101 Switching Protocols\r\n}, '101 relayed';
    like $c->{buf}, qr{^Upgrade: websocket\r$}mi, 'with Upgrade';
    like $c->{buf}, qr{^Connection: upgrade\r$}mi, 'and Connection: upgrade';
    like $c->{buf}, qr{^Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK\+xOo=\r$}m, 'the accept key';
    unlike $c->{buf}, qr/Content-Length|Transfer-Encoding|Connection: close/i, 'no framing';
    my $q = ($be->requests)[-1];
    is hdr($q, 'Upgrade'), 'websocket', 'Upgrade went to the backend';
    $c->{buf} = '';
    my $data = join '', map { chr($_ % 256) } 0 .. 200_000;
    $c->send($data);
    $t0 = time;
    while (time - $t0 < 10 && !$c->{eof} && length($c->{buf}) < length $data) { $c->_fill(0.5) }
    ok $c->{buf} eq $data, '200 KB echoed byte-exact through the tunnel' or do {
        my ($b, $i) = ($c->{buf}, 0);
        $i++ while $i < length $b && substr($b, $i, 1) eq substr($data, $i, 1);
        diag sprintf('got %d of %d bytes, first difference at %d, eof %d (%s), after %.2f s',
                     length $b, length $data, $i, $c->{eof}, $c->{read_error} // '', time - $t0);
        diag $s->error_log;
    };
    my $conn = $q->{conn};
    $c->close;
    my $rec = $be->wait_close($conn, 10);
    ok $rec, 'the client\'s close closed the backend\'s side';
    # Only WebSocket is tunnelled: h2c would carry requests past luxd's
    # rules; its Upgrade stays behind and the request is an ordinary one.
    my $h = $s->http(path => '/ok/2', headers => ['Upgrade' => 'h2c', 'Connection' => 'Upgrade, HTTP2-Settings', 'HTTP2-Settings' => 'AAMAAABkAAQAAP__']);
    is $h->{status}, 200, 'Upgrade: h2c is answered as HTTP/1.1';
    my $hq = ($be->requests)[-1];
    is hdr($hq, 'Upgrade'), undef, 'and its Upgrade does not reach the backend';
    is hdr($hq, 'HTTP2-Settings'), undef, 'nor what Connection names';
    # An Upgrade the backend does not take is an ordinary request.
    my $r = $s->http(path => '/ok/4', headers => ['Upgrade' => 'websocket', 'Connection' => 'Upgrade']);
    is $r->{status}, 200, 'no 101: an ordinary answer';
    is $r->{body}, body(4), 'with its body';
};

$s->stop;
$be->stop;
done_testing;
