# A second SIGTERM that lands just as a graceful stop has drained by itself:
# the loop had closed its wake-up handle (its drain ended when the last
# client went away), and the main thread's uv_async_send to it then wrote to
# the loop's closed eventfd, which libuv answers with abort() (SIGABRT, no
# message). The main thread now checks, under the mailbox lock, that the
# loop still listens. The window is a few microseconds, so the test runs the
# race many times: each round a client holds a download open, the server is
# asked to stop, the client goes away, and the second SIGTERM follows at
# once; every exit must be clean.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my $ROUNDS = 40;
my $big = 'x' x (4 * 1024 * 1024);
my $bad = 0;
for my $round (1 .. $ROUNDS) {
    my $s = Luxd->new(files => { 'www/big.bin' => $big }, server => { drain_timeout => 30 });
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => '/big.bin'));
    $c->fill(1);
    $s->signal('TERM');
    sleep 0.05 * ($round % 4);    # the drain is under way, or just begun
    $c->close;
    $s->signal('TERM');
    my $st = $s->wait_exit(10);
    if (!defined $st || $st != 0) {
        $bad++;
        diag("round $round: " . (defined $st ? "exit status $st (signal " . ($st & 127) . ")" : 'still running'));
    }
    $s->stop;
}
is($bad, 0, "a second SIGTERM as the drain ends: $ROUNDS clean exits");
done_testing;
