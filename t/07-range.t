# Range requests: single, open-ended, suffix, multipart/byteranges, 416,
# If-Range, and byte-exact large files (sendfile path).
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;

my $small = join '', map { sprintf '%03d,', $_ } 0 .. 249;    # 1000 bytes
srand(42);
my $large = pack 'N*', map { int rand 4294967296 } 1 .. 786432;  # 3 MiB
my $L = length $large;

my $s = Luxd->new(files => {
    'www/index.html' => "<h1>home</h1>\n",
    'www/r.txt'      => $small,
    'www/large.bin'  => $large,
}, no_start => 1);
# Modified in the past: a Last-Modified of the current second is no strong
# validator, and If-Range with it gives the whole file (t/210).
utime 1704164645, 1704164645, $s->dir . '/www/r.txt';
$s->start;

sub rng { my ($path, $range, @h) = @_; $s->http(path => $path, headers => [Range => $range, @h], timeout => 10) }

sub single {
    my ($range, $first, $last, $name) = @_;
    my $r = rng('/r.txt', $range);
    check_response($r, {
        status  => 206,
        body    => substr($small, $first, $last - $first + 1),
        headers => { 'content-range' => "bytes $first-$last/1000", 'content-length' => $last - $first + 1,
                     'content-type' => qr{^text/plain\b} },
    }, $name // $range);
    return $r;
}

sub multipart {
    my ($r) = @_;
    my ($b) = ($r->{headers}{'content-type'} // '') =~ m{^multipart/byteranges;\s*boundary="?([^";\s]+)"?}i;
    return undef unless defined $b;
    my @segs = split /\r\n--\Q$b\E/, "\r\n" . $r->{body}, -1;
    shift @segs;    # preamble
    my $close = pop @segs;
    return undef unless defined $close && $close =~ /^--(\r\n)?$/;
    my @parts;
    for my $seg (@segs) {
        my ($hdr, $data) = $seg =~ /\A\r\n(.*?)\r\n\r\n(.*)\z/s or return undef;
        my %h;
        for (split /\r\n/, $hdr) { my ($k, $v) = /^([^:]+):\s*(.*?)\s*$/ or next; $h{ lc $k } = $v }
        push @parts, { headers => \%h, body => $data };
    }
    return \@parts;
}

subtest 'single ranges' => sub {
    my $r = single('bytes=0-9', 0, 9);
    ok(defined $r->{headers}{etag}, '206 carries the ETag');
    single('bytes=0-0', 0, 0);
    single('bytes=10-19', 10, 19);
    single('bytes=990-', 990, 999, 'open-ended');
    single('bytes=0-', 0, 999, 'open-ended from 0');
    single('bytes=-5', 995, 999, 'suffix');
    single('bytes=-5000', 0, 999, 'suffix longer than the file');
    single('bytes=995-2000', 995, 999, 'last byte past the end is clamped');
    single('bytes=999-999', 999, 999, 'last byte');
    single('Bytes=0-4', 0, 4, 'unit name case-insensitive');
};

subtest 'Accept-Ranges' => sub {
    my $r = $s->get('/r.txt');
    check_response($r, { status => 200, body => $small, headers => { 'accept-ranges' => 'bytes' } }, 'GET without Range');
};

subtest 'multiple ranges: multipart/byteranges' => sub {
    my $r = rng('/r.txt', 'bytes=0-4,10-14,-3');
    is($r->{status}, 206, 'status 206');
    like($r->{headers}{'content-type'}, qr{^multipart/byteranges; ?boundary=\S+}, 'multipart/byteranges with a boundary');
    ok(!defined $r->{headers}{'content-range'}, 'no top-level Content-Range');
    is($r->{headers}{'content-length'}, length($r->{body}), 'Content-Length is the multipart body length');
    my $parts = multipart($r);
    ok($parts, 'the body parses as multipart') or return diag($r->{body});
    is(scalar @$parts, 3, 'three parts');
    my @want = ([0, 4], [10, 14], [997, 999]);
    for my $i (0 .. $#want) {
        my ($f, $l) = @{ $want[$i] };
        my $p = $parts->[$i] or next;
        is($p->{headers}{'content-range'}, "bytes $f-$l/1000", "part $i: Content-Range");
        like($p->{headers}{'content-type'}, qr{^text/plain\b}, "part $i: Content-Type of the file");
        is($p->{body}, substr($small, $f, $l - $f + 1), "part $i: bytes");
    }

    $r = rng('/r.txt', 'bytes=100-199, 500-599');
    $parts = multipart($r);
    is($r->{status}, 206, 'two ranges with a space after the comma: 206');
    is(join('|', map { $_->{body} } @{ $parts || [] }), substr($small, 100, 100) . '|' . substr($small, 500, 100), 'byte-exact parts');
};

subtest 'unsatisfiable ranges: 416' => sub {
    for my $range ('bytes=1000-1005', 'bytes=5000-', 'bytes=1000-', 'bytes=-0', 'bytes=2000-3000,4000-5000') {
        my $r = rng('/r.txt', $range);
        check_response($r, { status => 416, headers => { 'content-range' => 'bytes */1000' }, body_max => 1024 }, $range);
    }
};

subtest 'invalid Range headers are ignored: 200 with the whole file' => sub {
    for my $range ('bytes=abc', 'items=0-5', 'bytes=5-2', 'bytes=', 'bytes=--5', '0-5', 'bytes=0-5-') {
        my $r = rng('/r.txt', $range);
        check_response($r, { status => 200, body => $small, headers => { 'content-range' => undef } }, $range);
    }
};

subtest 'If-Range' => sub {
    my $etag = $s->get('/r.txt')->{headers}{etag} // '"none"';
    my $lm = $s->get('/r.txt')->{headers}{'last-modified'} // 'none';
    (my $strong = $etag) =~ s{^W/}{};
    my $r = rng('/r.txt', 'bytes=0-9', 'If-Range' => $etag);
    check_response($r, { status => 206, body => substr($small, 0, 10) }, 'matching ETag: 206');
    $r = rng('/r.txt', 'bytes=0-9', 'If-Range' => '"not-the-etag"');
    check_response($r, { status => 200, body => $small }, 'other ETag: 200 with the whole file');
    $r = rng('/r.txt', 'bytes=0-9', 'If-Range' => "W/$strong");
    check_response($r, { status => 200, body => $small }, 'weak ETag never matches If-Range: 200');
    $r = rng('/r.txt', 'bytes=0-9', 'If-Range' => $lm);
    check_response($r, { status => 206, body => substr($small, 0, 10) }, 'Last-Modified date: 206');
    $r = rng('/r.txt', 'bytes=0-9', 'If-Range' => 'Mon, 01 Jan 2001 00:00:00 GMT');
    check_response($r, { status => 200, body => $small }, 'other date: 200');
    $r = rng('/r.txt', 'bytes=0-9', 'If-None-Match' => $etag);
    is($r->{status}, 304, 'If-None-Match match with Range: 304 (conditions before Range)');
};

subtest 'ranges on a missing file' => sub {
    is(rng('/nope.txt', 'bytes=0-9')->{status}, 404, 'missing file: 404');
};

subtest 'a large file, whole and by ranges, byte-exact' => sub {
    my $r = $s->http(path => '/large.bin', timeout => 20);
    is($r->{status}, 200, 'whole large file: 200');
    is($r->{headers}{'content-length'}, $L, 'Content-Length');
    is(length($r->{body}), $L, 'all bytes');
    is(md5_hex($r->{body}), md5_hex($large), 'MD5 of the whole file');
    for my $case ([1_000_000, 1_999_999], [0, 65535], [$L - 100_000, $L - 1], [65535, 65536], [1, $L - 2]) {
        my ($f, $l) = @$case;
        my $rr = rng('/large.bin', "bytes=$f-$l");
        is($rr->{status}, 206, "bytes=$f-$l: 206");
        is($rr->{headers}{'content-range'}, "bytes $f-$l/$L", "bytes=$f-$l: Content-Range");
        is(md5_hex($rr->{body} // ''), md5_hex(substr($large, $f, $l - $f + 1)), "bytes=$f-$l: MD5");
    }
    my $rr = rng('/large.bin', 'bytes=-100000');
    is(md5_hex($rr->{body} // ''), md5_hex(substr($large, -100000)), 'suffix range: MD5');
    $rr = rng('/large.bin', 'bytes=0-99,2000000-2000099,3000000-');
    my $parts = multipart($rr) || [];
    is(scalar @$parts, 3, 'multipart on the large file: three parts');
    is(join('', map { md5_hex($_->{body}) } @$parts),
       md5_hex(substr($large, 0, 100)) . md5_hex(substr($large, 2000000, 100)) . md5_hex(substr($large, 3000000)),
       'multipart on the large file: byte-exact');
    # Several large responses pipelined on one connection.
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/large.bin') . Luxd::request(path => '/large.bin', headers => [Range => 'bytes=7-']) . Luxd::request(path => '/r.txt', close => 1));
    my @r = $c->responses(3, timeout => 20);
    is(join(',', map { $_->{status} } @r), '200,206,200', 'pipelined: statuses');
    ok(@r == 3 && md5_hex($r[0]{body}) eq md5_hex($large) && md5_hex($r[1]{body}) eq md5_hex(substr($large, 7)) && $r[2]{body} eq $small,
       'pipelined: byte-exact');
    $c->close;
};

$s->stop;
done_testing;
