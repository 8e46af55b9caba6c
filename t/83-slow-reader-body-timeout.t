# body_timeout bounds a client that is slow to send a body, not a handler
# that is slow to read one: while a body reader holds a piece, luxd reads
# nothing from the client, and a client that sent its whole body at once
# must not get a 408 because the reader takes longer than body_timeout.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(test_server fnv1a64);

my $H = "Host: localhost\r\n";
my $s = test_server(server => { body_timeout => 1 });

for my $delay (1500, 2500) {
    my $body = 'b' x 20000;
    my $c = $s->connect;
    my $t0 = time;
    $c->send("POST /t/body?delay_ms=$delay HTTP/1.1\r\n${H}Content-Length: " . length($body) . "\r\n\r\n$body");
    my $r = $c->response(timeout => 30);
    is($r && $r->{status}, 200, "a reader waiting $delay ms per piece, body_timeout 1 s: 200");
    is($r && $r->{body}, sprintf("bytes=%d fnv=%s\n", length($body), fnv1a64($body)), 'the whole body reached it');
    cmp_ok(time - $t0, '>=', $delay / 1000, 'after the reader took its time');
    $c->close;
}

# The bound that stays: a client that stops sending mid-body still gets
# cut at body_timeout while the reader is waiting for bytes.
my $c = $s->connect;
my $t0 = time;
$c->send("POST /t/body HTTP/1.1\r\n${H}Content-Length: 100\r\n\r\n" . ('z' x 10));
# (Without the bound it would never be cut: 10 s to see it, 6 s allowed.)
ok($c->wait_closed(10), 'a stalled client is cut off');
cmp_ok(time - $t0, '<', 6, 'after about body_timeout');
$c->close;

$s->stop;
done_testing;
