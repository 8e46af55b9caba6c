# A file the page cache holds goes out by sendfile alone, with no thread-pool
# read: the check that keeps a cold range off the loop (out.c in_page_cache:
# the end probes and the loop thread's block-input count, cachestat for a
# piece found cold) must not send a warm one to the pool. Nothing else
# asserts this side: a check that always answered "miss" would pass t/160
# and t/15 and move every byte through the pool and a 64 KiB buffer. Run as
# root and as nobody (who may not cachestat root's files), with a partial
# last page. (From the review of the t/160 fix.)
#
# "Warm" is made true and checked, not hoped for (Luxd::PageCache): the file
# is mlock()ed (the CI VMs' proactive reclaim took pages of a file read a
# moment before, and luxd rightly sent those by the pool), and so is every
# file luxd maps. luxd also calls a warm range cold when its loop thread
# read from the disk since its last look, for whatever reason: a GET is
# counted only when the process read nothing from the disk from before the
# GET before it (whose looks set the count the measured one compares
# against) to its end; one that did is set up again, never judged. Then a
# warm file takes no pool read at all, where this test used to allow one.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;
use Luxd::PageCache;

my $TRIES = 30;    # GET pairs per round before giving up on a quiet one

for my $as ('root', 'nobody') {
    my $s = Luxd->new(server => { error_log_level => 'debug', $as eq 'root' ? () : (user => $as) });
    chmod 0755, $s->dir or die;
    my $file = $s->dir . '/www/warm.bin';
    my $size = 4 * 1024 * 1024 + 1000;
    my $data = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. int($size / 4) - 1;
    $data .= 'x' x ($size - length $data);
    { open my $fh, '>:raw', $file or die; print $fh $data; close $fh or die }
    my $pin = Luxd::PageCache->pin($file);
    my @code = Luxd::PageCache->pin_process($s->pid);
    for my $round (1 .. 2) {
        my ($r, @q, $tries, $quiet);
        for my $try (1 .. $TRIES) {
            $tries = $try;
            my $before = Luxd::PageCache->disk_reads($s->pid);
            $s->get('/warm.bin');    # its looks set the count the next GET's compare with
            my $log_at = length $s->error_log;
            $r = $s->get('/warm.bin');
            @q = substr($s->error_log, $log_at) =~ /(read-ahead of \d+ bytes at \d+ queued)/g;
            $quiet = Luxd::PageCache->disk_reads($s->pid) == $before && !$pin->missing;
            last if $quiet;
        }
        ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($data), "$as: round $round: byte-exact");
        # The measured GET is the last tried: if none was quiet, it is judged
        # anyway (and may fail: say so).
        is(scalar @q, 0, "$as: round $round: the warm file went by sendfile alone")
          or diag "try $tries, ", $quiet ? 'quiet' : "none of $TRIES quiet (luxd read from the disk)", ': ', join(', ', grep defined, @q[0 .. 2]);
    }
    $s->stop;
}
done_testing;
