# issue 9: an error page is an internal redirect. The failed request
# becomes a GET of the page's path, the location is chosen again for that
# path, and its handler serves the page with the status the request earned.
# When the page cannot be served, the client gets luxd's built-in page for
# that original status (never the page's own 404), and a page is never
# redirected again (no loops). doc/luxd.lua.5 "ERROR PAGES"; t/64 and t/66
# hold the cases of issue 8.
#
# Part 1 runs on the normal binary; what today's luxd already does is
# marked "(today)", the rest is new. Part 2 needs build/luxd-test (handlers
# that return a status or decline) and is all new.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $H = "Host: localhost\r\n";
my %PAGE = (
    404 => "<p>the 404 page</p>\n",
    405 => "<p>the 405 page</p>\n",
    500 => "<p>the 500 page</p>\n",
    503 => "<p>the 503 page, a little longer than the others</p>\n",
    own404 => "<p>the location's own 404 page</p>\n",
    own503 => "<p>the location's own 503 page</p>\n",
    err404 => "<p>the 404 page of the /errors/ location</p>\n",
);
my %FILES = (
    'www/a.txt'     => "aaa\n",
    'www/index.html' => "home\n",
    # The pages live under the /errors/ location's own root, not the vhost's.
    'errpages/errors/404.html'    => $PAGE{404},
    'errpages/errors/405.html'    => $PAGE{405},
    'errpages/errors/500.html'    => $PAGE{500},
    'errpages/errors/503.html'    => $PAGE{503},
    'errpages/errors/own404.html' => $PAGE{own404},
    'errpages/errors/own503.html' => $PAGE{own503},
    'errpages/errors/err404.html' => $PAGE{err404},
    # Decoys: the same names under the vhost's root must not be served.
    'www/errors/404.html' => "wrong root\n",
    'www/errors/405.html' => "wrong root\n",
);

sub vhost {
    my ($extra) = @_;
    return <<"EOF_CONF";
vhost "localhost" {
  default = true,
  root = "\$DIR/www",
  error_pages = { [404] = "/errors/404.html", [405] = "/errors/405.html", [500] = "/errors/500.html",
                  [503] = "/errors/503.html", [403] = "/errors/missing-403.html" },
  access = { deny { prefix = "/secret/" } },
  location "/errors/" { root = "\$DIR/errpages", error_pages = { [404] = "/errors/err404.html" } },
  location "/own/" { error_pages = { [404] = "/errors/own404.html" } },
  location "/loop/" { error_pages = { [404] = "/loop/missing.html" } },
  location "/ping/" { error_pages = { [404] = "/pong/p.html" } },
  location "/pong/" { error_pages = { [404] = "/ping/p.html" } },
  location "/gone/" { error_pages = { [404] = "/errors/gone.html" } },
$extra}
EOF_CONF
}

my $BUILTIN = sub { my ($st) = @_; qr{<h1>$st [A-Z]} };

