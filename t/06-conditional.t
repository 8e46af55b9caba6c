# ETag, Last-Modified, If-None-Match, If-Modified-Since, per-vhost
# cache_control and headers, etag/last_modified switches, revalidation.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my $MTIME = 1704164645;                       # Tue, 02 Jan 2024 03:04:05 GMT
my $LM    = 'Tue, 02 Jan 2024 03:04:05 GMT';
my %files = (
    'www/index.html'  => "<h1>home</h1>\n",
    'www/a.txt'       => "conditional body\n",
    'www/b.txt'       => "another file\n",
    'plain/a.txt'     => "plain vhost\n",
);

my $s = Luxd->new(
    config => <<'LUA',
vhost "localhost" {
  default = true, root = "$DIR/www", index = { "index.html" },
  cache_control = "public, max-age=60",
  headers = { ["X-Frame-Options"] = "DENY", ["X-Test"] = "yes" },
}
vhost "bare.test" { root = "$DIR/plain", etag = false, last_modified = false }
vhost "noetag.test" { root = "$DIR/plain", etag = false }
vhost "nolm.test" { root = "$DIR/plain", last_modified = false }
LUA
    files => \%files,
    no_start => 1,
);
utime $MTIME, $MTIME, map { $s->dir . "/$_" } keys %files;
$s->start;

my $r0 = $s->get('/a.txt');
my $etag = $r0->{headers}{etag};

subtest 'validators present by default' => sub {
    is($r0->{status}, 200, 'GET /a.txt: 200');
    like($etag, qr{^(W/)?"[\x21\x23-\x7e]+"$}, 'ETag is a quoted entity-tag');
    is($r0->{headers}{'last-modified'}, $LM, 'Last-Modified is the file mtime');
    my $e2 = $s->get('/b.txt')->{headers}{etag};
    isnt($e2, $etag, 'different files have different ETags');
    is($s->get('/a.txt')->{headers}{etag}, $etag, 'the ETag is stable');
};
$etag //= '"none"';
(my $strong = $etag) =~ s{^W/}{};

my $C = 'public, max-age=60';
my %vh = ('cache-control' => $C, 'x-frame-options' => 'DENY', 'x-test' => 'yes');

sub not_modified {
    my ($name, @h) = @_;
    my ($raw, $info) = $s->raw(Luxd::request(path => '/a.txt', headers => [@h], close => 1));
    my @r = parse_responses($raw);
    is(scalar @r, 1, "$name: one response");
    check_response($r[0], { status => 304, body => '', headers => { etag => $etag, %vh } }, $name);
    my $end = index($raw, "\r\n\r\n");
    is(length($raw), $end + 4, "$name: no body bytes after the header") if $end >= 0;
}

sub full { my ($name, @h) = @_;
    check_response($s->http(path => '/a.txt', headers => [@h]),
        { status => 200, body => "conditional body\n", headers => { etag => $etag } }, $name) }

subtest 'If-None-Match' => sub {
    not_modified('exact', 'If-None-Match' => $etag);
    not_modified('strong form', 'If-None-Match' => $strong);
    not_modified('weak form (weak comparison)', 'If-None-Match' => "W/$strong");
    not_modified('in a list', 'If-None-Match' => qq{"xyz", $etag, "abc"});
    not_modified('in a list without spaces', 'If-None-Match' => qq{"xyz",$etag});
    not_modified('star', 'If-None-Match' => '*');
    full('no match', 'If-None-Match' => '"no-such-etag"');
    full('list without a match', 'If-None-Match' => '"a", "b"');
    my $h = $s->http(method => 'HEAD', path => '/a.txt', headers => ['If-None-Match' => $etag]);
    is($h->{status}, 304, 'HEAD with a matching If-None-Match: 304');
};

