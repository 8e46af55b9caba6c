# send_timeout counts from the last successful write also when that write
# is followed by a read-ahead (issue 8 #13, #14): a write that moved the
# output on and then found the next piece out of the page cache did not
# restart it. A client reading as fast as a slow disk serves it, its socket
# never full, was cut send_timeout after the socket had last been full, in
# the middle of a download that never paused.
#
# The slow disk is made on purpose: a fanotify permission mark
# (FAN_ACCESS_PERM) on the file holds each read of it by the thread pool
# (where read-ahead runs) about DELAY before this test allows it; the
# loop's own reads (its page-cache probes, sendfile) are let through at
# once, told apart by thread id (FAN_REPORT_TID). The response is a multipart one whose parts lie far
# apart in a sparse file, so that each part starts out of the page cache
# (the kernel's own read-ahead does not reach it) and needs a read-ahead.
use strict;
use warnings;
use Test::More;
use Config;
use IO::Select;
use POSIX ();
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my %SYS = (x86_64 => [300, 301], aarch64 => [262, 263]);
my ($arch) = $Config{archname} =~ /^(x86_64|aarch64)/;
my ($SYS_INIT, $SYS_MARK) = @{ $SYS{ $arch // '' } || [] };
BAIL_OUT("fanotify syscall numbers unknown for $Config{archname}") unless $SYS_INIT;
use constant {
    FAN_CLOEXEC => 0x1, FAN_CLASS_CONTENT => 0x4, FAN_REPORT_TID => 0x100, FAN_MARK_ADD => 0x1,
    FAN_ACCESS_PERM => 0x20000, FAN_ALLOW => 0x1, AT_FDCWD => -100,
};

my $MB = 1024 * 1024;
my $TIMEOUT = 1;       # send_timeout, seconds
my $DELAY = 0.08;      # how long each read of the file is held (issue 9: a read-ahead now
                       # also feeds the write, so fewer reads are held: 0.03 ran under 1.5 s,
                       # and 0.05 did at 1.27 s on a loaded fresh machine, when the kernel's
                       # read-ahead had some parts cached already)
my $FIRST = 8 * $MB;   # the first part: more than the socket buffers hold
my $PART = 256 * 1024; # the other parts, each 16 MB after the one before
my $NPARTS = 15;

my $s = Luxd->new(server => { send_timeout => $TIMEOUT, error_log_level => 'debug' });
my $file = $s->dir . '/www/sparse.bin';
# Each far part 16 MB after the one before, the first 24 MB in: beyond what
# the kernel's read-ahead of the first part fetches.
my @ranges = ([0, $FIRST - 1],
              map { my $o = $FIRST + ($_ + 1) * 16 * $MB; [$o, $o + $PART - 1] } 0 .. $NPARTS - 1);
{
    open my $fh, '>:raw', $file or die "$file: $!";
    for my $r (@ranges) {
        seek $fh, $r->[0], 0 or die "seek: $!";
        print $fh chr(65 + $r->[0] % 26) x ($r->[1] - $r->[0] + 1);
    }
    close $fh or die;
    # Out of the page cache (dirty pages first go to disk), then the first
    # part back in.
    # On a busy machine one pass may leave pages behind (writeback still
    # running): check with fincore (util-linux) and go again, so the far
    # parts really start out of the page cache.
    my $resident;
    for my $try (1 .. 10) {
        system('sync', $file) == 0 or die "sync $file failed";
        system('dd', "if=$file", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd nocache';
        open $fh, '<:raw', $file or die;
        my $warm;
        read $fh, $warm, $FIRST;
        close $fh;
        $resident = `fincore --bytes --noheadings --output RES '$file'` // '';
        $resident =~ s/\s+//g;
        last if $resident =~ /^\d+$/ && $resident <= $ranges[1][0];
        sleep 0.2;
    }
    # The kernel's read-ahead of the first part may bring in a few MB more;
    # the far parts start 16 MB after it.
    ok($resident =~ /^\d+$/ && $resident <= $ranges[1][0],
       "premise: no far part is in the page cache ($resident bytes resident)");
}
my $range = 'bytes=' . join(',', map { "$_->[0]-$_->[1]" } @ranges);

# Marked before the server opens the file: the kernel decides at open
# whether reads of a file raise permission events.
my $fan = syscall($SYS_INIT, FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_REPORT_TID, POSIX::O_RDONLY());
die "fanotify_init: $!" if $fan < 0;
syscall($SYS_MARK, $fan, FAN_MARK_ADD, FAN_ACCESS_PERM, AT_FDCWD, $file) == 0
  or die "fanotify_mark: $!";
open my $fh, '+<&=', $fan or die "fdopen: $!";

# Takes the permission events that came in within $wait s. Reads by the
# threads in %$fast are allowed at once, others $delay s after they came;
# with $learn, the readers are added to %$fast.
my @held;
my %loop_tid;
sub answer_events {
    my ($wait, $delay, $learn) = @_;
    if (IO::Select->new($fh)->can_read($wait) && sysread($fh, my $buf, 4096)) {
        for (my $o = 0; $o + 24 <= length $buf; $o += 24) {
            my (undef, undef, undef, undef, undef, $efd, $tid) = unpack('L C C S Q l l', substr($buf, $o, 24));
            $loop_tid{$tid} = 1 if $learn;
            push @held, [time + ($loop_tid{$tid} ? 0 : $delay), $efd];
        }
        @held = sort { $a->[0] <=> $b->[0] } @held;
    }
    while (@held && $held[0][0] <= time) {
        my (undef, $efd) = @{ shift @held };
        syswrite($fh, pack('l L', $efd, FAN_ALLOW)) == 8 or die "fanotify answer: $!";
        POSIX::close($efd);
    }
}

my $c = $s->connect;
my $sock = $c->sock;
$c->send(Luxd::request(path => '/sparse.bin', close => 1, headers => [Range => $range]));
# Not reading yet: the server fills the socket from the first part (in the
# page cache: only the loop reads it) and arms send_timeout.
my $until = time + 0.5;
answer_events(0.01, 0, 1) while time < $until;
ok(scalar(keys %loop_tid) >= 1, 'premise: the loop read the first part');

my ($data, $eof) = ('', 0);
my $t0 = time;
my ($last_progress, $longest_gap) = ($t0, 0);
my $limit = $t0 + 60;
while (time < $limit) {
    answer_events(0, $DELAY);
    next unless IO::Select->new($sock)->can_read(0.005);
    my $n = sysread($sock, my $chunk, 1 << 20);
    if (!$n) { $eof = 1; last }
    $data .= $chunk;
    my $now = time;
    $longest_gap = $now - $last_progress if $now - $last_progress > $longest_gap;
    $last_progress = $now;
}
for (@held) { syswrite($fh, pack('l L', $_->[1], FAN_ALLOW)); POSIX::close($_->[1]) }
close $fh;
$c->close;
my $took = time - $t0;

my $hend = index($data, "\r\n\r\n");
my ($len) = substr($data, 0, $hend) =~ /^Content-Length: (\d+)/mi;
my ($boundary) = substr($data, 0, $hend) =~ /boundary=(\S+)/;
like(substr($data, 0, $hend), qr{^HTTP/1\.1 206 }, 'a multipart 206');
my @ra = $s->error_log =~ /read-ahead of \d+ bytes at \d+ queued/g;
# Most far parts, not every one: under a sanitizer on a loaded machine one
# or two were found in the page cache already (14 of 15), which changes
# nothing for what is tested; the download must still take several
# send_timeouts of read-aheads that follow writes (the next premises).
cmp_ok(scalar @ra, '>=', $NPARTS / 2, 'premise: most far parts were read ahead (' . scalar(@ra) . " of $NPARTS)");
cmp_ok($longest_gap, '<', $TIMEOUT, "premise: bytes arrived at least every send_timeout (longest gap $longest_gap s)");
cmp_ok($took, '>', 1.5 * $TIMEOUT, "premise: the download took longer than send_timeout ($took s)");
is(length($data) - $hend - 4, $len // -1, 'the whole response arrived');
like(substr($data, -100), qr/--\Q$boundary\E--\r\n$/, '... to its closing boundary') if $boundary;
diag "longest gap $longest_gap, eof $eof\n" . substr($s->error_log, -1200) if length($data) - $hend - 4 != ($len // -1);
$s->stop;
done_testing;
