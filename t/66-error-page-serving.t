# issue 8 #16, found in review: an error page is served with the status the
# request earned and as the bytes it is. Two ways it was not: a page that is
# a directory, under a location with dir_listing, answered 200 with a
# listing; and with gzip_static the page's .gz sibling went out without
# Content-Encoding, so the client showed compressed bytes as the page.
use strict;
use warnings;
use Test::More;
use Luxd;

my $gz = "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03+HLOU\xe1\x02\x00\x8c\x9b\x8b\x91\x05\x00\x00\x00";
my $s = Luxd->new(
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  gzip_static = true,
  error_pages = { [404] = "/404.html" },
  location "/lst/" { dir_listing = true, error_pages = { [404] = "/errs/" } },
  location "/hidden/" { policy = function(r) if not r.error_status then return 403 end end },
  location "/pol/" { policy = function(r) return 401 end, error_pages = { [401] = "/hidden/401.html" } },
}
EOF_CONF
    files => {
        'www/404.html'    => "page\n",
        'www/404.html.gz' => $gz,
        'www/errs/a.txt'  => "a file in the page directory\n",
        'www/lst/d/b.txt' => "b\n",
        'www/hidden/401.html' => "hidden page\n",
    },
);

$s->run_cases(
    { name => 'a listed directory as a 404 page: 404, the built-in page, no listing',
      request => { path => '/lst/missing' }, status => 404, body => qr{<h1>404 Not Found</h1>} },
    { name => 'a listing still answers where it is asked for',
      request => { path => '/lst/d/' }, status => 200, body => qr{Index of /lst/d/} },
    { name => 'the page directory outside the listed location: 403',
      request => { path => '/errs/' }, status => 403 },
);
my $r = $s->get('/lst/missing');
unlike $r->{body}, qr/Index of|a\.txt/, 'no byte of the listing in the 404';

# As luxd.lua(5) says (ERROR PAGES): a page's location guards it as it guards
# a request (issue 17 #7, t/233), so pages that clients may not fetch
# themselves are kept behind a policy that lets only error pages through
# (r.error_status, nginx's `internal`).
$s->run_cases(
    { name => "a policy's 401 gets a page from a location clients may not read",
      request => { path => '/pol/x' }, status => 401, body => "hidden page\n" },
    { name => 'that location itself is closed to clients',
      request => { path => '/hidden/401.html' }, status => 403 },
);

$r = $s->http(path => '/missing', headers => [ 'Accept-Encoding' => 'gzip' ]);
is $r->{status}, 404, 'the gzip-accepting client gets a 404';
is $r->{body}, $gz, '... with the .gz page';
is $r->{headers}{'content-encoding'}, 'gzip', '... labelled Content-Encoding: gzip';
is $r->{headers}{vary}, 'Accept-Encoding', '... and Vary';
$r = $s->http(path => '/missing');
is $r->{status}, 404, 'a client without gzip gets a 404';
is $r->{body}, "page\n", '... with the plain page';
ok !defined $r->{headers}{'content-encoding'}, '... and no Content-Encoding';
is $r->{headers}{vary}, 'Accept-Encoding', '... but Vary';
$r = $s->http(method => 'HEAD', path => '/missing', headers => [ 'Accept-Encoding' => 'gzip' ]);
is $r->{headers}{'content-encoding'}, 'gzip', 'HEAD says the same';
is $r->{headers}{'content-length'}, length($gz), '... with the .gz length';
$s->stop;
done_testing;
