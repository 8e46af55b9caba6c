# Range requests as an attacker sends them (issue 8 #9, #10): overlapping
# ranges must not multiply the bytes sent, the number of ranges is bounded
# (exactly the limit and one past), and a long Content-Type from mime { }
# must not over-read the multipart part-header buffer or cut a header line.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SIZE = 200_000;
srand(8);
my $big = join '', map { chr(65 + int rand 26) } 1 .. $SIZE;
my $small = join '', map { sprintf '%03d,', $_ } 0 .. 249;    # 1000 bytes
my $LIMIT = 16;                                               # LX_RANGE_MAX
# 516 characters: longer than the 512-byte part buffer static.c used.
my $long_type = 'application/x-' . ('a' x 502);
# Longer than the 1024-byte line buffer of lx_resp_headerf.
my $longer_type = 'application/x-' . ('b' x 1100);

my $s = Luxd->new(
    config => qq{mime { [".lt"] = "$long_type", [".llt"] = "$longer_type" }\n}
      . qq{vhost "localhost" { default = true, root = "\$DIR/www" }\n},
    files => {
        'www/big.bin' => $big,
        'www/r.txt'   => $small,
        'www/r.lt'    => $big,
        'www/r.llt'   => $big,
    },
);

# Sends one request with Connection: close and returns (raw bytes, parsed).
sub fetch {
    my ($path, $range) = @_;
    my $raw = $s->raw(Luxd::request(path => $path, headers => [Range => $range], close => 1), timeout => 10);
    my ($r) = parse_responses($raw);
    return ($raw, $r || { status => undef, headers => {}, body => '' });
}

sub multipart {
    my ($r) = @_;
    my ($b) = ($r->{headers}{'content-type'} // '') =~ m{^multipart/byteranges;\s*boundary="?([^";\s]+)"?}i;
    return undef unless defined $b;
    my @segs = split /\r\n--\Q$b\E/, "\r\n" . $r->{body}, -1;
    shift @segs;
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

subtest "$LIMIT overlapping 0- ranges send the file once, not $LIMIT times" => sub {
    my ($raw, $r) = fetch('/big.bin', 'bytes=' . join(',', ('0-') x $LIMIT));
    cmp_ok(length $raw, '<', $SIZE + 1024, "bytes on the wire: at most the file plus headers (got " . length($raw) . ")");
    is($r->{status}, 206, 'one merged range: 206');
    is($r->{headers}{'content-range'}, "bytes 0-" . ($SIZE - 1) . "/$SIZE", 'Content-Range of the merged range');
    ok($r->{body} eq $big, 'body is the file, once');
};

subtest 'overlapping and adjacent ranges are merged' => sub {
    my ($raw, $r) = fetch('/big.bin', 'bytes=100-199,150-299,300-399,1000-1099,0-9');
    is($r->{status}, 206, 'status 206');
    my $parts = multipart($r) || [];
    is(join(' ', map { $_->{headers}{'content-range'} } @$parts),
       "bytes 0-9/$SIZE bytes 100-399/$SIZE bytes 1000-1099/$SIZE", 'three parts, ascending, merged');
    is(join('|', map { $_->{body} } @$parts),
       join('|', substr($big, 0, 10), substr($big, 100, 300), substr($big, 1000, 100)), 'byte-exact');
    is($r->{headers}{'content-length'}, length $r->{body}, 'Content-Length is the body length');
};

subtest 'parts larger than the file: 200 with the whole file' => sub {
    # Sixteen disjoint 50-byte ranges of a 1000-byte file: 800 bytes of data,
    # but with their part headers more than the file itself.
    my $set = join ',', map { ($_ * 60) . '-' . ($_ * 60 + 49) } 0 .. $LIMIT - 1;
    my ($raw, $r) = fetch('/r.txt', "bytes=$set");
    is($r->{status}, 200, 'status 200');
    ok($r->{body} eq $small, 'the whole file');
    cmp_ok(length $raw, '<', 1000 + 1024, 'no more than the file plus headers on the wire');
    # A few disjoint ranges well under the file's size stay multipart.
    ($raw, $r) = fetch('/r.txt', 'bytes=0-99,500-599');
    is($r->{status}, 206, 'two small ranges: 206');
    is(scalar @{ multipart($r) || [] }, 2, 'two parts');
};

subtest "the range limit: exactly $LIMIT ranges, and one past" => sub {
    my @set = map { ($_ * 1000) . '-' . ($_ * 1000 + 9) } 0 .. $LIMIT;
    my ($raw, $r) = fetch('/big.bin', 'bytes=' . join(',', @set[0 .. $LIMIT - 1]));
    is($r->{status}, 206, "$LIMIT ranges: 206");
    my $parts = multipart($r) || [];
    is(scalar @$parts, $LIMIT, "$LIMIT parts");
    is(join('', map { $_->{body} } @$parts), join('', map { substr($big, $_ * 1000, 10) } 0 .. $LIMIT - 1),
       'byte-exact parts');
    ($raw, $r) = fetch('/big.bin', 'bytes=' . join(',', @set));
    is($r->{status}, 200, ($LIMIT + 1) . ' ranges: the Range header is ignored, 200');
    ok($r->{body} eq $big, 'the whole file');
    ($raw, $r) = fetch('/big.bin', 'bytes=' . join(',', ('0-') x ($LIMIT + 1)));
    is($r->{status}, 200, ($LIMIT + 1) . ' overlapping ranges: 200');
    cmp_ok(length $raw, '<', $SIZE + 1024, 'and the file once');
};

subtest 'a 516-character MIME type in multipart part headers' => sub {
    my ($raw, $r) = fetch('/r.lt', 'bytes=0-9,500-509');
    is($r->{status}, 206, 'status 206');
    is($r->{headers}{'content-length'}, length $r->{body}, 'Content-Length is the body length');
    my $parts = multipart($r) || [];
    is(scalar @$parts, 2, 'two parts');
    is($parts->[$_] && $parts->[$_]{headers}{'content-type'}, $long_type, "part $_: the whole Content-Type") for 0, 1;
    is(join('|', map { $_->{body} } @$parts), substr($big, 0, 10) . '|' . substr($big, 500, 10), 'byte-exact');
    ok($s->alive, 'server alive');
};

subtest 'a 1114-character MIME type in a header line' => sub {
    my ($raw, $r) = fetch('/r.llt', 'bytes=0-9');
    is($r->{status}, 206, 'single range: 206');
    is($r->{headers}{'content-type'}, $longer_type, 'the whole Content-Type');
    is($r->{headers}{'content-range'}, "bytes 0-9/$SIZE", 'Content-Range survives');
    is($r->{body}, substr($big, 0, 10), 'body');
    ($raw, $r) = fetch('/r.llt', 'bytes=0-9,500-509');
    is($r->{status}, 206, 'two ranges: 206');
    my $parts = multipart($r) || [];
    is($parts->[1] && $parts->[1]{headers}{'content-type'}, $longer_type, 'part Content-Type');
    my $w = $s->get('/r.llt');
    is($w->{status}, 200, 'whole file: 200');
    is($w->{headers}{'content-type'}, $longer_type, 'the whole Content-Type');
    ok($w->{body} eq $big, 'body');
};

$s->stop;
done_testing;
