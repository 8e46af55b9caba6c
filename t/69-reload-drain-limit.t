# A reload that drops a listen address drains that socket's accept queue
# before it closes it (the clients connected while the address was ours).
# The drain happens while the loop adopts the new generation, so it must
# count against the new generation's max_connections: a reload that lowers
# the limit must not be followed by accepts past it.
#
# The loop is kept busy by a policy while the reload is published and
# clients queue on the address it drops; idle keep-alive connections fill
# the slots below the new limit, so exactly one queued client fits.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $SPIN = 2;    # seconds the policy keeps the loop busy

my $s = Luxd->new(files => { 'www/index.html' => "index\n" }, no_start => 1);
my ($dir, $port) = ($s->dir, $s->port);

sub config {
    my ($max, @ports) = @_;
    my $listen = join ', ', map { qq{"127.0.0.1:$_"} } @ports;
    return <<"EOF2";
server {
  listen = { $listen },
  workers = 1,
  max_connections = $max,
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
  policy_budget = 100000000000,
}
vhost "localhost" {
  default = true, root = "$dir/www", index = { "index.html" },
  policy = function(r)
    if r.path == "/spin" then
      local t = os.clock()
      while os.clock() - t < $SPIN do end
      return r:respond(200, "spun")
    end
    return nil
  end,
}
EOF2
}

my $late = Luxd::free_port();
$s->write_config(config(100, $port, $late));
$s->start;

# Two idle keep-alive connections hold two slots.
my @idle;
for my $i (1 .. 2) {
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/'));
    my $r = $c->response(timeout => 5);
    is($r && $r->{status}, 200, "idle connection $i answered and kept open");
    push @idle, $c;
}

# The third slot: a keep-alive request that keeps the loop busy.
my $spin = $s->connect;
$spin->send(Luxd::request(path => '/spin'));
sleep 0.3;

# The new generation allows 4 connections (3 are open) and drops :$late.
$s->write_config(config(4, $port));
like($s->reload // $s->reload_error, qr/^ok generation 2 /, "reload dropping :$late, max_connections 4");
my @q;
for my $i (1 .. 3) {
    my $c = $s->connect(port => $late);
    # Keep-alive: an answered client stays open and holds its slot (a
    # closing one would be served and gone within the drain).
    $c->send(Luxd::request(path => '/'));
    push @q, $c;
}
ok(!IO::Select->new($spin->sock)->can_read(0), 'premise: the loop was busy throughout');
my $r = $spin->response(timeout => $SPIN + 10);
is($r && $r->{status}, 200, 'the busy request finished');

my $answered = 0;
for my $c (@q) {
    my $qr = eval { $c->response(timeout => 3) };
    $answered++ if $qr && $qr->{status} && $qr->{status} == 200;
}
is($answered, 1, 'exactly the one queued client that fits the new limit is answered') or diag(join '', grep { !/read-ahead/ } split /^/m, $s->error_log);

$_->close for @idle, $spin, @q;
$s->stop;
done_testing;
