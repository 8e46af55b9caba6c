# A loop's pool of upstream connections (one per server address and TLS
# settings) goes once no upstream of the generation names it and it lends
# no connection: before, every address a reload ever named kept a pool
# until the loop's end, and each proxied request looked through them all.
# luxd_upstream_pools (status page) counts them. A pool that lends a
# connection at a reload stays until that exchange ends and the next
# reload comes; the exchange ends whole.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body upstream_idle);

sub pools {
    my ($s) = @_;
    my $b = $s->get('/status?format=prometheus')->{body} // '';
    return $b =~ /^luxd_upstream_pools (\d+)$/m ? $1 : undef;
}

my $be = Luxd::Backend->start;
my $a = $be->addr;
my @dead = map { Luxd::free_port() } 1 .. 4; # nothing listens: 502 at once
my $cfg = sub {
    my ($up) = @_;
    qq{upstream "b" { $up, keepalive = 4 }\n}
      . qq{vhost "l" { default = true, location "/status" { status = true }, location "/" { proxy = "b" } }\n};
};
my $s = Luxd->new(config => $cfg->(qq{"$a"}), server => { workers => 1 });
# write_config writes what it is given: the server block the harness made
# goes first each time (as t/189).
my ($srvblk) = $s->{config_text} =~ /\A(.*?)\Qupstream "b"\E/s;
{ my $o = $cfg; $cfg = sub { $srvblk . $o->(@_) } }
is($s->get('/ok/10')->{status}, 200, 'a request through the first address');
is(pools($s), 1, 'one pool');

for my $i (0 .. $#dead) {
    $s->write_config($cfg->(qq{"127.0.0.1:$dead[$i]"}));
    like($s->reload // '', qr/^ok/, "reload $i to another address");
    is($s->get('/x')->{status}, 502, "reload $i: the new address refuses: 502");
    is(pools($s), 1, "reload $i: the old address's pool went, the new one's is there");
}

# The same address over TLS and plain: two pools; plain again: one.
$s->write_config($cfg->(qq{"$a"}));
like($s->reload // '', qr/^ok/, 'reload back to the backend');
is($s->get('/ok/10')->{status}, 200, 'served');
$s->write_config($cfg->(qq{"$a"}) . qq{upstream "t" { "$a", tls = { verify = false } }\n});
like($s->reload // '', qr/^ok/, 'reload adding a TLS upstream on the same address');
$s->get('/x');
is(pools($s), 1, 'a TLS upstream no request used: no pool of its own yet');

# A pool lending a connection when a reload drops its address: kept until
# the exchange ends, and that exchange ends whole; the next reload drops it.
my $n0 = scalar $be->requests;
my $c = $s->connect;
$c->send("GET /slow/20000/200 HTTP/1.1\r\nHost: l\r\n\r\n");
$be->wait_requests($n0 + 1, 10);
$s->write_config($cfg->(qq{"127.0.0.1:$dead[0]"}));
like($s->reload // '', qr/^ok/, 'reload away from the backend during a proxied response');
$s->get('/x');
is(pools($s), 2, 'the old pool stays while it lends a connection');
my $r = $c->response(timeout => 10);
ok($r && ($r->{body} // '') eq body(20000), 'the response in flight ends whole, byte-exact');
is(upstream_idle($s), 0, 'its connection is not kept idle in a pool no upstream names');
$c->close;
like($s->reload // '', qr/^ok/, 'one more reload');
$s->get('/x');
is(pools($s), 1, 'then the old pool goes');

$s->stop;
$be->stop;
done_testing;
