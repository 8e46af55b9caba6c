# connect_timeout needs a server that never answers a SYN, which loopback
# cannot give: the test runs itself again inside a private network
# namespace (unshare -rn: no privilege needed) where 127.0.0.2 is routed
# to nowhere, so a connect to it waits until luxd gives up.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time);
use lib 't/lib';

unless ($ENV{LUXD_NETNS}) {
    my $setup = 'ip link set lo up && ip route del local 127.0.0.0/8 dev lo table local'
      . ' && ip route replace local 127.0.0.1/32 dev lo table local && ip route add 127.0.0.2/32 dev lo';
    # A user namespace cannot be made inside a chroot, where root needs none.
    my @un = $> == 0 ? ('unshare', '-n') : ('unshare', '-rn');
    exec @un, 'sh', '-c', "$setup && LUXD_NETNS=1 exec \"\$0\" t/96-proxy-connect-timeout.t", $^X
      or die "unshare: $!";
}

require Luxd;
require Luxd::Backend;
my $be = Luxd::Backend->start(name => 'live');
my $a = $be->addr;
my $s = Luxd->new(config => <<"EOF2");
upstream "t" { "127.0.0.2:80", connect_timeout = 1 }
upstream "t2" { "127.0.0.2:80", "$a", connect_timeout = 1, max_fails = 1 }
vhost "l" { default = true, location "/" { proxy = "t" }, location "/t2/" { proxy = "t2" } }
EOF2

my $timeouts = sub { scalar(() = $s->error_log =~ /connect to 127\.0\.0\.2:80: connection timed out/g) };
my $t0 = time;
my $r = $s->http(path => '/x', timeout => 15);
my $dt = time - $t0;
is $r->{status}, 504, 'a connect that times out: Gateway Timeout';
ok $dt >= 0.9 && $dt < 8, sprintf('after connect_timeout (%.2f s), not the system\'s connect timeout', $dt);
is $timeouts->(), 1, 'logged';

$r = $s->http(path => '/t2/ok/3', timeout => 15);
is $r->{headers}{'x-backend'}, 'live', 'with a second server: it answers';
is $r->{status}, 404, 'with its own answer (it has no /t2/ok/3)';
is $timeouts->(), 2, 'after the first one timed out';
# Round robin would give the first server one of the next two: marked
# down, it is skipped (no connect tried, so no timeout logged).
for my $i (1 .. 2) {
    $r = $s->http(path => '/t2/ok/3', timeout => 15);
    is $r->{headers}{'x-backend'}, 'live', "request $i after: the live server answers";
}
is $timeouts->(), 2, 'the timed-out server is skipped while marked down (no connect tried)';
$s->stop;
$be->stop;
done_testing;
