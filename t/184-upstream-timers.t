# An upstream connection's one timer serves its idle time in the pool
# (keepalive_timeout) and a request's deadlines (read_timeout), and it is
# moved only when it would fire too late. These pin down each way that could
# go wrong: an idle connection that is never closed, one closed while it is
# reused, a deadline that waits for a later idle time, and an idle time that
# cuts a slow answer; and the connections beyond keepalive, kept a moment.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use Luxd;
use Luxd::Backend qw(proxy_front);

subtest 'an idle connection is closed after keepalive_timeout, not before' => sub {
    my $be = Luxd::Backend->start(name => 'i');
    my $s = proxy_front($be, 'keepalive_timeout = 0.6');
    is $s->get('/ok/1')->{status}, 200, 'answered';
    sleep 0.3;
    is $be->closed_by_peer, 0, 'still pooled at half the idle time';
    sleep 1.0;
    is $be->closed_by_peer, 1, 'closed by luxd once keepalive_timeout passed';
    is $s->get('/ok/1')->{status}, 200, 'the next request is answered';
    is $be->conns_used, 2, 'on a new connection';
    $s->stop;
    $be->stop;
};

subtest 'reuse within keepalive_timeout starts the idle time again' => sub {
    my $be = Luxd::Backend->start(name => 'r');
    my $s = proxy_front($be, 'keepalive_timeout = 0.6');
    # Each request 0.35 s after the last: more than keepalive_timeout in
    # all, less between two. An idle time counted from the first put, or a
    # timer left from it, would close the connection in the middle.
    for (1 .. 4) {
        is $s->get('/ok/1')->{status}, 200, "request $_ answered";
        sleep 0.35;
    }
    is $be->conns_used, 1, 'one connection carried all four';
    is $be->closed_by_peer, 0, 'and was not closed meanwhile';
    sleep 1.0;
    is $be->closed_by_peer, 1, 'then closed, idle for keepalive_timeout';
    $s->stop;
    $be->stop;
};

subtest 'a read_timeout shorter than the idle time fires on a reused connection' => sub {
    my $be = Luxd::Backend->start(name => 't');
    my $s = proxy_front($be, 'keepalive_timeout = 30, read_timeout = 0.5');
    is $s->get('/ok/1')->{status}, 200, 'first request: the connection is pooled for 30 s';
    my $t0 = time;
    my $r = $s->get('/sleep/5000', timeout => 10);
    my $took = time - $t0;
    is $r->{status}, 504, 'a silent backend: 504';
    is $be->conns_used, 1, 'on the reused connection';
    cmp_ok $took, '<', 2.5, sprintf('after read_timeout, not the idle time (%.2f s)', $took);
    cmp_ok $took, '>=', 0.45, 'and not before read_timeout';
    $s->stop;
    $be->stop;
};

subtest 'an idle time shorter than the answer does not cut a reused connection' => sub {
    my $be = Luxd::Backend->start(name => 's');
    my $s = proxy_front($be, 'keepalive_timeout = 0.3, read_timeout = 5');
    is $s->get('/ok/1')->{status}, 200, 'first request';
    my $r = $s->get('/sleep/1200', timeout => 10);
    is $r->{status}, 200, 'an answer after 1.2 s, four idle times, is relayed';
    like $r->{body}, qr/^slept 1200$/m, 'whole';
    is $be->conns_used, 1, 'on the reused connection';
    $s->stop;
    $be->stop;
};

subtest 'connections beyond keepalive carry the next burst, then go' => sub {
    my $be = Luxd::Backend->start(name => 'b');
    my $s = proxy_front($be, 'keepalive = 2');
    my $burst = sub {
        my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => '/slow/10/100', close => 1)); $c } 1 .. 5;
        my $ok = grep { my $r = $_->response(timeout => 5); $r && $r->{status} == 200 } @c;
        $_->close for @c;
        $ok;
    };
    is $burst->(), 5, 'a burst of five answered';
    is $burst->(), 5, 'and a second one at once';
    is $be->conns_used, 5, 'on the same five connections: none closed and connected again';
    sleep 1.5;
    is $be->closed_by_peer, 3, 'a second later, the three beyond keepalive are closed';
    is $s->get('/ok/1')->{status}, 200, 'the next request';
    is $be->conns_used, 5, 'takes one of the two kept';
    $s->stop;
    $be->stop;
};

done_testing;
