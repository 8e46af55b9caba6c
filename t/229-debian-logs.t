# issue 17 #15: Debian conventions. The package ships the README and
# conf/examples in /usr/share/doc/luxd (what dh_installdocs and
# dh_installexamples make of debian/luxd.docs and debian/luxd.examples);
# its postinst leaves /var/log/luxd to the serving user with group adm
# (www-data:adm 2750), with or without systemd; the logs luxd creates at
# start as root with user = "www-data" are -rw-r----- www-data adm there,
# as logrotate's `create` line (conf/dist/luxd.logrotate) makes them again,
# and a rotation run by logrotate with the package's su and create lines
# works: the new file is the same, and luxd writes to it after a reopen.
# Outside a set-group-ID directory a log gets the user's group, still 0640.
use strict;
use warnings;
use Test::More;
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(sleep time);
use Luxd;

plan skip_all => 'needs root (chown to www-data, luxd dropping root)' if $> != 0;
my @pw = getpwnam('www-data') or plan skip_all => 'no user www-data';
my $adm = getgrnam('adm') // plan skip_all => 'no group adm';
my ($uid, $gid) = @pw[2, 3];

my $root = $Luxd::ROOT;
my $tmp = tempdir('luxd-deb-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
chmod 0711, $tmp;
sub slurp { my ($p) = @_; open my $fh, '<', $p or return undef; local $/; <$fh> }
sub spew  { my ($p, $t) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $t; close $fh }
sub run {
    my (@cmd) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) { open STDERR, '>&', \*STDOUT; exec @cmd or POSIX::_exit(127) }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}
# "www-data adm 0640" for a path.
sub who {
    my @st = stat $_[0] or return 'missing';
    my $u = getpwuid($st[4]) // $st[4];
    my $g = getgrgid($st[5]) // $st[5];
    return sprintf '%s %s %04o', $u, $g, $st[2] & 07777;
}

subtest 'the README and the examples in /usr/share/doc/luxd' => sub {
    my ($dh) = grep { -x } map { "$_/dh_installdocs" } split /:/, $ENV{PATH};
    plan skip_all => 'debhelper is not installed (deps/packages-pkg.txt)' unless $dh;
    my $src = "$tmp/src";
    make_path("$src/conf");
    system('cp', '-R', "$root/debian", "$root/README", $src) == 0 or die 'cp';
    system('cp', '-R', "$root/conf/examples", "$src/conf/") == 0 or die 'cp';
    my ($rc, $out) = run('sh', '-c', 'cd "$0" && dh_installdocs -pluxd && dh_installexamples -pluxd', $src);
    is $rc, 0, 'dh_installdocs and dh_installexamples run' or diag $out;
    my $doc = "$src/debian/luxd/usr/share/doc/luxd";
    is slurp("$doc/README"), slurp("$root/README"), '/usr/share/doc/luxd/README';
    my @ex = map { s{.*/}{}r } glob "$root/conf/examples/*.lua";
    ok @ex >= 5, scalar(@ex) . ' examples in conf/examples';
    for my $e (@ex) {
        is slurp("$doc/examples/$e"), slurp("$root/conf/examples/$e"), "/usr/share/doc/luxd/examples/$e";
    }
    like slurp("$root/doc/luxd.lua.5"), qr{/usr/share/doc/luxd/examples/}, 'luxd.lua(5) points to them';
};

