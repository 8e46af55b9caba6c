# issue 11 review: access_log_buffer has no upper bound. The buffers are now
# made on first use (one per log file and loop), so a size the loop cannot
# allocate passes -t, starts, and then drops every access-log line with an
# "out of memory" error per request: the log is silently empty. Before the
# per-vhost logs the buffer was allocated at start and luxd refused to run.
# A size that cannot be had must be refused at -t (or at start), not turn
# logging off.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

sub lines_after_two_requests {
    my ($s) = @_;
    $s->get('/') for 1 .. 2;
    my $t = time + 3;
    sleep 0.05 until $s->access_log =~ /(?:.*\n){2}/ || time > $t;
    return scalar(() = $s->access_log =~ /\n/g);
}

# At the limit of what can be had (1 GiB, virtual until written): works.
my $s = Luxd->new(server => { access_log_buffer => 1 << 30 });
is(lines_after_two_requests($s), 2, 'access_log_buffer = 1 GiB: both requests logged');
$s->stop;

# Past it (16 TiB, more than the machine has): -t must refuse it, or luxd
# must not start; it must not run with its access log silently off.
$s = Luxd->new(no_start => 1, server => { access_log_buffer => 1 << 44 });
my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
my $started = $rc == 0 && eval { $s->start; 1 };
if ($started) {
    is(lines_after_two_requests($s), 2, 'access_log_buffer = 16 TiB accepted by -t and start: then both requests are logged')
        or diag("-t: $out\nerror log:\n" . $s->error_log);
    $s->stop;
} else {
    pass("access_log_buffer = 16 TiB refused: $out");
}
done_testing;
