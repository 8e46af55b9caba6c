# Signals that keep coming while the process exits: once every loop has
# finished the main thread closes its signal watchers, and libuv then puts
# back each signal's default action. A SIGTERM or SIGHUP in the moment
# before luxd ignores them kills a server that was stopping cleanly. A child
# floods the server with SIGTERM and SIGHUP for the whole stop; every exit
# must be a clean 0.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep time);
use POSIX ();
use lib 't/lib';
use Luxd;

my $ROUNDS = 60;
my $bad = 0;
for my $round (1 .. $ROUNDS) {
    my $s = Luxd->new(files => { 'www/a.txt' => 'a' });
    my $pid = $s->pid;
    my $kid = fork();
    die "fork: $!" unless defined $kid;
    if ($kid == 0) {
        my $end = time + 3;    # far longer than a stop takes; bounded so a slow build is not starved
        my $sig = $round % 2 ? 'TERM' : 'HUP';
        while (time < $end) { kill($sig, $pid) or last; kill('TERM', $pid) or last }
        POSIX::_exit(0);
    }
    $s->signal('TERM');
    my $st = $s->wait_exit(20);
    kill 'KILL', $kid;
    waitpid($kid, 0);
    if (!defined $st || $st != 0) {
        $bad++;
        diag("round $round: " . (defined $st ? "exit status $st (signal " . ($st & 127) . ")" : 'still running'));
    }
    $s->stop;
}
is($bad, 0, "signals flooding a stopping server: $ROUNDS clean exits");
done_testing;
