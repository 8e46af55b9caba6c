# A pipelined request behind a long response gets its header_timeout from
# when the server reads again (issue 8 #15): while the response ahead is
# being written, the server reads nothing more (the pipeline is bounded),
# so the rest of a request that straddled a read waits unread in the
# socket. Its header deadline counted from its first byte: once the
# response ahead had taken longer than header_timeout, the request, sent
# whole and at once, was answered 408.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MB = 1024 * 1024;
my $SIZE = 8 * $MB;
my $RATE = 1.5 * $MB;    # bytes per second the client reads: about 5.3 s
my $HEADER_TIMEOUT = 2;    # the rest of the second request comes 0.2 s after its start

my $s = Luxd->new(
    files  => { 'www/big.bin' => 'b' x $SIZE, 'www/small.txt' => "small\n" },
    server => { header_timeout => $HEADER_TIMEOUT, send_timeout => 10 },
);

for my $cut (1, 20, 40) {
    my $c = $s->connect(rcvbuf => 16384);
    my $second = Luxd::request(path => '/small.txt', close => 1);
    # The first request and the start of the second in one segment, the
    # rest of the second a moment later (a read of its own).
    $c->send(Luxd::request(path => '/big.bin') . substr($second, 0, $cut));
    sleep 0.2;
    $c->send(substr($second, $cut));
    my $sock = $c->sock;
    my ($data, $t0) = ('', time);
    while (time < $t0 + 30) {
        last unless IO::Select->new($sock)->can_read(5);
        my $n = sysread($sock, my $chunk, 65536);
        last unless $n;
        $data .= $chunk;
        my $wait = $t0 + length($data) / $RATE - time;
        sleep $wait if $wait > 0;
    }
    my $took = time - $t0;
    $c->close;
    cmp_ok($took, '>', 2 * $HEADER_TIMEOUT, "cut at $cut: premise: the first response took longer than header_timeout ($took s)");
    my @status = $data =~ m{HTTP/1\.1 (\d{3}) }g;
    is_deeply(\@status, [200, 200], "cut at $cut: both requests answered 200") or diag "statuses: @status";
    like($data, qr/\r\n\r\nsmall\n\z/, "cut at $cut: the second response is the small file");
}
# Lines are buffered up to a second; a stop writes out every one (read
# before it, the log could miss the very line looked for).
ok($s->stop, 'stopped cleanly');
unlike($s->access_log, qr/" 408 /, 'no 408 in the access log');
done_testing;
