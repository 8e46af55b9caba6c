# issue 11: after luxd dropped root for `user`, a reopen or a reload either
# works or says exactly why and what to change. Logs in a directory nobody
# may not write: a reopen after logrotate moved them fails with the path,
# the errno text and the user, and luxd goes on writing to the files it had;
# once the files are there for nobody (logrotate's `create`), the reopen
# works. A reload that asks for a new port below 1024 is refused naming the
# port and the dropped root; one naming a log nobody cannot create is
# refused naming it; a reload that needs nothing of root works.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my ($uid, $gid) = (getpwnam('nobody'))[2, 3];
defined $uid or BAIL_OUT('no user nobody');

my $s = Luxd->new(no_start => 1, config => <<'EOF_CONF', files => { 'www/index.html' => "hi\n" });
server {
  listen = "127.0.0.1:$PORT",
  workers = 2,
  user = "nobody",
  error_log = "$DIR/logs/error.log",
  access_log = "$DIR/logs/access.log",
  access_log_buffer = 0,
  pid_file = "$DIR/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
EOF_CONF
my $d = $s->dir;
chmod 0711, $d;
chmod 0755, "$d/www";
chmod 0644, "$d/www/index.html";
# nobody may enter logs/ and write the files in it, but not create any.
mkdir "$d/logs", 0755 or die;
$s->start;
my $pid = $s->pid;
sub slurp { Luxd::_slurp($_[0]) // '' }
sub nlines { my @l = split /\n/, slurp($_[0]); scalar @l }
sub file_has { my ($f, $re) = @_; my $t = time + 5; sleep 0.05 until slurp($f) =~ $re || time > $t; slurp($f) =~ $re }

is($s->get('/')->{status}, 200, 'serving as nobody');
is((stat "$d/logs/access.log")[4], $uid, 'access.log, created at start, is nobody\'s');

# 1. logrotate without `create`: the files moved, nobody cannot make new ones.
rename "$d/logs/$_.log", "$d/logs/$_.log.1" or die for qw(access error);
ok($s->signal('USR1'), 'SIGUSR1 after the move');
ok(file_has("$d/logs/error.log.1", qr/logs reopened/), 'the reopen ran (logged to the old error log)');
my $el = slurp("$d/logs/error.log.1");
like($el, qr{\[error\] reopen: error log \Q$d\E/logs/error\.log: Permission denied: luxd runs as user "nobody" \(it dropped root at start\) and that user cannot create files in \Q$d\E/logs; make the directory writable by nobody, or have the file created for nobody \(logrotate: create 0640 nobody adm\); still writing to the file open before},
     'the error log: path, errno text, user, what to change') or diag($el);
like($el, qr{\[error\] reopen: access log \Q$d\E/logs/access\.log: Permission denied: luxd runs as user "nobody" .*cannot create files in \Q$d\E/logs;}, 'the access log too');
ok(!-e "$d/logs/access.log", 'no new access.log');
is($s->get('/')->{status}, 200, 'still serving');
ok(file_has("$d/logs/access.log.1", qr/GET[^\n]*\n[^\n]*GET/), 'and logging to the file it had');

# 2. logrotate with `create 0640 nobody adm`: the new files are nobody's.
for my $f (qw(access error)) {
    open my $fh, '>', "$d/logs/$f.log" or die; close $fh;
    chown $uid, $gid, "$d/logs/$f.log";
    chmod 0640, "$d/logs/$f.log";
}
my ($rc, $out) = Luxd::run_luxd('-s', 'reopen', '-c', $s->config_file);
is($rc, 0, 'luxd -s reopen') or diag($out);
ok(file_has("$d/logs/error.log", qr/logs reopened/), 'the new error log is written');
unlike(slurp("$d/logs/error.log"), qr/\[error\]/, 'no error this time');
is($s->get('/')->{status}, 200, 'a request');
ok(file_has("$d/logs/access.log", qr/GET/), 'logged to the new access.log');
is(nlines("$d/logs/access.log.1"), 2, 'and not to the moved one');

# 3. A reload that needs root for a new port is refused, naming it.
my $low;
for my $p (reverse 600 .. 1000) {
    my $c = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $p, Listen => 1, ReuseAddr => 1) or next;
    close $c; $low = $p; last;
}
ok($low, "a free port below 1024 ($low)");
my $start = slurp('/proc/sys/net/ipv4/ip_unprivileged_port_start') =~ /(\d+)/ ? $1 : 1024;
cmp_ok($low, '<', $start, "it needs root here (ip_unprivileged_port_start $start)");
my $conf = slurp($s->config_file);
(my $c2 = $conf) =~ s/listen = "127\.0\.0\.1:(\d+)",/listen = { "127.0.0.1:$1", "127.0.0.1:$low" },/ or die;
$s->write_config($c2);
($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc, 1, 'luxd -s reload exits 1');
like($out, qr{luxd: reload failed \S+luxd\.lua:2: listen 127\.0\.0\.1:$low: Permission denied: port $low needs root, and luxd dropped root for user "nobody" when it started; restart luxd to listen on it}, 'the port and the dropped root are named') or diag($out);
ok(!IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $low, Timeout => 1), "nothing listens on $low");
is($s->get('/')->{status}, 200, 'still serving the old generation');

# 4. A reload naming a new log nobody cannot create: refused, naming it.
mkdir "$d/rootlogs", 0755 or die;
(my $c3 = $conf) =~ s{access_log = "[^"]+",}{access_log = "$d/rootlogs/new.log",} or die;
$s->write_config($c3);
($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc, 1, 'a reload to a log nobody cannot create fails');
like($out, qr{luxd: reload failed \S+luxd\.lua:6: access_log \Q$d\E/rootlogs/new\.log: Permission denied: luxd runs as user "nobody" \(it dropped root at start\) and that user cannot create files in \Q$d\E/rootlogs;}, 'with file:line, path, errno and the user') or diag($out);

# 5. The same, once the file is there for nobody: the reload works.
open my $fh, '>', "$d/rootlogs/new.log" or die; close $fh;
chown $uid, $gid, "$d/rootlogs/new.log";
($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc, 0, 'then the reload works') or diag($out);
is($s->get('/')->{status}, 200, 'a request');
ok(file_has("$d/rootlogs/new.log", qr/GET/), 'logged to the new file');
$s->stop;
done_testing;
