# Review of the idle connections beyond keepalive (upconn.c trim,
# SURPLUS_MS): the least recently used beyond keepalive go once idle a
# second; the most recently used keepalive stay keepalive_timeout. Found:
# deciding at the put, the kept ones sank under the most-recent-first list
# and the ones in use expired a second after each use (subtest 1); a reload
# to a smaller keepalive kept the old count until keepalive_timeout (8).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use Luxd;
use Luxd::Backend qw(proxy_front upstream_idle);

sub burst {
    my ($s, $n, $path) = @_;
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => $path // '/slow/10/20', close => 1)); $c } 1 .. $n;
    my $ok = grep { my $r = $_->response(timeout => 5); $r && $r->{status} == 200 } @c;
    $_->close for @c;
    $ok;
}

# DEFECT. Which connection is "kept" is decided when it comes back, but the
# idle list is LIFO: the kept ones (given back first) sink to the bottom and
# are never taken, while the ones actually reused are surplus each time they
# come back. The kept ones then expire keepalive_timeout after the burst, the
# used one a second after its last use: the pool ends up empty although the
# last request was well within keepalive_timeout.
subtest 'a connection used within keepalive_timeout is still there (LIFO vs surplus)' => sub {
    my $be = Luxd::Backend->start(name => 'lifo');
    my $s = proxy_front($be, 'keepalive = 1, keepalive_timeout = 2', status => 1);
    is burst($s, 3), 3, 'a burst of three (one kept, two surplus)';
    my $t0 = time;
    for my $at (0.4, 0.8, 1.2, 1.6) {
        sleep $t0 + $at - time;
        is $s->get('/ok/1')->{status}, 200, "a request at +$at s";
    }
    my $last = time;
    is $be->conns_used, 3, 'all on pooled connections';
    sleep $t0 + 2.8 - time;     # 1.2 s after the last use, keepalive_timeout is 2
    is upstream_idle($s), 1, 'keepalive = 1: one idle connection remains (status endpoint)';
    is $s->get('/ok/1')->{status}, 200, 'the next request';
    is $be->conns_used, 3, 'is carried by a pooled connection, not a new connect';
    $s->stop;
    $be->stop;
};

subtest 'an idle connection beyond keepalive whose timer was armed for 60 s closes a second after its last use' => sub {
    my $be = Luxd::Backend->start(name => 't60');
    my $s = proxy_front($be, 'keepalive = 1', status => 1);     # keepalive_timeout 60
    is $s->get('/ok/1')->{status}, 200, 'conn 1 pooled, its timer for 60 s';
    my $slow = $s->connect;
    $slow->send(Luxd::request(path => '/slow/10/60', close => 1));   # takes conn 1
    $be->wait_requests(2, 5);
    is $s->get('/ok/1')->{status}, 200, 'a second request meanwhile (conn 2, alone in the pool: its timer for 60 s)';
    my $t = time;
    my $r = $slow->response(timeout => 5);
    is $r && $r->{status}, 200, 'conn 1 given back later: the most recently used, kept; conn 2 now beyond keepalive';
    $slow->close;
    is $be->conns_used, 2, 'two connections';
    my $c = $be->wait_close(2, 3);
    ok $c && $c->{how} eq 'peer-eof', 'conn 2 (least recently used) closed by luxd';
    my $dt = time - $t;
    ok $dt > 0.7 && $dt < 1.6, sprintf('a second after its last use (%.2f s), not 60', $dt);
    is upstream_idle($s), 1, 'one idle left';
    is $s->get('/ok/1')->{status}, 200, 'the next request';
    is $be->conns_used, 2, 'on conn 1, kept';
    $s->stop;
    $be->stop;
};

subtest 'load stops: exactly keepalive idle per server remain; repeated bursts do not grow the pool' => sub {
    my $be = Luxd::Backend->start(name => 'n');
    my $s = proxy_front($be, 'keepalive = 2', status => 1);
    for (1 .. 6) { is burst($s, 6), 6, "burst $_ of six"; sleep 0.5 }
    is $be->conns_used, 6, 'six connections carried six bursts 0.5 s apart';
    sleep 1.4;
    is $be->closed_by_peer, 4, 'a second after the load, the four beyond keepalive are closed';
    is upstream_idle($s), 2, 'status: two idle';
    is burst($s, 2, '/ok/1'), 2, 'two more';
    is $be->conns_used, 6, 'on the two kept';
    $s->stop;
    $be->stop;
};

subtest 'keepalive_timeout below one second applies to all' => sub {
    my $be = Luxd::Backend->start(name => 'short');
    my $s = proxy_front($be, 'keepalive = 1, keepalive_timeout = 0.4', status => 1);
    is burst($s, 4), 4, 'a burst of four';
    sleep 0.2;
    is $be->closed_by_peer, 0, 'none closed at 0.2 s';
    sleep 0.6;
    is $be->closed_by_peer, 4, 'all four closed at 0.8 s';
    is upstream_idle($s), 0, 'status: none idle';
    $s->stop;
    $be->stop;
};

subtest 'unix-socket upstream' => sub {
    my $be = Luxd::Backend->start(name => 'u', unix => 1);
    my $s = proxy_front($be, 'keepalive = 1', status => 1);
    is burst($s, 3), 3, 'a burst of three';
    is burst($s, 3), 3, 'and again';
    is $be->conns_used, 3, 'on the same three';
    sleep 1.5;
    is $be->closed_by_peer, 2, 'two closed a second later';
    is upstream_idle($s), 1, 'status: one idle';
    $s->stop;
    $be->stop;
};

subtest 'a backend that closes idle connections' => sub {
    my $be = Luxd::Backend->start(name => 'ci', close_idle => 1);
    my $s = proxy_front($be, 'keepalive = 1', status => 1);
    is burst($s, 4), 4, 'a burst of four';
    sleep 0.3;
    is upstream_idle($s), 0, 'the backend closed them: none idle';
    is burst($s, 4), 4, 'the next burst answered';
    unlike $s->error_log, qr/\[error\]/, 'no error';
    $s->stop;
    $be->stop;
};

subtest 'max_fails: surplus connections of a server marked down' => sub {
    my $be = Luxd::Backend->start(name => 'mf');
    my $dead = Luxd::free_port();
    my $s = proxy_front($be, qq{"127.0.0.1:$dead", keepalive = 1, max_fails = 1, fail_timeout = 30}, status => 1);
    is burst($s, 4), 4, 'a burst of four (one server refuses, marked down)';
    sleep 1.4;
    is upstream_idle($s), 1, 'one idle a second later';
    $s->stop;
    $be->stop;
};

# Pre-existing (the same before the change): a reload to a smaller keepalive
# keeps the idle connections of the old one until keepalive_timeout.
subtest 'reload to a smaller keepalive' => sub {
    my $be = Luxd::Backend->start(name => 'rl');
    my $s = proxy_front($be, 'keepalive = 4', status => 1);
    is burst($s, 4), 4, 'four, all kept';
    sleep 0.2;
    is upstream_idle($s), 4, 'four idle';
    (my $t = $s->{config_text}) =~ s{keepalive = 4}{keepalive = 1};
    $s->write_config($t);
    like $s->reload // '', qr/^ok/, 'reloaded with keepalive = 1';
    is burst($s, 2, '/ok/1'), 2, 'two requests after the reload';
    sleep 1.4;
    is upstream_idle($s), 1, 'a second later, keepalive = 1 idle';
    $s->stop;
    $be->stop;
};

done_testing;
