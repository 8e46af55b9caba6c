# A warm file on tmpfs goes out by sendfile, as on a disk (from review 5).
# tmpfs refuses RWF_NOWAIT (preadv2 fails with EOPNOTSUPP, Linux 6.18), and
# luxd took that for overlayfs: the file became "unprobed" and every byte
# went through the thread pool and a 64 KiB buffer, though tmpfs pages are
# in memory by nature (a document root in /dev/shm or /run, or TMPDIR on
# tmpfs, where t/179 fails for the same reason).
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my $s = Luxd->new(server => { error_log_level => 'debug' }, no_start => 1);
my $d = $s->dir;
my $mount = system('mount', '-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', "$d/www");
ok($mount == 0, 'tmpfs mounted on the document root (this test needs root)') or do { done_testing; exit 1 };
END { system('umount', "$d/www") if $d && defined $mount && $mount == 0 }
my $size = 4 * 1024 * 1024;
my $data = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. $size / 4 - 1;
{ open my $fh, '>:raw', "$d/www/t.bin" or die; print $fh $data; close $fh or die }
$s->start;
for my $round (1 .. 2) {
    my $at = length $s->error_log;
    my $r = $s->get('/t.bin');
    ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($data), "round $round: byte-exact");
    my @q = substr($s->error_log, $at) =~ /read-ahead of \d+ bytes at \d+ queued/g;
    is(scalar @q, 0, "round $round: the tmpfs file went by sendfile alone");
}
# A client that stalls first: luxd meets a full socket with the file at the
# head of its queue and writes a piece read from it (plainly: tmpfs refuses
# RWF_NOWAIT there too, which once ended the response).
my $c = $s->connect(rcvbuf => 4096);
$c->send(Luxd::request(path => '/t.bin', close => 1));
sleep 0.5;
my $got = $c->read_all(30);
$c->close;
my $body = $got =~ /\r\n\r\n(.*)\z/s ? $1 : '';
ok(length($body) == $size && md5_hex($body) eq md5_hex($data), 'read after a stall: the whole body, byte-exact')
  or diag 'got ' . length($body) . " of $size bytes";
unlike($s->error_log, qr/refuses non-blocking reads/, 'nothing said of tmpfs: it is not a limit');
$s->stop;
done_testing;
