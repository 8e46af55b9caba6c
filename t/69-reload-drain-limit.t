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
use POSIX ();
use lib 't/lib';
use Luxd;

# CPU seconds (os.clock: the whole process's) the policy keeps the loop
# busy: long enough that the reload and the three connects, which take
# milliseconds of CPU, come well within it even on a loaded machine. The
# wall time that takes is unbounded there, so the idle connections that
# hold the slots get a keepalive_timeout far above it.
my $SPIN = 6;

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
  keepalive_timeout = 3600,
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
my $ticks = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
# The user CPU time of each of luxd's threads, in seconds.
sub utimes {
    my %u;
    for my $t (glob('/proc/' . $s->pid . '/task/*')) {
        my $st = Luxd::_slurp("$t/stat") // next;
        $st =~ s/^.*\)\s+//s;    # after "pid (comm) "
        my @f = split ' ', $st;
        $u{$t} = $f[11] / $ticks;    # field 14, utime
    }
    %u;
}
my %u0 = utimes();
$spin->send(Luxd::request(path => '/spin'));
# The policy is running once a thread has spent 0.2 s of CPU since.
my $deadline = time + 30;
my $spun = 0;
until ($spun || time > $deadline) {
    my %u = utimes();
    $spun = grep { $u{$_} - ($u0{$_} // 0) >= 0.2 } keys %u;
    sleep 0.02 unless $spun;
}
ok($spun, 'premise: the policy is spinning');

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
my $r = $spin->response(timeout => 20 * $SPIN);
is($r && $r->{status}, 200, 'the busy request finished');

# The queued clients: the first answer within 10 s, then 3 s more for any
# other (past the limit, it would come with the first).
my $answered = 0;
my %got;
my $until = time + 10;
while (time < $until) {
    for my $i (0 .. $#q) {
        next if $got{$i};
        my $qr = eval { $q[$i]->response(timeout => 0.05) };
        if ($qr && $qr->{status} && $qr->{status} == 200) {
            $got{$i} = 1;
            $answered++;
            my $more = time + 3;
            $until = $more if $answered == 1;
        }
    }
}
is($answered, 1, 'exactly the one queued client that fits the new limit is answered') or diag(join '', grep { !/read-ahead/ } split /^/m, $s->error_log);

$_->close for @idle, $spin, @q;
$s->stop;
done_testing;
