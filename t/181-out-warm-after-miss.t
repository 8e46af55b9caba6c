# A warm file is not sent to the thread pool because another connection's
# probe missed (from review 5 of the t/160 fix). A probe that misses starts
# the page's read from the loop thread; probe_ends returned before it
# recorded the loop thread's block-input count, so the next hit on the
# worker, any connection's, saw the count grown and called its warm range a
# miss: a pool read and cachestat for the rest of that response.
#
# The old form allowed two rounds in eight to take pool reads and still
# failed about once in six runs on a busy machine: the "warm" file was not
# all warm (the CI VMs' proactive reclaim takes pages of a file read a
# moment before; the failure's first look missed on its last page), and a
# loop thread that reads from the disk for another reason (paging its code
# in) makes the next look a miss by design. Both are now made true and
# checked (Luxd::PageCache): the warm file and every file luxd maps are
# mlock()ed, and a round counts only when luxd read nothing from the disk
# from the end of the cold GET to the end of the warm one (the cold probe's
# own read is before that, and is the one the defect forgot); a round that
# did is set up again, never judged. The server logs nothing per request
# (pool reads are counted from /status, access log off): a
# log line appended from the loop can read its file's last page back from
# the disk after the cold probe, where no window of the test sees it.
# Then every round's warm GET takes no pool read; the old code took one in
# each.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;
use Luxd::PageCache;

my $KB = 1024;
my $ROUNDS = 8;
my $TRIES = 40;    # attempts for the eight rounds
my $s = Luxd->new(
    config => 'vhost "localhost" { default = true, root = "$DIR/www", location "/status" { status = true } }',
    server => { access_log => \'false' },
);
my $www = $s->dir . '/www';

sub make {
    my ($name, $size) = @_;
    my $data = join '', map { pack('N', ($_ + length $name) * 2654435761 % 4294967296) } 0 .. $size / 4 - 1;
    open my $fh, '>:raw', "$www/$name" or die;
    print $fh $data;
    close $fh or die;
    system('sync');
    return $data;
}

sub pool_reads { Luxd::PageCache->pool_reads($s) }

sub reads { Luxd::PageCache->disk_reads($s->pid) }

# Whether the cold file's first page is out of the page cache: dd's nocache
# asks posix_fadvise(DONTNEED), which leaves a page it cannot drop.
sub evict_cold {
    for (1 .. 20) {
        system('dd', "if=$www/cold.bin", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd failed';
        return 1 if `fincore --raw --noheadings --output PAGES $www/cold.bin` =~ /^\s*0\s*$/;
        select undef, undef, undef, 0.05;
    }
    return 0;
}

my $warm = make('warm.bin', 4 * 1024 * $KB);
make('cold.bin', 4 * 1024 * $KB);
my $pin = Luxd::PageCache->pin("$www/warm.bin");
my @code = Luxd::PageCache->pin_process($s->pid);

# The premise (t/179 asserts it on its own): a warm GET after a warm GET
# takes no pool read, when luxd read nothing from the disk meanwhile.
my ($r, $n, $quiet);
for (1 .. $TRIES) {
    my $d = reads();
    $s->get('/warm.bin');
    $n = pool_reads();
    $r = $s->get('/warm.bin');
    $n = pool_reads() - $n;
    last if $quiet = reads() == $d;
}
ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($warm), 'warm: byte-exact');
is($n, 0, 'warm, then warm again: by sendfile alone (the premise)') or diag $quiet ? 'quiet' : 'never quiet';

my ($round, $tries) = (0, 0);
while ($round < $ROUNDS && $tries++ < $TRIES) {
    ok(evict_cold(), 'the cold file is out of the page cache') or last;
    $n = pool_reads();
    $r = $s->get('/cold.bin', Range => 'bytes=0-0');
    my $cold = pool_reads() - $n;
    my $d = reads();
    $n = pool_reads();
    my $w = $s->get('/warm.bin');
    $n = pool_reads() - $n;
    next unless reads() == $d && !$pin->missing;    # set up again: this round proves nothing
    $round++;
    is($r->{status}, 206, "round $round: one byte of the cold file");
    cmp_ok($cold, '>=', 1, "round $round: the cold byte went by the thread pool (the premise)");
    ok($w->{status} == 200 && md5_hex($w->{body} // '') eq md5_hex($warm), "round $round: warm again, byte-exact");
    is($n, 0, "round $round: the warm file after the cold byte went by sendfile alone");
}
is($round, $ROUNDS, "$ROUNDS rounds in which luxd read nothing from the disk but the cold byte (in $tries tries)");

$s->stop;
done_testing;
