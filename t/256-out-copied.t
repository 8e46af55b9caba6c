# A file piece of a file past the memory cache's 256 KiB (a range, or what
# is left of the file), up to LX_OUT_COPY_MAX (128 KiB), goes out copied,
# not by sendfile (issue 18): read from the page
# cache with preadv2(RWF_NOWAIT) into the loop's 64 KiB scratch, one write
# of at most 64 KiB at a time, the first with the headers. The scratch
# belongs to the loop, not the connection: what the socket does not take is
# read again from the file. This test holds that path to what sendfile gave:
# - over HTTP/1 a file of exactly 64 KiB comes from memory (nothing read),
#   one past, though held in memory, copied from the page cache; over
#   HTTP/2 (h2c on the same listener) a file of 256 KiB from memory, one
#   past read; a full cache still takes a new file into memory;
# - byte-exact at 64 KiB + 1, 100 KiB, exactly 128 KiB (the limit) and
#   128 KiB + 1 (one past: sendfile), ranges of a larger file, by GET, two
#   ranges (multipart) and two pipelined GETs, and HEAD;
# - which way each size goes: copied up to the limit, by sendfile one past
#   (the loop thread's rchar has sendfile's two probe bytes, or not);
# - a warm file takes no thread-pool read (like t/179 for sendfile), and a
#   cold one is read by the pool, never waited for in the loop;
# - a client that reads slowly (a 4 KiB window) still gets every byte: the
#   partial writes leave the rest to the file piece.
# (t/181 covers a miss of the copied path: a cold one-byte range before a
# warm file.)
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::HiRes qw(sleep time);
use IO::Select;
use lib 't/lib';
use Luxd;
use Luxd::PageCache;

my $KB = 1024;
my $MEM = 256 * $KB;    # src/io/filecache.h LX_SMALL_FILE
my $TRIES = 30;
my $s = Luxd->new(
    config => 'vhost "localhost" { default = true, root = "$DIR/www", location "/status" { status = true } }',
    server => { access_log => \'false', listen => \'{ { "127.0.0.1:$PORT", http2 = true } }' },
);
my $www = $s->dir . '/www';
my @code = Luxd::PageCache->pin_process($s->pid);

sub make {
    my ($name, $size) = @_;
    my $data = join '', map { pack('N', ($_ + $size) * 2654435761 % 4294967296) } 0 .. int($size / 4);
    $data = substr($data, 0, $size);
    open my $fh, '>:raw', "$www/$name" or die;
    print $fh $data;
    close $fh or die;
    system('sync', "$www/$name") == 0 or die 'sync failed';
    return $data;
}

sub pool_reads { Luxd::PageCache->pool_reads($s) }

# The loop thread: the one that wrote the responses (the most wchar).
sub loop_task {
    my ($best, $bw);
    for my $d (glob '/proc/' . $s->pid . '/task/*') {
        open my $fh, '<', "$d/io" or next;
        my ($w) = join('', <$fh>) =~ /^wchar: (\d+)/m;
        ($best, $bw) = ($d, $w) if defined $w && (!defined $bw || $w > $bw);
    }
    return $best;
}

sub rchar {
    my ($task) = @_;
    open my $fh, '<', "$task/io" or die "$task/io: $!";
    my ($v) = join('', <$fh>) =~ /^rchar: (\d+)/m;
    return $v;
}

