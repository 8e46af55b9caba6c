# A request that arrived whole and waits on the thread pool is not answered
# 408 by a header or body deadline left from its arrival (issue 8 #15): it
# was, and then the handler resumed on a half-closed socket.
#
# The thread-pool wait is made long on purpose, and exactly as long as the
# test wants: a fanotify permission mark (FAN_OPEN_PERM) on the file makes
# the pool's open() of it wait until this test answers the event, which it
# does only after the deadline has passed. (A lease would not do: luxd opens
# with O_NONBLOCK, which a lease break turns into EWOULDBLOCK.)
use strict;
use warnings;
use Test::More;
use Config;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

# fanotify_init and fanotify_mark by number (Perl has no binding).
my %SYS = (x86_64 => [300, 301], aarch64 => [262, 263]);
my ($arch) = $Config{archname} =~ /^(x86_64|aarch64)/;
my ($SYS_INIT, $SYS_MARK) = @{ $SYS{ $arch // '' } || [] };
BAIL_OUT("fanotify syscall numbers unknown for $Config{archname}") unless $SYS_INIT;
use constant {
    FAN_CLOEXEC => 0x1, FAN_CLASS_CONTENT => 0x4, FAN_MARK_ADD => 0x1,
    FAN_OPEN_PERM => 0x10000, FAN_ALLOW => 0x1, AT_FDCWD => -100,
};

# 2 s, and the pieces 0.1 s apart: the second piece must come within the
# deadline the first armed, even when this process runs late.
my $HEADER_TIMEOUT = 2;
my $s = Luxd->new(
    files => {
        'www/slow-header.html' => "header case\n",
        'www/slow-body.html'   => "body case\n",
    },
    server => { header_timeout => $HEADER_TIMEOUT, body_timeout => $HEADER_TIMEOUT },
);

# A fanotify group that holds up every open of $path until allowed.
sub hold_opens {
    my ($path) = @_;
    my $fd = syscall($SYS_INIT, FAN_CLASS_CONTENT | FAN_CLOEXEC, POSIX::O_RDONLY());
    die "fanotify_init: $!" if $fd < 0;
    syscall($SYS_MARK, $fd, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, $path) == 0
      or die "fanotify_mark $path: $!";
    open my $fh, '+<&=', $fd or die "fdopen: $!";
    return $fh;
}

# Waits up to $timeout s for an open of the marked file; returns the event's
# fd (the opener is blocked until answer_open), or undef.
sub wait_open {
    my ($fan, $timeout) = @_;
    return undef unless IO::Select->new($fan)->can_read($timeout);
    sysread($fan, my $buf, 4096) >= 24 or return undef;
    my (undef, undef, undef, undef, undef, $efd) = unpack('L C C S Q l', $buf);
    return $efd;
}

sub answer_open {
    my ($fan, $efd) = @_;
    syswrite($fan, pack('l L', $efd, FAN_ALLOW)) == 8 or die "fanotify answer: $!";
    POSIX::close($efd);
}

sub case {
    my ($name, $file, $want, @pieces) = @_;
    my $fan = hold_opens($s->dir . "/www/$file");
    my $c = $s->connect;
    for my $i (0 .. $#pieces) {
        sleep 0.1 if $i;
        $c->send($pieces[$i]);
    }
    my $efd = wait_open($fan, 10);
    ok(defined $efd, "$name: the request reached the thread pool's open");
    # The open began after the whole request was read, so any deadline a
    # read armed is due by now + HEADER_TIMEOUT. Keep the open waiting
    # until well past that.
    my $until = time + $HEADER_TIMEOUT + 1;
    sleep $until - time if $until > time;
    answer_open($fan, $efd) if defined $efd;
    my @r = $c->responses(2, timeout => 10);
    my $closed = $c->wait_closed(10);
    $c->close;
    close $fan;
    is(scalar @r, 1, "$name: one response");
    is($r[0] && $r[0]{status}, 200, "$name: 200, not 408")
      or diag explain [map { $_->{status_line} } @r];
    is($r[0] && $r[0]{body}, $want, "$name: the file's body");
    ok($closed, "$name: closed after Connection: close");
}

# The header came in two reads: a header deadline was armed after the first.
case('header deadline', 'slow-header.html', "header case\n",
     "GET /slow-header.html HTTP/1.1\r\nHost: localhost\r\n",
     "Connection: close\r\n\r\n");

# The body came in two reads: a body deadline was armed after the first.
case('body deadline', 'slow-body.html', "body case\n",
     "GET /slow-body.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 6\r\n\r\nabc",
     "def");

# Lines are buffered up to a second; a stop writes out every one (read
# before it, the log could miss the very line looked for).
ok($s->stop, 'stopped cleanly');
unlike($s->access_log, qr/" 408 /, 'no 408 in the access log');
done_testing;
