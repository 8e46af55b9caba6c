# issue 11 review: with `user`, luxd opens its pid file and logs as root.
# Where a directory on the way belongs to the serving user, that user (the
# one a compromised site runs as) controls what the names point to: a
# symbolic link planted there makes root write, or truncate, a file only
# root may touch (the Debian nginx CVE-2016-1247 class). And a pid file the
# user may replace makes `luxd -s stop`, run by root, signal any process.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my $user = 'nobody';
my @pw = getpwnam($user) or BAIL_OUT("no user $user");
my ($uid, $gid) = @pw[2, 3];

# An access-log line is written just after its response: waits (up to
# 10 s) until $file matches $re.
sub wait_file {
    my ($file, $re) = @_;
    my $deadline = time + 10;
    sleep 0.05 until (Luxd::_slurp($file) // '') =~ $re || time > $deadline;
}

sub server {
    my (%o) = @_;
    my $s = Luxd->new(no_start => 1, config => <<'EOF_CONF', files => { 'www/index.html' => "hi\n" });
server {
  listen = "127.0.0.1:$PORT",
  workers = 1,
  user = "nobody",
  error_log = "$DIR/error.log",
  access_log = "$DIR/ulogs/access.log",
  access_log_buffer = 0,
  pid_file = "$DIR/urun/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
EOF_CONF
    my $d = $s->dir;
    chmod 0711, $d;
    chmod 0755, "$d/www";
    chmod 0644, "$d/www/index.html";
    # The user's own directories, as LogsDirectory=/RuntimeDirectory= or a
    # package's postinst makes them.
    for (qw(ulogs urun)) { mkdir "$d/$_", 0755 or die "$_: $!"; chown $uid, $gid, "$d/$_" }
    # Root's own files, elsewhere.
    mkdir "$d/rootonly", 0700 or die;
    for (qw(secret victim)) {
        open my $fh, '>', "$d/rootonly/$_" or die; print $fh "root's $_\n"; close $fh;
        chmod 0600, "$d/rootonly/$_";
    }
    return $s;
}

# luxd refuses to start on such a link, saying which file and why (an
# old luxd followed it and started: run_luxd's timeout, rc -1).
local $Luxd::RUN_TIMEOUT = 5;

subtest 'an access_log link planted by the user points at a root-only file' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(Luxd::as_user('nobody', sub { symlink "$d/rootonly/secret", "$d/ulogs/access.log" }), 'nobody plants ulogs/access.log -> rootonly/secret');
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    is($rc, 1, 'luxd refuses to start') or diag($out);
    like($out, qr{luxd\.lua:\d+: access_log \Q$d\E/ulogs/access\.log: it is a symbolic link, which luxd does not follow there},
         'saying which file and why');
    is(Luxd::_slurp("$d/rootonly/secret"), "root's secret\n",
       'root-only file untouched: luxd (root) did not follow the user\'s link');
};

subtest 'a pid_file link planted by the user points at a root-only file' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(Luxd::as_user('nobody', sub { symlink "$d/rootonly/victim", "$d/urun/luxd.pid" }), 'nobody plants urun/luxd.pid -> rootonly/victim');
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    is($rc, 1, 'luxd refuses to start') or diag($out);
    like($out, qr{pid_file \Q$d\E/urun/luxd\.pid: it is a symbolic link}, 'saying which file and why');
    is(Luxd::_slurp("$d/rootonly/victim"), "root's victim\n",
       'root-only file not truncated and overwritten with the pid');
};

subtest 'a hard link to a root-only file as the pid file' => sub {
    my $s = server();
    my $d = $s->dir;
    # fs.protected_hardlinks keeps nobody from making it; root's own
    # mistake, or a system without that setting, is what is left.
    link "$d/rootonly/victim", "$d/urun/luxd.pid" or die "link: $!";
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    is($rc, 1, 'luxd refuses to start') or diag($out);
    like($out, qr{pid_file \Q$d\E/urun/luxd\.pid: the file has other hard links}, 'saying why');
    is(Luxd::_slurp("$d/rootonly/victim"), "root's victim\n", 'root-only file not truncated');
};

subtest 'a FIFO as the access log' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(Luxd::as_user('nobody', sub { POSIX::mkfifo("$d/ulogs/access.log", 0644) }), 'nobody makes ulogs/access.log a FIFO');
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    # A luxd waiting for a reader would run until run_luxd kills it (-1).
    is($rc, 1, 'luxd refuses to start, without waiting for a reader') or diag($out);
    like($out, qr{access_log \Q$d\E/ulogs/access\.log: not a regular file}, 'saying why');
};

subtest 'the log files nobody owns (after a rotation) are fine' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(Luxd::as_user('nobody', sub { open my $fh, '>', "$d/ulogs/access.log" or return 0; close $fh }), 'nobody makes ulogs/access.log');
    $s->start;
    is($s->get('/')->{status}, 200, 'a request');
    wait_file("$d/ulogs/access.log", qr{"GET / HTTP/1\.1" 200});
    like(Luxd::_slurp("$d/ulogs/access.log"), qr{"GET / HTTP/1\.1" 200}, 'logged there');
    $s->stop;
};

