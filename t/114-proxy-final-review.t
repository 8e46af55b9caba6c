# Final review of the reverse proxy (issue 10): the wrong vhost and
# absolute-form targets, pipelined requests split at every byte while the
# first is proxied, and two workers with pools and a reload in the middle
# of proxied requests and WebSocket tunnels (one with a slow client).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr);

$SIG{PIPE} = 'IGNORE';

my $ba = Luxd::Backend->start(name => 'a');
my $bb = Luxd::Backend->start(name => 'b');
my ($aa, $ab) = ($ba->addr, $bb->addr);
# read_timeout is also the idle limit of a WebSocket tunnel: the tunnels
# below sit idle while the slow client writes (2 s), the requests run and
# the reload happens, so "a" gets a limit far above that.
my $s = Luxd->new(workers => 2, config => <<"EOF2");
upstream "a" { "$aa", keepalive = 4, read_timeout = 30 }
upstream "b" { "$ab", keepalive = 4, read_timeout = 3 }
vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "a" } }
vhost "other" { root = "\$DIR/www", location "/" { proxy = "b" } }
EOF2

sub last_req { my ($be) = @_; my @r = $be->requests; $r[-1] }

subtest 'absolute-form target names another vhost than Host' => sub {
    my $c = $s->connect;
    $c->send("GET http://other/ok/3 HTTP/1.1\r\nHost: localhost\r\n\r\n");
    my $r = $c->response;
    is $r && $r->{status}, 200, 'answered';
    like $r ? $r->{raw} : '', qr/X-Backend: b/, 'routed by the absolute authority (vhost other)';
    my $q = last_req($bb);
    is $q && hdr($q, 'Host'), 'other', 'backend gets Host: other';
    my @hosts = grep { lc $_->[0] eq 'host' } @{ $q ? $q->{headers} : [] };
    is scalar(@hosts), 1, 'exactly one Host';
    is $q && hdr($q, 'X-Forwarded-Host'), 'other', 'X-Forwarded-Host is the authority';
    $c->close;
};

subtest 'Host of a vhost without the proxied location' => sub {
    my $r = $s->get('/ok/3', Host => 'other');
    like $r->{raw}, qr/X-Backend: b/, 'Host other goes to b';
    $r = $s->get('/ok/3', Host => 'nosuch');
    like $r->{raw}, qr/X-Backend: a/, 'unknown Host goes to the default vhost';
};

subtest 'pipelined pair split at every byte while the first is proxied' => sub {
    my $two = "GET /slow/2000/20 HTTP/1.1\r\nHost: localhost\r\n\r\n"
            . "GET /ok/5 HTTP/1.1\r\nHost: other\r\n\r\n";
    my $bad = 0;
    for my $i (1 .. length($two) - 1) {
        my $c = $s->connect;
        $c->send(substr($two, 0, $i));
        sleep 0.01;
        $c->send(substr($two, $i));
        my @r = $c->responses(2, timeout => 10);
        my $okk = @r == 2 && $r[0]{status} == 200 && $r[0]{body} eq body(2000)
               && $r[1]{status} == 200 && $r[1]{body} eq body(5) && $r[1]{raw} =~ /X-Backend: b/
               && $r[0]{raw} =~ /X-Backend: a/;
        $bad++, diag("split at $i: " . scalar(@r) . " responses") unless $okk;
        $c->close;
    }
    is $bad, 0, 'every split answered both, in order, by the right backend';
};

sub ws_open {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    my $r = $c->response(head => 1);
    return ($c, $r);
}

subtest 'reload with two workers during requests and tunnels, slow client' => sub {
    my @ws;
    for (1 .. 4) {
        my ($c, $r) = ws_open();
        is $r && $r->{status}, 101, 'tunnel open';
        push @ws, $c;
    }
    # A slow client: sends 2 MB, reads nothing for a while.
    my $slow = $ws[0];
    my $big = 'x' x (2 * 1024 * 1024);
    my $sent = 0;
    $slow->{sock}->blocking(0);
    my $t0 = time;
    while ($sent < length($big) && time - $t0 < 2) {
        my $n = syswrite($slow->{sock}, $big, 65536, $sent);
        if (defined $n) { $sent += $n } else { sleep 0.01 }
    }
    my @reqs = map { $s->connect } 1 .. 10;
    $_->send(Luxd::request(path => '/slow/20000/50')) for @reqs;
    sleep 0.1;
    like $s->reload // 'timeout', qr/^ok generation 2 /, 'reloaded mid-flight';
    for my $c (@reqs) {
        my $r = $c->response(timeout => 10);
        is $r && $r->{status}, 200, 'proxied request across the reload';
        is $r && length($r->{body}), 20000, '  whole body';
    }
    for my $c (@ws[1 .. 3]) {
        $c->send("ping-after-reload");
        my $t = time; $c->_fill(0.2) while $c->{buf} !~ /ping-after-reload/ && time - $t < 10 && !$c->{eof};
        like $c->{buf}, qr/ping-after-reload/, 'tunnel echoes after the reload';
    }
    # Now the slow client reads everything.
    $slow->{sock}->blocking(1);
    my $got = length $slow->{buf};
    $t0 = time;
    while ($got < $sent && time - $t0 < 10) {
        my $n = sysread($slow->{sock}, my $b, 65536);
        last unless $n;
        $got += $n;
    }
    is $got, $sent, "slow client got every echoed byte ($sent)";
    $_->close for @ws;
    my $r = $s->get('/ok/3');
    is $r->{status}, 200, 'still serving';
    ok $s->alive, 'alive';
};

$s->stop;
$ba->stop;
$bb->stop;
done_testing;
