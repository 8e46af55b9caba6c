# A warm file is not sent to the thread pool because another connection's
# probe missed (from review 5 of the t/160 fix). A probe that misses starts
# the page's read from the loop thread; probe_ends returned before it
# recorded the loop thread's block-input count, so the next hit on the
# worker, any connection's, saw the count grown and called its warm range a
# miss: a pool read and cachestat for the rest of that response.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;

my $KB = 1024;
my $s = Luxd->new(server => { error_log_level => 'debug' });
my $www = $s->dir . '/www';

sub make {
    my ($name, $size) = @_;
    my $data = join '', map { pack('N', ($_ + length $name) * 2654435761 % 4294967296) } 0 .. $size / 4 - 1;
    open my $fh, '>:raw', "$www/$name" or die;
    print $fh $data;
    close $fh or die;
    system('sync');
    { open my $r, '<:raw', "$www/$name" or die; local $/; my $w = <$r> }    # in the page cache
    return $data;
}

sub pool_reads {
    my ($from) = @_;
    my @q = substr($s->error_log, $from) =~ /read-ahead of \d+ bytes at \d+ queued/g;
    return scalar @q;
}

# Eight rounds of a cold byte, then the warm file. Before the fix every
# round's warm GET took a pool read; a loaded machine can make one look a
# miss now and then for reasons of its own, so most rounds must be clean.
my $warm = make('warm.bin', 4 * 1024 * $KB);
make('cold.bin', 4 * 1024 * $KB);
my $at = length $s->error_log;
my $r = $s->get('/warm.bin');
ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($warm), 'warm: byte-exact');
cmp_ok(pool_reads($at), '<=', 1, 'warm, first: by sendfile (the premise: not a read per 64 KiB)');
my $dirty = 0;
for my $round (1 .. 8) {
    system('dd', "if=$www/cold.bin", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd failed';
    $at = length $s->error_log;
    $r = $s->get('/cold.bin', Range => 'bytes=0-0');
    is($r->{status}, 206, "round $round: one byte of the cold file");
    cmp_ok(pool_reads($at), '>=', 1, "round $round: the cold byte went by the thread pool (the premise)");
    $at = length $s->error_log;
    $r = $s->get('/warm.bin');
    ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($warm), "round $round: warm again, byte-exact");
    $dirty++ if pool_reads($at);
}
cmp_ok($dirty, "<=", 2, "the warm file after the cold byte went by sendfile alone in all but $dirty of 8 rounds");

$s->stop;
done_testing;
