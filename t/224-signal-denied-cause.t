# issue 17 #14: `luxd -s` refused by the kernel names the real cause. Run
# as the server's own user but without its capability (systemd's
# AmbientCapabilities=CAP_NET_BIND_SERVICE), -s could not read
# /proc/PID/fd (the kernel shows a process's files only to one holding all
# of its capabilities) and refused with "run luxd -s as root or as the
# server's user", which it was. Now a pid file no one but root and the
# caller may write is taken at its word (the signal can only reach what the
# caller could signal anyway), and a refusal says which check failed: the
# capabilities, the user, a user= drop, a kill(2) EPERM.
use strict;
use warnings;
use Test::More;
use Cwd qw(abs_path);
use POSIX ();
use Luxd;

my @pw = getpwnam('nobody') or plan skip_all => 'no user nobody';
my ($uid, $gid) = @pw[2, 3];
my $bin = abs_path(Luxd::bin());
-x '/usr/bin/setpriv' or plan skip_all => 'no setpriv';
my @as_nobody = ('/usr/bin/setpriv', "--reuid=$uid", "--regid=$gid", '--clear-groups');

# (exit status, output) of a command.
sub run {
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        chdir '/';
        exec { $_[0] } @_ or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

subtest 'the server runs as nobody with CAP_NET_BIND_SERVICE; -s as nobody without it' => sub {
    my $s = Luxd->new(no_start => 1);
    my $d = $s->dir;
    system('chown', '-R', "$uid:$gid", $d) == 0 or die;
    # As systemd's User=www-data with AmbientCapabilities= starts it.
    my $wrap = "$d/start.sh";
    Luxd::_write_file($wrap, "#!/bin/sh\nexec @as_nobody --inh-caps=+net_bind_service --ambient-caps=+net_bind_service $bin \"\$@\"\n");
    chmod 0755, $wrap;
    {
        local $ENV{LUXD_BIN} = $wrap;
        $s->start;
    }
    my $pidf = "$d/luxd.pid";
    is((stat $pidf)[4], $uid, 'premise: the pid file is nobody\'s');
    my $spid = Luxd::_slurp($pidf) // '';
    chomp $spid;
    like Luxd::_slurp("/proc/$spid/status") // '', qr/^CapPrm:\s*0*400$/m, 'premise: the server holds CAP_NET_BIND_SERVICE';
    my ($rc, $out) = run(@as_nobody, '--inh-caps=-all', $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 0, 'luxd -s reopen as the server\'s user, without its capability: it works' or diag $out;
    ok $s->wait_log(qr/logs reopened/), 'the server reopened its logs';

    # A pid file others may write is not taken at its word: the refusal
    # names the capability check, not "run as the server's user".
    chmod 0664, $pidf;
    ($rc, $out) = run(@as_nobody, '--inh-caps=-all', $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 1, 'a group-writable pid file: refused';
    like $out, qr{/proc/$spid/fd: Permission denied: pid $spid runs as the same user but holds capabilities this process lacks \(CapPrm 400},
      'naming the capability check' or diag $out;
    unlike $out, qr/run luxd -s as root or as the server's user/, 'not the old advice';
    chmod 0644, $pidf;
    # The harness signals the server as root; it stops as nobody.
    $s->stop;
};

subtest 'a root server, -s as nobody: kill(2) refused, with whose process it is' => sub {
    my $s = Luxd->new;
    system('chmod', '-R', 'a+rX', $s->dir) == 0 or die;
    my ($rc, $out) = run(@as_nobody, $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 1, 'exit 1';
    like $out, qr/^luxd: kill \d+: Operation not permitted: pid \d+ runs as uid 0 \(root\) and luxd -s as uid $uid \(nobody\); only root or that user may signal it$/m,
      'names the server\'s user and the caller\'s' or diag $out;
    $s->stop;
};

subtest 'a server that dropped root for user nobody, a pid file others may write' => sub {
    my $s = Luxd->new(server => { user => 'nobody' });
    system('chmod', '-R', 'a+rX', $s->dir) == 0 or die;
    my ($rc, $out) = run(@as_nobody, $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 0, 'control: as nobody, with the pid file root\'s alone, it works' or diag $out;
    chmod 0666, $s->dir . '/luxd.pid';
    ($rc, $out) = run(@as_nobody, $bin, '-s', 'reopen', '-c', $s->config_file);
    is $rc, 1, 'with the pid file writable by all: refused';
    like $out, qr/changed its user when it started \(user =\), so the kernel keeps its \/proc entries root's/,
      'naming the user= drop' or diag $out;
    chmod 0644, $s->dir . '/luxd.pid';
    $s->stop;
};
done_testing;
