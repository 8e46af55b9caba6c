# A file on overlayfs (a container's image: Docker's overlay2). Its
# filesystem refuses non-blocking reads: preadv2(RWF_NOWAIT) fails with
# EOPNOTSUPP. luxd took that for "cached" when probing before sendfile,
# and when the socket was full, file_to_buffer returned it as an error: the
# connection ended in the middle of the body (a 4 MiB file came out at
# 3.9 MB). The page cache cannot be asked about such a file without
# waiting for the disk, so its bytes go by the thread pool, whole and
# byte-exact, and luxd says so once at info.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my $s = Luxd->new(server => { error_log_level => 'debug' }, no_start => 1);
my $d = $s->dir;
mkdir "$d/$_" or die for qw(lower upper work);
my $size = 4 * 1024 * 1024;
my $data = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. $size / 4 - 1;
{ open my $fh, '>:raw', "$d/lower/f.bin" or die; print $fh $data; close $fh or die }
my $mount = system('mount', '-t', 'overlay', 'overlay', '-o',
                   "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work", "$d/www");
ok($mount == 0, 'overlayfs mounted on the document root (this test needs root and overlayfs)')
  or do { done_testing; exit 1 };
END { system('umount', "$d/www") if $d && $mount == 0 }
{ open my $fh, '<:raw', "$d/www/f.bin" or die; local $/; my $w = <$fh> }    # in the page cache
$s->start;

# A client reading at once, and one that stalls first, so that luxd meets a
# full socket with the file piece at the head of its queue.
for my $how ('at once', 'after a stall') {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => '/f.bin', close => 1));
    sleep 0.5 if $how eq 'after a stall';
    my $got = $c->read_all(30);
    $c->close;
    my $body = $got =~ /\r\n\r\n(.*)\z/s ? $1 : '';
    ok(length($body) == $size && md5_hex($body) eq md5_hex($data), "read $how: the whole body, byte-exact")
      or diag 'got ' . length($body) . " of $size bytes";
}
my @q = $s->error_log =~ /read-ahead of \d+ bytes at \d+ queued/g;
cmp_ok(scalar @q, '>=', 2 * $size / (64 * 1024), 'every byte went by the thread pool (' . scalar(@q) . ' reads)');
my $told = () = $s->error_log =~ /\[info\] "[^"]*f\.bin": its filesystem refuses non-blocking reads/g;
is($told, 1, 'luxd said why, once');
$s->stop;
done_testing;
