# Upstreams: the keep-alive pool and its one retry, round robin and
# weights, passive health (connect_timeout: t/96), unix sockets, fallback, r:proxy, the forwarded
# Host and fields, and the upstream variables of the access log.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr);

subtest 'idle-close race: an idempotent request is retried once, a POST is not' => sub {
    my $be = Luxd::Backend->start(name => 'd', drop_reused => 1);
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "d" { "$a" }\nvhost "l" { default = true, location "/" { proxy = "d" } }\n});
    is $s->get('/ok/5')->{status}, 200, 'first request on a new connection';
    my $r = $s->get('/ok/5');
    is $r->{status}, 200, 'GET on the dropped pooled connection: retried, answered';
    my @q = $be->requests;
    is scalar(grep { $_->{dropped} } @q), 1, 'the backend dropped one';
    isnt $q[-1]{conn}, $q[-2]{conn}, 'the retry came on a new connection';
    # The pool holds the retry's connection now: the POST gets it.
    $r = $s->http(method => 'POST', path => '/echo', body => 'abc');
    is $r->{status}, 502, 'POST on the dropped pooled connection: 502, not sent twice';
    is scalar(grep { $_->{method} eq 'POST' && $_->{dropped} } $be->requests), 1, 'the backend saw it once';
    $s->stop;
    $be->stop;
};

subtest 'a backend that closes idle connections: noticed, never lent' => sub {
    my $be = Luxd::Backend->start(name => 'c', close_idle => 1);
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "c" { "$a" }\nvhost "l" { default = true, location "/" { proxy = "c" } }\n});
    for my $i (1 .. 5) {
        is $s->get('/ok/5')->{status}, 200, "request $i";
        sleep 0.05;
    }
    is $be->conns_used, 5, 'one connection each';
    unlike $s->error_log, qr/\[error\]/, 'and no error on the way';
    $s->stop;
    $be->stop;
};

subtest 'keepalive = 0: Connection: close upstream, no pooling' => sub {
    my $be = Luxd::Backend->start(name => 'k');
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "k" { "$a", keepalive = 0 }\nvhost "l" { default = true, location "/" { proxy = "k" } }\n});
    is $s->get('/ok/5')->{status}, 200, 'answered' for 1 .. 3;
    is $be->conns_used, 3, 'three connections';
    is hdr(($be->requests)[0], 'Connection'), 'close', 'asked the backend to close';
    $s->stop;
    $be->stop;
};

subtest 'keepalive = N keeps at most N idle connections per server' => sub {
    my $be = Luxd::Backend->start(name => 'n');
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "n" { "$a", keepalive = 2 }\nvhost "l" { default = true, location "/" { proxy = "n" } }\n});
    # Five at once: five backend connections, of which two stay.
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => '/slow/10/200', close => 1)); $c } 1 .. 5;
    for my $c (@c) { my $r = $c->response(timeout => 5); is $r && $r->{status}, 200, 'slow one answered' }
    $_->close for @c;
    is $be->conns_used, 5, 'five connections for five concurrent requests';
    # The three beyond keepalive stay a second for the next burst (closed
    # at once, a load above keepalive connected anew for half its
    # requests), then go. Awaited (up to 10 s); "not at once" from the
    # backend's records: the answer takes 2 s after the request record,
    # then the surplus second.
    my $peer_eof = sub { grep { $_->{how} eq 'peer-eof' } $be->closes };
    my $deadline = time + 10;
    sleep 0.05 while $peer_eof->() < 3 && time < $deadline;
    my @closed = $peer_eof->();
    is scalar(@closed), 3, 'three closed by luxd, two kept';
    my %asked = map { $_->{conn} => $_->{time} } $be->requests;
    for my $c (@closed) {
        cmp_ok $c->{time} - $asked{ $c->{conn} }, '>=', 2.9, "conn $c->{conn} not closed at once (idle a second)";
    }
    my %seen;
    $seen{ ($be->requests)[-1]{conn} } = 1 if $s->get('/ok/1')->{status} == 200;
    is $be->conns_used, 5, 'the next request took a kept one';
    $s->stop;
    $be->stop;
};