# --- part 1: static handlers, normal binary -------------------------------
{
    my $s = Luxd->new(config => vhost(''), files => \%FILES);
    $s->run_cases(
        { name => '(today) a missing file: 404 with the page from the /errors/ root',
          request => { path => '/missing.html' }, status => 404, body => $PAGE{404},
          headers => { 'Content-Length' => length $PAGE{404} } },
        { name => '(today) the same in a nested path',
          request => { path => '/no/such/dir/x' }, status => 404, body => $PAGE{404} },
        { name => '(today) HEAD of a missing file: 404, the length of the page, no body',
          request => { method => 'HEAD', path => '/missing.html' }, status => 404,
          headers => { 'Content-Length' => length $PAGE{404} } },
        { name => "(today) a location's own error_pages",
          request => { path => '/own/missing' }, status => 404, body => $PAGE{own404} },
        { name => '(today) a 403 whose page is missing: 403, the built-in page',
          request => { path => '/secret/x' }, status => 403, body => $BUILTIN->(403) },
        # /errors/gone.html falls in /errors/, whose own 404 page exists: a
        # page is not redirected again, so the client gets the built-in 404,
        # not /errors/err404.html.
        { name => '(today) a 404 whose page is missing in a location with its own pages: the built-in 404',
          request => { path => '/gone/x' }, status => 404, body => $BUILTIN->(404) },
        { name => '(today) a page whose own path would get that page again: built-in 404, no loop',
          request => { path => '/loop/x' }, status => 404, body => $BUILTIN->(404) },
        { name => '(today) two locations whose pages name each other: built-in 404, no loop',
          request => { path => '/ping/x' }, status => 404, body => $BUILTIN->(404) },
        { name => "(today) a request under /errors/ gets that location's page",
          request => { path => '/errors/nothing' }, status => 404, body => $PAGE{err404} },
        # The redirect is a GET of the page, so the static handler serves it
        # to a POST, PUT or DELETE (today). New: the 405 with a page says
        # Allow, as the built-in one does (t/01; RFC 9110 15.5.6: a 405 MUST
        # carry Allow); today's page answer drops it.
        { name => 'POST to a static file: 405 with the 405 page (today), Allow: GET, HEAD (new)',
          request => { method => 'POST', path => '/a.txt', body => 'hello' }, status => 405, body => $PAGE{405},
          headers => { Allow => qr/^GET, HEAD$/, 'Content-Length' => length $PAGE{405} } },
        { name => 'DELETE of a static file: 405 with the 405 page (today), Allow (new)',
          request => { method => 'DELETE', path => '/a.txt' }, status => 405, body => $PAGE{405},
          headers => { Allow => qr/\bGET\b/ } },
        { name => '(today) PUT with a chunked body: 405 with the 405 page',
          request => "PUT /index.html HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
          status => 405, body => $PAGE{405} },
        { name => '(today) POST to a missing file: 405 (the method is the first thing wrong) with its page, or 404 with its page',
          request => { method => 'POST', path => '/missing.html', body => 'x' }, status => [404, 405],
          body => qr/^<p>the 40[45] page<\/p>\n$/ },
    );

    # Error pages on a keep-alive connection: each answer whole, the bodies
    # of the refused requests read and dropped, the next request served.
    my $c = $s->connect;
    $c->send("GET /missing HTTP/1.1\r\n$H\r\n"
           . "POST /a.txt HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello"
           . "HEAD /missing HTTP/1.1\r\n$H\r\n"
           . "GET /a.txt HTTP/1.1\r\n$H\r\n");
    my @r = $c->responses(4, head => [0, 0, 1, 0], timeout => 10);
    is(join(' ', map { $_->{status} // '?' } @r), '404 405 404 200', 'four answers in order on one connection');
    is($r[0]{body}, $PAGE{404}, 'the 404 page') if @r > 0;
    is($r[1]{body}, $PAGE{405}, 'the 405 page') if @r > 1;
    is($r[3]{body}, "aaa\n", 'then the file') if @r > 3;
    $c->close;
    ok($s->stop, 'part 1: the server stops cleanly');
}

# --- part 2: handlers that return a status, build/luxd-test ----------------
{
    my $s = Luxd->new(test_handlers => 1, files => \%FILES, config => vhost(<<'EOF_LOC'));
  location "/t/" { test_handler = true },
  location "/t2/" { test_handler = true, error_pages = { [503] = "/errors/own503.html" } },
  location "/t3/" { test_handler = true, error_pages = { [503] = "/t/decline", [500] = "/errors/none.html" } },
EOF_LOC
    $s->run_cases(
        { name => 'a handler returns 503: the 503 page',
          request => { path => '/t/status?code=503' }, status => 503, body => $PAGE{503},
          headers => { 'Content-Length' => length $PAGE{503} } },
        { name => 'a handler returns 500: the 500 page',
          request => { path => '/t/status?code=500' }, status => 500, body => $PAGE{500} },
        { name => 'a handler returns 404: the 404 page',
          request => { path => '/t/status?code=404' }, status => 404, body => $PAGE{404} },
        { name => 'a handler returns 502, no page for it: the built-in 502',
          request => { path => '/t/status?code=502' }, status => 502, body => $BUILTIN->(502) },
        { name => 'a handler returns 403, its page is missing: the built-in 403, not 404',
          request => { path => '/t/status?code=403' }, status => 403, body => $BUILTIN->(403) },
        { name => 'HEAD, a handler returns 503: no body, the length of the page',
          request => { method => 'HEAD', path => '/t/status?code=503' }, status => 503,
          headers => { 'Content-Length' => length $PAGE{503} } },
        { name => 'POST, a handler returns 503: the page all the same (served as a GET)',
          request => { method => 'POST', path => '/t/status?code=503', body => 'hello' }, status => 503,
          body => $PAGE{503} },
        { name => 'a handler declines, nothing else answers: 404 with the page',
          request => { path => '/t/decline' }, status => 404, body => $PAGE{404} },
        { name => "a handler's location with its own error_pages: its page",
          request => { path => '/t2/status?code=503' }, status => 503, body => $PAGE{own503} },
        { name => "... and the vhost's pages are not its (its own error_pages replace them): built-in 500",
          request => { path => '/t2/status?code=500' }, status => 500, body => $BUILTIN->(500) },
        # The page's path is chosen a location again: here one of the test
        # handler, which declines it; the client gets the built-in page of
        # the original status, not a 404.
        { name => 'a page served by a handler that declines it: the built-in 503',
          request => { path => '/t3/status?code=503' }, status => 503, body => $BUILTIN->(503) },
        { name => "a handler's 500 whose page (in /errors/, which has its own 404 page) is missing: the built-in 500",
          request => { path => '/t3/status?code=500' }, status => 500, body => $BUILTIN->(500) },
        { name => 'static cases the same on this binary',
          request => { path => '/missing.html' }, status => 404, body => $PAGE{404} },
    );
    my $c = $s->connect;
    $c->send("GET /t/status?code=503 HTTP/1.1\r\n$H\r\nGET /t/stream?bytes=4 HTTP/1.1\r\n$H\r\n"
           . "GET /t/decline HTTP/1.1\r\n$H\r\nGET /a.txt HTTP/1.1\r\n$H\r\n");
    my @r = $c->responses(4, timeout => 10);
    is(join(' ', map { $_->{status} // '?' } @r), '503 200 404 200', 'pipelined after handler errors: in order');
    is($r[1]{body}, 'abcd', 'the stream between them whole') if @r > 1;
    is($r[2]{body}, $PAGE{404}, 'the 404 page') if @r > 2;
    $c->close;
    ok($s->stop, 'part 2: the server stops cleanly');
}
done_testing;
