# issue 11: access_log per vhost. A vhost's own log replaces the server's
# for its requests, access_log = false turns logging off for one vhost,
# vhosts naming one path share one open file, a request refused before a
# vhost is known goes to the server's log, and templates follow the server's
# rules (compiled at load, unknown variables refused at -t, file:line).
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my $CONFIG = <<'EOF_CONF';
server {
  listen = "127.0.0.1:$PORT",
  workers = 2,
  error_log = "$DIR/error.log",
  error_log_level = "info",
  access_log = "$DIR/access.log",
  access_log_buffer = 0,
  pid_file = "$DIR/luxd.pid",
}
vhost "a.test" { root = "$DIR/www", access_log = { path = "$DIR/a.log", format = "A $host $status $request_uri" } }
vhost "b.test" { root = "$DIR/www", access_log = "$DIR/shared.log" }
vhost "c.test" { root = "$DIR/www", access_log = "$DIR/shared.log" }
vhost "off.test" { root = "$DIR/www", access_log = false }
vhost "plain.test" { root = "$DIR/www", default = true }
EOF_CONF

my $s = Luxd->new(config => $CONFIG, files => { 'www/index.html' => "hi\n" }, workers => 2);
my $d = $s->dir;
sub slurp { Luxd::_slurp("$d/$_[0]") // '' }
sub lines { my @l = split /\n/, slurp($_[0]); scalar @l }

for my $h (qw(a.test b.test c.test off.test plain.test)) {
    is($s->get('/', Host => $h)->{status}, 200, "GET / for $h");
}
is($s->get('/x?q=1', Host => 'a.test')->{status}, 404, 'a 404 for a.test');

# A malformed request never reaches a vhost: the server's log has it.
my $bad = $s->raw("GET / HTTP/1.1\r\nHost: a.test\r\nBad Header\r\n\r\n");
like($bad, qr{^HTTP/1\.1 400}, 'a malformed request is refused with 400');

my $t = time + 10;
# Lines are written just after their responses went out: wait for them.
# With two loops, a line may land after the next request's (each loop
# writes its own): lines are compared in sorted order.
sleep 0.05 while (lines('access.log') < 2 || lines('a.log') < 2 || lines('shared.log') < 2) && time < $t;

my $a = slurp('a.log');
is(join('', sort map { "$_\n" } split /\n/, $a), "A a.test 200 /\nA a.test 404 /x?q=1\n",
   "a.test's own log, in its own template, has exactly its two requests") or diag($a);
like($a, qr/\n\z/, '... each line ended');
my @shared = split /\n/, slurp('shared.log');
is(scalar @shared, 2, 'b.test and c.test share shared.log: two lines');
like($shared[0], qr{^127\.0\.0\.1 - - \[[^]]+\] "GET / HTTP/1\.1" 200 3 }, 'combined format by default');
my @srv = split /\n/, slurp('access.log');
is(scalar @srv, 2, "the server's log: the vhost without access_log and the refused request") or diag(slurp('access.log'));
is(scalar(grep { m{"GET / HTTP/1\.1" 200 } } @srv), 1, 'plain.test logs to the server log');
is(scalar(grep { m{" 400 } } @srv), 1, 'the 400 refused before a vhost was chosen is in the server log');
unlike(slurp('access.log') . slurp('shared.log') . slurp('a.log'), qr/off\.test/, 'off.test (false) is logged nowhere');

# One open file for a path, whoever names it.
my %open;
for my $fd (glob("/proc/" . $s->pid . "/fd/*")) {
    my $to = readlink($fd) // next;
    $open{$to}++;
}
is($open{"$d/shared.log"}, 1, 'shared.log is open once for two vhosts');
is($open{"$d/a.log"}, 1, 'a.log is open once');
is($open{"$d/access.log"}, 1, 'access.log is open once');
$s->stop;

# The same template rules as the server's: -t refuses an unknown variable
# at the vhost's access_log line, and a location cannot have one.
my ($rc, $out) = Luxd::check_config(<<'EOF_BAD');
server { listen = "127.0.0.1:$PORT" }
vhost "a.test" {
  root = "$DIR",
  access_log = { path = "$DIR/a.log", format = "$status $no_such_var" },
}
EOF_BAD
is($rc, 1, '-t refuses an unknown variable in a vhost template');
like($out, qr{luxd\.lua:4: .*unknown variable "\$no_such_var"}, 'named, at the access_log line') or diag($out);

($rc, $out) = Luxd::check_config(<<'EOF_LOC');
server { listen = "127.0.0.1:$PORT" }
vhost "a.test" {
  root = "$DIR",
  location "/x/" { access_log = "$DIR/x.log" },
}
EOF_LOC
is($rc, 1, '-t refuses access_log in a location');
like($out, qr{luxd\.lua:4: .*access_log.*put it on the vhost}, 'and says where it goes') or diag($out);

# A path that cannot be opened stops the start with file:line.
my $n = Luxd->new(no_start => 1, config => <<'EOF_NODIR');
server { listen = "127.0.0.1:$PORT", error_log = "$DIR/error.log", pid_file = "$DIR/luxd.pid",
  access_log = false }
vhost "a.test" { root = "$DIR/www", default = true,
  access_log = "$DIR/no/such/dir/a.log" }
EOF_NODIR
my ($rc2, $out2) = Luxd::run_luxd('-c', $n->config_file);
is($rc2, 1, 'a vhost log in a missing directory: luxd does not start');
like($out2, qr{luxd\.lua:4: access_log \S+/no/such/dir/a\.log: No such file or directory}, 'file:line, path and errno') or diag($out2);

done_testing;
