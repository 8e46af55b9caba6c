# issue 11: user = "nobody". Every file luxd needs is opened while it is
# still root, as nginx's master opens them: the pid file in a directory only
# root may write, the error and access logs in another; after the switch the
# logs are still written and `luxd -s reload` still learns its outcome. The
# user's supplementary groups are set (initgroups): a group of the user's
# opens a document root to it, and without that group the same root is
# refused (and -t and start-up say so). At stop the pid file, which nobody
# may not remove, is emptied.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my $GROUP = 'luxdt140';
my $user = 'nobody';
my @pw = getpwnam($user) or BAIL_OUT("no user $user");
my ($uid, $gid) = @pw[2, 3];

sub sh { my $rc = system(@_); $rc == 0 or die "@_: exit $rc" }
system("getent group $GROUP >/dev/null && groupdel $GROUP");
sh('groupadd', $GROUP);
END { system("getent group $GROUP >/dev/null && groupdel $GROUP >/dev/null 2>&1") }
sh("gpasswd -a $user $GROUP >/dev/null");
my $ggid = (getgrnam($GROUP))[2];

sub server {
    my $s = Luxd->new(no_start => 1, config => <<'EOF_CONF', files => { 'www/index.html' => "hi\n", 'grp/index.html' => "members only\n" });
server {
  listen = "127.0.0.1:$PORT",
  workers = 2,
  user = "nobody",
  error_log = "$DIR/logs/error.log",
  access_log = "$DIR/logs/access.log",
  access_log_buffer = 0,
  pid_file = "$DIR/run/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
vhost "grp.test" { root = "$DIR/grp" }
EOF_CONF
    my $d = $s->dir;
    chmod 0711, $d;                       # nobody may pass, not list
    chmod 0755, "$d/www";
    chmod 0644, "$d/www/index.html";
    mkdir "$d/$_", 0700 or die "$_: $!" for qw(logs run);   # root's alone
    chown 0, $ggid, "$d/grp", "$d/grp/index.html";
    chmod 0750, "$d/grp";
    chmod 0640, "$d/grp/index.html";
    return $s;
}

my $s = server();
my $d = $s->dir;
my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is($rc, 0, '-t: the config is good');
unlike($out, qr/root \S+ cannot be searched/, '-t: no warning about grp/, which a group of nobody may search') or diag($out);
$s->start;
my $pid = $s->pid;

my $status = Luxd::_slurp("/proc/$pid/status");
like($status, qr/^Uid:\s+$uid\s+$uid\s+$uid\s+$uid$/m, "running as $user (real, effective, saved, fs uid)");
like($status, qr/^Gid:\s+$gid\s+$gid\s+$gid\s+$gid$/m, "with its group $gid");
my ($groups) = $status =~ /^Groups:\s*(.*)$/m;
ok(grep({ $_ == $ggid } split ' ', $groups // ''), "supplementary groups set by initgroups: $GROUP ($ggid) in [$groups]");

is($s->get('/')->{status}, 200, 'a file of the root everyone may read');
my $r = $s->get('/', Host => 'grp.test');
is($r->{status}, 200, 'grp/ (mode 0750, group luxdt140) is served through the supplementary group');
is($r->{body}, "members only\n", 'its file');

# The logs in the root-only directory were opened before the switch and are
# still written after it; the ones luxd created are nobody's.
# The line of the first request may come later than the second's (another
# loop wrote it): wait for both.
my $t = time + 10;
sleep 0.05 until (() = (Luxd::_slurp("$d/logs/access.log") // '') =~ /\n/g) >= 2 || time > $t;
my @al = split /\n/, Luxd::_slurp("$d/logs/access.log") // '';
is(scalar @al, 2, 'both requests in logs/access.log (a directory only root may write)');
my $el = Luxd::_slurp("$d/logs/error.log") // '';
like($el, qr/\[info\] luxd \S+ started: .*running as user nobody/, 'the error log says who it runs as');
is((stat "$d/logs/access.log")[4], $uid, 'a log luxd created at start belongs to nobody (a later reopen can open it)');
is((stat "$d/logs")[2] & 07777, 0700, 'logs/ is still root-only');

# The pid file: root's, in root's directory, written before the switch.
my @st = stat "$d/run/luxd.pid";
is($st[4], 0, 'the pid file belongs to root');
is(Luxd::_slurp("$d/run/luxd.pid"), "$pid\n", 'and holds the pid');

# A reload's outcome reaches `luxd -s reload` although nobody cannot create
# files in run/: the status file was opened with the pid file.
($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc, 0, 'luxd -s reload exits 0') or diag($out);
like($out, qr/^luxd: reload ok generation 2 /m, 'and prints the outcome') or diag($out);
is($s->get('/', Host => 'grp.test')->{status}, 200, 'grp/ still served after the reload');

$s->stop;
is(-s "$d/run/luxd.pid", 0, 'at stop the pid file, which nobody may not remove, is emptied');
like(Luxd::_slurp("$d/logs/error.log"), qr/pid_file \S+luxd\.pid: cannot remove it as user nobody \(Permission denied\); emptied it instead/, 'and the log says so');
($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
is($rc, 1, 'luxd -s stop afterwards signals nobody');
like($out, qr/no pid in \S+luxd\.pid/, '"no pid in" the emptied file') or diag($out);

# One past: without the group, the same root is nobody's no more. -t and
# start-up say why, and the request is refused.
sh("gpasswd -d $user $GROUP >/dev/null");
my $s2 = server();
($rc, $out) = Luxd::run_luxd('-t', '-c', $s2->config_file);
like($out, qr{luxd: warning: \S+luxd\.lua:11: vhost "grp\.test": root \S+/grp cannot be searched by user "nobody": no search \(x\) permission on \S+/grp \(mode 0750, owner root, group $GROUP\)}, '-t: grp/ cannot be searched by nobody without the group') or diag($out);
$s2->start;
is($s2->get('/', Host => 'grp.test')->{status}, 403, 'not a member: 403');
my $el2 = Luxd::_slurp($s2->dir . "/logs/error.log") // '';
like($el2, qr/\[warn\] \S+luxd\.lua:11: vhost "grp\.test": root \S+ cannot be searched by user "nobody"/, 'start-up logs the same warning');
like($el2, qr/\[error\] open\(\) "\S+\/grp\/index\.html" failed \(13: Permission denied\), client: 127\.0\.0\.1, vhost: grp\.test, request: "GET \/"/, 'the refused open is logged at error with why');
$s2->stop;
done_testing;
