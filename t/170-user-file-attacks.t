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

# What nobody can do in its own directory: plant a link (as that user).
sub as_nobody {
    my ($code) = @_;
    my $pid = fork // die;
    if ($pid == 0) {
        $( = $) = "$gid $gid"; $< = $> = $uid;
        POSIX::_exit($code->() ? 0 : 1);
    }
    waitpid($pid, 0);
    return $? == 0;
}

subtest 'an access_log link planted by the user points at a root-only file' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(as_nobody(sub { symlink "$d/rootonly/secret", "$d/ulogs/access.log" }), 'nobody plants ulogs/access.log -> rootonly/secret');
    my $started = eval { $s->start; 1 };
    $s->get('/') if $started;
    sleep 0.3;
    is(Luxd::_slurp("$d/rootonly/secret"), "root's secret\n",
       'root-only file untouched: luxd (root) did not follow the user\'s link')
        or diag('secret now: ' . Luxd::_slurp("$d/rootonly/secret"));
    $s->stop if $started;
};

subtest 'a pid_file link planted by the user points at a root-only file' => sub {
    my $s = server();
    my $d = $s->dir;
    ok(as_nobody(sub { symlink "$d/rootonly/victim", "$d/urun/luxd.pid" }), 'nobody plants urun/luxd.pid -> rootonly/victim');
    my $started = eval { $s->start; 1 };
    is(Luxd::_slurp("$d/rootonly/victim"), "root's victim\n",
       'root-only file not truncated and overwritten with the pid')
        or diag('victim now: ' . Luxd::_slurp("$d/rootonly/victim"));
    $s->stop if $started;
};

subtest 'the pid file replaced by the user: luxd -s stop signals another process' => sub {
    my $s = server();
    my $d = $s->dir;
    $s->start;
    is(Luxd::_slurp("$d/urun/luxd.pid"), $s->pid . "\n", 'the pid file holds luxd\'s pid');
    # A process of root's that is not luxd.
    my $decoy = fork // die;
    if ($decoy == 0) { no warnings 'exec'; exec 'sleep', '30'; POSIX::_exit(1) }
    ok(as_nobody(sub {
        unlink "$d/urun/luxd.pid" or return 0;
        open my $fh, '>', "$d/urun/luxd.pid" or return 0;
        print $fh "$decoy\n"; close $fh;
    }), 'nobody replaces urun/luxd.pid with another pid');
    my ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    sleep 0.3;
    my $gone = waitpid($decoy, POSIX::WNOHANG()) == $decoy;
    ok(!$gone, 'the other process was not signalled') or diag("luxd -s stop: rc $rc: $out");
    isnt($rc, 0, 'luxd -s stop refuses: the pid is not a luxd serving this config') or diag($out);
    kill 'KILL', $decoy; waitpid($decoy, 0);
    ok($s->alive, 'luxd itself still runs');
    $s->stop;
};

done_testing;
