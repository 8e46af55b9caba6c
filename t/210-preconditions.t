# issue 17 #3: preconditions on static files, RFC 9110 13.2.2's order of
# evaluation (If-Match, If-Unmodified-Since, If-None-Match,
# If-Modified-Since, If-Range), for GET and HEAD, on a file at the
# small-file cache's limit (held in memory with pre-built headers,
# LX_SMALL_FILE = 64 KiB in src/io/filecache.h) and one byte past it (an
# open fd), on gzip_static variants (each with its own ETag and date), on
# vhosts that send no ETag or no Last-Modified, and the resume case: a
# Range with an If-Match that no longer holds is 412, never 206 (a client
# would splice bytes of a changed file into its copy).
use strict;
use warnings;
use Test::More;
use IO::Compress::Gzip qw(gzip $GzipError);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MTIME   = 1704164645;                          # Tue, 02 Jan 2024 03:04:05 GMT
my $LM      = 'Tue, 02 Jan 2024 03:04:05 GMT';
my $EARLIER = 'Tue, 02 Jan 2024 03:04:04 GMT';
my $LATER   = 'Wed, 03 Jan 2024 00:00:00 GMT';
my $LIMIT   = 64 * 1024;                           # LX_SMALL_FILE

srand(17);
my $small = join '', map { chr(int rand 256) } 1 .. $LIMIT;        # at the limit: in memory
my $large = join '', map { chr(int rand 256) } 1 .. $LIMIT + 1;    # one past: an fd
my $js = "function hello() { return 'hello, world'; }\n" x 50;
gzip(\$js => \my $jsgz) or die $GzipError;

my $s = Luxd->new(
    config => <<'LUA',
vhost "localhost" {
  default = true, root = "$DIR/www", gzip_static = true,
  location "/status" { status = true },
}
vhost "noetag.test" { root = "$DIR/plain", etag = false }
vhost "bare.test" { root = "$DIR/plain", etag = false, last_modified = false }
vhost "page.test" { root = "$DIR/www", error_pages = { [412] = "/err412.html" } }
vhost "count.test" { root = "$DIR/plain" }
LUA
    files => {
        'www/small.bin'    => $small,
        'www/large.bin'    => $large,
        'www/app.js'       => $js,
        'www/app.js.gz'    => $jsgz,
        'www/future.txt'   => "stamped in the future\n" x 10,
        'www/err412.html'  => "<p>the page for 412</p>\n",
        'plain/a.txt'      => "plain vhost\n" x 20,
        'plain/count.txt'  => "counted\n",
    },
    no_start => 1,
);
my $d = $s->dir;
utime $MTIME, $MTIME, map { "$d/$_" } qw(www/small.bin www/large.bin www/app.js www/err412.html
                                         plain/a.txt plain/count.txt);
utime $MTIME + 100, $MTIME + 100, "$d/www/app.js.gz";    # the variant is newer
my $FUTURE = int(time) + 365 * 86400;
utime $FUTURE, $FUTURE, "$d/www/future.txt";
$s->start;

my $RANGE = 'bytes=10-49';

