# Review of issue 17 #10 (`luxd -s reload` prints the server's verdict):
# -s sends SIGHUP and then polls PIDFILE.reload for up to 60 s. When the
# server stops holding its pid file while -s waits, no verdict can ever come
# there, and -s sat out the whole minute before saying "no answer":
#  - the server dies in the middle of the reload (killed, crashed);
#  - the reload gives the server another pid_file (it opens the new pid file
#    and .reload beside it, unlinks the old ones and writes its verdict into
#    the new file, which -s is not reading).
# -s keeps the locked pid file open: the lock going away is the sign, and
# -s must say so at once instead of waiting a minute.
use strict;
use warnings;
use Test::More;
use POSIX ();
use Time::HiRes qw(time sleep);
use Luxd;

# Starts `luxd @args` in the background, output to $out; returns its pid.
sub spawn {
    my ($out, @args) = @_;
    my $bin = Luxd::bin();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $out or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT;
        exec { $bin } $bin, @args or POSIX::_exit(127);
    }
    return $pid;
}

# Waits up to $t seconds for $pid to exit; its exit code, or undef.
sub reap {
    my ($pid, $t) = @_;
    my $deadline = time + $t;
    while (time < $deadline) {
        return $? >> 8 if waitpid($pid, POSIX::WNOHANG()) == $pid;
        sleep 0.02;
    }
    return undef;
}

# CPU time (ticks) process $pid has used.
sub cpu_ticks {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/stat" or return 0;
    my $l = <$fh> // '';
    $l =~ s/^.*\) //;
    my @f = split / /, $l;
    return $f[11] + $f[12];    # utime + stime (fields 14, 15)
}

subtest 'the server dies during the reload' => sub {
    my $s    = Luxd->new();
    my $cf   = $s->config_file;
    my $good = Luxd::_slurp($cf);
    # A reload that never ends: the main loop runs the config forever.
    $s->write_config("while true do end\n" . $good);
    my $t0  = cpu_ticks($s->pid);
    my $out = $s->dir . '/ctl.out';
    my $ctl = spawn($out, '-c', $cf, '-s', 'reload');
    # The server spinning in the config means the SIGHUP arrived.
    my $deadline = time + 30;
    sleep 0.05 while time < $deadline && cpu_ticks($s->pid) - $t0 < 30;
    ok cpu_ticks($s->pid) - $t0 >= 30, 'the server is running the reload (spinning in the config)';
    kill 'KILL', $s->pid;
    is $s->wait_exit(10), 9, 'the server was killed in the middle of the reload';
    $s->{stopped} = 1;
    my $killed = time;
    my $rc     = reap($ctl, 50);
    my $took   = time - $killed;
    kill 'KILL', $ctl unless defined $rc;
    reap($ctl, 5) unless defined $rc;
    my $text = Luxd::_slurp($out) // '';
    ok defined $rc && $took < 15, sprintf('-s reload returns soon after the server died (took %.1f s)', $took)
      or diag $text;
    is $rc, 1, 'exit 1: no verdict';
    unlike $text, qr/no answer from pid \d+ within 60 s/, 'it does not wait out the minute';
    like $text, qr/no longer holds/, 'it says the server let go of its pid file' or diag $text;
};

subtest 'the reload moves the pid file' => sub {
    my $s    = Luxd->new();
    my $cf   = $s->config_file;
    my $dir  = $s->dir;
    my $good = Luxd::_slurp($cf);
    (my $moved = $good) =~ s{pid_file = "\Q$dir\E/luxd\.pid"}{pid_file = "$dir/moved.pid"} or die "no pid_file in $good";
    $s->write_config($moved);
    local $Luxd::RUN_TIMEOUT = 30;
    my $t0 = time;
    my ($rc, $out) = Luxd::run_luxd('-p', "$dir/luxd.pid", '-s', 'reload');
    my $took = time - $t0;
    ok $s->wait_log(qr/reload: generation 2/), 'the server reloaded (to the new pid file)';
    ok -s "$dir/moved.pid", 'and wrote the new pid file';
    ok $rc != -1 && $took < 15, sprintf('-s reload -p OLD returns at once (took %.1f s)', $took) or diag $out;
    unlike $out, qr/no answer from pid \d+ within 60 s/, 'not after a minute of waiting';
    like $out, qr/no longer holds \Q$dir\E\/luxd\.pid/, 'it says the server let go of the pid file it named' or diag $out;
    $s->stop;
};
done_testing;