subtest 'If-Modified-Since' => sub {
    not_modified('equal date', 'If-Modified-Since' => $LM);
    not_modified('later date', 'If-Modified-Since' => 'Wed, 03 Jan 2024 00:00:00 GMT');
    not_modified('RFC 850 date, equal', 'If-Modified-Since' => 'Tuesday, 02-Jan-24 03:04:05 GMT');
    not_modified('asctime date, equal', 'If-Modified-Since' => 'Tue Jan  2 03:04:05 2024');
    full('earlier date', 'If-Modified-Since' => 'Tue, 02 Jan 2024 03:04:04 GMT');
    full('much earlier date', 'If-Modified-Since' => 'Thu, 01 Jan 1970 00:00:01 GMT');
    full('invalid date', 'If-Modified-Since' => 'yesterday');
};

subtest 'If-None-Match takes precedence over If-Modified-Since' => sub {
    full('INM not matching, IMS equal', 'If-None-Match' => '"other"', 'If-Modified-Since' => $LM);
    not_modified('INM matching, IMS earlier', 'If-None-Match' => $etag, 'If-Modified-Since' => 'Thu, 01 Jan 1970 00:00:01 GMT');
};

subtest 'cache_control and headers of the vhost' => sub {
    check_response($r0, { headers => \%vh }, 'on the 200');
    check_response($s->get('/'), { status => 200, headers => \%vh }, 'index');
    my $nf = $s->get('/nope');
    check_response($nf, { status => 404, headers => { 'x-frame-options' => 'DENY', 'x-test' => 'yes' } }, '404 too');
    is(scalar @{ $r0->{hlist}{'cache-control'} || [] }, 1, 'one Cache-Control');
};

subtest 'etag = false and last_modified = false' => sub {
    my $r = $s->get('/a.txt', Host => 'bare.test');
    check_response($r, { status => 200, body => "plain vhost\n", headers => { etag => undef, 'last-modified' => undef,
        'cache-control' => undef, 'x-test' => undef } }, 'both off');
    $r = $s->get('/a.txt', Host => 'noetag.test');
    check_response($r, { status => 200, headers => { etag => undef, 'last-modified' => $LM } }, 'etag off');
    my $r2 = $s->get('/a.txt', Host => 'noetag.test', 'If-Modified-Since' => $LM);
    is($r2->{status}, 304, 'etag off: If-Modified-Since still gives 304');
    $r = $s->get('/a.txt', Host => 'nolm.test');
    check_response($r, { status => 200, headers => { etag => qr/"/, 'last-modified' => undef } }, 'last_modified off');
    $r2 = $s->get('/a.txt', Host => 'nolm.test', 'If-None-Match' => $r->{headers}{etag} // '"x"');
    is($r2->{status}, 304, 'last_modified off: If-None-Match still gives 304');
};

subtest 'a changed file is revalidated (at most a second later)' => sub {
    $s->write_file('www/a.txt', "changed, and longer than before\n");
    utime $MTIME + 100, $MTIME + 100, $s->dir . '/www/a.txt';
    sleep 2.2;
    my $r = $s->get('/a.txt');
    check_response($r, { status => 200, body => "changed, and longer than before\n",
        headers => { 'last-modified' => 'Tue, 02 Jan 2024 03:05:45 GMT', 'content-length' => 32 } }, 'new content');
    isnt($r->{headers}{etag}, $etag, 'new ETag');
    my $old = $s->get('/a.txt', 'If-None-Match' => $etag);
    is($old->{status}, 200, 'the old ETag no longer matches');
    my $new = $s->get('/a.txt', 'If-None-Match' => $r->{headers}{etag} // '"x"');
    is($new->{status}, 304, 'the new one does');
    # Same size, same mtime second, different content: the cache must not lie
    # about size; a content change with a new mtime is seen.
    $s->write_file('www/a.txt', "CHANGED, AND LONGER THAN BEFORE\n");
    utime $MTIME + 200, $MTIME + 200, $s->dir . '/www/a.txt';
    sleep 2.2;
    check_response($s->get('/a.txt'), { status => 200, body => "CHANGED, AND LONGER THAN BEFORE\n" }, 'same size, new mtime: new content');
    unlink $s->dir . '/www/b.txt';
    sleep 2.2;
    is($s->get('/b.txt')->{status}, 404, 'a deleted file is 404 after revalidation');
};

$s->stop;
done_testing;