# Over HTTP/1, files up to 64 KiB come from the cache's memory (nothing
# read per request); past that, though in memory, from the page cache by
# the copied path (their bytes read, no probe): filecache.h LX_MEM_FD_FROM.
for my $size (64 * $KB, 64 * $KB + 1) {
    my $name = "h$size.bin";
    my $data = make($name, $size);
    my $pin = Luxd::PageCache->pin("$www/$name");
    my ($r, $read);
    for (1 .. $TRIES) {    # a GET first: its cache load is not counted
        $s->get("/$name");
        my $task = loop_task();
        my $rc0 = rchar($task);
        $r = $s->get("/$name");
        $read = rchar($task) - $rc0;
        last unless $pin->missing;
    }
    ok($r->{status} == 200 && md5_hex($r->{body} // '') eq md5_hex($data), "HTTP/1, $size bytes: GET byte-exact");
    is($read, $size <= 64 * $KB ? 0 : $size,
        "HTTP/1, $size bytes: " . ($size <= 64 * $KB ? 'from memory, nothing read' : 'copied from the page cache'));
}

# Over HTTP/2 (h2c on the same listener), files up to the memory cache's
# limit (256 KiB) come from memory; one past is read.
sub h2_get {
    my ($path) = @_;
    my $body = $s->curl('--http2-prior-knowledge', 'http://127.0.0.1:' . $s->port . $path);
    return $body;
}
for my $size ($MEM, $MEM + 1) {
    my $name = "m$size.bin";
    my $data = make($name, $size);
    my $pin = Luxd::PageCache->pin("$www/$name");
    h2_get("/$name");
    my $task = loop_task();
    my $rc0 = rchar($task);
    my $body = h2_get("/$name");
    ok(md5_hex($body // '') eq md5_hex($data), "HTTP/2, $size bytes: GET byte-exact");
    my $read = rchar($task) - $rc0;
    # (rchar also counts the frames luxd reads of the connection: a few bytes)
    if ($size == $MEM) {
        cmp_ok($read, '<', 4096, "HTTP/2, $size bytes (the memory cache's limit): from memory, none of its bytes read");
    } else {
        cmp_ok($read, '>=', $size, "HTTP/2, $size bytes (one past): read");
    }
}

# A full cache still takes a new file into memory, evicting the least
# recently used (the cache's bound counts what stalled responses hold:
# with none, a full cache must not turn new files away to an fd).
{
    my $n = 64 * 1024 / 256 + 8;    # past CACHE_BYTES (64 MiB) in files of $MEM
    for my $i (1 .. $n) {    # no sync: which way these go is not asked
        open my $fh, '>:raw', "$www/full$i.bin" or die;
        print $fh chr(65 + $i % 26) x $MEM;
        close $fh or die;
    }
    my $ok = 0;
    $ok += ($s->get("/full$_.bin")->{status} // 0) == 200 for 1 .. $n;
    is($ok, $n, "$n files of 256 KiB, past the cache's 64 MiB: all served");
    h2_get("/full$n.bin");
    my $task = loop_task();
    my $rc0 = rchar($task);
    h2_get("/full$n.bin");
    cmp_ok(rchar($task) - $rc0, '<', 4096, 'the last of them comes from memory: a full cache takes new files');
    unlink "$www/full$_.bin" for 1 .. $n;
}

# The copied path takes a file piece of up to LX_OUT_COPY_MAX (128 KiB):
# a range of a file larger than the memory cache's, or the tail of one.
my $BIG = 4 * $MEM;
my $big = make('big.bin', $BIG);
my $bigpin = Luxd::PageCache->pin("$www/big.bin");
my %data;
for my $size (64 * $KB + 1, 100 * $KB, 128 * $KB, 128 * $KB + 1) {
    my $from = 4096 + $size % 7;
    my $range = "bytes=$from-" . ($from + $size - 1);
    my $data = $data{$size} = substr($big, $from, $size);

    # Warm: no pool read, when luxd read nothing from the disk meanwhile
    # (a GET first, whose cache load and looks set what the next compares).
    my ($r, $n, $quiet);
    for (1 .. $TRIES) {
        my $d = Luxd::PageCache->disk_reads($s->pid);
        $s->get('/big.bin', Range => $range);
        $n = pool_reads();
        $r = $s->get('/big.bin', Range => $range);
        $n = pool_reads() - $n;
        last if $quiet = Luxd::PageCache->disk_reads($s->pid) == $d && !$bigpin->missing;
    }
    ok($r->{status} == 206 && ($r->{headers}{'content-length'} // '') eq $size && md5_hex($r->{body} // '') eq md5_hex($data),
        "$size bytes: GET of a range byte-exact");
    is($n, 0, "$size bytes: warm, no thread-pool read") or diag $quiet ? 'quiet' : 'never quiet';

    # Which way it went, from the loop thread's rchar: the piece's bytes
    # either way (preadv2, or sendfile), and by sendfile also the two bytes
    # its page-cache probes read (the first and the last), which the copied
    # path does without. At the limit copied, one past by sendfile.
    my $task = loop_task();
    my $rc0 = rchar($task);
    $r = $s->get('/big.bin', Range => $range);
    my $extra = rchar($task) - $rc0 - $size;
    is($extra, $size <= 128 * $KB ? 0 : 2,
        "$size bytes: " . ($size <= 128 * $KB ? 'copied, no probe read' : 'by sendfile, after its two probe bytes'));

    my $req = Luxd::request(path => '/big.bin', headers => [Range => $range]);
    my $two = $s->raw($req . Luxd::request(path => '/big.bin', headers => [Range => $range], close => 1), timeout => 10);
    my @bodies;
    while ($two =~ /\G HTTP\/1\.1\ 206[^\r]*\r\n (.*?) \r\n\r\n/gcxs) {
        my ($len) = $1 =~ /content-length: (\d+)/i or last;
        push @bodies, substr($two, pos($two), $len);
        pos($two) += $len;
    }
    ok(@bodies == 2 && (grep { $_ eq $data } @bodies) == 2 && pos($two) == length $two, "$size bytes: two pipelined GETs, byte-exact");
}
{
    # A range is for GET alone (RFC 9110 14.2): HEAD has the whole length.
    my $h = $s->head('/big.bin', Range => 'bytes=4096-70000');
    ok($h->{status} == 200 && ($h->{headers}{'content-length'} // '') eq $BIG && ($h->{body} // '') eq '',
        "HEAD of a file past the memory cache: the length, no body");
    my $r = $s->get('/big.bin', Range => 'bytes=0-9,65530-65545');
    my @parts = ($r->{body} // '') =~ /\r\nContent-Range: bytes (\d+)-(\d+)\/$BIG\r\n\r\n(.*?)\r\n--/sg;
    ok($r->{status} == 206 && @parts == 6 && $parts[2] eq substr($big, 0, 10) && $parts[5] eq substr($big, 65530, 16),
        "two ranges, multipart, byte-exact");
}

# Cold: evicted (dd's nocache drops what it can), then read by the pool.
{
    my $size = 100 * $KB;
    my $name = "cold.bin";
    my $data = make($name, $BIG);
    my $range = 'bytes=8192-' . (8192 + $size - 1);
    my ($ok, $n, $r);
    for (1 .. 10) {
        $s->get("/$name", Range => $range);    # in the file cache: the GET below is only the body's reads
        system('dd', "if=$www/$name", 'iflag=nocache', 'count=0', 'status=none') == 0 or die 'dd failed';
        next unless `fincore --raw --noheadings --output PAGES $www/$name` =~ /^\s*0\s*$/;
        $n = pool_reads();
        $r = $s->get("/$name", Range => $range);
        $n = pool_reads() - $n;
        $ok = 1;
        last;
    }
    ok($ok, 'cold: the file was evicted (the premise)');
    ok($r->{status} == 206 && md5_hex($r->{body} // '') eq md5_hex(substr($data, 8192, $size)), 'cold: byte-exact');
    cmp_ok($n, '>=', 1, 'cold: read by the thread pool');
}

# A slow reader: a 4 KiB window and 64 pipelined GETs, more than the
# kernel buffers between the two sockets (2.8 MB seen); luxd fills the socket, stalls, and
# goes on as the client reads, a few KiB at a time: writes the socket takes
# only in part, the rest read again from the file.

# Bytes queued between luxd and the client on port $cport (luxd's Send-Q,
# the client's Recv-Q).
sub queued {
    my ($cport) = @_;
    my ($q, $port) = (0, $s->port);
    for (`ss -tnH state established "( sport = :$port or dport = :$port )"`) {
        my @f = split ' ';
        $q += $f[1] if $f[2] =~ /:$port\z/ && $f[3] =~ /:$cport\z/;
        $q += $f[0] if $f[2] =~ /:$cport\z/;
    }
    return $q;
}

my $N = 64;
for my $size (100 * $KB, 128 * $KB) {
    my $c = $s->connect(rcvbuf => 4096);
    my $range = "bytes=4096-" . (4096 + $size - 1);
    $data{$size} = substr($big, 4096, $size);
    my @h = (headers => [Range => $range]);
    $c->send(join '', (map { Luxd::request(path => '/big.bin', @h) } 1 .. $N - 1), Luxd::request(path => '/big.bin', @h, close => 1));
    my ($q, $last) = (0, -1);
    for (1 .. 100) {    # until it stops growing: luxd stalled on the full socket
        sleep 0.05;
        $q = queued($c->{sock}->sockport);
        last if $q == $last && $q > 0;
        $last = $q;
    }
    cmp_ok($q, '<', $N * $size, "slow reader, $size bytes x $N: luxd stalled with bytes unsent (the premise)");
    my $got = '';
    my $until = time + 60;
    while (time < $until) {
        my $k = sysread($c->{sock}, my $buf, 16384);
        last if !$k;
        $got .= $buf;
        sleep 0.001;
    }
    $c->close;
    my @bodies;
    pos($got) = 0;
    while ($got =~ /\G HTTP\/1\.1\ 206[^\r]*\r\n (.*?) \r\n\r\n/gcxs) {
        my ($len) = $1 =~ /content-length: (\d+)/i or last;
        push @bodies, substr($got, pos($got), $len);
        pos($got) += $len;
    }
    ok(@bodies == $N && (grep { $_ eq $data{$size} } @bodies) == $N && pos($got) == length $got,
        "slow reader, $size bytes x $N: byte-exact") or diag scalar(@bodies) . " responses in " . length($got) . ' bytes';
}

# Four slow readers on the one loop, each of a different file, read in
# turn: the scratch is the loop's, so a uv_write left pointing into it
# would send another connection's bytes (a break review's test: the server
# kept a uv_write on the scratch and this caught it, 38 of 40 byte-exact).
{
    my %d;
    for my $i (1 .. 4) {
        my $size = (90 + 9 * $i) * $KB + $i;
        $d{$i} = [substr(make("g$i.bin", $BIG), $i, $size), "bytes=$i-" . ($i + $size - 1)];
    }
    my $n = 40;
    my @c;
    for my $i (1 .. 4) {
        my $c = $s->connect(rcvbuf => 4096);
        my @h = (path => "/g$i.bin", headers => [Range => $d{$i}[1]]);
        $c->send(join '', (map { Luxd::request(@h) } 1 .. $n - 1), Luxd::request(@h, close => 1));
        push @c, [$i, $c, ''];
    }
    my $sel = IO::Select->new(map { $_->[1]{sock} } @c);
    my $until = time + 120;
    my $open = @c;
    while ($open && time < $until) {
        for my $e (@c) {
            next unless $e->[1] && $sel->exists($e->[1]{sock}) && IO::Select->new($e->[1]{sock})->can_read(0.01);
            my $k = sysread($e->[1]{sock}, my $buf, 3000);
            if (!$k) { $sel->remove($e->[1]{sock}); $e->[1]->close; $e->[1] = undef; $open--; next }
            $e->[2] .= $buf;
        }
    }
    for my $e (@c) {
        my ($i, undef, $got) = @$e;
        my ($k, $good) = (0, 0);
        pos($got) = 0;
        while ($got =~ /\G HTTP\/1\.1\ 206[^\r]*\r\n (.*?) \r\n\r\n/gcxs) {
            my ($len) = $1 =~ /content-length: (\d+)/i or last;
            $k++;
            $good++ if substr($got, pos($got), $len) eq $d{$i}[0];
            pos($got) += $len;
        }
        ok($k == $n && $good == $n, "four slow readers on one loop: g$i: $n responses byte-exact")
          or diag "$k responses, $good byte-exact, " . length($got) . ' bytes';
    }
}

$s->stop;
done_testing;
