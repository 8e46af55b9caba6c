# Review of the pid-file lock (issue 11): luxd holds a fcntl write lock on
# its pid file for its whole life and `luxd -s` signals only the lock
# holder. Two ways the design gives way:
#  1. fcntl (POSIX) locks belong to the process and are dropped when the
#     process closes ANY fd it has on the file. The workers are threads of
#     that process: serving the pid file as a static file (a pid_file under
#     a vhost root) opens and closes it, and the lock is gone. Then
#     `luxd -s stop` refuses to stop the running luxd ("stale pid file?")
#     and a second luxd with the same pid_file starts, truncating and
#     rewriting the first one's pid file.
#  2. The .reload status file is opened by `luxd -s reload` (as root) with
#     plain fopen: no O_NOFOLLOW, no O_NONBLOCK, no check of what it is or
#     whose. In a directory the serving user may write (RuntimeDirectory=,
#     the layout t/170 defends) that user makes it a FIFO and root's
#     `luxd -s reload` hangs for good (open of a FIFO no one writes)
#     before it even sends SIGHUP. (Reading as root a file the serving user
#     put there also lets that user decide the outcome it prints.)
use strict;
use warnings;
use Test::More;
use Luxd;
use POSIX ();
use Time::HiRes qw(sleep time);

my @pw = getpwnam('nobody') or BAIL_OUT('no user nobody');
my ($uid, $gid) = @pw[2, 3];
# A hang is for good: 15 s tells it from a slow run on a loaded machine.
local $Luxd::RUN_TIMEOUT = 15;

subtest 'control: kill -9 leaves a stale pid file; the next start is not blocked' => sub {
    my $s = Luxd->new;
    ok(-s $s->dir . '/luxd.pid', 'pid file written');
    kill 'KILL', $s->pid; $s->wait_exit(5);
    $s->start;
    is(Luxd::_slurp($s->dir . '/luxd.pid'), $s->pid . "\n", 'restarted, pid file rewritten');
    $s->reload; $s->reload;
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file, '-s', 'stop');
    is($rc, 0, 'luxd -s stop after two reloads: the lock held') or diag($out);
    ok(defined $s->wait_exit(5), 'stopped');
};

subtest 'a GET of the pid file (under a vhost root) keeps the lock' => sub {
    my $s = Luxd->new(server => { pid_file => '$DIR/www/luxd.pid' }, files => { 'www/index.html' => "hi\n" });
    my $d = $s->dir;
    is($s->get('/index.html')->{status}, 200, 'a request');
    my $r = $s->get('/luxd.pid');
    is($r->{status}, 200, 'the pid file is served (a file under the root)');
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file, '-s', 'reopen');
    is($rc, 0, 'luxd -s reopen still finds the running luxd holding the lock') or diag($out);
    unlike($out, qr/no luxd holds/, 'not taken for a stale pid file');
    # A second luxd with the same pid_file, on another port.
    (my $conf2 = Luxd::_slurp($s->config_file)) =~ s/127\.0\.0\.1:\d+/"127.0.0.1:" . Luxd::free_port()/e;
    # Its own error log: its refusal is an [emerg], which the harness
    # counts against the first luxd's log.
    $conf2 =~ s{"\Q$d\E/error\.log"}{"$d/second-error.log"}g;
    Luxd::_write_file("$d/second.lua", $conf2);
    ($rc, $out) = Luxd::run_luxd('-c', "$d/second.lua");
    is($rc, 1, 'a second luxd with the same pid_file is refused') or diag($out);
    like(Luxd::_slurp("$d/second-error.log") // '', qr/another process holds its lock/, 'saying so');
    unlink "$d/second-error.log"; # the harness fails a test on any [emerg] in the logs it finds
    is(Luxd::_slurp("$d/www/luxd.pid"), $s->pid . "\n", 'the running luxd\'s pid file is intact');
    ok($s->alive, 'the first luxd still runs');
    $s->stop;
};

sub urun_server {
    my $s = Luxd->new(no_start => 1, config => <<'EOF_CONF', files => { 'www/index.html' => "hi\n" });
server {
  listen = "127.0.0.1:$PORT",
  workers = 1,
  user = "nobody",
  error_log = "$DIR/error.log",
  access_log = "$DIR/access.log",
  pid_file = "$DIR/urun/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
EOF_CONF
    my $d = $s->dir;
    chmod 0711, $d; chmod 0755, "$d/www"; chmod 0644, "$d/www/index.html";
    mkdir "$d/urun", 0755 or die; chown $uid, $gid, "$d/urun";
    $s->start;
    return $s;
}

subtest 'the serving user makes the .reload status file a FIFO: luxd -s reload does not hang' => sub {
    my $s = urun_server();
    my $d = $s->dir;
    ok(Luxd::as_user('nobody', sub { unlink "$d/urun/luxd.pid.reload"; POSIX::mkfifo("$d/urun/luxd.pid.reload", 0644) }),
       'nobody replaces urun/luxd.pid.reload with a FIFO');
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file, '-s', 'reload');
    isnt($rc, -1, 'luxd -s reload returns (run_luxd gives -1 when it had to be killed)') or diag($out);
    is($rc, 1, 'exit 1: the outcome cannot be read');
    like($out, qr/luxd\.pid\.reload is not the regular file luxd writes/, 'saying why') or diag($out);
    ok($s->wait_log(qr/reload: generation 2/, 10), 'and the reload was sent');
    $s->stop;
};

done_testing;
