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

my $t0 = time;
my $r = $s->get('/x');
my $dt = time - $t0;
is $r->{status}, 504, 'a connect that times out: Gateway Timeout';
ok $dt >= 0.9 && $dt < 2.5, sprintf('after connect_timeout (%.2f s)', $dt);
like $s->error_log, qr/connect to 127\.0\.0\.2:80: connection timed out/, 'logged';

$t0 = time;
$r = $s->get('/t2/ok/3');
is $r->{headers}{'x-backend'}, 'live', 'with a second server: it answers';
is $r->{status}, 404, 'with its own answer (it has no /t2/ok/3)';
$t0 = time;
$r = $s->get('/t2/ok/3');
ok time - $t0 < 0.5, 'the timed-out server is skipped while marked down';
$s->stop;
$be->stop;
done_testing;
