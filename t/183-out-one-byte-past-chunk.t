# A file of 512 KiB + 1 byte (the sendfile chunk and one past) whose last
# page is not cached. In one flush the second look starts where the first
# was found warm: its first byte is not probed again, and with a range of
# one byte the end probe was skipped as well ("end - off > 1"), so sendfile
# read the page from the disk in the loop. At exactly the chunk (512 KiB)
# there is no second look. (From the final review.)
#
# Only the last page may be cold: the pages before it are mlock()ed, and so
# is every file luxd maps (Luxd::PageCache). The CI VMs' proactive reclaim
# evicts pages of a file read a moment before, and luxd's code, and either
# made the loop read more than the probe's page from the disk (sendfile of
# an evicted middle page, a fault paging code in). The server logs nothing
# per request (pool reads counted from /status, access log off): a
# log line appended from the loop could read its file's last page back.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::PageCache;

my $KB = 1024;
my $s = Luxd->new(
    config => 'vhost "localhost" { default = true, root = "$DIR/www", location "/status" { status = true } }',
    server => { access_log => \'false' },
);
my $www = $s->dir . '/www';
my @code = Luxd::PageCache->pin_process($s->pid);

sub pool_reads { Luxd::PageCache->pool_reads($s) }

# Whether the page of $path at $off (page-aligned) is in the page cache:
# mincore() on a mapping of that page alone, which does not fault it in.
sub resident {
    my ($path, $off) = @_;
    open my $fh, '<:raw', $path or die "$path: $!";
    my $addr = syscall(Luxd::PageCache::_nr('mmap'), 0, 4096, 1, 1, fileno($fh), $off);  # PROT_READ, MAP_SHARED
    die "mmap $path: $!" if $addr == -1;
    my $vec = "\0";
    my $rc = syscall(Luxd::PageCache::_nr('mincore'), $addr, 4096, $vec);
    syscall(Luxd::PageCache::_nr('munmap'), $addr, 4096);
    die "mincore $path: $!" if $rc != 0;
    return ord($vec) & 1;
}

sub loop_io {
    my ($best, $bw);
    for my $d (glob '/proc/' . $s->pid . '/task/*') {
        open my $fh, '<', "$d/io" or next;
        my %h = map { /^(\w+): (\d+)/ ? ($1, $2) : () } <$fh>;
        ($best, $bw) = (\%h, $h{wchar}) if defined $h{wchar} && (!defined $bw || $h{wchar} > $bw);
    }
    return $best;
}

for my $size (512 * $KB, 512 * $KB + 1) {
    my $name = "f$size.bin";
    my $data = join '', map { chr(65 + $_ % 26) } 0 .. $size - 1;
    { open my $fh, '>:raw', "$www/$name" or die; print $fh $data; close $fh or die }
    system('sync') == 0 or die;
    # Warm and held so, but for the last page, which dd reads, then drops (nocache).
    my $lastpg = int(($size - 1) / 4096) * 4096;
    my $pin = Luxd::PageCache->pin("$www/$name", $lastpg);
    # Dropped again should something (read-ahead) bring it back before the GET.
    for (1 .. 5) {
        system('dd', "if=$www/$name", 'iflag=nocache,skip_bytes', "skip=$lastpg", 'bs=4096', 'count=1',
               'of=/dev/null', 'status=none') == 0 or die 'dd failed';
        last unless resident("$www/$name", $lastpg);
    }
    # (What the pool-read check below needs; for the 512 KiB file the page
    # stays resident here, next to the pinned ones, and the test asks only
    # that the loop read no more than a probe's page.)
    ok(!resident("$www/$name", $lastpg), "$size bytes: premise: the last page is not in the page cache")
      if $size % (512 * $KB);
    my $at = pool_reads();
    my $io0 = loop_io();
    my $r = $s->get("/$name");
    my $io1 = loop_io();
    ok($r->{status} == 200 && ($r->{body} // '') eq $data, "$size bytes: byte-exact");
    my $disk = $io1->{read_bytes} - $io0->{read_bytes};
    # A probe that misses starts its page's read (not waited for): one page.
    cmp_ok($disk, '<=', 4096, "$size bytes: the loop thread read $disk bytes from the disk, at most the probe's page");
    my $q = pool_reads() - $at;
    cmp_ok($q, '>=', 1, "$size bytes: the evicted last page went by the thread pool") if $size % (512 * $KB);
}
$s->stop;
done_testing;
