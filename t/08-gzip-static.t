# gzip_static: file.gz served for file when the client accepts gzip.
use strict;
use warnings;
use Test::More;
use IO::Compress::Gzip qw(gzip $GzipError);
use lib 't/lib';
use Luxd;

my $js = "function hello() { return 'hello, world'; }\n" x 50;
gzip(\$js => \my $jsgz) or die $GzipError;
my $css = "body { margin: 0 }\n" x 20;

my %files = (
    'www/index.html'  => "<h1>home</h1>\n",
    'www/app.js'      => $js,
    'www/app.js.gz'   => $jsgz,
    'www/plain.css'   => $css,
);

my $s = Luxd->new(
    config => <<'LUA',
vhost "localhost" { default = true, root = "$DIR/www", index = { "index.html" }, gzip_static = true }
vhost "nogz.test" { root = "$DIR/www", gzip_static = false }
LUA
    files => \%files,
);

sub vary_has_ae { my ($r) = @_; (grep { lc($_) eq 'accept-encoding' } split /\s*,\s*/, $r->{headers}{vary} // '') ? 1 : 0 }

sub gz_ok {
    my ($ae, $name) = @_;
    my $r = $s->get('/app.js', 'Accept-Encoding' => $ae);
    check_response($r, { status => 200, body => $jsgz, headers => {
        'content-encoding' => 'gzip', 'content-length' => length $jsgz,
        'content-type' => qr{^(text|application)/javascript\b} } }, $name);
    ok(vary_has_ae($r), "$name: Vary: Accept-Encoding") or diag('Vary: ' . ($r->{headers}{vary} // 'none'));
    return $r;
}

sub plain_ok {
    my ($ae, $name) = @_;
    my $r = $s->get('/app.js', defined $ae ? ('Accept-Encoding' => $ae) : ());
    check_response($r, { status => 200, body => $js, headers => {
        'content-encoding' => undef, 'content-length' => length $js,
        'content-type' => qr{^(text|application)/javascript\b} } }, $name);
    ok(vary_has_ae($r), "$name: Vary: Accept-Encoding (a cache must know the answer depends on it)")
      or diag('Vary: ' . ($r->{headers}{vary} // 'none'));
    return $r;
}

my $g = gz_ok('gzip', 'Accept-Encoding: gzip');
gz_ok('gzip, deflate, br', 'gzip in a list');
gz_ok('br;q=1.0, gzip;q=0.5', 'gzip with q=0.5');
gz_ok('GZIP', 'coding names are case-insensitive');
gz_ok('deflate,gzip', 'list without spaces');
my $p = plain_ok(undef, 'no Accept-Encoding');
plain_ok('deflate, br', 'no gzip in the list');
plain_ok('gzip;q=0', 'gzip;q=0 refuses gzip');
plain_ok('gzip; q=0.000', 'gzip; q=0.000 refuses gzip');
plain_ok('identity', 'identity only');
plain_ok('xgzip', 'a coding that merely contains "gzip"');

isnt($g->{headers}{etag} // 'a', $p->{headers}{etag} // 'a', 'the gzip and plain variants have different ETags');

subtest 'HEAD on the gzip variant' => sub {
    my $h = $s->http(method => 'HEAD', path => '/app.js', headers => ['Accept-Encoding' => 'gzip']);
    check_response($h, { status => 200, body => '', headers => { 'content-encoding' => 'gzip', 'content-length' => length $jsgz } }, 'HEAD');
};

subtest 'conditional request on the gzip variant' => sub {
    my $r = $s->get('/app.js', 'Accept-Encoding' => 'gzip', 'If-None-Match' => $g->{headers}{etag} // '"x"');
    is($r->{status}, 304, 'its own ETag: 304');
    ok(vary_has_ae($r), '304 keeps Vary');
};

subtest 'no .gz next to the file: the plain file' => sub {
    my $r = $s->get('/plain.css', 'Accept-Encoding' => 'gzip');
    check_response($r, { status => 200, body => $css, headers => { 'content-encoding' => undef, 'content-type' => qr{^text/css\b} } }, 'plain.css');
};

subtest 'the .gz file asked for by name' => sub {
    my $r = $s->get('/app.js.gz', 'Accept-Encoding' => 'gzip');
    check_response($r, { status => 200, body => $jsgz, headers => { 'content-encoding' => undef,
        'content-type' => qr{^application/(x-)?gzip$} } }, '/app.js.gz as a gzip file');
};

subtest 'gzip_static = false' => sub {
    my $r = $s->get('/app.js', Host => 'nogz.test', 'Accept-Encoding' => 'gzip');
    check_response($r, { status => 200, body => $js, headers => { 'content-encoding' => undef } }, 'plain file');
};

subtest 'curl --compressed gets the original bytes' => sub {
    my $out = $s->curl('--compressed', $s->url('/app.js'));
    ok($out eq $js, 'decoded body equals the plain file') or diag('got ' . length($out) . ' bytes');
};

$s->stop;
done_testing;
