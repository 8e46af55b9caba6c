# issue 17 #11: the default config path is built in (the Makefile's
# CONF_PATH, as nginx's --conf-path; PID_PATH the pid file luxd -s falls
# back to). The packaged luxd read conf/luxd.lua from the working directory,
# so `cd /root; luxd -t` failed with no hint. A plain build keeps the source
# tree's conf/luxd.lua; `make install` and the Debian package build theirs
# with /etc/luxd/luxd.lua and /run/luxd/luxd.pid; luxd -V prints them; a
# config that cannot be read names -c.
use strict;
use warnings;
use Test::More;
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use POSIX ();
use Luxd;

my $root = $Luxd::ROOT;
my $bin  = Luxd::bin();
my $tmp  = tempdir('luxd-defaults-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});

# (exit status, stdout and stderr together) of a command run in $dir.
sub run_in {
    my ($dir, @cmd) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        chdir $dir or POSIX::_exit(126);
        exec { $cmd[0] } @cmd or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

subtest 'a plain build: conf/luxd.lua, no pid file' => sub {
    my ($rc, $out) = run_in($root, $bin, '-V');
    like $out, qr{^default config \(-c\): conf/luxd\.lua$}m, '-V prints the default config';
    like $out, qr{^default pid file \(-s\): none$}m, 'and that no pid file is built in';
    ($rc, $out) = run_in($tmp, $bin, '-t');
    is $rc, 1, 'luxd -t in a directory without conf/luxd.lua: exit 1';
    like $out, qr{^conf/luxd\.lua: cannot read: No such file or directory$}m, 'cannot read';
    like $out, qr{^luxd: conf/luxd\.lua is the built-in default config \(relative to the working directory \Q$tmp\E\); name another with -c FILE$}m,
      'says it was the default, from where, and that -c names another' or diag $out;
    ($rc, $out) = run_in($tmp, $bin, '-t', '-c', 'mine.lua');
    like $out, qr{^luxd: mine\.lua is the config -c named \(relative to the working directory \Q$tmp\E\); name another with -c FILE$}m,
      'a file -c named that cannot be read: the same hint' or diag $out;
    ($rc, $out) = run_in($tmp, $bin, '-t', '-c', "$tmp/x.lua");
    like $out, qr{^luxd: \Q$tmp\E/x\.lua is the config -c named; name another with -c FILE$}m,
      'an absolute path: no working directory named';
};

subtest 'make install: /etc/luxd/luxd.lua and /run/luxd/luxd.pid' => sub {
    my $d = "$tmp/destdir";
    my ($rc, $out) = run_in($root, 'make', '-s', '--no-print-directory', 'install', "DESTDIR=$d");
    is $rc, 0, 'make install DESTDIR=... exits 0' or diag $out;
    my $inst = "$d/usr/local/sbin/luxd";
    ($rc, $out) = run_in('/', $inst, '-V');
    like $out, qr{^default config \(-c\): /etc/luxd/luxd\.lua$}m, 'the installed luxd reads /etc/luxd/luxd.lua by default';
    like $out, qr{^default pid file \(-s\): /run/luxd/luxd\.pid$}m, 'and falls back to /run/luxd/luxd.pid';
    SKIP: {
        skip '/etc/luxd/luxd.lua exists on this machine', 2 if -e '/etc/luxd/luxd.lua';
        ($rc, $out) = run_in($tmp, $inst, '-t');
        is $rc, 1, 'the installed luxd -t, here without /etc/luxd/luxd.lua: exit 1';
        like $out, qr{^luxd: /etc/luxd/luxd\.lua is the built-in default config; name another with -c FILE$}m,
          'naming the absolute default and -c' or diag $out;
    }
    ($rc, $out) = run_in($tmp, $inst, '-t', '-c', "$d/etc/luxd/luxd.lua");
    is $rc, 0, 'it checks the config it installed' or diag $out;

    # The pid file built in is what -s reads when the config's text does not
    # name one: an install built with this server's pid file finds it.
    my $s = Luxd->new(config => qq{server { listen = "127.0.0.1:\$PORT", workers = 1, error_log = "\$DIR/error.log",
  pid_file = os.getenv("LUXD_T222_DIR") .. "/luxd.pid", access_log = "\$DIR/access.log" }
vhost "localhost" { default = true, root = "\$DIR/www" }
}, no_start => 1);
    local $ENV{LUXD_T222_DIR} = $s->dir;
    $s->start;
    my $pid = $s->dir . '/luxd.pid';
    ok -s $pid, 'a server whose pid_file is computed';
    ($rc, $out) = run_in($root, 'make', '-s', '--no-print-directory', 'install', "DESTDIR=$tmp/d2", "INSTALL_PID_PATH=$pid");
    is $rc, 0, "make install INSTALL_PID_PATH=$pid" or diag $out;
    ($rc, $out) = run_in($tmp, "$tmp/d2/usr/local/sbin/luxd", '-s', 'reopen', '-c', $s->config_file);
    is $rc, 1, 'luxd -s reopen: the config computes its pid_file: refused, no guess (t/251)' or diag $out;
    like $out, qr/not falling back to the built-in pid file: name it with -p PIDFILE/, 'naming -p' or diag $out;
    my $nopid = "$tmp/nopid.lua";
    open my $fh, '>', $nopid or die "$nopid: $!";
    print $fh qq{vhost "x" { root = "/tmp" }\n};
    close $fh;
    ($rc, $out) = run_in($tmp, "$tmp/d2/usr/local/sbin/luxd", '-s', 'reopen', '-c', $nopid);
    is $rc, 0, 'luxd -s reopen: a config that names no pid_file: the built-in one is used' or diag $out;
    ok $s->wait_log(qr/logs reopened/), 'the server reopened its logs';
    ($rc, $out) = run_in($tmp, $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 1, 'control: the plain build, with none built in, cannot tell';
    like $out, qr/pid_file is not set to a plain string literal.*name it with -p PIDFILE/, 'and says so' or diag $out;
    $s->stop;
    # Leave build/install as a plain `make install` would have it.
    run_in($root, 'make', '-s', '--no-print-directory', 'install', "DESTDIR=$tmp/d3");
};

subtest 'debian/rules builds and installs with the package paths' => sub {
    my $rules = Luxd::_slurp("$root/debian/rules") // '';
    my ($paths) = $rules =~ /^PATHS = (.*)$/m;
    like $paths // '', qr{\bINSTALL_CONF_PATH=/etc/luxd/luxd\.lua\b}, 'PATHS: the config conf/dist/luxd.lua installs';
    like $paths // '', qr{\bINSTALL_PID_PATH=/run/luxd/luxd\.pid\b}, 'PATHS: the pid file it names';
    my $conf = Luxd::_slurp("$root/conf/dist/luxd.lua") // '';
    like $conf, qr{^\s*pid_file\s*=\s*"/run/luxd/luxd\.pid"}m, 'which is conf/dist/luxd.lua\'s pid_file';
    like $rules, qr{^\t\$\(MAKE\) install .*\\\n.*\$\(PATHS\)}m, 'make install gets them';
    like $rules, qr{^\tbuild/install/luxd -V \| grep -qx 'default config \(-c\): /etc/luxd/luxd\.lua'$}m,
      'and the package build checks the binary it installs';
};
done_testing;
