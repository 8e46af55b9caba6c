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

my $nreq = 0;
for my $path ('/ok/50000000', '/chunked/50000000/4000') {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => $path, close => 1));
    $c->_fill(10);
    # Reads nothing more: the server must give up about send_timeout (1 s)
    # after the socket last took bytes, and let the backend's connection go.
    # Awaited (10 s) by the backend's record of that connection's end; left
    # open, the backend would be blocked writing to luxd until read_timeout
    # (30 s).
    my ($q) = reverse Luxd::Backend::wait_requests($be, ++$nreq, 10);
    ok($q && $q->{target} eq $path, "$path: the backend got the request");
    my $closed = $q && $be->wait_close($q->{conn}, 10);
    ok($closed, "$path: the backend connection was let go (" . ($closed ? $closed->{how} : 'still open') . ')');
    # Now drain: if the server closed (send_timeout), the stream ends early.
    my $got = length($c->{buf}) + length($c->read_all(10));
    ok($got < 50000000, "$path: a stalled client is cut off ($got bytes)");
    ok($c->{eof}, "$path: the connection was closed");
    $c->close;
}

# A slow but steady reader of a chunked stream gets all of it. On a server
# with send_timeout = 3: this test process may not be scheduled for a
# second on a loaded machine (then a cut after 1 s would be right). The
# reader takes about 2 MB a second (no faster), so the download outlasts
# 1.5 send_timeouts; each write moves the output on and the clock restarts.
# Not much slower either: luxd's socket becomes writable again only when a
# third or so of its send buffer (grown to MBs on loopback) has drained,
# and at 0.3 MB/s that took longer than 3 s (a cut that is right). So the
# reader has a 64 KiB buffer, not 4 KiB: a few reads a second keep the
# pace on a loaded machine, where 4 KiB reads fell to 0.36 MB/s.
my $s3 = Luxd->new(
    server => { send_timeout => 3 },
    config => qq{upstream "s" { "$addr", read_timeout = 30 }
vhost "l" { default = true, location "/" { proxy = "s" } }
});
{
    my $N = 12_000_000;
    my $RATE = 2_000_000;
    my $c = $s3->connect(rcvbuf => 65536);
    $c->send(Luxd::request(path => "/chunked/$N/1000", close => 1));
    my $t0 = time;
    while (!$c->{eof} && time - $t0 < 60) {
        my $k = sysread($c->{sock}, my $chunk, 1 << 20);
        if (!$k) { $c->{eof} = 1; last }
        $c->{buf} .= $chunk;
        my $ahead = length($c->{buf}) / $RATE - (time - $t0);
        sleep($ahead > 0.002 ? $ahead : 0.002);
    }
    my $took = time - $t0;
    cmp_ok($took, '>', 1.5 * 3, "premise: the slow reader took longer than send_timeout ($took s)");
    my $r = Luxd::parse_one(\$c->{buf}, eof => 1);
    ok($r && $r->{status} == 200 && defined $r->{body} && $r->{body} eq body($N),
       'a steady slow reader gets the whole chunked stream')
      or diag sprintf("got %d bytes in %.3f s: %s\n%s", length($c->{buf}) + ($r ? length($r->{raw}) : 0), $took,
                      $r ? ($r->{error} // 'no error') : 'no response', substr($s3->error_log, -1000))
      . join(' ', map { "[$_->{conn} $_->{how}]" } $be->closes);
    $c->close;
}

$s->stop;
$s3->stop;
$be->stop;
done_testing;
