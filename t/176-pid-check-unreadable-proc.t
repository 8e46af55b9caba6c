# Review (issue 11, the F_OFD_SETLK pid lock): `luxd -s` now proves the
# pid the file names holds it open by reading /proc/PID/fd. Whoever may not
# read that directory (the kernel's ptrace-read check: another uid, or a
# luxd that changed uid with user= and so is no longer dumpable, read by a
# root without CAP_SYS_PTRACE, as in a default container) gets told the pid
# file "was rewritten or replaced": a false report of tampering, for an
# untouched file and the very luxd that holds its lock. It must say that it
# could not check (and why), never that the file was replaced.
use strict;
use warnings;
use Test::More;
use Luxd;
use POSIX ();

my @pw = getpwnam('nobody') or BAIL_OUT('no user nobody');
my $s = Luxd->new;
system('chmod', '-R', 'a+rX', $s->dir) == 0 or die;
my $cf = $s->config_file;
my $fd_dir = '/proc/' . $s->pid . '/fd';

sub as_nobody {
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open(STDERR, '>&', \*STDOUT) or die;
        $( = $) = "$pw[3] $pw[3]"; $< = $> = $pw[2];
        exec(@_) or POSIX::_exit(127);
    }
    local $/; my $out = <$fh> // ''; close $fh;
    return ($? >> 8, $out);
}

my ($lsrc) = as_nobody('ls', $fd_dir);
isnt($lsrc, 0, "premise: user nobody cannot read $fd_dir of a root luxd");
is(Luxd::_slurp($s->dir . '/luxd.pid'), $s->pid . "\n", 'premise: the pid file is untouched');

my ($rc, $out) = as_nobody('build/luxd', '-c', $cf, '-s', 'reopen');
isnt($rc, 0, 'luxd -s as nobody does not succeed (it may not signal root)');
unlike($out, qr/rewritten or replaced/, 'no false claim that the pid file was tampered with') or diag($out);
like($out, qr/permission|not permitted|cannot (check|read)/i, 'the message says what stopped it') or diag($out);
ok(kill(0, $s->pid), 'the server runs on');

# Worse: root without CAP_SYS_PTRACE (Docker's default set) cannot read
# /proc/PID/fd of a luxd that dropped to user=, so root can neither stop
# nor reload the luxd it started: refused as "rewritten or replaced".
{
    my $u = Luxd->new(server => { user => 'nobody' });
    my $ucf = $u->config_file;
    my $o = `setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace build/luxd -c $ucf -s stop 2>&1`;
    is($? >> 8, 0, 'root without CAP_SYS_PTRACE stops a user=nobody luxd') or diag($o);
    ok(defined $u->wait_exit(5), 'it stopped');
}
done_testing;
