# send_timeout bounds the time between two successful writes, as nginx's
# does (issue 8 #13), not the whole rest of the response: a client that
# reads slowly but steadily for much longer than send_timeout gets the whole
# file; one that stops reading is cut about send_timeout after it stopped.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MB = 1024 * 1024;
my $SIZE = 12 * $MB;
my $TIMEOUT = 2;           # send_timeout, seconds
my $RATE = 1.5 * $MB;      # bytes per second the slow client reads: about 8 s

my $body = join '', map { pack('N', $_) x 256 } 0 .. $SIZE / 1024 - 1;
my $s = Luxd->new(
    files  => { 'www/big.bin' => $body },
    server => { send_timeout => $TIMEOUT, keepalive_timeout => 30 },
);

sub fd_count { my @f = glob('/proc/' . $s->pid . '/fd/*'); scalar @f }

# Reads the response to GET /big.bin at about $rate bytes a second, pausing
# $pause seconds once the headers are in. Returns (bytes after the header,
# saw EOF, seconds taken).
sub download {
    my (%o) = @_;
    my $c = $s->connect(rcvbuf => 16384);
    $c->send(Luxd::request(path => '/big.bin', close => 1));
    my $t0 = time;
    my $data = '';
    my $eof = 0;
    my $paused = 0;
    my $closed_after;
    my $sock = $c->sock;
    my $sel = IO::Select->new($sock);
    my $limit = $t0 + 60;
    while (time < $limit) {
        if (!$paused && $o{pause} && index($data, "\r\n\r\n") >= 0) {
            # While paused, watch the server's open fds: the connection's
            # goes when the server gives up on it.
            my $t = time;
            my $fds = fd_count();
            while (time < $t + $o{pause}) {
                $closed_after //= time - $t if fd_count() < $fds;
                sleep 0.05;
            }
            $paused = 1;
        }
        next unless $sel->can_read(1);
        my $n = sysread($sock, my $chunk, 16384);
        if (!$n) { $eof = 1; last }
        $data .= $chunk;
        # Keep to the rate: wait until the bytes so far are "due".
        my $due = $t0 + length($data) / $o{rate};
        my $wait = $due - time;
        sleep $wait if $wait > 0;
    }
    $c->close;
    my $hend = index($data, "\r\n\r\n");
    my $got = $hend >= 0 ? substr($data, $hend + 4) : '';
    return ($got, $eof, time - $t0, $hend >= 0 ? substr($data, 0, $hend) : $data, $closed_after);
}

{
    my ($got, $eof, $took, $head) = download(rate => $RATE);
    like($head, qr{^HTTP/1\.1 200 }, 'slow steady reader: 200');
    cmp_ok($took, '>', 2 * $TIMEOUT, "the download took longer than send_timeout ($took s)");
    is(length $got, $SIZE, 'slow steady reader: the whole file arrived');
    ok(md5_hex($got) eq md5_hex($body), 'slow steady reader: byte-exact');
}

{
    # A pause shorter than send_timeout is no reason to cut. A quarter of
    # it: the pause is timed by this process, whose sleeps and reads run
    # late on a loaded machine, so it must stay well clear of the timeout.
    my ($got, $eof, $took, $head, $closed_after) = download(rate => 8 * $MB, pause => $TIMEOUT / 4);
    is(length $got, $SIZE, 'a pause of a quarter of send_timeout: the whole file arrived');
    ok(!defined $closed_after, '... and the connection stayed open through the pause');
}

{
    # A client that stops reading: the server gives up about send_timeout
    # after the last write that moved on. The bytes already in the socket
    # buffers still drain, then EOF, well before the file is complete.
    # The pause starts when the headers are read, which may come a little
    # after the server's last write moved on (hence the 1 s below the
    # timeout); the bound above only has to tell the cut from no cut.
    my ($got, $eof, $took, $head, $closed_after) = download(rate => 64 * $MB, pause => $TIMEOUT + 5);
    ok(defined $closed_after && $closed_after > $TIMEOUT - 1 && $closed_after < $TIMEOUT + 4,
       'a client that stops reading is given up about send_timeout later ('
       . ($closed_after // 'never') . ' s)');
    ok($eof, 'a client that stops reading is closed');
    cmp_ok(length $got, '<', $SIZE, 'and does not get the whole file') or diag "took $took s";
}

# Lines are buffered up to a second; a stop writes out every one.
ok($s->stop, 'stopped cleanly');
like($s->access_log, qr{"GET /big\.bin HTTP/1\.1" 200 }, 'access log has the downloads');
done_testing;
