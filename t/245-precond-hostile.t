# issue 17 #3, review: preconditions with the odd forms RFC 9110 13 allows
# or forbids that t/210 does not send: obs-text in a tag, tabs, empty list
# elements, "*" inside a list, a list of 400 tags, the three date
# formats, dates at the ends of what a date can say, and a file that
# changes between two requests (the cache's stat revalidation must give
# the new file a new ETag, and the old ETag must then fail, 412 on a
# resume, never a 206 of the new bytes).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MTIME   = 1704164645;                       # Tue, 02 Jan 2024 03:04:05 GMT
my $LM      = 'Tue, 02 Jan 2024 03:04:05 GMT';
my $body    = join '', map { chr(65 + $_ % 26) } 0 .. 999;

my $s = Luxd->new(
    config => <<'LUA',
vhost "localhost" {
  default = true, root = "$DIR/www",
  error_pages = { [412] = "/e412.html" },
}
LUA
    files => { 'www/f.txt' => $body, 'www/g.txt' => $body, 'www/e412.html' => "page 412\n" },
    no_start => 1,
);
my $d = $s->dir;
utime $MTIME, $MTIME, "$d/www/f.txt", "$d/www/g.txt";
$s->start;

my $E = $s->get('/f.txt')->{headers}{etag};
like($E // '', qr/^"[^"]+"$/, 'a strong ETag') or BAIL_OUT('no ETag');
my $Ein = substr($E, 1, -1);

sub st {
    my ($m, $path, @h) = @_;
    return $s->http(method => $m, path => $path, headers => [@h]);
}

my $many = join(', ', map { "\"t$_\"" } 1 .. 400);
my @cases = (
    ['If-Match: obs-text tag',           ['If-Match' => "\"\x80\xff\""],          412],
    ['If-Match: tab before, comma after', ['If-Match' => "\t$E ,"],               200],
    ['If-Match: empty elements',         ['If-Match' => ", ,$E,,"],               200],
    ['If-Match: only commas',            ['If-Match' => ' , , '],                 412],
    ['If-Match: * in a list',            ['If-Match' => "*, $E"],                 412],
    ['If-Match: 400 tags, ETag last',  ['If-Match' => "$many, $E"],             200],
    ['If-Match: 400 tags, no ETag',    ['If-Match' => $many],                   412],
    ['If-Match: W/ lower-case w',        ['If-Match' => "w/$E"],                  412],
    ['If-Match: tag with a space in it', ['If-Match' => "\"$Ein \""],             412],
    ['If-Match: tag without quotes',     ['If-Match' => $Ein],                    412],
    ['If-None-Match: * in a list',       ['If-None-Match' => "*, \"x\""],         200],
    ['If-None-Match: 400 then ETag',   ['If-None-Match' => "$many, W/$E"],      304],
    ['If-None-Match: two lines',         ['If-None-Match' => '"x"', 'If-None-Match' => $E], 304],
    ['IUS asctime, a day before',        ['If-Unmodified-Since' => 'Mon Jan  1 00:00:00 2024'], 412],
    ['IUS asctime, the date',            ['If-Unmodified-Since' => 'Tue Jan  2 03:04:05 2024'], 200],
    ['IUS RFC 850, the date',            ['If-Unmodified-Since' => 'Tuesday, 02-Jan-24 03:04:05 GMT'], 200],
    ['IUS epoch',                        ['If-Unmodified-Since' => 'Thu, 01 Jan 1970 00:00:00 GMT'], 412],
    ['IUS year 9999',                    ['If-Unmodified-Since' => 'Fri, 31 Dec 9999 23:59:59 GMT'], 200],
    ['IUS year 0000 (not a date luxd takes: ignored, or before)', ['If-Unmodified-Since' => 'Sat, 01 Jan 0000 00:00:00 GMT'], qr/^(200|412)$/],
    ['IUS Feb 30 (invalid: ignored)',    ['If-Unmodified-Since' => 'Fri, 30 Feb 2024 00:00:00 GMT'], 200],
    ['IUS 24:00:00 before (invalid)',    ['If-Unmodified-Since' => 'Mon, 01 Jan 2024 24:00:00 GMT'], qr/^(200|412)$/],
    ['IUS not GMT (invalid: ignored)',   ['If-Unmodified-Since' => 'Mon, 01 Jan 2024 00:00:00 UTC'], 200],
    ['IUS trailing junk (invalid)',      ['If-Unmodified-Since' => 'Mon, 01 Jan 2024 00:00:00 GMTx'], 200],
    ['IUS two lines (invalid)',          ['If-Unmodified-Since' => 'Mon, 01 Jan 2024 00:00:00 GMT', 'If-Unmodified-Since' => 'Mon, 01 Jan 2024 00:00:00 GMT'], 200],
    ['Range + If-None-Match the ETag',   [Range => 'bytes=0-9', 'If-None-Match' => $E], 304],
    ['Range + If-Range weak ETag',       [Range => 'bytes=0-9', 'If-Range' => "W/$E"],  200],
    ['Range + If-Range two lines',       [Range => 'bytes=0-9', 'If-Range' => $E, 'If-Range' => $E], 200],
    ['Range + If-Range ETag with OWS',   [Range => 'bytes=0-9', 'If-Range' => " $E\t"], 206],
    ['Range + If-Range asctime date',    [Range => 'bytes=0-9', 'If-Range' => 'Tue Jan  2 03:04:05 2024'], 206],
);
for my $c (@cases) {
    my ($name, $h, $want) = @$c;
    for my $m ('GET', 'HEAD') {
        next if $m eq 'HEAD' && grep { $_ eq 'Range' } @$h;
        my $r = st($m, '/f.txt', @$h);
        my $w = ref $want ? $want : qr/^$want$/;
        like($r->{status} // 'none', $w, "$m $name");
        if (($r->{status} // 0) == 412) {
            is($r->{body}, $m eq 'HEAD' ? '' : "page 412\n", "$m $name: the site's 412 page");
        }
        if (($r->{status} // 0) == 206) {
            is($r->{body}, substr($body, 0, 10), "$m $name: the range");
        }
        if (($r->{status} // 0) == 200 && $m eq 'GET') {
            is($r->{body}, $body, "$m $name: the file");
        }
    }
}

# The file changes: once the cache has seen it (it looks again at most
# a second later), the ETag is new; the old one must fail If-Match,
# with and without a Range, and If-None-Match with the old one is 200.
subtest 'a file that changes between requests' => sub {
    my $old = st('GET', '/g.txt');
    my $Eold = $old->{headers}{etag};
    my $new = $body;
    $new =~ tr/A-Z/a-z/;                          # same size
    open my $fh, '+<:raw', "$d/www/g.txt" or die $!;  # in place: same inode
    print $fh $new;
    close $fh;
    utime $MTIME + 1, $MTIME + 1, "$d/www/g.txt";
    my ($r, $t0) = (undef, time);
    do { $r = st('GET', '/g.txt'); sleep 0.05 unless $r->{body} eq $new }
        until $r->{body} eq $new || time - $t0 > 10;
    is($r->{body}, $new, 'the new bytes are served');
    isnt($r->{headers}{etag}, $Eold, 'with a new ETag');
    my $a = st('GET', '/g.txt', 'If-Match' => $Eold, Range => 'bytes=0-9');
    is($a->{status}, 412, 'resume with the old ETag: 412');
    my $b = st('GET', '/g.txt', 'If-Range' => $Eold, Range => 'bytes=0-9');
    is($b->{status}, 200, 'If-Range the old ETag: the whole new file');
    is($b->{body}, $new, '... and its bytes');
    my $c = st('GET', '/g.txt', 'If-None-Match' => $Eold);
    is($c->{status}, 200, 'If-None-Match the old ETag: 200');
    my $e = st('HEAD', '/g.txt', 'If-Match' => $r->{headers}{etag});
    is($e->{status}, 200, 'HEAD, If-Match the new ETag: 200');
};

done_testing;
