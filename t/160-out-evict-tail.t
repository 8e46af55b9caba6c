# A file's pages evicted from the page cache while a client is stalled in the
# middle of it must be read on the thread pool, not by sendfile in the loop
# (a read from disk there stops every client of the loop).
#
# The sendfile probe (out.c in_page_cache) remembers how far it found the
# file cached (warm_to) and returns "cached" without looking for a range
# that ends there: in the last SENDFILE_CHUNK (512 KiB) of a file piece,
# once probed, nothing is probed again, however long the client stalls.
#
# Setup: a client with a small receive window asks for a file a bit larger
# than what the kernel buffers between the two sockets (measured first with
# ss: luxd's Send-Q plus the client's Recv-Q). luxd sends that much at once,
# its last sendfile ranges in the file's last chunk, and stalls on the full
# socket with the rest unsent. The file is evicted (dd iflag=nocache; the
# pages in the socket buffers stay, the rest goes), then the client reads.
#
# Limit: 256 KiB left, all inside the last chunk: the rest must go through
# the thread pool (debug log "read-ahead ... queued"), and the loop thread
# must not read it from the disk (/proc/PID/task/TID/io read_bytes). One
# past: 1 MiB left, the stall before the last chunk: each range's new end is
# probed and finds the eviction.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my $KB = 1024;
my $s = Luxd->new(server => { error_log_level => 'debug' });
my $port = $s->port;

# Bytes queued between luxd and the client on port $cport.
sub queued {
    my ($cport) = @_;
    my $q = 0;
    for (`ss -tnH state established "( sport = :$port or dport = :$port )"`) {
        my @f = split ' ';
        $q += $f[1] if $f[2] =~ /:$port\z/ && $f[3] =~ /:$cport\z/;    # luxd's Send-Q
        $q += $f[0] if $f[2] =~ /:$cport\z/;                           # the client's Recv-Q
    }
    return $q;
}

# A request from a client that reads nothing yet: the connection and what
# luxd got into the kernel before the socket was full.
sub stall {
    my ($path) = @_;
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(Luxd::request(path => $path, close => 1));
    my ($q, $last) = (0, -1);
    for (1 .. 50) {    # until it stops growing
        sleep 0.1;
        $q = queued($c->{sock}->sockport);
        last if $q == $last && $q > 0;
        $last = $q;
    }
    return ($c, $q);
}

# The loop thread is the one that wrote the responses (sendfile counts there).
sub loop_io {
    my ($best, $bw);
    for my $d (glob '/proc/' . $s->pid . '/task/*') {
        open my $fh, '<', "$d/io" or next;
        my %h = map { /^(\w+): (\d+)/ ? ($1, $2) : () } <$fh>;
        next unless defined $h{read_bytes};
        ($best, $bw) = (\%h, $h{wchar}) if !defined $bw || $h{wchar} > $bw;
    }
    return $best;
}

sub make_file {
    my ($name, $size) = @_;
    my $file = $s->dir . "/www/$name";
    my $data = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. $size / 4 - 1;
    open my $fh, '>:raw', $file or die "$file: $!";
    print $fh $data;
    close $fh or die;
    system('sync', $file) == 0 or die 'sync failed';
    open $fh, '<:raw', $file or die;    # warm: the first probes find it cached
    local $/;
    my $warm = <$fh>;
    close $fh;
    return ($file, $data);
}

# What the kernel holds for a stalled client on this machine.
my $big = $s->dir . '/www/big.bin';
open my $bf, '>:raw', $big or die;
print $bf "\0" x (16 * 1024 * $KB);
close $bf;
my ($c0, $cap) = stall('/big.bin');
$c0->close;
cmp_ok($cap, '>', 256 * $KB, "the kernel holds $cap bytes for a stalled client");

sub case {
    my ($name, $rest) = @_;
    my $size = $cap + $rest;
    $size -= $size % 4096;
    my ($file, $data) = make_file($name, $size);
    my ($c, $pos) = stall("/$name");
    my $left = $size - $pos;
    ok($left > 64 * $KB && $left <= $rest, "$name: luxd stalled with $left of $size bytes unsent");
    system('dd', "if=$file", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd failed';
    my $log_at = length $s->error_log;
    my $io0 = loop_io();
    my $got = $c->read_all(30);
    my $io1 = loop_io();
    $c->close;

    my $body = $got =~ /\r\n\r\n(.*)\z/s ? $1 : '';
    ok(length($body) == $size && md5_hex($body) eq md5_hex($data), "$name: byte-exact")
      or diag 'got ' . length($body) . " of $size";
    my @q = substr($s->error_log, $log_at) =~ /read-ahead of \d+ bytes at (\d+) queued/g;
    ok(@q >= 1, "$name: the evicted rest was read on the thread pool (" . scalar(@q) . ' read-aheads)');
    my $disk = $io1->{read_bytes} - $io0->{read_bytes};
    cmp_ok($disk, '<', $left / 2, "$name: the loop thread read $disk of the $left evicted bytes from the disk");
}

case('tail.bin', 256 * $KB);    # the limit: the rest is inside the last chunk
case('mid.bin', 1024 * $KB);    # one past: it is not (this held)

$s->stop;
done_testing;
