# issue 9: a handler that returns ASYNC. GET /t/async?ms=M on the test
# handler of build/luxd-test queues a thread-pool job that sleeps M ms; the
# handler is resumed after it (not run again from the start: the answer
# counts "entered=1 resumed=1"). Asserted: the answer, many at once, the
# event loop serving others meanwhile, a client that goes away during the
# wait, and a reload and a stop during the wait. All new with issue 9.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use Socket qw(SOL_SOCKET SO_LINGER);
use IO::Select;
use lib 't/lib';
use Luxd;

my $ANSWER = "async entered=1 resumed=1\n";
my $H = "Host: localhost\r\n";
my $CONFIG = <<'EOF_CONF';
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  location "/t/" { test_handler = true },
}
EOF_CONF

my $s = Luxd->new(
    test_handlers => 1,
    config => $CONFIG,
    files  => { 'www/a.txt' => "aaa\n" },
    server => { drain_timeout => 20, access_log_buffer => 0 },
);

sub async_req { my ($ms) = @_; "GET /t/async?ms=$ms HTTP/1.1\r\n$H\r\n" }

# Waits (10 s at most) until luxd has read what these clients sent: the
# server's end of each connection is in /proc/net/tcp with nothing left
# in its receive queue. Then each request is in its handler (the job is
# queued at once), rather than perhaps not yet read after a fixed sleep.
sub server_read {
    my ($srv, @c) = @_;
    my %want = map { $_->sock->sockport => 1 } @c;
    my $deadline = time + 10;
    while (1) {
        my %done;
        open my $fh, '<', '/proc/net/tcp' or return 0;
        while (<$fh>) {
            my (undef, $l, $r, undef, $q) = split;
            next unless $l && $l =~ /:([0-9A-F]{4})$/ && hex($1) == $srv->port;
            my ($rp) = $r =~ /:([0-9A-F]{4})$/ or next;
            my ($rx) = ($q // '') =~ /:([0-9A-F]+)$/ or next;
            $done{hex $rp} = 1 if $want{hex $rp} && hex($rx) == 0;
        }
        return 1 if keys(%done) == keys(%want);
        return 0 if time > $deadline;
        sleep 0.01;
    }
}

subtest 'one async request' => sub {
    my $c = $s->connect;
    my $t0 = time;
    $c->send(async_req(200));
    my $r = $c->response(timeout => 10);
    my $took = time - $t0;
    check_response($r, { status => 200, body => $ANSWER }, 'entered once, resumed once');
    cmp_ok($took, '>=', 0.19, sprintf('answered after the job (%.3f s)', $took));
    # The connection goes on after a resumed handler.
    $c->send(async_req(1) . "GET /a.txt HTTP/1.1\r\n$H\r\n");
    my @r = $c->responses(2, timeout => 10);
    check_response($r[0], { status => 200, body => $ANSWER }, 'a second one on the connection');
    check_response($r[1], { status => 200, body => "aaa\n" }, 'a pipelined static file after it');
    $c->close;
};

subtest '20 at once on separate connections, the loop free meanwhile' => sub {
    my @c = map { $s->connect } 1 .. 20;
    $_->send(async_req(1000)) for @c;
    ok(server_read($s, @c), 'premise: luxd has read the 20 requests');
    # The jobs run on the thread pool: the event loop answers others now,
    # with no job of its own (a stream) and with no file to open. Judged
    # by the order of the answers, not by the clock: when the stream is
    # answered, most of the jobs (1 s each, a few at a time) are still
    # running; a loop that waited for them would answer it after them.
    my $c = $s->connect;
    my $t0 = time;
    $c->send("GET /t/stream?bytes=10 HTTP/1.1\r\n${H}Connection: close\r\n\r\n");
    my $r = $c->response(timeout => 10);
    my $took = time - $t0;
    check_response($r, { status => 200, body => 'abcdefghij' }, 'a stream request during the wait');
    my $pending = grep { !IO::Select->new($_->sock)->can_read(0) } @c;
    cmp_ok($pending, '>=', 16, sprintf('answered before the jobs: %d of the 20 still unanswered (it took %.3f s)', $pending, $took));
    $c->close;
    my $ok = 0;
    for my $x (@c) {
        my $r = $x->response(timeout => 30);
        $ok++ if $r && ($r->{status} // 0) == 200 && $r->{body} eq $ANSWER;
        $x->close;
    }
    is($ok, 20, 'all 20 answered, each entered once and resumed once');
};

subtest 'a client that goes away during the wait' => sub {
    for my $how (qw(close reset)) {
        for my $after (0, 0.05, 0.15) {
            my $c = $s->connect;
            $c->send(async_req(150));
            sleep $after if $after;
            # A reset (SO_LINGER 0) is the client gone at once, a close
            # leaves a half-closed connection.
            setsockopt($c->sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) if $how eq 'reset';
            $c->close;
        }
    }
    sleep 0.5;    # every job is over, every handler resumed on a gone connection
    ok($s->alive, 'the server is alive');
    check_response($s->get('/t/async?ms=1'), { status => 200, body => $ANSWER }, 'the next async request is served');
    check_response($s->get('/a.txt'), { status => 200, body => "aaa\n" }, 'and a static file');
};

subtest 'a reload during the wait' => sub {
    my $c = $s->connect;
    $c->send(async_req(1000));
    ok(server_read($s, $c), 'premise: luxd has read the request');
    my $out = $s->reload(timeout => 15);
    like($out // $s->reload_error, qr/^ok generation 2\b/, 'reload accepted during the wait');
    check_response($c->response(timeout => 15), { status => 200, body => $ANSWER }, 'the waiting request is answered');
    check_response($s->get('/t/async?ms=1'), { status => 200, body => $ANSWER }, 'a request after the reload');
    $c->close;
};

subtest 'a stop during the wait' => sub {
    my $s2 = Luxd->new(test_handlers => 1, config => $CONFIG, server => { drain_timeout => 20 });
    my $c = $s2->connect;
    $c->send(async_req(800));
    ok(server_read($s2, $c), 'premise: luxd has read the request');
    my $t0 = time;
    $s2->signal('TERM');
    my $r = $c->response(timeout => 15);
    check_response($r, { status => 200, body => $ANSWER }, 'the request in flight is answered');
    is(lc($r->{headers}{connection} // ''), 'close', '... saying Connection: close') if $r;
    ok(defined $s2->wait_exit(15), 'the server exits');
    cmp_ok(time - $t0, '<', 10, 'well before drain_timeout');
    ok($s2->stop, 'cleanly');
    $c->close;
};

like($s->access_log, qr{"GET /t/async\?ms=200 HTTP/1\.1" 200 }, 'the access log has the async request');
$s->stop;
done_testing;
