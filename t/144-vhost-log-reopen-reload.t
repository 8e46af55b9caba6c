# issue 11: per-vhost access logs through reopen (SIGUSR1, logrotate) and
# reload: every open file is reopened; a reload keeps unchanged paths open,
# opens new ones before the new config serves, closes the ones it dropped,
# and fails whole, naming file:line, path and errno, when one cannot open.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

sub config {
    my ($a, $b) = @_;
    return <<"EOF_CONF";
server {
  listen = "127.0.0.1:\$PORT",
  workers = 2,
  error_log = "\$DIR/error.log",
  access_log = "\$DIR/access.log",
  access_log_buffer = 0,
  pid_file = "\$DIR/luxd.pid",
}
vhost "a.test" { root = "\$DIR/www", access_log = $a }
vhost "b.test" { root = "\$DIR/www", access_log = $b }
vhost "plain.test" { root = "\$DIR/www", default = true }
EOF_CONF
}

my $s = Luxd->new(config => config('"$DIR/a.log"', '"$DIR/b.log"'), files => { 'www/index.html' => "hi\n" }, workers => 2);
my $d = $s->dir;
my $port = $s->port;
sub slurp { Luxd::_slurp("$d/$_[0]") // '' }
sub count { my @l = split /\n/, slurp($_[0]); scalar @l }
# A line is written just after its response went out: wait a little for
# the count expected, then say what there is.
sub nlines { my ($f, $want) = @_; my $t = time + 10; sleep 0.02 while defined $want && count($f) < $want && time < $t; count($f) }
sub hit { my ($h, $p) = @_; $s->get($p // '/', Host => $h)->{status} }
sub open_paths {
    my %o;
    for my $fd (glob("/proc/" . $s->pid . "/fd/*")) { my $t = readlink($fd) // next; $o{$t}++ }
    return \%o;
}

is(hit($_), 200, "GET / for $_") for qw(a.test b.test plain.test);
is(nlines($_, 1), 1, "$_ has its line") for qw(a.log b.log access.log);

# logrotate: move every file away, then reopen.
rename "$d/$_", "$d/$_.1" or die "rename $_: $!" for qw(a.log b.log access.log);
ok($s->signal('USR1'), 'SIGUSR1');
ok($s->wait_log(qr/logs reopened/, 10), 'logs reopened');
is(hit($_), 200, "GET / for $_ after the reopen") for qw(a.test b.test plain.test);
for my $f (qw(a.log b.log access.log)) {
    ok(-e "$d/$f", "$f made again by the reopen");
    is(nlines($f, 1), 1, "$f has the request after the reopen");
    is(nlines("$f.1", 1), 1, "$f.1 (the moved file) got nothing more");
}
unlike($s->error_log, qr/reopen: .*access log/, 'no reopen errors');

# Reload: a.test to a new file, b.test off.
my $cfg2 = Luxd::_subst(config('"$DIR/a2.log"', 'false'), $port, $d);
$s->write_config($cfg2);
like($s->reload // $s->reload_error, qr/^ok /, 'reload: a.test to a2.log, b.test off');
is(hit('a.test'), 200, 'a.test after the reload');
is(hit('b.test'), 200, 'b.test after the reload');
is(nlines('a2.log', 1), 1, 'a.test logs to a2.log now');
is(nlines('a.log', 1), 1, 'and no longer to a.log');
is(nlines('b.log', 1), 1, 'b.test (access_log = false) logs nowhere');
my $t = time + 10;
my $o;
while (time < $t) { $o = open_paths(); last unless $o->{"$d/a.log"} || $o->{"$d/b.log"}; sleep 0.1 }
ok(!$o->{"$d/a.log"}, 'a.log is closed once no generation logs there');
ok(!$o->{"$d/b.log"}, 'b.log too');
is($o->{"$d/a2.log"}, 1, 'a2.log is open once');
is($o->{"$d/access.log"}, 1, 'the unchanged server log is still the one file');

# A reload whose log cannot be opened fails whole and changes nothing.
my $cfg3 = Luxd::_subst(config('"$DIR/missing/a3.log"', '"$DIR/b.log"'), $port, $d);
$s->write_config($cfg3);
my $out = $s->reload // $s->reload_error;
like($out, qr{^failed \S+luxd\.lua:9: access_log \S+/missing/a3\.log: No such file or directory}, 'reload failed, with file:line, path and errno') or diag($out);
is(hit('a.test'), 200, 'still serving');
is(nlines('a2.log', 2), 2, 'a.test still logs to a2.log');
is(nlines('b.log', 1), 1, 'b.test still logs nowhere: the failed config changed nothing');
ok(!open_paths()->{"$d/b.log"}, 'and the failed reload left no file open');

# -s reopen after the reload covers the new file.
rename "$d/a2.log", "$d/a2.log.1" or die;
my ($rc, $msg) = Luxd::run_luxd('-s', 'reopen', '-c', $s->config_file);
is($rc, 0, 'luxd -s reopen') or diag($msg);
# a2.log appears when the reopen opens it, before it takes the place of
# the old fd: wait for the reopen's second "logs reopened" line instead.
ok($s->wait_log(qr/logs reopened.*\n(?s:.*)logs reopened/, 10), 'logs reopened again');
is(hit('a.test'), 200, 'a.test after the second reopen');
is(nlines('a2.log', 1), 1, 'a2.log made again and written');
$s->stop;
done_testing;