subtest 'a reopen does not follow a link planted in place of the rotated log' => sub {
    my $s = server();
    my $d = $s->dir;
    $s->start;
    ok(Luxd::as_user('nobody', sub {
        rename "$d/ulogs/access.log", "$d/ulogs/access.log.1" or return 0;
        symlink "$d/rootonly/secret", "$d/ulogs/access.log";
    }), 'nobody moves the log and plants a link in its place');
    ok($s->signal('USR1'), 'SIGUSR1');
    ok($s->wait_log(qr/logs reopened/, 10), 'the reopen ran');
    like($s->error_log, qr{\[error\] reopen: access log \Q$d\E/ulogs/access\.log: it is a symbolic link, which luxd does not follow there.*; still writing to the file open before},
         'the link is refused, saying why');
    is($s->get('/')->{status}, 200, 'a request');
    wait_file("$d/ulogs/access.log.1", qr{"GET / HTTP/1\.1" 200});
    like(Luxd::_slurp("$d/ulogs/access.log.1"), qr{"GET / HTTP/1\.1" 200}, 'logged to the file open before');
    is(Luxd::_slurp("$d/rootonly/secret"), "root's secret\n", 'root-only file untouched');
    $s->stop;
};

subtest 'the pid file replaced by the user: luxd -s stop signals another process' => sub {
    my $s = server();
    my $d = $s->dir;
    $s->start;
    is(Luxd::_slurp("$d/urun/luxd.pid"), $s->pid . "\n", 'the pid file holds luxd\'s pid');
    # A process of root's that is not luxd.
    my $decoy = fork // die;
    if ($decoy == 0) { no warnings 'exec'; exec 'sleep', '30'; POSIX::_exit(1) }
    ok(Luxd::as_user('nobody', sub {
        unlink "$d/urun/luxd.pid" or return 0;
        open my $fh, '>', "$d/urun/luxd.pid" or return 0;
        print $fh "$decoy\n"; close $fh;
    }), 'nobody replaces urun/luxd.pid with another pid');
    my ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    sleep 0.3;
    my $gone = waitpid($decoy, POSIX::WNOHANG()) == $decoy;
    ok(!$gone, 'the other process was not signalled') or diag("luxd -s stop: rc $rc: $out");
    isnt($rc, 0, 'luxd -s stop refuses: the pid is not a luxd serving this config') or diag($out);
    like($out, qr{no luxd holds \Q$d\E/urun/luxd\.pid \(stale pid file\?\)}, 'saying why');
    kill 'KILL', $decoy; waitpid($decoy, 0);
    ok($s->alive, 'luxd itself still runs');
    $s->stop;
};

subtest 'the pid file rewritten in place: luxd -s stop refuses' => sub {
    my $s = server();
    my $d = $s->dir;
    $s->start;
    my $decoy = fork // die;
    if ($decoy == 0) { no warnings 'exec'; exec 'sleep', '30'; POSIX::_exit(1) }
    # Another fd of root's on the file, in this process: luxd's lock stays.
    open my $fh, '+<', "$d/urun/luxd.pid" or die; truncate $fh, 0; print $fh "$decoy\n"; close $fh;
    my ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    is($rc, 1, 'luxd -s stop refuses') or diag($out);
    like($out, qr{\Q$d\E/urun/luxd\.pid says pid $decoy, but that process does not hold the file open}, 'saying the pid it names does not hold the file');
    sleep 0.3;
    ok(waitpid($decoy, POSIX::WNOHANG()) != $decoy, 'the other process was not signalled');
    kill 'KILL', $decoy; waitpid($decoy, 0);
    ok($s->alive, 'luxd still runs');
    ($rc, $out) = Luxd::run_luxd('-s', 'reopen', '-c', $s->config_file);
    isnt($rc, 0, 'nor is luxd itself signalled on the file\'s word');
    $s->stop;
};

subtest 'a stale pid file after luxd stopped' => sub {
    my $s = server();
    my $d = $s->dir;
    my $decoy = fork // die;
    if ($decoy == 0) { no warnings 'exec'; exec 'sleep', '30'; POSIX::_exit(1) }
    open my $fh, '>', "$d/urun/luxd.pid" or die; print $fh "$decoy\n"; close $fh;
    my ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    is($rc, 1, 'luxd -s stop exits 1') or diag($out);
    like($out, qr{^luxd: no luxd holds \Q$d\E/urun/luxd\.pid \(stale pid file\?\); not signalling pid $decoy$}m, 'saying so');
    sleep 0.3;
    ok(waitpid($decoy, POSIX::WNOHANG()) != $decoy, 'the process named was not signalled');
    kill 'KILL', $decoy; waitpid($decoy, 0);
    # luxd starts over the stale file (root's, one link) and -s works.
    $s->start;
    is(Luxd::_slurp("$d/urun/luxd.pid"), $s->pid . "\n", 'the pid file rewritten');
    ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    is($rc, 0, 'luxd -s stop') or diag($out);
    ok(defined $s->wait_exit(10), 'luxd stopped');
};

subtest 'a second luxd on the same pid_file' => sub {
    my $s = server();
    my $d = $s->dir;
    $s->start;
    # The same config but another port: the sockets bind, the pid file is
    # what stops it.
    (my $conf = Luxd::_slurp($s->config_file)) =~ s/127\.0\.0\.1:\d+/"127.0.0.1:" . Luxd::free_port()/e;
    $conf =~ s{error_log = "[^"]*"}{error_log = "stderr"} or die; # not in $DIR: the harness reads its *.log
    Luxd::_write_file("$d/second.lua", $conf);
    my ($rc, $out) = Luxd::run_luxd('-c', "$d/second.lua");
    is($rc, 1, 'the second refuses to start') or diag($out);
    like($out, qr{pid_file \Q$d\E/urun/luxd\.pid: another process holds its lock}, 'saying why');
    is(Luxd::_slurp("$d/urun/luxd.pid"), $s->pid . "\n", 'the running one\'s pid file left whole');
    $s->stop;
};

done_testing;
