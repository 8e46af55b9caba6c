# An error page is an internal redirect that keeps the status the request
# earned. The static handler kept it by itself (static.c serve()), but a page
# served by any other handler (the test handler here, a backend later)
# answered 200: a missing file became "200 OK" with the page's body, for GET,
# HEAD, a streamed page and a page that reads the original request's body.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $H = "Host: localhost\r\n";
my $s = Luxd->new(
    test_handlers => 1,
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  error_pages = { [404] = "/t/async", [403] = "/t/stream", [410] = "/t/body", [503] = "/t/decline" },
  location "/t/" { test_handler = true },
}
EOF_CONF
    files => { 'www/a.txt' => "aaa\n" },
);

for my $m ('GET', 'HEAD') {
    my $r = $s->http(method => $m, path => '/nope.txt');
    is($r->{status}, 404, "$m of a missing file, page by an async handler: 404");
    like($r->{body}, qr/^async entered=1 resumed=1\n$/, "$m: the page's body") if $m eq 'GET';

    $r = $s->http(method => $m, path => '/t/status?code=403');
    is($r->{status}, 403, "$m 403, page by a streamed response: 403");

    # The page's handler declines (it is alone in its chain): the client
    # gets the built-in page of the status the request earned.
    $r = $s->http(method => $m, path => '/t/status?code=503');
    is($r->{status}, 503, "$m 503, the page's handler declines: 503");
    like($r->{body}, qr{<title>503 Service Unavailable</title>}, "$m: the built-in page") if $m eq 'GET';
}

# The page reads the body of the request that failed; the next pipelined
# request is answered normally.
my $d = $s->raw("POST /t/status?code=410 HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello"
      . "GET /a.txt HTTP/1.1\r\n${H}Connection: close\r\n\r\n");
my @r = parse_responses($d);
is(scalar @r, 2, 'two responses');
is($r[0]{status}, 410, 'POST 410, page by a body reader: 410');
like($r[0]{body} // '', qr/^bytes=5 /, 'the page read the body');
is($r[1]{status}, 200, 'the pipelined GET');
is($r[1]{body}, "aaa\n", 'its body');

$s->stop;
done_testing;
