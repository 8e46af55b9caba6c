# send_timeout on proxied streams written by uv_try_write first (624ed1b):
# a client that stops reading a proxied response is closed about
# send_timeout after the socket last took bytes, with the backend
# connection let go, for a length-delimited and a chunked stream; a client
# that reads slowly but steadily (each write moves the output on) is not.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep time);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body);

my $be = Luxd::Backend->start(name => 's');
my $addr = $be->addr;
my $s = Luxd->new(
    server => { send_timeout => 1 },
    config => qq{upstream "s" { "$addr", read_timeout = 30 }
vhost "l" { default = true, location "/" { proxy = "s" } }
});

for my $path ('/ok/50000000', '/chunked/50000000/4000') {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => $path, close => 1));
    $c->_fill(2);
    # Reads nothing more for 3 send_timeouts: the server must give up.
    sleep 3;
    # Now drain: if the server closed (send_timeout), the stream ends early.
    my $got = length($c->{buf}) + length($c->read_all(10));
    ok($got < 50000000, "$path: a stalled client is cut off ($got bytes)");
    ok($c->{eof}, "$path: the connection was closed");
    $c->close;
}

# A slow but steady reader of a chunked stream gets all of it.
{
    my $N = 4000000;
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => "/chunked/$N/1000", close => 1));
    my $t0 = time;
    while (!$c->{eof} && time - $t0 < 60) {
        my $k = sysread($c->{sock}, my $chunk, 65536);
        if (!$k) { $c->{eof} = 1; last }
        $c->{buf} .= $chunk;
        sleep 0.002;
    }
    my $r = Luxd::parse_one(\$c->{buf}, eof => 1);
    ok($r && $r->{status} == 200 && defined $r->{body} && $r->{body} eq body($N),
       'a steady slow reader gets the whole chunked stream');
    $c->close;
}

$s->stop;
$be->stop;
done_testing;
