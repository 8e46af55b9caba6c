# A body reader that answers after a piece without asking for more (what a
# proxy does when the backend answers before the upload is over): the core
# drops the rest of the body and the connection goes on with the next
# request. Found in review of issue 9: the piece left body_paused set, so
# after the response the discard never parsed again, reading stalled with
# a full buffer, and the connection hung until body_timeout; the pipelined
# request behind the body was never answered.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(test_server);

my $H = "Host: localhost\r\n";
my $s = test_server(
    # Long, so that the hang this test is about (until body_timeout) stands
    # well apart from a slow run: 10 s against the 8 s bound below.
    server => { body_timeout => 10 },
);

for my $size (1000, 300_000) {
    subtest "body of $size bytes, answered at its first piece" => sub {
        my $c = $s->connect;
        my $t0 = time;
        # The first part alone, so that the reader sees a piece before the
        # rest is there; then the rest and a pipelined request.
        my $body = 'x' x $size;
        $c->send("POST /t/body?early=1 HTTP/1.1\r\n${H}Content-Length: $size\r\n\r\n" . substr($body, 0, 100));
        select(undef, undef, undef, 0.2);
        $c->send(substr($body, 100) . "GET /a.txt HTTP/1.1\r\n$H\r\n");
        my @r = $c->responses(2, timeout => 15);
        my $took = time - $t0;
        check_response($r[0], { status => 200, body => "early\n" }, 'the early answer');
        check_response($r[1], { status => 200, body => "aaa\n" }, 'the pipelined request after the body');
        cmp_ok($took, '<', 8, sprintf('at once (%.2f s), not after body_timeout', $took));
        $c->close;
    };
}

ok($s->alive, 'server alive');
$s->stop;
done_testing;
