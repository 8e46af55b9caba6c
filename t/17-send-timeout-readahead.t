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
use Luxd::PageCache;

my %SYS = (x86_64 => [300, 301], aarch64 => [262, 263]);
my ($arch) = $Config{archname} =~ /^(x86_64|aarch64)/;
my ($SYS_INIT, $SYS_MARK) = @{ $SYS{ $arch // '' } || [] };
BAIL_OUT("fanotify syscall numbers unknown for $Config{archname}") unless $SYS_INIT;
use constant {
    FAN_CLOEXEC => 0x1, FAN_CLASS_CONTENT => 0x4, FAN_REPORT_TID => 0x100, FAN_MARK_ADD => 0x1,
    FAN_ACCESS_PERM => 0x20000, FAN_ALLOW => 0x1, AT_FDCWD => -100,
};

my $MB = 1024 * 1024;
my $TIMEOUT = 3;       # send_timeout, seconds (3, not 1: on a loaded machine the test
                       # itself may not read for a second, a gap that voids the premise)
my $DELAY = 0.25;      # how long each read of the file is held (issue 9: a read-ahead now
                       # also feeds the write, so fewer reads are held; about two
                       # read-aheads a part, so the download takes 15 * 2 * DELAY, well
                       # past 1.5 send_timeouts)
my $FIRST = 8 * $MB;   # the first part: more than the socket buffers hold
my $PART = 256 * 1024; # the other parts, each 16 MB after the one before
my $NPARTS = 15;
my $TRIES = 3;         # fresh files to try when a premise (not the result) fails
use constant SIOCINQ => 0x541B;

my $s = Luxd->new(server => { send_timeout => $TIMEOUT, error_log_level => 'debug' });
# Threads of luxd before any request: the main thread and the worker's loop.
# libuv starts its thread pool (where read-ahead runs) at the first job, so
# every thread there is now is one whose reads are let through at once.
# (luxd accepts on its listening socket before the loop's thread runs: wait
# for the thread.)
my %loop_tid;
for (my $end = time + 10; ; sleep 0.01) {
    %loop_tid = map { m{/(\d+)$} ? ($1 => 1) : () } glob('/proc/' . $s->pid . '/task/*');
    last if keys %loop_tid >= 2 || time > $end;
}
is(scalar(keys %loop_tid), 2, 'premise: luxd runs its main thread and one loop, no pool thread yet')
  or diag join ' ', sort keys %loop_tid;
# luxd's own code and libraries stay in memory: a loop that pages its code in
# from the disk calls the next warm range cold (see Luxd::PageCache).
my @pins = Luxd::PageCache->pin_process($s->pid);

# Each far part 16 MB after the one before, the first 24 MB in: beyond what
# the kernel's read-ahead of the first part fetches.
my @ranges = ([0, $FIRST - 1],
              map { my $o = $FIRST + ($_ + 1) * 16 * $MB; [$o, $o + $PART - 1] } 0 .. $NPARTS - 1);
my $range = 'bytes=' . join(',', map { "$_->[0]-$_->[1]" } @ranges);

# One download of a fresh file (luxd keeps the files it opened open, and a
# fanotify mark applies to opens after it). Returns what it saw.
sub attempt {
    my ($try) = @_;
    my %res = (try => $try);
    my $name = "sparse$try.bin";
    my $file = $s->dir . "/www/$name";
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
    for my $i (1 .. 10) {
        system('sync', $file) == 0 or die "sync $file failed";
        system('dd', "if=$file", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd nocache';
        $resident = `fincore --bytes --noheadings --output RES '$file'` // '';
        $resident =~ s/\s+//g;
        last if $resident =~ /^\d+$/ && $resident == 0;
        sleep 0.2;
    }
    # The first part back in, and locked there: DAMON's proactive reclaim
    # on the CI machines evicts cold pages within a fraction of a second,
    # and a first-part page the loop finds cold goes to the pool to be
    # read (held DELAY) while the socket should fill. The kernel's
    # read-ahead of it may bring in a few MB more; the far parts start
    # 16 MB after it.
    $res{pin} = Luxd::PageCache->pin($file, $FIRST);
    $resident = `fincore --bytes --noheadings --output RES '$file'` // '';
    $resident =~ s/\s+//g;
    $res{resident} = $resident;
    $res{cold} = $resident =~ /^\d+$/ && $resident <= $ranges[1][0];

    # Marked before the server opens the file: the kernel decides at open
    # whether reads of a file raise permission events.
    my $fan = syscall($SYS_INIT, FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_REPORT_TID, POSIX::O_RDONLY());
    die "fanotify_init: $!" if $fan < 0;
    syscall($SYS_MARK, $fan, FAN_MARK_ADD, FAN_ACCESS_PERM, AT_FDCWD, $file) == 0
      or die "fanotify_mark: $!";
    open my $fan_fh, '+<&=', $fan or die "fdopen: $!";

    # Takes the permission events that came in within $wait s. Reads by the
    # loop's threads are allowed at once, others $delay s after they came.
    # Returns how many reads by the loop came.
    my @held;
    my $answer = sub {
        my ($wait, $delay) = @_;
        my $loop_reads = 0;
        if (IO::Select->new($fan_fh)->can_read($wait) && sysread($fan_fh, my $buf, 4096)) {
            for (my $o = 0; $o + 24 <= length $buf; $o += 24) {
                my (undef, undef, undef, undef, undef, $efd, $tid) = unpack('L C C S Q l l', substr($buf, $o, 24));
                $loop_reads++ if $loop_tid{$tid};
                push @held, [time + ($loop_tid{$tid} ? 0 : $delay), $efd];
            }
            @held = sort { $a->[0] <=> $b->[0] } @held;
        }
        while (@held && $held[0][0] <= time) {
            my (undef, $efd) = @{ shift @held };
            syswrite($fan_fh, pack('l L', $efd, FAN_ALLOW)) == 8 or die "fanotify answer: $!";
            POSIX::close($efd);
        }
        return $loop_reads;
    };

    my $log_from = length $s->error_log;
    my $c = $s->connect;
    my $sock = $c->sock;
    $c->send(Luxd::request(path => "/$name", close => 1, headers => [Range => $range]));
    # Not reading yet: the server fills the socket from the first part (in
    # the page cache: only the loop reads it) and arms send_timeout. Wait
    # for the loop's first read, then until the bytes queued for us stop
    # growing (the socket is full), at least 0.5 s.
    my $deadline = time + 10;
    $res{loop_read} = 0;
    $res{loop_read} += $answer->(0.01, $DELAY) while !$res{loop_read} && time < $deadline;
    my ($queued, $since, $settle_from) = (-1, time, time);
    while (time < $deadline) {
        $answer->(0.01, $DELAY);
        my $q = pack('i', 0);
        ioctl($sock, SIOCINQ, $q) or die "SIOCINQ: $!";
        $q = unpack('i', $q);
        ($queued, $since) = ($q, time) if $q != $queued;
        last if time - $settle_from >= 0.5 && time - $since >= 0.2;
    }
    $res{queued} = $queued;

    my ($data, $eof) = ('', 0);
    my $t0 = time;
    my ($last_progress, $longest_gap) = ($t0, 0);
    my $limit = $t0 + 60;
    while (time < $limit) {
        $answer->(0, $DELAY);
        next unless IO::Select->new($sock)->can_read(0.005);
        my $n = sysread($sock, my $chunk, 1 << 20);
        if (!$n) { $eof = 1; last }
        $data .= $chunk;
        my $now = time;
        $longest_gap = $now - $last_progress if $now - $last_progress > $longest_gap;
        $last_progress = $now;
    }
    for (@held) { syswrite($fan_fh, pack('l L', $_->[1], FAN_ALLOW)); POSIX::close($_->[1]) }
    close $fan_fh;
    $c->close;
    $res{took} = time - $t0;
    $res{gap} = $longest_gap;
    $res{eof} = $eof;

    my $hend = index($data, "\r\n\r\n");
    $res{head} = $hend < 0 ? $data : substr($data, 0, $hend);
    ($res{len}) = $res{head} =~ /^Content-Length: (\d+)/mi;
    ($res{boundary}) = $res{head} =~ /boundary=(\S+)/;
    $res{got} = $hend < 0 ? -1 : length($data) - $hend - 4;
    $res{tail} = substr($data, -100);
    $res{whole} = defined $res{len} && $res{got} == $res{len};
    my @ra = substr($s->error_log, $log_from) =~ /read-ahead of \d+ bytes at \d+ queued/g;
    $res{ra} = scalar @ra;
    delete $res{pin};
    return \%res;
}

# Premises a busy machine can spoil without luxd being at fault: far parts
# found in the page cache, the loop's read not seen, a gap of a whole
# send_timeout in this test's own reading (then a cut is right), a download
# that came too fast to outlast send_timeout. Then try a fresh file. A
# download cut short while the bytes came steadily is what this test is
# for: that fails at once.
my $res;
for my $try (1 .. $TRIES) {
    $res = attempt($try);
    my $premises = $res->{cold} && $res->{loop_read} && $res->{ra} >= $NPARTS / 2
      && $res->{gap} < $TIMEOUT && $res->{took} > 1.5 * $TIMEOUT;
    last if $premises;
    last if $res->{cold} && $res->{loop_read} && !$res->{whole} && $res->{gap} < $TIMEOUT;    # cut short: the defect
    diag sprintf('try %d: a premise failed (resident %s, loop read %d, %d read-aheads, longest gap %.3f s, '
                 . 'took %.3f s, whole %d): again with a fresh file', $try, $res->{resident}, $res->{loop_read},
                 $res->{ra}, $res->{gap}, $res->{took}, $res->{whole} ? 1 : 0) if $try < $TRIES;
}

# The kernel's read-ahead of the first part may bring in a few MB more;
# the far parts start 16 MB after it.
ok($res->{cold}, "premise: no far part is in the page cache ($res->{resident} bytes resident)");
ok($res->{loop_read}, 'premise: the loop read the first part');
like($res->{head}, qr{^HTTP/1\.1 206 }, 'a multipart 206');
# Most far parts, not every one: under a sanitizer on a loaded machine one
# or two were found in the page cache already (14 of 15), which changes
# nothing for what is tested; the download must still take several
# send_timeouts of read-aheads that follow writes (the next premises).
cmp_ok($res->{ra}, '>=', $NPARTS / 2, "premise: most far parts were read ahead ($res->{ra} of $NPARTS)");
cmp_ok($res->{gap}, '<', $TIMEOUT, "premise: bytes arrived at least every send_timeout (longest gap $res->{gap} s)");
cmp_ok($res->{took}, '>', 1.5 * $TIMEOUT, "premise: the download took longer than send_timeout ($res->{took} s)");
is($res->{got}, $res->{len} // -1, 'the whole response arrived');
like($res->{tail}, qr/--\Q$res->{boundary}\E--\r\n$/, '... to its closing boundary') if $res->{boundary};
diag "longest gap $res->{gap}, eof $res->{eof}, $res->{queued} bytes queued before reading\n"
  . substr($s->error_log, -1200) unless $res->{whole};
$s->stop;
done_testing;
