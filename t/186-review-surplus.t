# Review of the idle connections beyond keepalive (upconn.c trim,
# SURPLUS_MS): the least recently used beyond keepalive go once idle a
# second; the most recently used keepalive stay keepalive_timeout. Found:
# deciding at the put, the kept ones sank under the most-recent-first list
# and the ones in use expired a second after each use (subtest 1); a reload
# to a smaller keepalive kept the old count until keepalive_timeout (8).
#
# Timing on a loaded machine: no check reads a count once after a fixed
# sleep. The tests wait (up to 10 s) for the backend's close records and
# judge when each connection went from the records' times: a lower bound
# (not before its idle time) holds however slow the machine is; upper
# bounds are loose or replaced by which connection went.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use Luxd;
use Luxd::Backend qw(proxy_front upstream_idle);

sub burst {
    my ($s, $n, $path) = @_;
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => $path // '/slow/10/20', close => 1)); $c } 1 .. $n;
    my $ok = grep { my $r = $_->response(timeout => 10); $r && $r->{status} == 200 } @c;
    $_->close for @c;
    $ok;
}

# $k bursts of $n, back to back: the next burst's client connections are
# made while the answers of one are on their way, so that the pooled
# connections wait for the next requests as little as the machine allows.
# /sleep/200: all answers of a burst come at about the same time. Returns
# how many were answered 200.
sub bursts {
    my ($s, $k, $n, $path) = @_;
    my $ok = 0;
    my @c = map { $s->connect } 1 .. $n;
    for my $i (1 .. $k) {
        $_->send(Luxd::request(path => $path // '/sleep/200', close => 1)) for @c;
        my @next = $i < $k ? map { $s->connect } 1 .. $n : ();
        $ok += grep { my $r = $_->response(timeout => 10); $r && $r->{status} == 200 } @c;
        $_->close for @c;
        @c = @next;
    }
    $ok;
}

# Whether the loaded machine spoiled a round of bursts: $used connections
# where $want were meant. Fewer: a burst was not concurrent. More: some
# connection went between bursts, which is right only when it had been idle
# a second (every close so far was), not when luxd closed it at once.
sub spoiled {
    my ($be, $used, $want) = @_;
    return 1 if $used < $want;
    return 0 if $used == $want;
    my $last = last_request_times($be);
    my @cl = $be->closes;
    return @cl && !grep { $_->{time} - ($last->{ $_->{conn} } // 0) < 1.0 } @cl;
}

# conn => the time of the last request record on it (the backend's clock).
sub last_request_times {
    my ($be) = @_;
    my %t;
    $t{ $_->{conn} } = $_->{time} for $be->requests;
    return \%t;
}

# DEFECT. Which connection is "kept" is decided when it comes back, but the
# idle list is LIFO: the kept ones (given back first) sink to the bottom and
# are never taken, while the ones actually reused are surplus each time they
# come back. The kept ones then expire keepalive_timeout after the burst, the
# used one a second after its last use: the pool ends up empty although the
# last request was well within keepalive_timeout.
# Here: once the two beyond keepalive have gone, the one left must be the
# one the requests used (with the defect the used one is the second to go,
# a second after its last use, and the one left is a kept one that was never
# taken). keepalive_timeout 5 keeps the used one seconds past these checks.
subtest 'a connection used within keepalive_timeout is still there (LIFO vs surplus)' => sub {
    my $be = Luxd::Backend->start(name => 'lifo');
    my $s = proxy_front($be, 'keepalive = 1, keepalive_timeout = 5', status => 1);
    is burst($s, 3), 3, 'a burst of three (one kept, two surplus)';
    my %used;
    for my $i (1 .. 4) {
        sleep 0.4;
        my $r = $s->get('/ok/1');
        is $r->{status}, 200, "request $i, 0.4 s after the last";
        $used{ $r->{headers}{'x-conn'} // '?' }++;
    }
    is $be->conns_used, 3, 'all on pooled connections';
    is scalar(keys %used), 1, 'the four on one connection, the most recently used';
    my ($last) = keys %used;
    ok wait_for(sub { $be->closed_by_peer >= 2 }), 'two connections closed by luxd';
    is $be->closed_by_peer, 2, 'two, the ones beyond keepalive';
    ok !(grep { $_->{conn} eq $last } $be->closes), "the one the requests used (conn $last) is not one of them"
      or diag explain [$be->closes];
    is upstream_idle($s), 1, 'keepalive = 1: one idle connection remains (status endpoint)';
    my $r = $s->get('/ok/1');
    is $r->{status}, 200, 'the next request';
    is $be->conns_used, 3, 'is carried by a pooled connection, not a new connect';
    is $r->{headers}{'x-conn'}, $last, 'the one used before';
    $s->stop;
    $be->stop;
};

# Conn 2 must come back while conn 1 is busy and conn 1 within a second
# after it (so conn 2's 60 s timer is the one cut). When the loaded machine
# delays the second request past the slow answer, it lands on conn 1 and
# proves nothing: then the round is done again (at most three times).
subtest 'an idle connection beyond keepalive whose timer was armed for 60 s closes a second after its last use' => sub {
    for my $try (1 .. 3) {
        my $be = Luxd::Backend->start(name => 't60');
        my $s = proxy_front($be, 'keepalive = 1', status => 1);     # keepalive_timeout 60
        is $s->get('/ok/1')->{status}, 200, 'conn 1 pooled, its timer for 60 s';
        my $slow = $s->connect;
        $slow->send(Luxd::request(path => '/slow/10/80', close => 1));   # takes conn 1 for 0.8 s
        $be->wait_requests(2, 10);
        my $r2 = $s->get('/ok/1');
        if (($r2->{headers}{'x-conn'} // '') ne '2' && $try < 3) {
            diag "try $try: the second request came after the slow answer (X-Conn "
              . ($r2->{headers}{'x-conn'} // 'none') . '); again';
            $slow->close;
            $s->stop;
            $be->stop;
            next;
        }
        is $r2->{status}, 200, 'a second request meanwhile';
        is $r2->{headers}{'x-conn'}, 2, 'on conn 2, alone in the pool: its timer for 60 s';
        my ($q2) = grep { $_->{conn} == 2 } $be->requests;
        my $r = $slow->response(timeout => 10);
        is $r && $r->{status}, 200, 'conn 1 given back later: the most recently used, kept; conn 2 now beyond keepalive';
        $slow->close;
        is $be->conns_used, 2, 'two connections';
        my $c = $be->wait_close(2, 10);
        ok $c && $c->{how} eq 'peer-eof', 'conn 2 (least recently used) closed by luxd within 10 s, not 60';
        my $dt = $c && $q2 ? $c->{time} - $q2->{time} : -1;
        ok $dt >= 0.9 && $dt < 10, sprintf('a second after its last use (%.2f s after its request), not 60', $dt);
        is upstream_idle($s), 1, 'one idle left';
        my $r3 = $s->get('/ok/1');
        is $r3->{status}, 200, 'the next request';
        is $be->conns_used, 2, 'on a kept connection';
        is $r3->{headers}{'x-conn'}, 1, 'conn 1';
        $s->stop;
        $be->stop;
        last;
    }
};

# The bursts follow each other at once: the connections beyond keepalive
# stay a second, so each burst finds all six. Should the loaded machine
# stall a second between two bursts, connections idle that long go rightly
# and later bursts connect anew; that round is done again (at most five
# times), but only when every connection that went had been idle a second,
# so a pool that closes its surplus at once (the pool growing and shrinking
# with each burst) still fails.
subtest 'load stops: exactly keepalive idle per server remain; repeated bursts do not grow the pool' => sub {
    for my $try (1 .. 5) {
        my $be = Luxd::Backend->start(name => 'n');
        my $s = proxy_front($be, 'keepalive = 2', status => 1);
        my $ok = bursts($s, 6, 6);
        my $used = $be->conns_used;
        if ($try < 5 && spoiled($be, $used, 6)) {
            diag "try $try: $used connections (loaded machine); again";
            $s->stop;
            $be->stop;
            next;
        }
        is $ok, 36, 'six bursts of six answered';
        is $used, 6, 'six connections carried six bursts';
        ok wait_for(sub { $be->closed_by_peer >= 4 }), 'after the load, luxd closes connections';
        is $be->closed_by_peer, 4, 'the four beyond keepalive';
        my $last = last_request_times($be);
        for my $c ($be->closes) {
            cmp_ok $c->{time} - $last->{ $c->{conn} }, '>=', 1.0, "conn $c->{conn} went after a second idle, not at once";
        }
        is upstream_idle($s), 2, 'status: two idle';
        is burst($s, 2, '/ok/1'), 2, 'two more';
        is $be->conns_used, 6, 'on the two kept';
        $s->stop;
        $be->stop;
        last;
    }
};

# keepalive_timeout 0.2: every connection, kept or beyond keepalive, goes
# 0.2 s after it came back, not after the surplus second. Not before: from
# the backend's request record (the answer takes 0.2 s more, then the put).
# Not the second: judged from when the test had all answers, after the puts
# (0.9 s leaves 0.7 s for the backend to record the close on a loaded
# machine).
subtest 'keepalive_timeout below one second applies to all' => sub {
    my $be = Luxd::Backend->start(name => 'short');
    my $s = proxy_front($be, 'keepalive = 1, keepalive_timeout = 0.2', status => 1);
    is burst($s, 4), 4, 'a burst of four';
    my $t = time;
    ok wait_for(sub { $be->closed_by_peer >= 4 }), 'all four closed by luxd';
    is $be->closed_by_peer, 4, 'four';
    my $last = last_request_times($be);
    for my $c ($be->closes) {
        my $idle = $c->{time} - $last->{ $c->{conn} };
        cmp_ok $idle, '>=', 0.2, "conn $c->{conn}: not before keepalive_timeout";
        my $after = $c->{time} - $t;
        cmp_ok $after, '<', 0.9, "conn $c->{conn}: closed at keepalive_timeout, not after the surplus second";
    }
    is upstream_idle($s), 0, 'status: none idle';
    $s->stop;
    $be->stop;
};

subtest 'unix-socket upstream' => sub {
  for my $try (1 .. 5) {
    my $be = Luxd::Backend->start(name => 'u', unix => 1);
    my $s = proxy_front($be, 'keepalive = 1', status => 1);
    my $ok = bursts($s, 2, 3);
    if ($try < 5 && spoiled($be, $be->conns_used, 3)) {
        diag "try $try: " . $be->conns_used . ' connections (loaded machine); again';
        $s->stop;
        $be->stop;
        next;
    }
    is $ok, 6, 'a burst of three, and again';
    is $be->conns_used, 3, 'on the same three';
    ok wait_for(sub { $be->closed_by_peer >= 2 }), 'luxd closes connections';
    is $be->closed_by_peer, 2, 'two, the ones beyond keepalive';
    my $last = last_request_times($be);
    cmp_ok $_->{time} - $last->{ $_->{conn} }, '>=', 1.0, "conn $_->{conn} after a second idle" for $be->closes;
    is upstream_idle($s), 1, 'status: one idle';
    $s->stop;
    $be->stop;
    last;
  }
};

subtest 'a backend that closes idle connections' => sub {
    my $be = Luxd::Backend->start(name => 'ci', close_idle => 1);
    my $s = proxy_front($be, 'keepalive = 1', status => 1);
    is burst($s, 4), 4, 'a burst of four';
    ok wait_for(sub { upstream_idle($s) == 0 }), 'the backend closed them: none idle';
    is burst($s, 4), 4, 'the next burst answered';
    unlike $s->error_log, qr/\[error\]/, 'no error';
    $s->stop;
    $be->stop;
};

subtest 'max_fails: surplus connections of a server marked down' => sub {
    my $be = Luxd::Backend->start(name => 'mf');
    # Bound and not listening: a connect is refused, and no one else gets the port.
    my $held = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp') or die $!;
    my $dead = $held->sockport;
    my $s = proxy_front($be, qq{"127.0.0.1:$dead", keepalive = 1, max_fails = 1, fail_timeout = 30}, status => 1);
    is burst($s, 4), 4, 'a burst of four (one server refuses, marked down)';
    ok wait_for(sub { $be->closed_by_peer >= 3 }), 'luxd closes the surplus';
    is $be->closed_by_peer, 3, 'three';
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
    ok wait_for(sub { upstream_idle($s) == 4 }), 'four idle';
    (my $t = $s->{config_text}) =~ s{keepalive = 4}{keepalive = 1};
    $s->write_config($t);
    like $s->reload // '', qr/^ok/, 'reloaded with keepalive = 1';
    is burst($s, 2, '/ok/1'), 2, 'two requests after the reload';
    # Three go; one more for each connection opened anew, should the loaded
    # machine have stalled past the surplus second before the two requests.
    ok wait_for(sub { $be->closed_by_peer >= $be->conns_used - 1 }),
      'luxd closes all but one (the ones beyond the new keepalive; not after 60 s)';
    is $be->closed_by_peer, $be->conns_used - 1, 'all but one';
    is upstream_idle($s), 1, 'keepalive = 1 idle';
    $s->stop;
    $be->stop;
};

done_testing;
