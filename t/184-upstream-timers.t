# An upstream connection's one timer serves its idle time in the pool
# (keepalive_timeout) and a request's deadlines (read_timeout), and it is
# moved only when it would fire too late. These pin down each way that could
# go wrong: an idle connection that is never closed, one closed while it is
# reused, a deadline that waits for a later idle time, and an idle time that
# cuts a slow answer; and the connections beyond keepalive, kept a moment.
#
# Timing on a loaded machine: idle times of seconds, gaps between requests
# well inside them, closes awaited (up to 10 s) rather than read once after
# a sleep, and "not before" judged from the backend's record times.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use Luxd;
use Luxd::Backend qw(proxy_front);

# conn => the time of the last request record on it (the backend's clock).
sub last_request_times {
    my ($be) = @_;
    my %t;
    $t{ $_->{conn} } = $_->{time} for $be->requests;
    return \%t;
}

subtest 'an idle connection is closed after keepalive_timeout, not before' => sub {
    my $be = Luxd::Backend->start(name => 'i');
    my $s = proxy_front($be, 'keepalive_timeout = 3');
    is $s->get('/ok/1')->{status}, 200, 'answered';
    ok wait_for(sub { $be->closed_by_peer >= 1 }), 'closed by luxd (within 10 s)';
    is $be->closed_by_peer, 1, 'that one';
    my ($q) = $be->requests;
    my ($c) = $be->closes;
    cmp_ok $c->{time} - $q->{time}, '>=', 2.95, 'once keepalive_timeout passed, not before';
    is $s->get('/ok/1')->{status}, 200, 'the next request is answered';
    is $be->conns_used, 2, 'on a new connection';
    $s->stop;
    $be->stop;
};

subtest 'reuse within keepalive_timeout starts the idle time again' => sub {
    my $be = Luxd::Backend->start(name => 'r');
    my $s = proxy_front($be, 'keepalive_timeout = 3');
    # Each request 1 s after the last: more than keepalive_timeout in all
    # (4 s), well less between two. An idle time counted from the first put,
    # or a timer left from it, would close the connection in the middle.
    for (1 .. 5) {
        sleep 1.0 if $_ > 1;
        is $s->get('/ok/1')->{status}, 200, "request $_ answered";
    }
    is $be->conns_used, 1, 'one connection carried all five';
    is $be->closed_by_peer, 0, 'and was not closed meanwhile';
    ok wait_for(sub { $be->closed_by_peer >= 1 }), 'then closed by luxd';
    my $last = last_request_times($be);
    my ($c) = $be->closes;
    cmp_ok $c->{time} - $last->{ $c->{conn} }, '>=', 2.95, 'idle for keepalive_timeout since the last request';
    $s->stop;
    $be->stop;
};

subtest 'a read_timeout shorter than the idle time fires on a reused connection' => sub {
    my $be = Luxd::Backend->start(name => 't');
    # read_timeout 2 s: also the first request's (a fresh connection to a
    # backend that forks for it) on a loaded machine.
    my $s = proxy_front($be, 'keepalive_timeout = 30, read_timeout = 2');
    is $s->get('/ok/1')->{status}, 200, 'first request: the connection is pooled for 30 s';
    my $t0 = time;
    my $r = $s->http(path => '/sleep/25000', timeout => 20);
    my $took = time - $t0;
    is $r->{status}, 504, 'a silent backend: 504';
    is $be->conns_used, 1, 'on the reused connection';
    cmp_ok $took, '<', 10, sprintf('after read_timeout, not the idle time (%.2f s)', $took);
    cmp_ok $took, '>=', 1.95, 'and not before read_timeout';
    $s->stop;
    $be->stop;
};

# The second request must find the first one's connection still pooled
# (idle 1 s at most): if the loaded machine sends it later, it connects anew
# and proves nothing, and the round is done again (at most three times).
subtest 'an idle time shorter than the answer does not cut a reused connection' => sub {
    for my $try (1 .. 3) {
        my $be = Luxd::Backend->start(name => 's');
        my $s = proxy_front($be, 'keepalive_timeout = 1, read_timeout = 8');
        is $s->get('/ok/1')->{status}, 200, 'first request';
        my $r = $s->http(path => '/sleep/3000', timeout => 10);
        if ($be->conns_used != 1 && $try < 3) {
            diag "try $try: the second request came after the idle time; again";
            $s->stop;
            $be->stop;
            next;
        }
        is $r->{status}, 200, 'an answer after 3 s, three idle times, is relayed';
        like $r->{body}, qr/^slept 3000$/m, 'whole';
        is $be->conns_used, 1, 'on the reused connection';
        $s->stop;
        $be->stop;
        last;
    }
};

# The second burst's client connections are made while the first one's
# answers are on their way (all at about the same time: /sleep/300), so the
# pooled connections wait for its requests as little as the machine allows.
# Should the loaded machine stall a second anyway, connections idle that
# long go rightly and the second burst connects anew: then the round is
# done again (at most five times), but only when each that went had been
# idle a second, so a pool that closes them at once still fails (fewer
# than five: a burst was not concurrent; again too).
subtest 'connections beyond keepalive carry the next burst, then go' => sub {
    for my $try (1 .. 5) {
        my $be = Luxd::Backend->start(name => 'b');
        my $s = proxy_front($be, 'keepalive = 2');
        my @c = map { $s->connect } 1 .. 5;
        my @ok;
        for my $i (1, 2) {
            $_->send(Luxd::request(path => '/sleep/300', close => 1)) for @c;
            my @next = $i == 1 ? map { $s->connect } 1 .. 5 : ();
            push @ok, scalar grep { my $r = $_->response(timeout => 10); $r && $r->{status} == 200 } @c;
            $_->close for @c;
            @c = @next;
        }
        my ($ok1, $ok2) = @ok;
        my $used = $be->conns_used;
        my $last = last_request_times($be);
        my @cl = $be->closes;
        if ($try < 5 && ($used < 5 || ($used > 5 && @cl && !grep { $_->{time} - ($last->{ $_->{conn} } // 0) < 1.0 } @cl))) {
            diag "try $try: $used connections (loaded machine); again";
            $s->stop;
            $be->stop;
            next;
        }
        is $ok1, 5, 'a burst of five answered';
        is $ok2, 5, 'and a second one at once';
        is $used, 5, 'on the same five connections: none closed and connected again';
        ok wait_for(sub { $be->closed_by_peer >= 3 }), 'then luxd closes connections';
        is $be->closed_by_peer, 3, 'the three beyond keepalive';
        $last = last_request_times($be);
        cmp_ok $_->{time} - $last->{ $_->{conn} }, '>=', 1.0, "conn $_->{conn} after a second idle" for $be->closes;
        is $s->get('/ok/1')->{status}, 200, 'the next request';
        is $be->conns_used, 5, 'takes one of the two kept';
        $s->stop;
        $be->stop;
        last;
    }
};

done_testing;
