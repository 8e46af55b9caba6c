# issue 11 review: access_log = "stdout" (documented for the server and for
# a vhost) is opened as the path /dev/stdout. Under systemd, stdout is the
# journal's Unix socket (StandardOutput=journal, the default), which open(2)
# cannot open (ENXIO): luxd refuses to start. The fd luxd was given must be
# used as it is (as error_log = "stderr" uses fd 2), and a reopen must leave
# it alone.
use strict;
use warnings;
use Test::More;
use Luxd;
use Socket;
use IO::Handle;
use Time::HiRes qw(sleep time);

my $s = Luxd->new(no_start => 1, config => <<'EOF_CONF', files => { 'www/index.html' => "hi\n" });
server {
  listen = "127.0.0.1:$PORT",
  workers = 1,
  error_log = "$DIR/error.log",
  error_log_level = "info",
  access_log = false,
  access_log_buffer = 0,
  pid_file = "$DIR/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true, access_log = { path = "stdout", format = "OUT $status $request_uri" } }
EOF_CONF
my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is($rc, 0, '-t accepts access_log = "stdout" in a vhost') or diag($out);

# stdout a Unix stream socket, as systemd's journal gives it.
socketpair(my $journal, my $child_out, AF_UNIX, SOCK_STREAM, 0) or die "socketpair: $!";
my $pid = fork // die;
if ($pid == 0) {
    close $journal;
    open STDIN, '<', '/dev/null';
    open STDOUT, '>&', $child_out or POSIX::_exit(126);
    open STDERR, '>>', $s->dir . '/stderr.log';
    no warnings 'exec';
    exec { Luxd::bin() } Luxd::bin(), '-c', $s->config_file;
    POSIX::_exit(127);
}
close $child_out;
my $up = 0;
for (1 .. 100) {
    last if waitpid($pid, POSIX::WNOHANG()) == $pid;
    if (IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port, Timeout => 1)) { $up = 1; last }
    sleep 0.05;
}
ok($up, 'luxd starts with access_log = "stdout" when stdout is a socket (systemd journal)')
    or diag('stderr: ' . (Luxd::_slurp($s->dir . '/stderr.log') // '') . 'error log: ' . (Luxd::_slurp($s->dir . '/error.log') // ''));
if ($up) {
    is($s->get('/')->{status}, 200, 'a request');
    my $got = '';
    $journal->blocking(0);
    my $t = time + 3;
    while (time < $t && $got !~ /\n/) { my $n = sysread($journal, my $b, 4096); $got .= $b if $n; sleep 0.05 }
    is($got, "OUT 200 /\n", 'its line on the socket');
    # A reopen leaves fd 1 alone: opening /dev/stdout again would fail.
    kill 'USR1', $pid;
    my $el = '';
    for (1 .. 100) { $el = Luxd::_slurp($s->dir . '/error.log') // ''; last if $el =~ /logs reopened/; sleep 0.05 }
    like($el, qr/logs reopened/, 'SIGUSR1: the logs reopened');
    unlike($el, qr/\[error\] reopen/, 'with no error about stdout');
    is($s->get('/nothing')->{status}, 404, 'another request');
    ($got, my $t2) = ('', time + 3);
    while (time < $t2 && $got !~ /\n/) { my $n = sysread($journal, my $b, 4096); $got .= $b if $n; sleep 0.05 }
    is($got, "OUT 404 /nothing\n", 'its line on the same socket');
}
kill 'TERM', $pid; waitpid($pid, 0);
done_testing;
