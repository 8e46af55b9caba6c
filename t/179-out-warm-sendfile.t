# A file the page cache holds goes out by sendfile alone, with no thread-pool
# read: the check that keeps a cold range off the loop (out.c in_page_cache:
# the end probes and the loop thread's block-input count, cachestat for a
# piece found cold) must not send a warm one to the pool. Nothing else
# asserts this side: a check that always answered "miss" would pass t/160
# and t/15 and move every byte through the pool and a 64 KiB buffer. Run as
# root and as nobody (who may not cachestat root's files), with a partial
# last page. (From the review of the t/160 fix.)
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;

for my $as ('root', 'nobody') {
    my $s = Luxd->new(server => { error_log_level => 'debug', $as eq 'root' ? () : (user => $as) });
    chmod 0755, $s->dir or die;
    my $file = $s->dir . '/www/warm.bin';
    my $size = 4 * 1024 * 1024 + 1000;
    my $data = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. int($size / 4) - 1;
    $data .= 'x' x ($size - length $data);
    { open my $fh, '>:raw', $file or die; print $fh $data; close $fh or die }
    { open my $fh, '<:raw', $file or die; local $/; my $w = <$fh> }    # in the page cache
    for my $round (1 .. 2) {
        my $log_at = length $s->error_log;
        my $r = $s->get('/warm.bin');
        ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($data), "$as: round $round: byte-exact");
        my @q = substr($s->error_log, $log_at) =~ /(read-ahead of \d+ bytes at \d+ queued)/g;
        # One look may call a warm range cold when the loop thread read a
        # block for something else (a loaded machine): one pool read, then
        # the range is counted and goes by sendfile. A check that always
        # said "miss" would make 65.
        cmp_ok(scalar @q, '<=', 1, "$as: round $round: the warm file went by sendfile") or diag explain \@q;
    }
    $s->stop;
}
done_testing;