subtest 'round robin with weights; passive health; all down is an immediate 502' => sub {
    my $b1 = Luxd::Backend->start(name => 'one');
    my $b2 = Luxd::Backend->start(name => 'two');
    my ($a1, $a2) = ($b1->addr, $b2->addr);
    # Bound and not listening: a connect is refused, and no one else can
    # take the port meanwhile.
    my @held = map { IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die $! } 1 .. 2;
    my ($dead, $dead2) = map { $_->sockport } @held;
    my $s = Luxd->new(config => <<"EOF");
upstream "rr" { "$a1", { "$a2", weight = 3 } }
upstream "h" { "127.0.0.1:$dead", "$a1", max_fails = 1, fail_timeout = 30 }
upstream "down" { "127.0.0.1:$dead", "127.0.0.1:$dead2", fail_timeout = 30 }
upstream "lone" { "127.0.0.1:$dead2" }
vhost "l" { default = true, location "/" { proxy = "rr" }, location "/h/" { proxy = "h" }, location "/down/" { proxy = "down" },
  location "/lone/" { proxy = "lone" } }
EOF
    my %n;
    $n{ $s->get('/ok/1')->{headers}{'x-backend'} // 'none' }++ for 1 .. 8;
    is_deeply \%n, { one => 2, two => 6 }, 'weights 1:3 over 8 requests';

    my $r = $s->get('/h/ok/1');
    is $r->{status}, 404, 'a refused connect goes to the next server (which answers 404 for /h/ok/1)';
    is $r->{headers}{'x-backend'}, 'one', 'from the live one';
    like $s->error_log, qr/127\.0\.0\.1:$dead marked down/, 'the dead one marked down';
    my $before = () = $s->error_log =~ /connect to 127\.0\.0\.1:$dead/g;
    $s->get('/h/ok/1') for 1 .. 3;
    my $after = () = $s->error_log =~ /connect to 127\.0\.0\.1:$dead/g;
    is $after, $before, 'and skipped while down (no new connect to it)';

    my $t0 = time;
    is $s->get('/down/x')->{status}, 502, 'both servers refuse: 502';
    $before = () = $s->error_log =~ /connect to /g;
    is $s->get('/down/x')->{status}, 502, 'both marked down: 502 again';
    like $s->error_log, qr/upstream down: no server to send/, 'with no server left to try';
    $after = () = $s->error_log =~ /connect to /g;
    is $after, $before, 'and no connect was tried';
    cmp_ok time - $t0, '<', 3, 'at once (no waiting for anything)';

    # A lone server is never marked down (nginx neither): every request
    # tries it, so it is back as soon as it is.
    $s->get('/lone/x') for 1 .. 2;
    $before = () = $s->error_log =~ /connect to 127\.0\.0\.1:$dead2/g;
    $s->get('/lone/x');
    $after = () = $s->error_log =~ /connect to 127\.0\.0\.1:$dead2/g;
    is $after, $before + 1, 'a lone server is tried again after failing';
    unlike $s->error_log, qr/upstream lone: server .* marked down/, 'and never marked down';
    $s->stop;
    $b1->stop;
    $b2->stop;
};

subtest 'send_timeout: a backend that stops reading the body' => sub {
    my $be = Luxd::Backend->start(name => 'st');
    my $a = $be->addr;
    my $s = Luxd->new(server => { max_body_bytes => 64 * 1024 * 1024 },
                      config => qq{upstream "st" { "$a", send_timeout = 1 }\nvhost "l" { default = true, location "/" { proxy = "st" } }\n});
    my $n = 32 * 1024 * 1024; # more than the socket buffers between them hold
    my $c = $s->connect;
    $c->send("POST /slow-upload/1/20000 HTTP/1.1\r\nHost: l\r\nContent-Length: $n\r\nConnection: close\r\n\r\n");
    my $sock = $c->{sock};
    $sock->blocking(0);
    my $chunk = 'x' x 65536;
    my ($off, $t0) = (0, time);
    my $r;
    while (time - $t0 < 10) {
        my $w = syswrite($sock, $chunk);
        $off += $w if defined $w;
        if (!defined $w) {
            last if $!{EPIPE} || $!{ECONNRESET};
            $c->_fill(0.05);
            last if $c->{buf} =~ /\r\n\r\n/ || $c->{eof};
        }
    }
    $sock->blocking(1);
    $r = $c->response(timeout => 5);
    is $r && $r->{status}, 504, 'Gateway Timeout once the backend stopped taking the body';
    ok time - $t0 < 8, 'soon after send_timeout';
    like $s->error_log, qr/upstream st: .*timed out/, 'logged';
    $c->close;
    $s->stop;
    $be->stop;
};

subtest 'Expect: a backend that never answers 100 gets the body after a second' => sub {
    my $be = Luxd::Backend->start(name => 'ei');
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "ei" { "$a" }\nvhost "l" { default = true, location "/" { proxy = "ei" } }\n});
    my $c = $s->connect;
    my $t0 = time;    # before the send: luxd's second starts after it
    $c->send("POST /expect-ignore HTTP/1.1\r\nHost: l\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.2) }
    my $dt = time - $t0;
    like $c->{buf}, qr{\AHTTP/1\.1 100 Continue\r\n\r\n}, 'the client is told to go on';
    ok $dt > 0.8 && $dt < 5, sprintf('after about a second (%.2f s)', $dt);
    $c->{buf} = '';
    $c->send('abc');
    my $r = $c->response(timeout => 10);
    is $r && $r->{body}, "expect=1 sent_100=0 body=3\n", 'the body reached the backend';
    $c->close;
    $s->stop;
    $be->stop;
};

