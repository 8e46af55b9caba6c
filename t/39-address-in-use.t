# A second luxd on an address another process listens on refuses to start,
# with an error naming the address (issue 8 #23). Both bound with
# SO_REUSEPORT, the kernel used to let it start silently and split the
# connections between the two servers. Reloads still keep their own
# sockets, a restart while the old server drains (its listeners closed)
# still starts, and systemd socket activation is t/34-systemd.t.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_REUSEPORT SO_REUSEADDR);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MB = 1024 * 1024;

my $a = Luxd->new(
    files   => { 'www/who.txt' => "A\n", 'www/big.bin' => 'x' x (16 * $MB) },
    workers => 2,
);
my $port = $a->port;
is($a->get('/who.txt')->{body}, "A\n", 'the first server answers');

# A second server with the same listen address, its own files and logs.
sub second {
    my (%o) = @_;
    return Luxd->new(files => { 'www/who.txt' => "B\n" }, port => $port, workers => 2,
                     no_start => 1, %o);
}

{
    my $b = second();
    # Started by hand (not run_luxd) so that, were it to keep running, the
    # requests below would show the kernel splitting them.
    my $out = $b->dir . '/stderr.log';
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', $out or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT;
        chdir $Luxd::ROOT;
        exec { Luxd::bin() } Luxd::bin(), '-c', $b->config_file;
        POSIX::_exit(127);
    }
    my $exited;
    # Up to 10 s: a loaded machine may take seconds to get it that far.
    my $deadline = time + 10;
    until (($exited = waitpid($pid, POSIX::WNOHANG()) == $pid) || time > $deadline) { sleep 0.02 }
    my $status = $?;
    my @who = map { $a->get('/who.txt')->{body} // '' } 1 .. 20;
    if (!$exited) {
        $exited = 0;
        kill 'TERM', $pid;
        waitpid $pid, 0;
    }
    ok($exited && POSIX::WIFEXITED($status) && POSIX::WEXITSTATUS($status) == 1,
       'the second server exits 1 instead of running');
    is_deeply(\@who, [("A\n") x 20], 'every connection reaches the first server')
      or diag 'answers: ' . join('', @who);
    like($b->stderr_log, qr/listen 127\.0\.0\.1:$port: Address already in use by another process/,
         'it says why on stderr, naming the address');
    like($b->error_log, qr/\[emerg\] .*listen 127\.0\.0\.1:$port: Address already in use/,
         'and in its error log');
}

# The held address second in a list whose first address (same port) is
# free: that the port is also the second server's own first address is no
# reason to skip the check (it was: the check was skipped for any port the
# server itself had already opened, and the kernel split the connections).
for my $first ('127.0.0.2', '[::1]') {
    my $b = second(server => { listen => ["$first:$port", "127.0.0.1:$port"] });
    # Were it to start, it would run until run_luxd gives up on it (-1).
    local $Luxd::RUN_TIMEOUT = 5;
    my ($rc, $out) = Luxd::run_luxd('-c', $b->config_file);
    is($rc, 1, "listen { $first:$port, 127.0.0.1:$port }: the second server exits 1");
    like($out . $b->error_log, qr/listen 127\.0\.0\.1:$port: Address already in use by another process/,
         "... and names the held address");
}

# A foreign listener that also asked for SO_REUSEPORT (as a second luxd
# does) holding an address a reload adds: the reload fails and says so.
{
    my $other = Luxd::free_port();
    my $sock = IO::Socket::INET->new(Proto => 'tcp') or die "socket: $!";
    setsockopt($sock, SOL_SOCKET, SO_REUSEPORT, 1) or die "SO_REUSEPORT: $!";
    setsockopt($sock, SOL_SOCKET, SO_REUSEADDR, 1);
    bind($sock, Socket::pack_sockaddr_in($other, Socket::inet_aton('127.0.0.1'))) or die "bind: $!";
    listen($sock, 16) or die "listen: $!";
    (my $cfg = $a->{config_text}) =~ s/listen = \{ "127\.0\.0\.1:$port" \}/listen = { "127.0.0.1:$port", "127.0.0.1:$other" }/
      or die 'cannot find the listen line';
    $a->write_config($cfg);
    like($a->reload // $a->reload_error, qr/^failed .*listen 127\.0\.0\.1:$other: Address already in use by another process/,
         'a reload adding an address another process holds fails, naming it');
    is($a->get('/who.txt')->{body}, "A\n", 'the server still answers after the failed reload');
    close $sock;
    like($a->reload // $a->reload_error, qr/^ok /, 'once the address is free, the same reload works');
    is(IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $other, Timeout => 2) ? 1 : 0, 1,
       'and the server listens there');
    is($a->http(path => '/who.txt')->{body}, "A\n", 'reloads keep their own sockets: still served');
}

# A restart while the old server drains: its listeners are closed at once,
# so the new one starts while a download on the old one goes on.
{
    my $c = $a->connect(rcvbuf => 16384);
    $c->send(Luxd::request(path => '/big.bin', close => 1));
    # The response has begun (its head is here) before the TERM.
    my $deadline = time + 10;
    $c->fill(0.5) while index($c->buffered, "\r\n\r\n") < 0 && !$c->eof && time < $deadline;
    like($c->buffered, qr{^HTTP/1\.1 200 }, 'the download has begun');
    $a->signal('TERM');
    ok(refused($port, 10), 'the draining server closed its listeners');
    ok($a->alive, 'it is still running (draining the download)');
    my $b = second();
    $b->start;
    is($b->get('/who.txt')->{body}, "B\n", 'the new server started and answers');
    my $data = $c->read_all(30);
    ok($c->eof, 'the old server finished the download');
    my $hend = index($data, "\r\n\r\n");
    is(length($c->buffered) + length($data) - ($hend + 4), 16 * $MB,
       'the download arrived whole') if $hend >= 0;
    $c->close;
    is($a->wait_exit(10), 0, 'the old server exited cleanly');
    $b->stop;
}

done_testing;
