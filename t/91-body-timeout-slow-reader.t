# body_timeout bounds how long luxd waits for the client's body bytes. While
# a handler that reads the body is slow and holds it (the parser paused,
# reading stopped), luxd is not waiting for the client: the deadline kept
# running there, and a body the client had sent in time got 408 once the
# handler's delay passed body_timeout. A client that really stops sending
# must still get 408 (or a close) after body_timeout.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $H = "Host: localhost\r\n";
my $s = Luxd->new(
    test_handlers => 1,
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  location "/t/" { test_handler = true },
}
EOF_CONF
    files  => { 'www/a.txt' => "aaa\n" },
    server => { body_timeout => 2, keepalive_timeout => 30 },
);

# The handler waits 2.5 s after each piece; body_timeout is 2 s (the client's
# second piece, 0.2 s after the first, must come within it on a loaded
# machine).
for my $case (
    [ 'chunked', "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n", "3\r\ndef\r\n0\r\n\r\n" ],
    [ 'Content-Length', "Content-Length: 6\r\n", "abc", "def" ],
) {
    my ($name, $framing, $first, $rest) = @$case;
    my $c = $s->connect;
    $c->send("POST /t/body?delay_ms=2500 HTTP/1.1\r\n$H$framing\r\n$first");
    sleep 0.2;
    $c->send($rest . "GET /a.txt HTTP/1.1\r\n${H}Connection: close\r\n\r\n");
    my @r = $c->responses(2, timeout => 15);
    is($r[0] && $r[0]{status}, 200, "$name: a slow reader of a body sent in time gets no 408");
    like($r[0] && $r[0]{body} // '', qr/^bytes=6 /, "$name: all of the body read");
    is($r[1] && $r[1]{body}, "aaa\n", "$name: the pipelined request after it");
}

# A client that sends part of its body and stops: 408 after body_timeout,
# slow reader or not.
for my $delay (0, 300) {
    my $c = $s->connect;
    my $t0 = time;
    $c->send("POST /t/body?delay_ms=$delay HTTP/1.1\r\n${H}Content-Length: 10\r\n\r\nabc");
    my $r = $c->response(timeout => 10);
    ok($r ? $r->{status} == 408 : $c->wait_closed(0), "delay_ms=$delay: a client that stops sending times out");
    cmp_ok(time - $t0, '<', 8, "delay_ms=$delay: within body_timeout and the reader's delay");
}

$s->stop;
done_testing;
