# A file not in the page cache is read ahead on the thread pool before
# sendfile sends it, one chunk at a time per connection (issue 8 #14): the
# connection must not queue the same read-ahead again and again while one is
# outstanding (it did: every writable event queued another, 20 times the
# file's size read for one cold download), flooding the pool all loops share.
#
# Observables: the bytes the thread pool's threads read (/proc/PID/task/*/io,
# rchar: pread counts there, and sendfile counts in the loop thread, which
# also writes the response), and the debug log's "read-ahead ... queued" /
# "read-ahead done" lines, which must alternate.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;

my $MB = 1024 * 1024;
my $SIZE = 30 * $MB;

my $s = Luxd->new(server => { error_log_level => 'debug' });
my $file = $s->dir . '/www/cold.bin';
my $md5 = Digest::MD5->new;
{
    open my $fh, '>:raw', $file or die "$file: $!";
    for my $k (0 .. $SIZE / $MB - 1) {
        my $block = pack('N*', map { $k * ($MB / 4) + $_ } 0 .. $MB / 4 - 1);
        print $fh $block;
        $md5->add($block);
    }
    close $fh or die;
}
my $want = $md5->hexdigest;

# Drops the file from the page cache: dirty pages first go to disk (sync),
# then dd's nocache flag asks posix_fadvise(POSIX_FADV_DONTNEED) for all of it.
sub make_cold {
    system('sync', $file) == 0 or die "sync $file failed";
    system('dd', "if=$file", 'iflag=nocache', 'count=0', 'status=none') == 0
      or die "dd nocache failed";
}

# Per-thread I/O counters of the server.
sub thread_io {
    my %t;
    for my $d (glob '/proc/' . $s->pid . '/task/*') {
        open my $fh, '<', "$d/io" or next;
        my %h = map { /^(\w+): (\d+)/ ? ($1, $2) : () } <$fh>;
        $t{$d} = \%h;
    }
    return \%t;
}

for my $round (1, 2) {
    make_cold();
    my $log_before = length $s->error_log;
    my $before = thread_io();
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/cold.bin', close => 1));
    my $r = $c->response(timeout => 60);
    $c->close;
    my $after = thread_io();
    ok($r && $r->{status} == 200, "round $round: 200");
    ok($r && length($r->{body}) == $SIZE && md5_hex($r->{body}) eq $want,
       "round $round: the file arrived byte-exact");

    # Threads that wrote next to nothing (the pool's threads write only the
    # 8-byte wakeups of uv_async_send) read ahead what they read.
    my ($pool_read, $loop_sent) = (0, 0);
    for my $t (keys %$after) {
        my $dr = $after->{$t}{rchar} - ($before->{$t}{rchar} // 0);
        my $dw = $after->{$t}{wchar} - ($before->{$t}{wchar} // 0);
        if ($dw < 65536) { $pool_read += $dr } else { $loop_sent += $dw }
    }
    cmp_ok($loop_sent, '>=', $SIZE, "round $round: the loop thread sent the file");
    cmp_ok($pool_read, '<=', $SIZE,
           "round $round: the thread pool read the file at most once ($pool_read bytes)");

    my $log = substr($s->error_log, $log_before);
    my @ev = $log =~ /read-ahead (?:of \d+ bytes at \d+ (queued)|(done) at \d+)/g;
    @ev = grep { defined } @ev;
    ok(scalar(grep { $_ eq 'queued' } @ev) >= 1, "round $round: the cold file was read ahead")
      or diag "no read-ahead logged: was the file cold?";
    my $outstanding = 0;
    my $max = 0;
    for (@ev) {
        $outstanding += $_ eq 'queued' ? 1 : -1;
        $max = $outstanding if $outstanding > $max;
    }
    is($max, 1, "round $round: never more than one read-ahead outstanding");
    is($outstanding, 0, "round $round: every read-ahead completed");
}

$s->stop;
done_testing;
