# The status page shows each loop's lag, how late a timer due every 10 ms
# fires (issue 18: a loop's longest stall is the measure that it never
# waits on a disk, bench/cold.sh): luxd_worker_lag_seconds, a histogram per
# worker, and luxd_worker_lag_max_seconds, the largest; the JSON's
# workers[].lag_max_seconds. A policy that spins 0.3 s in the loop must show as a lag of 0.29 s or more (the spin less the timer's 10 ms
# period), in the max and in the buckets past 0.1 s; the histogram must be
# a histogram (cumulative, +Inf = count) on every worker, and the timer
# must run in an idle loop.
# The spin waits on the wall clock (a luxd.shared key that expires), not on
# os.clock: that is the whole process's CPU time, which the other loop and
# the pool threads also advance, so a CPU-time spin of 0.3 s can end sooner
# than 0.3 s of wall time on a busy machine (CI failed so). The key lives
# 2 ms longer because expiry is counted in whole milliseconds.
use strict;
use warnings;
use Test::More;
use JSON::PP;
use lib 't/lib';
use Luxd;

my $SPIN = 0.3;
my $s = Luxd->new(
    workers => 2,
    server  => { policy_budget => \'100000000000' },
    config  => <<"EOF",
vhost "localhost" {
  default = true, root = "\$DIR/www",
  location "/status" { status = true },
  policy = function(r)
    if r.path == "/spin" then
      luxd.shared.set("spin", 1, $SPIN + 0.002)
      while luxd.shared.get("spin") do end
      return r:respond(200, "spun")
    end
    return nil
  end,
}
EOF
);

# {worker => {le => count, sum, count, max}} from a Prometheus scrape.
sub lags {
    my $r = $s->get('/status');
    die "status: $r->{status}\n" unless $r->{status} == 200;
    my %w;
    for (split /\n/, $r->{body}) {
        if (/^luxd_worker_lag_seconds_bucket\{worker="(\d+)",le="([^"]+)"\} (\d+)$/) { $w{$1}{le}{$2} = $3 }
        elsif (/^luxd_worker_lag_seconds_(sum|count)\{worker="(\d+)"\} ([\d.]+)$/) { $w{$2}{$1} = $3 }
        elsif (/^luxd_worker_lag_max_seconds\{worker="(\d+)"\} ([\d.]+)$/) { $w{$1}{max} = $2 }
    }
    return \%w;
}

my @LE = ('0.002', '0.01', '0.1', '1', '+Inf');
my $t0 = lags();
is_deeply([sort keys %$t0], [0, 1], 'a histogram for each of the two workers');
for my $i (sort keys %$t0) {
    my $w = $t0->{$i};
    is_deeply([sort keys %{ $w->{le} }], [sort @LE], "worker $i: buckets @LE");
    my @c = map { $w->{le}{$_} // -1 } @LE;
    ok((!grep { $c[$_] < $c[$_ - 1] } 1 .. $#c), "worker $i: cumulative (@c)");
    is($c[-1], $w->{count}, "worker $i: +Inf is the count");
    ok(defined $w->{sum} && defined $w->{max} && $w->{max} <= $w->{sum}, "worker $i: a sum and a max no larger");
}
# The timer runs in an idle loop: both count samples over time.
my $t = Luxd::wait_for(sub { my $x = lags(); $x->{0}{count} > $t0->{0}{count} && $x->{1}{count} > $t0->{1}{count} }, 10);
ok($t, 'both loops take samples while idle');

my $r = $s->get('/spin');
is($r->{body}, 'spun', 'the policy spun');
# The spinning loop records its lag when its timer next fires, after the
# response has gone out: a scrape served at once by the other loop can come
# before it. Await the sample (the bucket is counted before the max is
# set) rather than read at once.
sub maxlag { my $x = shift; my $m = 0; for (0, 1) { $m = $x->{$_}{max} if $x->{$_}{max} > $m } $m }
my $t1 = Luxd::wait_for(sub { my $x = lags(); maxlag($x) >= $SPIN - 0.01 ? $x : undef }, 10) || lags();
my $max = maxlag($t1);
my $long = 0;
for my $i (0, 1) {
    $long += ($t1->{$i}{le}{'+Inf'} - $t1->{$i}{le}{'0.1'}) - ($t0->{$i}{le}{'+Inf'} - $t0->{$i}{le}{'0.1'});
}
cmp_ok($max, '>=', $SPIN - 0.01, "the largest lag is at least the spin less 10 ms ($max s)");
cmp_ok($long, '>=', 1, 'a lag over 0.1 s was counted past the 0.1 s bucket');

my $j = $s->get('/status', Accept => 'application/json');
my $d = eval { decode_json($j->{body}) };
ok($d && @{ $d->{workers} } == 2, 'JSON: two workers');
my ($jmax) = sort { $b <=> $a } map { $_->{lag_max_seconds} } @{ $d->{workers} || [] };
cmp_ok($jmax // 0, '>=', $SPIN - 0.01, 'JSON: workers[].lag_max_seconds has the spin');

$s->stop;
done_testing;
