# Review of issue 17 #4: the request line of a method llhttp does not know
# is read by luxd itself (lx_h1_line_status) until it can tell 501 from
# 400. It was looked at from its start on every read: a client dribbling a
# long line in small pieces made luxd read it again for each piece, a cost
# of the line's length squared (with max_header_bytes = 1 MB, one client
# could keep a worker busy for its whole header_timeout). The same line
# with a method llhttp knows costs a look at each byte once.
#
# What is measured is the CPU time luxd spends (its own utime + stime, not
# the wall clock), for the same line and the same pieces with GET and with
# an unknown method. A busy machine makes luxd read bigger pieces, which
# only lowers both; the bound is loose (4 times GET's, and at least 0.4 s),
# and a line read again per piece costs several seconds here.
use strict;
use warnings;
use Test::More;
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

$SIG{PIPE} = 'IGNORE';

my $MAX = 1048576;
my $s = Luxd->new(
    files  => { 'www/a.txt' => "aaa\n" },
    server => { header_timeout => 120, max_header_bytes => $MAX, workers => 1 },
);

# luxd's CPU time so far, in seconds (every thread).
sub cpu {
    my $t = 0;
    for my $f (glob('/proc/' . $s->pid . '/task/*/stat')) {
        open my $h, '<', $f or next;
        my @x = split ' ', (scalar(<$h>) =~ s/.*\) //sr);
        $t += $x[11] + $x[12];
    }
    return $t / POSIX::sysconf(POSIX::_SC_CLK_TCK());
}
use POSIX ();

my $PIECE = 100;
my $LEN = 900_000;    # of the target

# Sends "METHOD /aaa... HTTP/1.1" in pieces, each after a short pause so
# that luxd reads most of them on their own; returns luxd's CPU time for it
# and the answer's status.
sub dribble {
    my ($method) = @_;
    my $c = $s->connect;
    setsockopt($c->sock, IPPROTO_TCP, TCP_NODELAY, 1);
    my $c0 = cpu();
    $c->send("$method /");
    for (my $sent = 0; $sent < $LEN; $sent += $PIECE) {
        $c->send('a' x $PIECE);
        sleep 0.0003;
    }
    $c->send(" HTTP/1.1\r\nHost: localhost\r\n\r\n");
    my $r = $c->response(timeout => 60);
    my $used = cpu() - $c0;
    $c->close;
    return ($used, $r ? $r->{status} : 'no answer');
}

my ($get, $get_st) = dribble('GET');
my ($foo, $foo_st) = dribble('FOO');
is $get_st, 404, 'GET with the long target: 404 (no such file)';
is $foo_st, 501, 'FOO with the long target: 501';
my $bound = 4 * $get > 0.4 ? 4 * $get : 0.4;
cmp_ok $foo, '<=', $bound, sprintf('the unknown method costs about what GET does (GET %.2f s, FOO %.2f s of CPU)', $get, $foo);

# The line's end still decides, however the pieces fall: a byte that makes
# it no request line, in a piece after the wait began, is a 400 at the LF.
for my $case (["FOO /a", "\x01b HTTP/1.1\r\nHost: localhost\r\n\r\n", 400],
              ["FOO /a", "b HTTP/1.1\r\nHost: localhost\r\n\r\n", 501],
              ["FOO /a", "b HTTP/2.0\r\n", 505],
              ["FOO /a b", "c HTTP/1.1\r\n", 400]) {
    my ($one, $two, $want) = @$case;
    my $c = $s->connect;
    $c->send($one);
    sleep 0.05;
    for my $ch (split //, $two) { $c->send($ch) }
    my $r = $c->response(timeout => 5);
    is $r && $r->{status}, $want, (($one . $two) =~ s/\r/\\r/gr =~ s/\n/\\n/gr =~ s/\x01/\\x01/gr) . ", the rest byte by byte: $want";
    ok $c->wait_closed(5), '... and closed';
    $c->close;
}

$s->stop;
done_testing;
