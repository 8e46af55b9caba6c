# Review of issue 17 #9/#11: `luxd -s` reads the config's pid_file from
# its text, and falls back to the built-in PID_PATH when it cannot. When the
# config DOES assign pid_file, but not as one plain literal (a local
# variable, a concatenation: `pid_file = run .. "/b.pid"`), the server it
# names is not the built-in default's. Falling back then aims the signal at
# another server: on a machine running the packaged luxd (pid file
# /run/luxd/luxd.pid) and a second one with its own config,
# `luxd -c second.lua -s stop` stopped the packaged one and exited 0. The
# lock check cannot catch that: the other server is a real luxd holding its
# pid file. A config that sets pid_file in a way -s cannot read must make
# -s refuse (and name -p), not guess.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use Luxd;

my $root = $Luxd::ROOT;
my $tmp  = tempdir('luxd-t251-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});

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

# A: the "packaged" server, at the pid file built into the binary.
my $a = Luxd->new();
my $apid = $a->dir . '/luxd.pid';
# B: a second server whose config computes its pid_file.
my $b = Luxd->new(config => <<'EOF');
local run = "$DIR"
server { listen = "127.0.0.1:$PORT", workers = 1, error_log = run .. "/error.log",
  access_log = run .. "/access.log", pid_file = run .. "/b.pid" }
vhost "localhost" { default = true, root = run .. "/www" }
EOF
ok -s $b->dir . '/b.pid', 'B wrote its own pid file';
# C: a third whose pid_file is set in a file it includes, which -s does not
# read: it must not fall back to the built-in pid file either.
my $c = Luxd->new(no_start => 1);
my ($cd, $cp) = ($c->dir, $c->port);
$c->write_file('server.lua', qq{server { listen = "127.0.0.1:$cp", workers = 1,
  error_log = "$cd/error.log", access_log = "$cd/access.log", pid_file = "$cd/luxd.pid" }\n});
$c->write_config(qq{include "server.lua"\nvhost "localhost" { default = true, root = "$cd/www" }\n});
$c->start;
ok -s "$cd/luxd.pid", 'C wrote the pid file its included file names';

my ($rc, $out) = run_in($root, 'make', '-s', '--no-print-directory', 'install', "DESTDIR=$tmp/d",
    "INSTALL_PID_PATH=$apid");
is $rc, 0, 'make install with A\'s pid file built in' or diag $out;
my $inst = "$tmp/d/usr/local/sbin/luxd";

($rc, $out) = run_in($tmp, $inst, '-c', $b->config_file, '-s', 'stop');
isnt $rc, 0, 'luxd -c B -s stop: B\'s pid_file cannot be read from its text: refused' or diag $out;
like $out, qr/-p/, 'naming -p' or diag $out;
ok $a->alive, 'A, the server built in as the default, was not stopped' or diag $out;
ok $b->alive, 'B is still running too';

($rc, $out) = run_in($tmp, $inst, '-c', $c->config_file, '-s', 'stop');
isnt $rc, 0, 'luxd -c C -s stop: C\'s pid_file is in an included file: refused' or diag $out;
like $out, qr/included file.*-p/, 'saying so, and naming -p' or diag $out;
ok $a->alive, 'A was not stopped';
ok $c->alive, 'C is still running';
$c->stop;

($rc, $out) = run_in($tmp, $inst, '-c', $b->config_file, '-p', $b->dir . '/b.pid', '-s', 'stop');
is $rc, 0, 'with -p B\'s pid file: B is stopped' or diag $out;
is $b->wait_exit(10), 0, 'B exited';
$b->{stopped} = 1;
ok $a->alive, 'and A runs on';
$a->stop;
# Leave build/install as a plain `make install` would have it.
run_in($root, 'make', '-s', '--no-print-directory', 'install', "DESTDIR=$tmp/d3");
done_testing;
