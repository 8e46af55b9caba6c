# issue 17 #16: a luxd.cidr set under load with two workers. Each loop's Lua
# state runs the config and builds its own set, read only by that loop, so
# two loops answering at once share nothing (run this under TSan too:
# LUXD_BIN=build/tsan/luxd). Many connections, each with its requests
# pipelined, keep both loops busy at once; every answer must be right, and
# both loops' states must have answered.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    workers => 2,
    config  => <<'EOF_CONF',
local office = luxd.cidr{ "10.0.0.0/8", "192.0.2.128/25", "2001:db8::/32", "::1" }
-- Which Lua state this is: the config check's, then one per loop.
local state = luxd.shared.incr("cidr-states", 1)
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  real_ip = { from = { "127.0.0.1" }, header = "X-Forwarded-For" },
  policy = function(r)
    r:set_header("X-State", tostring(state))
    if not office:contains(r.remote_addr) then return 403 end
  end,
}
EOF_CONF
    files => { 'www/f.txt' => "ok\n" },
);

# Addresses and whether the set holds them.
my @addrs = (
    [ '10.0.0.1', 200 ], [ '10.255.255.255', 200 ], [ '11.0.0.0', 403 ], [ '9.255.255.255', 403 ],
    [ '192.0.2.128', 200 ], [ '192.0.2.127', 403 ], [ '192.0.2.255', 200 ], [ '192.0.3.0', 403 ],
    [ '2001:db8::1', 200 ], [ '2001:db9::', 403 ], [ '::1', 200 ], [ '::2', 403 ],
    [ '::ffff:10.1.1.1', 200 ], [ '::ffff:11.1.1.1', 403 ],
);

my ($conns, $per) = (64, 28);
my @c;
for my $i (0 .. $conns - 1) {
    my $c = $s->connect;
    my $bytes = '';
    for my $j (0 .. $per - 1) {
        my $a = $addrs[($i + $j) % @addrs][0];
        $bytes .= Luxd::request(path => '/f.txt', headers => [ 'X-Forwarded-For' => $a ], close => 0);
    }
    $c->send($bytes);
    push @c, $c;
}
my ($right, $wrong, %states) = (0, 0);
for my $i (0 .. $conns - 1) {
    my @r = $c[$i]->responses($per, timeout => 20);
    for my $j (0 .. $per - 1) {
        my ($a, $want) = @{ $addrs[($i + $j) % @addrs] };
        my $got = $r[$j] && $r[$j]{status};
        if (defined $got && $got == $want) { $right++ } else { $wrong++; diag("$a: got " . ($got // 'nothing') . ", want $want") if $wrong < 10 }
        $states{ $r[$j]{headers}{'x-state'} // '?' }++ if $r[$j];
    }
    $c[$i]->close;
}
is($right, $conns * $per, "all $conns x $per answers right ($wrong wrong)");
# The config check's state is 1; the loops' are 2 and 3.
is(join(',', sort keys %states), '2,3', 'both loops\' Lua states answered') or diag(explain(\%states));
ok($s->alive, 'the server is still running');
$s->stop;
unlike($s->error_log, qr/ThreadSanitizer|data race/, 'no data race reported') or diag($s->error_log);
unlike($s->stderr_log, qr/ThreadSanitizer|data race/, '... on stderr either') or diag($s->stderr_log);
done_testing;
