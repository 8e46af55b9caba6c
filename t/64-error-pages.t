# issue 8 #16: an error page is a path in the vhost. It is served from the
# location that path falls in, not from the location of the request that
# failed; and when the page itself cannot be served, the client still gets
# the status the request earned (with the built-in page), never the page's
# own 404.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  error_pages = { [404] = "/404.html", [403] = "/403-missing.html" },
  access = { deny { prefix = "/secret/" } },
  location "/other/" { root = "$DIR/other" },
  location "/own/" { root = "$DIR/own", error_pages = { [404] = "/errors/own404.html" } },
  location "/errors/" { root = "$DIR/errs" },
  location "/dirpage/" { error_pages = { [404] = "/d/" } },
}
vhost "nopage.test" {
  root = "$DIR/www",
  error_pages = { [404] = "/nowhere.html" },
}
EOF_CONF
    files => {
        'www/404.html'                => "vhost 404 page\n",
        'www/d/x.txt'                 => "a directory, not a page\n",
        'other/other/present.txt'     => "present\n",
        'errs/errors/own404.html'     => "own 404 page\n",
        'own/own/present.txt'         => "present\n",
    },
);

$s->run_cases(
    { name => 'a 404 in the vhost gets its page',
      request => { path => '/missing' }, status => 404, body => "vhost 404 page\n" },
    { name => 'a 404 under a location with its own root gets the vhost page',
      request => { path => '/other/missing' }, status => 404, body => "vhost 404 page\n" },
    { name => 'the location itself still serves from its root',
      request => { path => '/other/present.txt' }, status => 200, body => "present\n" },
    { name => "a location's own page is found under the location its path names",
      request => { path => '/own/missing' }, status => 404, body => "own 404 page\n" },
    { name => 'a 403 whose page file is missing stays 403, built-in page',
      request => { path => '/secret/x' }, status => 403, body => qr{<h1>403 Forbidden</h1>} },
    { name => 'a HEAD of it too',
      request => { method => 'HEAD', path => '/secret/x' }, status => 403 },
    { name => 'a 404 whose page is a directory stays 404, built-in page, no redirect',
      request => { path => '/dirpage/missing' }, status => 404, body => qr{<h1>404 Not Found</h1>},
      headers => { Location => undef } },
    { name => 'a 404 whose page is missing: 404, built-in page',
      request => { path => '/missing', host => 'nopage.test' }, status => 404, body => qr{<h1>404 Not Found</h1>} },
);

# Keep-alive: the error page answers and the next request is served as usual.
my $c = $s->connect;
$c->send(Luxd::request(path => '/secret/x') . Luxd::request(path => '/other/missing') . Luxd::request(path => '/other/present.txt'));
my @r = $c->responses(3);
is scalar(@r), 3, 'three answers on one connection';
is join(' ', map { $_->{status} } @r), '403 404 200', 'statuses in order';
is $r[1]{body}, "vhost 404 page\n", 'the page in the middle';
$c->close;
$s->stop;
done_testing;
