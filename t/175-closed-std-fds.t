# luxd started with its standard fds closed (a bare launcher, `luxd <&- >&-`)
# must not let other files take fds 0-2: an access_log = "stdout" would then
# write into whatever got fd 1 (the review of the pid and log files found
# the event loop's fds there). They are held by /dev/null at start.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use POSIX ();
use Time::HiRes qw(time);

my $s = Luxd->new(no_start => 1, server => { access_log => 'stdout' }, files => { 'www/x.txt' => "x\n" });
my $d = $s->dir;
my $port = $s->port;
my $pid = fork // die;
if ($pid == 0) {
    POSIX::close($_) for 0 .. 2;
    exec { Luxd::bin() } Luxd::bin(), '-c', $s->config_file or POSIX::_exit(127);
}
my $ok;
my $deadline = time + 20;    # not 100 x 0.05 s: a loaded machine is slower
while (time < $deadline) {
    my $c = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 1);
    if ($c) {
        print $c "GET /x.txt HTTP/1.1\r\nHost: l\r\nConnection: close\r\n\r\n";
        local $/; $ok = <$c>; last;
    }
    select undef, undef, undef, 0.05;
}
like($ok // '', qr{^HTTP/1\.1 200 }, 'serves with its std fds closed at start');
my @fd = map { readlink($_) // '' } map { "/proc/$pid/fd/$_" } 0 .. 2;
is_deeply(\@fd, ['/dev/null', '/dev/null', '/dev/null'], 'fds 0, 1, 2 are /dev/null, not a socket or a log');
kill 'TERM', $pid;
waitpid($pid, 0);
is($? & 127, 0, 'stopped by SIGTERM cleanly');
done_testing;
