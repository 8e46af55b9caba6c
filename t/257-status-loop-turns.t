# The status page counts each loop's turns by how long they ran, their wait
# for events left out (issue 18: a loop's longest stall is the measure that
# it never waits on a disk, bench/cold.sh): luxd_worker_turn_seconds, a
# histogram per worker, and luxd_worker_turn_max_seconds, the longest turn;
# the JSON's workers[].turn_max_seconds. A policy that spins 0.3 s of CPU in
# the loop must show as a turn of 0.3 s or more, in the max and in the
# buckets past 0.1 s; the histogram must be a histogram (cumulative,
# +Inf = count) on every worker.
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
      local t = os.clock()
      while os.clock() - t < $SPIN do end
      return r:respond(200, "spun")
    end
    return nil
  end,
}
EOF
);

# {worker => {le => count, sum, count, max}} from a Prometheus scrape.
sub turns {
    my $r = $s->get('/status');
    die "status: $r->{status}\n" unless $r->{status} == 200;
    my %w;
    for (split /\n/, $r->{body}) {
        if (/^luxd_worker_turn_seconds_bucket\{worker="(\d+)",le="([^"]+)"\} (\d+)$/) { $w{$1}{le}{$2} = $3 }
        elsif (/^luxd_worker_turn_seconds_(sum|count)\{worker="(\d+)"\} ([\d.]+)$/) { $w{$2}{$1} = $3 }
        elsif (/^luxd_worker_turn_max_seconds\{worker="(\d+)"\} ([\d.]+)$/) { $w{$1}{max} = $2 }
    }
    return \%w;
}

my @LE = ('0.001', '0.01', '0.1', '1', '+Inf');
my $t0 = turns();
is_deeply([sort keys %$t0], [0, 1], 'a histogram for each of the two workers');
for my $i (sort keys %$t0) {
    my $w = $t0->{$i};
    is_deeply([sort keys %{ $w->{le} }], [sort @LE], "worker $i: buckets @LE");
    my @c = map { $w->{le}{$_} // -1 } @LE;
    ok((!grep { $c[$_] < $c[$_ - 1] } 1 .. $#c), "worker $i: cumulative (@c)");
    is($c[-1], $w->{count}, "worker $i: +Inf is the count");
    ok(defined $w->{sum} && defined $w->{max} && $w->{max} <= $w->{sum}, "worker $i: a sum and a max no larger");
}
# The scrape itself was a turn of the loop that answered it: counted.
cmp_ok($t0->{0}{count} + $t0->{1}{count}, '>', 0, 'turns are counted');

my $r = $s->get('/spin');
is($r->{body}, 'spun', 'the policy spun');
my $t1 = turns();
my ($max, $long) = (0, 0);
for my $i (0, 1) {
    $max = $t1->{$i}{max} if $t1->{$i}{max} > $max;
    $long += ($t1->{$i}{le}{'+Inf'} - $t1->{$i}{le}{'0.1'}) - ($t0->{$i}{le}{'+Inf'} - $t0->{$i}{le}{'0.1'});
}
cmp_ok($max, '>=', $SPIN, "the longest turn is at least the spin ($max s)");
cmp_ok($long, '>=', 1, 'a turn longer than 0.1 s was counted past the 0.1 s bucket');

my $j = $s->get('/status', Accept => 'application/json');
my $d = eval { decode_json($j->{body}) };
ok($d && @{ $d->{workers} } == 2, 'JSON: two workers');
my ($jmax) = sort { $b <=> $a } map { $_->{turn_max_seconds} } @{ $d->{workers} || [] };
cmp_ok($jmax // 0, '>=', $SPIN, 'JSON: workers[].turn_max_seconds has the spin');

$s->stop;
done_testing;
