# issue 17 #7 and #16, review: an error page guarded by a policy with a
# luxd.cidr set, two workers, and reloads that move the set. After each
# reload's verdict, every answer (fresh connections on both loops, and a
# connection kept alive from before the reload) must follow the new set:
# a page the new rules refuse is never served from an old loop state, and
# one they allow is. Six reloads back and forth also let the old states
# (and their sets) be collected while the loops serve.
use strict;
use warnings;
use Test::More;
use Luxd;

sub conf {
    my ($net) = @_;
    return <<"EOF_CONF";
local office = luxd.cidr{ "$net" }
local state = luxd.shared.incr("states", 1)
vhost "localhost" {
  default = true, root = "\$DIR/www",
  real_ip = { from = { "127.0.0.1" }, header = "X-Forwarded-For" },
  error_pages = { [404] = "/office/404.html" },
  location "/office/" {
    policy = function(r)
      r:set_header("X-State", tostring(state))
      if not office:contains(r.remote_addr) then return 403 end
    end,
  },
}
EOF_CONF
}

my $PAGE = "OFFICE PAGE\n";
my $s = Luxd->new(workers => 2, config => conf('10.0.0.0/8'),
                  files => { 'www/office/404.html' => $PAGE });

sub page_for {
    my ($conn, $addr) = @_;
    $conn->send(Luxd::request(path => '/missing', headers => ['X-Forwarded-For' => $addr]));
    my $r = $conn->response(timeout => 5) or return ('none', '');
    return ($r->{status} . ' ' . (($r->{body} // '') eq $PAGE ? 'page' : 'builtin'), $r->{headers}{'x-state'} // '');
}

my $kept = $s->connect;
my @nets = ('10.0.0.0/8', '192.0.2.0/24');
for my $round (0 .. 6) {
    my $net = $nets[$round % 2];
    if ($round) {
        (my $t = $s->{config_text}) =~ s/luxd\.cidr\{ "[^"]+" \}/luxd.cidr{ "$net" }/ or die;
        $s->write_config($t);
        like($s->reload // $s->reload_error, qr/^ok/, "reload $round: to $net");
    }
    my ($in, $out) = $net eq '10.0.0.0/8' ? ('10.1.2.3', '192.0.2.1') : ('192.0.2.1', '10.1.2.3');
    my (%bad);
    for my $i (1 .. 24) {
        my $c = $s->connect;
        for ([$in, '404 page'], [$out, '404 builtin']) {
            my ($got) = page_for($c, $_->[0]);
            $bad{"$_->[0]: $got"}++ unless $got eq $_->[1];
        }
        $c->close;
    }
    is(join(', ', sort keys %bad), '', "round $round ($net): every fresh connection follows the set");
    my ($g1) = page_for($kept, $in);
    my ($g2) = page_for($kept, $out);
    is("$g1 / $g2", '404 page / 404 builtin', "round $round: the connection kept from before too");
}
ok($s->alive, 'the server lived through the reloads');
$kept->close;
done_testing;