# One request; headers are name => value pairs with ETAG and LM put in.
sub ask {
    my ($method, $path, $hdrs, %v) = @_;
    my @h = @$hdrs;
    for (my $i = 1; $i < @h; $i += 2) {
        $h[$i] =~ s/\bETAG\b/$v{etag}/g if defined $v{etag};
        $h[$i] =~ s/\bLM\b/$v{lm}/g      if defined $v{lm};
    }
    return $s->http(method => $method, path => $path, host => $v{host} // 'localhost', headers => \@h);
}

# Checks one answer: status, and the body: 'full', 'part' (the Range's
# bytes), 'none' (304, or any HEAD), 'e412' (the built-in 412 page).
sub expect {
    my ($r, $method, $status, $body, $bytes, $name, %o) = @_;
    my %want = (status => $status);
    $body = 'none' if $method eq 'HEAD';
    $want{body} = $body eq 'full' ? $bytes
                : $body eq 'part' ? substr($bytes, 10, 40)
                : $body eq 'none' ? ''
                : $body eq 'e412' ? qr{^<!DOCTYPE html>.*412 Precondition Failed}s
                :                   $body;
    $want{headers}{'content-range'} = $status == 206 ? 'bytes 10-49/' . length($bytes) : undef;
    $want{headers}{etag} = $o{etag} if $status == 200 || $status == 206 || $status == 304;
    $want{headers}{'content-type'} = qr{^text/html} if $status == 412 && !$o{page};
    $want{headers}{'content-length'} = length($bytes) if $status == 200;
    check_response($r, \%want, "$method $name");
}

# [name, [headers], status, body] for every file; ETAG is its ETag, LM
# its Last-Modified.
my @rules = (
    ['no condition',                         [],                                  200, 'full'],
    # 1. If-Match (strong comparison)
    ['If-Match: the ETag',                   ['If-Match' => 'ETAG'],              200, 'full'],
    ['If-Match: another',                    ['If-Match' => '"x"'],               412, 'e412'],
    ['If-Match: *',                          ['If-Match' => '*'],                 200, 'full'],
    ['If-Match: the ETag in a list',         ['If-Match' => '"x", ETAG, "y"'],    200, 'full'],
    ['If-Match: weak form',                  ['If-Match' => 'W/ETAG'],            412, 'e412'],
    ['If-Match: malformed (a bare token)',   ['If-Match' => 'x'],                 412, 'e412'],
    ['If-Match: malformed after a match',    ['If-Match' => 'ETAG, "x'],          412, 'e412'],
    ['If-Match: empty',                      ['If-Match' => ''],                  412, 'e412'],
    ['If-Match on two lines, ETag second',   ['If-Match' => '"x"', 'If-Match' => 'ETAG'], 200, 'full'],
    ['If-Match on two lines, ETag first',    ['If-Match' => 'ETAG', 'If-Match' => '"x"'], 200, 'full'],
    # 2. If-Unmodified-Since
    ['If-Unmodified-Since: Last-Modified',   ['If-Unmodified-Since' => 'LM'],     200, 'full'],
    ['If-Unmodified-Since: a second before', ['If-Unmodified-Since' => $EARLIER], 412, 'e412'],
    ['If-Unmodified-Since: later',           ['If-Unmodified-Since' => $LATER],   200, 'full'],
    ['If-Unmodified-Since: invalid',         ['If-Unmodified-Since' => 'yesterday'], 200, 'full'],
    ['If-Unmodified-Since: RFC 850, before', ['If-Unmodified-Since' => 'Monday, 01-Jan-24 00:00:00 GMT'], 412, 'e412'],
    ['If-Match true: IUS ignored',           ['If-Match' => 'ETAG', 'If-Unmodified-Since' => $EARLIER], 200, 'full'],
    ['If-Match false, IUS true',             ['If-Match' => '"x"', 'If-Unmodified-Since' => $LATER], 412, 'e412'],
    # 3. If-None-Match (weak comparison)
    ['If-None-Match: the ETag',              ['If-None-Match' => 'ETAG'],         304, 'none'],
    ['If-None-Match: weak form',             ['If-None-Match' => 'W/ETAG'],       304, 'none'],
    ['If-None-Match: *',                     ['If-None-Match' => '*'],            304, 'none'],
    ['If-None-Match: another',               ['If-None-Match' => '"x"'],          200, 'full'],
    # 4. If-Modified-Since
    ['If-Modified-Since: Last-Modified',     ['If-Modified-Since' => 'LM'],       304, 'none'],
    ['If-Modified-Since: a second before',   ['If-Modified-Since' => $EARLIER],   200, 'full'],
    ['INM false: IMS ignored',               ['If-None-Match' => '"x"', 'If-Modified-Since' => 'LM'], 200, 'full'],
    # The order between the steps.
    ['If-Match false, If-None-Match true',   ['If-Match' => '"x"', 'If-None-Match' => 'ETAG'], 412, 'e412'],
    ['IUS false, If-None-Match true',        ['If-Unmodified-Since' => $EARLIER, 'If-None-Match' => 'ETAG'], 412, 'e412'],
    ['IUS false, IMS true',                  ['If-Unmodified-Since' => $EARLIER, 'If-Modified-Since' => 'LM'], 412, 'e412'],
    ['If-Match true, If-None-Match true',    ['If-Match' => 'ETAG', 'If-None-Match' => 'ETAG'], 304, 'none'],
    # 5. Range and If-Range
    ['Range',                                [Range => $RANGE],                   206, 'part'],
    ['resume: If-Match another + Range',     ['If-Match' => '"x"', Range => $RANGE], 412, 'e412'],
    ['resume: If-Match the ETag + Range',    ['If-Match' => 'ETAG', Range => $RANGE], 206, 'part'],
    ['IUS before + Range',                   ['If-Unmodified-Since' => $EARLIER, Range => $RANGE], 412, 'e412'],
    ['IUS Last-Modified + Range',            ['If-Unmodified-Since' => 'LM', Range => $RANGE], 206, 'part'],
    ['If-Range: the ETag',                   ['If-Range' => 'ETAG', Range => $RANGE], 206, 'part'],
    ['If-Range: weak form',                  ['If-Range' => 'W/ETAG', Range => $RANGE], 200, 'full'],
    ['If-Range: another',                    ['If-Range' => '"x"', Range => $RANGE], 200, 'full'],
    ['If-Range: Last-Modified',              ['If-Range' => 'LM', Range => $RANGE], 206, 'part'],
    ['If-Range: a second before',            ['If-Range' => $EARLIER, Range => $RANGE], 200, 'full'],
    ['If-None-Match true + If-Range false',  ['If-None-Match' => 'ETAG', 'If-Range' => '"x"', Range => $RANGE], 304, 'none'],
    ['If-Match true + If-Range false',       ['If-Match' => 'ETAG', 'If-Range' => '"x"', Range => $RANGE], 200, 'full'],
);

for my $f (['small.bin', $small, 'at the cache limit'], ['large.bin', $large, 'one past the limit']) {
    my ($file, $bytes, $what) = @$f;
    my $r0 = $s->get("/$file");
    my $etag = $r0->{headers}{etag};
    is($r0->{headers}{'last-modified'}, $LM, "$file: Last-Modified");
    like($etag // '', qr/^"[\x21\x23-\x7e]+"$/, "$file: a strong ETag") or next;
    subtest "$file ($what)" => sub {
        for my $rule (@rules) {
            my ($name, $hdrs, $status, $body) = @$rule;
            for my $m ('GET', 'HEAD') {
                # HEAD has no ranges: the whole file's headers (200).
                next if $m eq 'HEAD' && grep { $_ eq 'Range' } @$hdrs;
                my $r = ask($m, "/$file", $hdrs, etag => $etag, lm => $LM);
                expect($r, $m, $status, $body, $bytes, $name, etag => $etag);
            }
        }
    };
}

subtest 'gzip_static: the conditions are the chosen variant\'s' => sub {
    my $g = $s->get('/app.js', 'Accept-Encoding' => 'gzip');
    my $p = $s->get('/app.js');
    my ($eg, $ep) = ($g->{headers}{etag} // '"g"', $p->{headers}{etag} // '"p"');
    is($g->{headers}{'content-encoding'}, 'gzip', 'the .gz variant is served');
    isnt($eg, $ep, 'the variants have their own ETags');
    my $LMGZ = 'Tue, 02 Jan 2024 03:05:45 GMT';
    is($g->{headers}{'last-modified'}, $LMGZ, 'and their own dates');
    my @AE = ('Accept-Encoding' => 'gzip');
    my @cases = (
        ['gzip, If-Match its ETag',          [@AE, 'If-Match' => $eg], 200, 'full', $jsgz, $eg],
        ['gzip, If-Match the plain ETag',    [@AE, 'If-Match' => $ep], 412, 'e412', $jsgz],
        ['plain, If-Match the gzip ETag',    ['If-Match' => $eg],      412, 'e412', $js],
        ['plain, If-Match its ETag',         ['If-Match' => $ep],      200, 'full', $js, $ep],
        ['gzip, If-None-Match its ETag',     [@AE, 'If-None-Match' => $eg], 304, 'none', $jsgz, $eg],
        ['gzip, If-None-Match the plain one', [@AE, 'If-None-Match' => $ep], 200, 'full', $jsgz, $eg],
        ['gzip, If-Range its ETag',          [@AE, 'If-Range' => $eg, Range => $RANGE], 206, 'part', $jsgz, $eg],
        ['gzip, If-Range the plain ETag',    [@AE, 'If-Range' => $ep, Range => $RANGE], 200, 'full', $jsgz, $eg],
        ['gzip, If-Range its date',          [@AE, 'If-Range' => $LMGZ, Range => $RANGE], 206, 'part', $jsgz, $eg],
        ['gzip, If-Range the plain date',    [@AE, 'If-Range' => $LM, Range => $RANGE], 200, 'full', $jsgz, $eg],
        ['gzip, If-Unmodified-Since the plain date', [@AE, 'If-Unmodified-Since' => $LM], 412, 'e412', $jsgz],
        ['plain, If-Unmodified-Since its date', ['If-Unmodified-Since' => $LM], 200, 'full', $js, $ep],
        ['gzip, resume with the plain ETag', [@AE, 'If-Match' => $ep, Range => $RANGE], 412, 'e412', $jsgz],
    );
    for my $c (@cases) {
        my ($name, $hdrs, $status, $body, $bytes, $etag) = @$c;
        for my $m ('GET', 'HEAD') {
            next if $m eq 'HEAD' && grep { $_ eq 'Range' } @$hdrs;
            expect(ask($m, '/app.js', $hdrs), $m, $status, $body, $bytes, $name, etag => $etag);
        }
    }
};

subtest 'a vhost without ETag or Last-Modified' => sub {
    my $body = "plain vhost\n" x 20;
    my @cases = (
        # etag = false: no tag can match; "*" still does, the file is there.
        ['noetag.test', 'If-Match: a tag',           ['If-Match' => '"x"'],              412, 'e412'],
        ['noetag.test', 'If-Match: *',               ['If-Match' => '*'],                200, 'full'],
        ['noetag.test', 'If-None-Match: *',          ['If-None-Match' => '*'],           304, 'none'],
        ['noetag.test', 'If-None-Match: a tag',      ['If-None-Match' => '"x"'],         200, 'full'],
        ['noetag.test', 'If-Unmodified-Since before', ['If-Unmodified-Since' => $EARLIER], 412, 'e412'],
        ['noetag.test', 'If-Range: a tag',           ['If-Range' => '"x"', Range => $RANGE], 200, 'full'],
        ['noetag.test', 'If-Range: the date',        ['If-Range' => $LM, Range => $RANGE], 206, 'part'],
        # and last_modified = false: dates are not compared with a date
        # the server does not send (RFC 9110 13.1.3, 13.1.4: none available).
        ['bare.test',   'If-Match: a tag',           ['If-Match' => '"x"'],              412, 'e412'],
        ['bare.test',   'If-Match: *',               ['If-Match' => '*'],                200, 'full'],
        ['bare.test',   'If-Unmodified-Since before', ['If-Unmodified-Since' => $EARLIER], 200, 'full'],
        ['bare.test',   'If-Modified-Since later',   ['If-Modified-Since' => $LATER],    200, 'full'],
        ['bare.test',   'If-Range: the date',        ['If-Range' => $LM, Range => $RANGE], 200, 'full'],
        ['bare.test',   'resume: If-Match a tag + Range', ['If-Match' => '"x"', Range => $RANGE], 412, 'e412'],
    );
    for my $c (@cases) {
        my ($host, $name, $hdrs, $status, $kind) = @$c;
        for my $m ('GET', 'HEAD') {
            next if $m eq 'HEAD' && grep { $_ eq 'Range' } @$hdrs;
            my $r = ask($m, '/a.txt', $hdrs, host => $host);
            expect($r, $m, $status, $kind, $body, "$host: $name", etag => undef);
        }
    }
};

subtest 'If-Range with a date that is no strong validator' => sub {
    # Stamped a year ahead: its second is not over, the file may still
    # change within it, so the date cannot vouch for the bytes (8.8.2.2).
    my $r0 = $s->get('/future.txt');
    my ($etag, $lm) = ($r0->{headers}{etag}, $r0->{headers}{'last-modified'});
    my $body = "stamped in the future\n" x 10;
    expect(ask('GET', '/future.txt', ['If-Range' => $lm, Range => $RANGE]), 'GET', 200, 'full', $body,
           'future: If-Range its date', etag => $etag);
    expect(ask('GET', '/future.txt', ['If-Range' => $etag, Range => $RANGE]), 'GET', 206, 'part', $body,
           'future: If-Range its ETag', etag => $etag);
};

subtest '412 is an error like any other' => sub {
    # The site's error page for 412, GET and HEAD.
    my $r = ask('GET', '/small.bin', ['If-Match' => '"x"'], host => 'page.test');
    expect($r, 'GET', 412, "<p>the page for 412</p>\n", '', 'error_pages [412]', page => 1);
    $r = ask('HEAD', '/small.bin', ['If-Match' => '"x"'], host => 'page.test');
    expect($r, 'HEAD', 412, 'none', '', 'error_pages [412]', page => 1);
    # The connection stays usable after a 412.
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/count.txt', host => 'count.test', headers => ['If-Match' => '"x"'])
           . Luxd::request(path => '/count.txt', host => 'count.test', close => 1));
    my @rr = $c->responses(2);
    $c->close;
    is(scalar @rr, 2, 'two answers on one connection');
    is($rr[0]{status}, 412, 'first: 412');
    is($rr[1] && $rr[1]{status}, 200, 'then the file: keep-alive after a 412');
    for (1 .. 2) {
        is(ask('GET', '/count.txt', ['If-Match' => '"x"'], host => 'count.test')->{status}, 412, "412 number " . ($_ + 1));
    }
    # Counted as 4xx (three) and 2xx (one) for the vhost, once the answers are out.
    my %want = ('4xx' => 3, '2xx' => 1);
    my %got;
    my $deadline = time + 5;
    while (time < $deadline) {
        my $m = $s->get('/status?format=prometheus')->{body} // '';
        %got = map { $_ => ($m =~ /^luxd_requests_total\{vhost="count\.test",class="\Q$_\E"\} (\d+)$/m ? $1 : -1) } keys %want;
        last if $got{'4xx'} == 3 && $got{'2xx'} == 1;
        sleep 0.05;
    }
    is_deeply(\%got, \%want, 'luxd_requests_total counts the 412s');
};

subtest 'the resume request split at every byte' => sub {
    # The new field names reach the handler however the head arrives: the
    # name or value cut anywhere, If-Match and If-Unmodified-Since still
    # say 412, never 206.
    for my $f (['If-Match', '"x"'], ['If-Unmodified-Since', $EARLIER]) {
        my $req = Luxd::request(path => '/small.bin', headers => [$f->[0] => $f->[1], Range => $RANGE], close => 1);
        my @bad;
        for my $at (1 .. length($req) - 1) {
            my $raw = $s->raw(undef, pieces => [substr($req, 0, $at), substr($req, $at)], delay => 0.01);
            my ($r) = parse_responses($raw);
            push @bad, "$at: " . ($r ? $r->{status} // '?' : 'none') unless $r && ($r->{status} // 0) == 412;
        }
        is(scalar @bad, 0, "$f->[0]: 412 at each of " . (length($req) - 1) . ' split points') or diag(join ', ', @bad);
    }
};

ok($s->stop, 'stopped cleanly');
my @l412 = grep { m{"GET /count\.txt HTTP/1\.1" 412 } } split /\n/, $s->access_log;
is(scalar @l412, 3, 'each 412 has its access log line') or diag($s->access_log);

done_testing;