subtest 'unix socket upstream' => sub {
    my $be = Luxd::Backend->start(name => 'u', unix => 1);
    my $a = $be->addr;
    my $s = Luxd->new(config => qq{upstream "u" { "$a" }\nvhost "l" { default = true, location "/" { proxy = "u" } }\n});
    my $r = $s->get('/ok/100');
    is $r->{status}, 200, 'answered over the unix socket';
    is $r->{body}, body(100), 'body';
    is $s->get('/ok/1')->{headers}{'x-conn'}, $r->{headers}{'x-conn'}, 'and pooled';
    $s->stop;
    $be->stop;
};

subtest 'fallback: files first, the rest to the backend' => sub {
    my $be = Luxd::Backend->start(name => 'f');
    my $a = $be->addr;
    my $s = Luxd->new(files => { 'www/ok/here.txt' => "a file\n" }, config => <<"EOF");
upstream "f" { "$a" }
vhost "l" { default = true, root = "\$DIR/www", fallback = "f", location "/ok/static/" { fallback = false } }
EOF
    my $r = $s->get('/ok/here.txt');
    is $r->{body}, "a file\n", 'a file is served from the root';
    ok !exists $r->{headers}{'x-backend'}, 'not by the backend';
    $r = $s->get('/ok/7');
    is $r->{headers}{'x-backend'}, 'f', 'no file: the backend answers';
    is $r->{body}, body(7), 'its body';
    $r = $s->http(method => 'POST', path => '/echo', body => 'posted');
    is $r->{body}, 'posted', 'a POST goes to the backend with its body';
    $r = $s->get('/ok/static/nothing');
    is $r->{status}, 404, 'fallback = false in a location: files only';
    ok !exists $r->{headers}{'x-backend'}, 'and the 404 is luxd\'s';
    $s->stop;
    $be->stop;
};

subtest 'r:proxy from a policy' => sub {
    my $be = Luxd::Backend->start(name => 'p');
    my $a = $be->addr;
    my $s = Luxd->new(files => { 'www/index.html' => "home\n" }, config => <<"EOF");
upstream "p" { "$a" }
vhost "l" { default = true, root = "\$DIR/www",
  policy = function(r)
    if r.path:find("^/ok/") then return r:proxy("p") end
    if r.path == "/bad" then return r:proxy("nosuch") end
  end }
EOF
    is $s->get('/')->{body}, "home\n", 'a file';
    my $r = $s->get('/ok/9');
    is $r->{headers}{'x-backend'}, 'p', 'handed over';
    is $r->{body}, body(9), 'body';
    is $s->get('/bad')->{status}, 500, 'an unknown upstream fails closed';
    like $s->error_log, qr/r:proxy: no upstream is named "nosuch"/, 'and says why';
    $s->stop;
    $be->stop;
};

subtest 'proxy_host, proxy_headers, proxy_via = false' => sub {
    my $be = Luxd::Backend->start(name => 'h');
    my $a = $be->addr;
    my $s = Luxd->new(config => <<"EOF");
upstream "h" { "$a" }
vhost "l" { default = true, location "/" { proxy = "h", proxy_host = "app.internal:81", proxy_via = false,
  proxy_headers = { ["X-Real-Front"] = "luxd", ["User-Agent"] = "", ["X-Replace"] = "ours" } } }
EOF
    my $r = $s->http(path => '/ok/1', headers => ['User-Agent' => 'ua', 'X-Replace' => 'theirs', 'Via' => '1.0 x']);
    is $r->{status}, 200, 'answered';
    my $q = ($be->requests)[-1];
    is hdr($q, 'Host'), 'app.internal:81', 'Host from proxy_host';
    is hdr($q, 'X-Real-Front'), 'luxd', 'a field set';
    is hdr($q, 'User-Agent'), undef, 'a field removed with ""';
    is hdr($q, 'X-Replace'), 'ours', 'a client field replaced';
    is hdr($q, 'Via'), '1.0 x', 'no Via of ours';
    $s->stop;
    $be->stop;
};

subtest 'access log: $upstream_addr $upstream_status $upstream_response_time' => sub {
    my $be = Luxd::Backend->start(name => 'a');
    my $a = $be->addr;
    my $s = Luxd->new(server => { access_log => { path => '$DIR/access.log', format => '$uri $status $upstream_addr $upstream_status $upstream_response_time' }, access_log_buffer => 0 },
                      files => { 'www/f.txt' => "f\n" },
                      config => qq{upstream "a" { "$a" }\nvhost "l" { default = true, root = "\$DIR/www", fallback = "a" }\n});
    $s->get('/sleep/120');
    $s->get('/f.txt');
    my $log = '';
    for (1 .. 200) { $log = $s->access_log; last if $log =~ /f\.txt/; sleep 0.05 }
    like $log, qr{^/sleep/120 200 \Q$a\E 200 \d+\.\d{3}$}m, 'upstream fields of a proxied request';
    my ($urt) = $log =~ m{^/sleep/120 200 \S+ 200 (\d+\.\d{3})$}m;
    cmp_ok $urt // 0, '>=', 0.120, '$upstream_response_time: at least the backend\'s 120 ms';
    like $log, qr{^/f\.txt 200 - - -$}m, 'dashes for a file';
    $s->stop;
    $be->stop;
};

done_testing;