# postinst configure in a root of its own (DPKG_ROOT, as dpkg sets it for
# another root). Not in a mount namespace with a scratch /var: in a chroot
# (the fresh-machine check) / is no mount point and `unshare -m` fails
# ("cannot change root filesystem propagation"). Instead the test checks
# that this machine's own /var/log/luxd and welcome page are as before.
subtest 'postinst: /var/log/luxd is www-data:adm 2750, without systemd' => sub {
    my $r = "$tmp/root";
    make_path("$r/usr/share/luxd");
    my @host = map { who($_) } '/var/log/luxd', '/var/www/html/index.luxd-debian.html';
    spew("$r/usr/share/luxd/index.html", "welcome\n");
    my ($rc, $out) = run('sh', '-c', 'DPKG_ROOT="$1" sh "$2" configure', 'x', $r, "$root/debian/postinst");
    is $rc, 0, 'postinst configure exits 0' or diag $out;
    is who("$r/var/log/luxd"), 'www-data adm 2750', '/var/log/luxd: www-data adm, 2750 (set-group-ID)';
    is slurp("$r/var/www/html/index.luxd-debian.html"), "welcome\n", 'the welcome page, as before';
    ($rc, $out) = run('sh', '-c', 'DPKG_ROOT="$1" sh "$2" configure', 'x', $r, "$root/debian/postinst");
    is $rc, 0, 'a second configure (an upgrade) exits 0 too' or diag $out;
    is_deeply [map { who($_) } '/var/log/luxd', '/var/www/html/index.luxd-debian.html'], \@host,
        "nothing outside DPKG_ROOT changed (this machine's /var/log/luxd, welcome page)";
    my $lr = slurp("$root/conf/dist/luxd.logrotate") // '';
    like $lr, qr/^\s*create 0640 www-data adm$/m, 'logrotate creates 0640 www-data adm';
};

# luxd started as root with user = "www-data" (no systemd: a container,
# sysvinit), its logs in a directory made as postinst makes /var/log/luxd,
# and, for the rest, in one that is not set-group-ID.
my $logs = "$tmp/log";
mkdir $logs or die;
chown $uid, $adm, $logs;
chmod 02750, $logs;
mkdir "$tmp/plain" or die;
chown $uid, 0, "$tmp/plain";
chmod 0750, "$tmp/plain";
my $s = Luxd->new(no_start => 1, files => { 'www/index.html' => "hi\n" }, config => <<'EOF');
server {
  listen = "127.0.0.1:$PORT", workers = 1, user = "www-data",
  pid_file = "$DIR/luxd.pid", access_log_buffer = 0,
  error_log = "LOGS/error.log",
  access_log = "LOGS/access.log",
}
vhost "localhost" { default = true, root = "$DIR/www", access_log = "PLAIN/plain.log" }
vhost "b" { root = "$DIR/www" }
EOF
{
    my $c = slurp($s->config_file);
    $c =~ s/LOGS/$logs/g;
    $c =~ s/PLAIN/$tmp\/plain/g;
    spew($s->config_file, $c);
}
chmod 0711, $s->dir;
chmod 0755, $s->dir . '/www';
$s->start;
is $s->get('/', Host => 'b')->{status}, 200, 'luxd serves as www-data';
is $s->get('/')->{status}, 200, 'and logs the default vhost apart';
is who("$logs/error.log"), 'www-data adm 0640', 'error.log it created at start: -rw-r----- www-data adm';
is who("$logs/access.log"), 'www-data adm 0640', 'access.log too';
is who("$tmp/plain/plain.log"), 'www-data www-data 0640', 'in a directory that is not set-group-ID: the user\'s group, 0640';

# A rotation as the package's logrotate does it: its su and create lines.
SKIP: {
    my ($lrbin) = grep { -x } map { "$_/logrotate" } split /:/, "$ENV{PATH}:/usr/sbin";
    skip 'logrotate is not installed', 5 unless $lrbin;
    my $dist = slurp("$root/conf/dist/luxd.logrotate") // '';
    my @keep = grep { /^\s*(su|create)\s/ } split /\n/, $dist;
    is scalar(@keep), 2, 'the package\'s su and create lines' or diag $dist;
    spew("$tmp/lr.conf", "$logs/*.log {\n  rotate 2\n" . join("\n", @keep) . "\n}\n");
    chmod 0644, "$tmp/lr.conf";
    my ($rc, $out) = run($lrbin, '-f', '-s', "$tmp/lr.state", "$tmp/lr.conf");
    is $rc, 0, 'logrotate -f exits 0' or diag $out;
    is who("$logs/access.log"), 'www-data adm 0640', 'the new access.log: -rw-r----- www-data adm';
    ok -s "$logs/access.log.1", 'the old one is access.log.1';
    $s->signal('USR1');
    my $t = time + 5;
    sleep 0.05 until ($s->get('/', Host => 'b'), (slurp("$logs/access.log") // '') =~ /GET/) || time > $t;
    like slurp("$logs/access.log") // '', qr/"GET \/ HTTP\/1\.1" 200/, 'after a reopen luxd writes the new file';
}
$s->stop;
done_testing;
