# Malformed requests: 400 (or 505 for versions) and the connection closed.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(files => { 'www/index.html' => "<h1>home</h1>\n", 'www/a.txt' => "aaa\n" });

my $H = "Host: localhost\r\n";
sub bad { my ($name, $req, %o) = @_; return { name => $name, request => $req, status => 400, closed => 1, %o } }

$s->run_cases(
    bad('no target',                         "GET\r\n\r\n"),
    # HTTP/0.9 is not served: 400, or 505 as for any unsupported version.
    { name => 'HTTP/0.9 style, no version', request => "GET /\r\n\r\n", status => [400, 505], closed => 1 },
    bad('extra word after the version',      "GET / HTTP/1.1 extra\r\n$H\r\n"),
    bad('target not starting with /',        "GET a.txt HTTP/1.1\r\n$H\r\n"),
    bad('header without a colon',            "GET / HTTP/1.1\r\n${H}NoColonHere\r\n\r\n"),
    bad('space before the colon',            "GET / HTTP/1.1\r\nHost : localhost\r\n\r\n"),
    bad('space before the colon (other)',    "GET / HTTP/1.1\r\n${H}X-A : b\r\n\r\n"),
    bad('obs-fold continuation line (SP)',   "GET / HTTP/1.1\r\n${H}X-A: a\r\n b\r\n\r\n"),
    bad('obs-fold continuation line (HTAB)', "GET / HTTP/1.1\r\n${H}X-A: a\r\n\tb\r\n\r\n"),
    # RFC 9112 2.2: whitespace before the first header line: reject, or ignore that line.
    { name => 'header line starting with SP right after the request line',
      request => "GET /a.txt HTTP/1.1\r\n X-A: a\r\n$H\r\n", status => [400, 200] },
    bad('invalid character in header name',  "GET / HTTP/1.1\r\n${H}X(A): b\r\n\r\n"),
    bad('empty header name',                 "GET / HTTP/1.1\r\n$H: b\r\n\r\n"),
    bad('NUL in a header value',             "GET / HTTP/1.1\r\n${H}X-A: a\0b\r\n\r\n"),
    bad('control byte in a header value',    "GET / HTTP/1.1\r\n${H}X-A: a\x01b\r\n\r\n"),
    bad('Transfer-Encoding on HTTP/1.0',     "POST /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    bad('Content-Length and Transfer-Encoding',
        "POST /a.txt HTTP/1.1\r\n${H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    bad('Transfer-Encoding and Content-Length (other order)',
        "POST /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"),
    bad('chunked not the final transfer coding',
        "POST /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"),
    bad('two different Content-Length values',
        "POST /a.txt HTTP/1.1\r\n${H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    bad('Content-Length list with different values',
        "POST /a.txt HTTP/1.1\r\n${H}Content-Length: 5, 6\r\n\r\nhello!"),
    bad('non-numeric Content-Length',        "POST /a.txt HTTP/1.1\r\n${H}Content-Length: abc\r\n\r\n"),
    bad('negative Content-Length',           "POST /a.txt HTTP/1.1\r\n${H}Content-Length: -1\r\n\r\n"),
    bad('Content-Length with a sign',        "POST /a.txt HTTP/1.1\r\n${H}Content-Length: +5\r\n\r\nhello"),
    bad('malformed chunk size',              "POST /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
    bad('HTTP/1.1 without Host',             "GET / HTTP/1.1\r\n\r\n"),
    bad('HTTP/1.1 without Host, other headers', "GET /a.txt HTTP/1.1\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n"),
    bad('two Host headers',                  "GET / HTTP/1.1\r\nHost: localhost\r\nHost: other\r\n\r\n"),
    bad('two identical Host headers',        "GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n"),
    bad('Host with a space',                 "GET / HTTP/1.1\r\nHost: local host\r\n\r\n"),
    bad('Host with a slash',                 "GET / HTTP/1.1\r\nHost: local/host\r\n\r\n"),
    bad('invalid characters in the method',  "G\@T / HTTP/1.1\r\n$H\r\n"),
    bad('method with a bracket',             "GE[T / HTTP/1.1\r\n$H\r\n"),
    bad('bad protocol name',                 "GET / HTTX/1.1\r\n$H\r\n"),
    bad('lower-case protocol name',          "GET / http/1.1\r\n$H\r\n"),
    bad('version without a minor',           "GET / HTTP/1\r\n$H\r\n"),
    bad('binary garbage',                    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" . ("\xaa" x 40) . "\r\n\r\n"),
    { name => 'HTTP/2.0 in an HTTP/1 request line', request => "GET / HTTP/2.0\r\n$H\r\n", status => [505, 400], closed => 1 },
    { name => 'HTTP/3.1',                           request => "GET / HTTP/3.1\r\n$H\r\n", status => [505, 400], closed => 1 },
);

subtest '400 responses are complete HTTP/1.1 answers with small bodies' => sub {
    my ($raw, $info) = $s->raw("GET / HTTP/1.1\r\nHost : localhost\r\n\r\n");
    my @r = parse_responses($raw);
    is(scalar @r, 1, 'one response');
    check_response($r[0], { status => 400, body_max => 1024 }, '400');
    is($r[0]{headers}{'content-length'}, length($r[0]{body}), 'Content-Length matches the body');
    ok($info->{closed}, 'closed');
};

subtest 'a bad request after a good one on the same connection' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\nGET / HTTP/1.1\r\nHost : x\r\n\r\nGET /a.txt HTTP/1.1\r\n$H\r\n");
    my $first = $c->response;
    check_response($first, { status => 200, body => "aaa\n" }, 'the good one is answered');
    my $second = $c->response;
    check_response($second, { status => 400 }, 'then 400');
    ok($c->wait_closed(3), 'closed');
    is($c->buffered, '', 'the request after the bad one is not answered');
    $c->close;
};

# Bare LF as a line terminator: RFC 9112 2.2 lets a recipient accept it; a
# server may also refuse it. Either answer must be a proper one.
subtest 'bare LF line endings' => sub {
    my ($raw, $info) = $s->raw("GET /a.txt HTTP/1.1\nHost: localhost\nConnection: close\n\n");
    my ($r) = parse_responses($raw);
    ok($r && defined $r->{status} && ($r->{status} == 200 || $r->{status} == 400), 'answered 200 or 400')
      or diag("got: " . substr($raw // '', 0, 200));
    is($r->{body}, "aaa\n", 'accepted: the right body') if $r && ($r->{status} // 0) == 200;
    ok($info->{closed}, 'connection closed (Connection: close or 400)');
};

# A bare CR inside a header value: RFC 9112 2.2 says it is invalid or to be
# replaced by SP; never a line break.
subtest 'bare CR inside a header' => sub {
    my ($raw) = $s->raw("GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-A: a\rHost: evil\r\nConnection: close\r\n\r\n");
    my ($r) = parse_responses($raw);
    ok($r && defined $r->{status} && ($r->{status} == 400 || $r->{status} == 200), 'answered 400 (or 200 with CR as SP)')
      or diag("got: " . substr($raw // '', 0, 200));
};

# RFC 9112 2.2: a server SHOULD ignore at least one empty line before the request line.
subtest 'leading empty line before the request line' => sub {
    my ($raw) = $s->raw("\r\nGET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    my ($r) = parse_responses($raw);
    check_response($r, { status => 200, body => "aaa\n" }, 'served');
};

subtest 'still serving after all that' => sub {
    check_response($s->get('/a.txt'), { status => 200, body => "aaa\n" }, 'GET /a.txt');
};

$s->stop;
done_testing;
