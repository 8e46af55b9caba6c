# Hostile HTTP/1 input (issue 8): one table of malformed and smuggling
# requests, each answered on its own connection. The expectations come from
# the MUSTs of RFC 9110 and RFC 9112 and from the CVE history of llhttp,
# nginx, lighttpd and h2o, not from what luxd happened to do.
#
# Each case is sent with a pipelined follow-up request behind it
# (GET /a.txt?f=ID). A case whose framing is in doubt must be answered with
# its 4xx/5xx, "Connection: close" and a close, and the follow-up must never
# run: the access log is the witness. A case that is well framed must leave
# the connection usable: the follow-up is answered on it.
#
# The cases marked split are also sent cut in two at every byte boundary
# (all cuts of one case in parallel, each on its own connection), so a
# parser state that goes wrong only across two reads shows up.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $s = Luxd->new(
    files => {
        'www/index.html'   => "<h1>home</h1>\n",
        'www/a.txt'        => "aaa\n",
        'pwww/admin/x.txt' => "admin only\n",
    },
    server => { access_log_buffer => 0 },
    config => <<'LUA',
vhost "localhost" { default = true, root = "$DIR/www", index = { "index.html" } }
vhost "policy.test" {
  root = "$DIR/pwww",
  location "/admin/" {
    policy = function(r)
      if r.headers["x-user"] ~= "admin" then return 403 end
    end,
  },
}
LUA
);

my $H   = "Host: localhost\r\n";
my $TE  = "Transfer-Encoding: chunked\r\n";
my $GET = "GET /a.txt HTTP/1.1\r\n$H";
my $POST = "POST /a.txt HTTP/1.1\r\n$H";
# A GET with a body: the body is framed and dropped, the file is served.
my $GETB = "GET /a.txt HTTP/1.1\r\n$H";
my $BAD = 'bad';    # expectation shorthand: 4xx/5xx and closed

# name, request bytes, allowed statuses, closed (1: must close, the
# follow-up must not run; 0: must stay open, the follow-up is answered;
# -1: either, as the status says: an error closes, a success stays open),
# options (split => 1; body => expected body of the first response;
# nofollow => 1: no follow-up is sent, as none could be told from a body).
my @cases = (
    # --- line ends: RFC 9112 2.2, bare CR (llhttp CVE-2023-30589,
    # CVE-2022-32213, CVE-2022-32214)
    ['bare CR ends the header block', "$GET\rGET /index.html HTTP/1.1\r\n$H\r\n", 400, 1, split => 1],
    ['bare CR before a Content-Length body', "${POST}Content-Length: 5\r\n\rhello", 400, 1, split => 1],
    ['bare CR after a chunk size', "$GETB$TE\r\n5\rXhello\r\n0\r\n\r\n", 400, 1, split => 1],
    ['bare CR after chunk data', "$GETB$TE\r\n5\r\nhello\rX0\r\n\r\n", 400, 1, split => 1],
    ['two other bytes for the CRLF after chunk data', "$GETB$TE\r\n5\r\nhelloXY0\r\n\r\n", 400, 1, split => 1],
    ['bare LF after chunk data', "$GETB$TE\r\n5\r\nhello\n0\r\n\r\n", 400, 1],
    ['bare CR inside a header value', "${GET}X-A: a\rb\r\n\r\n", 400, 1],
    ['bare CR inside a header name', "${GET}X\rA: b\r\n\r\n", 400, 1],
    ['bare CR ends the request line', "GET /a.txt HTTP/1.1\r$H\r\n", 400, 1],
    ['bare CR inside the request target', "GET /a\r.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['bare CR ends the trailer section', "$GETB$TE\r\n1\r\nx\r\n0\r\nA: b\r\n\rGET /index.html HTTP/1.1\r\n$H\r\n", 400, 1, split => 1],

    # --- field syntax: RFC 9112 5, RFC 9110 5.5, 5.6.2
    ['space before the colon', "GET /a.txt HTTP/1.1\r\nHost : localhost\r\n\r\n", 400, 1],
    ['tab before the colon', "${GET}X-A\t: b\r\n\r\n", 400, 1],
    ['Content-Length with space before the colon', "${POST}Content-Length : 5\r\n\r\nhello", 400, 1],
    ['obs-fold (SP)', "${GET}X-A: a\r\n b\r\n\r\n", 400, 1],
    ['obs-fold (HTAB)', "${GET}X-A: a\r\n\tb\r\n\r\n", 400, 1],
    ['obs-fold hides a Content-Length', "${POST}X-A: a\r\n Content-Length: 5\r\n\r\nhello", 400, 1],
    ['obs-fold continues Transfer-Encoding', "${POST}Transfer-Encoding: chunked\r\n , identity\r\n\r\n0\r\n\r\n", 400, 1],
    ['empty field name', "${GET}: b\r\n\r\n", 400, 1],
    ['field line without a colon', "${GET}NoColonHere\r\n\r\n", 400, 1],
    ['delimiter in a field name', "${GET}X(A): b\r\n\r\n", 400, 1],
    ['@ in a field name', "${GET}X\@A: b\r\n\r\n", 400, 1],
    ['8-bit byte in a field name', "${GET}X\xe9A: b\r\n\r\n", 400, 1],
    ['NUL in a field value', "${GET}X-A: a\0b\r\n\r\n", 400, 1],
    ['control byte in a field value', "${GET}X-A: a\x01b\r\n\r\n", 400, 1],
    ['DEL in a field value', "${GET}X-A: a\x7fb\r\n\r\n", 400, 1],
    ['ESC in a field value', "${GET}X-A: a\x1bb\r\n\r\n", 400, 1],
    ['vertical tab before chunked', "${POST}Transfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n", 400, 1],
    ['more header fields than luxd keeps (100)', $GET . join('', map { "X-$_: v\r\n" } 1 .. 101) . "\r\n", [400, 431], 1],
    ['obs-text in a field value is allowed', "${GET}X-A: caf\xe9\r\n\r\n", 200, 0, body => "aaa\n"],

    # --- request line: RFC 9112 3; nginx CVE-2013-4547 (space, NUL)
    ['no version (HTTP/0.9)', "GET /a.txt\r\n\r\n", [400, 505], 1],
    ['HTTP/2.0 request line', "GET /a.txt HTTP/2.0\r\n$H\r\n", [400, 505], 1],
    ['HTTP/3.0 request line', "GET /a.txt HTTP/3.0\r\n$H\r\n", [400, 505], 1],
    ['HTTP/1.10', "GET /a.txt HTTP/1.10\r\n$H\r\n", 400, 1],
    ['HTTP/01.1', "GET /a.txt HTTP/01.1\r\n$H\r\n", 400, 1],
    ['lower-case http/1.1', "GET /a.txt http/1.1\r\n$H\r\n", 400, 1],
    ['HTTP/1 without minor', "GET /a.txt HTTP/1\r\n$H\r\n", 400, 1],
    ['space after the version', "GET /a.txt HTTP/1.1 \r\n$H\r\n", 400, 1],
    ['junk after the version', "GET /a.txt HTTP/1.1x\r\n$H\r\n", 400, 1],
    ['h2 preface on an HTTP/1 port', "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", [400, 505], 1],
    ['lower-case method', "get /a.txt HTTP/1.1\r\n$H\r\n", [400, 501], 1],
    ['unknown method', "FROB /a.txt HTTP/1.1\r\n$H\r\n", [400, 501], 1],
    ['invalid character in the method', "G\@T /a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['empty method', " /a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['space inside the target', "GET /a .txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['NUL inside the target', "GET /a.txt\0.php HTTP/1.1\r\n$H\r\n", 400, 1],
    ['tab inside the target', "GET /a\t.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['DEL inside the target', "GET /a\x7f.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['8-bit byte inside the target', "GET /caf\xe9 HTTP/1.1\r\n$H\r\n", 400, 1],
    ['target without a leading slash', "GET a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['asterisk-form for GET', "GET * HTTP/1.1\r\n$H\r\n", 400, 1],
    ['authority-form for GET', "GET localhost:80 HTTP/1.1\r\n$H\r\n", 400, 1],
    ['CONNECT (no tunnels here)', "CONNECT localhost:80 HTTP/1.1\r\n$H\r\n", [400, 405], 1],
    ['absolute-form with userinfo', "GET http://user\@localhost/a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['absolute-form with a bad port', "GET http://localhost:8x/a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['absolute-form with a scheme other than http', "GET ftp://localhost/a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['NUL inside the method', "G\0ET /a.txt HTTP/1.1\r\n$H\r\n", 400, 1],
    ['method alone', "GET\r\n$H\r\n", 400, 1],
    ['absolute-form is allowed', "GET http://localhost/a.txt HTTP/1.1\r\nHost: elsewhere\r\n\r\n", 200, 0, body => "aaa\n"],
    ['TLS ClientHello', "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" . ("\xaa" x 40) . "\r\n\r\n", 400, 1],
    ['request line longer than max_header_bytes', "GET /" . ('a' x 9000) . " HTTP/1.1\r\n$H\r\n", [400, 414], 1],

    # --- Host: RFC 9112 3.2, RFC 9110 7.2 and 4.2.4
    ['HTTP/1.1 without Host', "GET /a.txt HTTP/1.1\r\n\r\n", 400, 1],
    ['two Host fields', "GET /a.txt HTTP/1.1\r\n${H}Host: other\r\n\r\n", 400, 1, split => 1],
    ['two Host fields in HTTP/1.0', "GET /a.txt HTTP/1.0\r\n${H}Host: other\r\n\r\n", 400, 1],
    ['Host with userinfo', "GET /a.txt HTTP/1.1\r\nHost: admin\@localhost\r\n\r\n", 400, 1],
    ['Host with a space inside', "GET /a.txt HTTP/1.1\r\nHost: local host\r\n\r\n", 400, 1],
    ['Host with < inside', "GET /a.txt HTTP/1.1\r\nHost: local<host\r\n\r\n", 400, 1],
    ['Host with a backslash', "GET /a.txt HTTP/1.1\r\nHost: local\\host\r\n\r\n", 400, 1],
    ['Host with a slash', "GET /a.txt HTTP/1.1\r\nHost: local/host\r\n\r\n", 400, 1],
    ['Host with a non-numeric port', "GET /a.txt HTTP/1.1\r\nHost: localhost:http\r\n\r\n", 400, 1],
    ['Host with two ports', "GET /a.txt HTTP/1.1\r\nHost: localhost:80:80\r\n\r\n", 400, 1],
    ['Host with an unclosed IPv6 literal', "GET /a.txt HTTP/1.1\r\nHost: [::1\r\n\r\n", 400, 1],
    ['Host with junk after an IPv6 literal', "GET /a.txt HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400, 1],
    ['Host with a bad IPv6 literal', "GET /a.txt HTTP/1.1\r\nHost: [::g]\r\n\r\n", 400, 1],
    ['Host with an empty label', "GET /a.txt HTTP/1.1\r\nHost: a..localhost\r\n\r\n", 400, 1],
    ['Host with a port is allowed', "GET /a.txt HTTP/1.1\r\nHost: localhost:8080\r\n\r\n", 200, 0, body => "aaa\n"],
    ['Host as an IPv6 literal is allowed', "GET /a.txt HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", 200, 0, body => "aaa\n"],

    # --- Content-Length: RFC 9110 8.6, RFC 9112 6.3 (llhttp CVE-2018-7159)
    ['Content-Length and Transfer-Encoding', "${POST}Content-Length: 5\r\n$TE\r\n0\r\n\r\n", 400, 1, split => 1],
    ['Transfer-Encoding and Content-Length', "${POST}${TE}Content-Length: 5\r\n\r\n0\r\n\r\n", 400, 1],
    ['two different Content-Length fields', "${POST}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, 1, split => 1],
    ['Content-Length list of different values', "${POST}Content-Length: 5, 6\r\n\r\nhello!", 400, 1],
    ['Content-Length with a plus sign', "${POST}Content-Length: +5\r\n\r\nhello", 400, 1],
    ['negative Content-Length', "${POST}Content-Length: -1\r\n\r\n", 400, 1],
    ['hexadecimal Content-Length', "${POST}Content-Length: 0x5\r\n\r\nhello", 400, 1],
    ['space inside Content-Length', "${POST}Content-Length: 1 2\r\n\r\nhello world!", 400, 1],
    ['non-numeric Content-Length', "${POST}Content-Length: abc\r\n\r\n", 400, 1],
    ['empty Content-Length', "${POST}Content-Length: \r\n\r\n", 400, 1],
    ['Content-Length overflow', "${POST}Content-Length: 99999999999999999999\r\n\r\n", [400, 413], 1],
    ['Content-Length over max_body_bytes', "${POST}Content-Length: 1048577\r\n\r\n", 413, 1],
    ['two equal Content-Length fields', "${GETB}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", [200, 400], -1],
    ['Content-Length with leading zeros is a number', "${GETB}Content-Length: 005\r\n\r\nhello", 200, 0, body => "aaa\n"],
    ['GET with a Content-Length body', "${GETB}Content-Length: 5\r\n\r\nhello", 200, 0, body => "aaa\n", split => 1],

    # --- Transfer-Encoding: RFC 9112 6.1, 6.3, 7 (llhttp CVE-2020-8287,
    # CVE-2022-32215; nginx answers codings it lacks with 501)
    ['Transfer-Encoding in HTTP/1.0', "POST /a.txt HTTP/1.0\r\n$TE\r\n0\r\n\r\n", 400, 1, split => 1],
    ['chunked not the last coding', "${POST}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400, 1],
    ['only a coding other than chunked', "${POST}Transfer-Encoding: gzip\r\n\r\n0\r\n\r\n", 400, 1],
    ['identity (no longer a coding)', "${POST}Transfer-Encoding: identity\r\n\r\n0\r\n\r\n", 400, 1],
    ['gzip, then chunked: not implemented', "${POST}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, 1],
    ['chunked twice in one line', "${POST}Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400, 1],
    ['chunked in two lines', "${POST}${TE}$TE\r\n0\r\n\r\n", 400, 1],
    ['chunked, then another line with a coding', "${POST}${TE}Transfer-Encoding: eee\r\n\r\n0\r\n\r\n", 400, 1],
    ['a coding line, then chunked', "${POST}Transfer-Encoding: eee\r\n$TE\r\n0\r\n\r\n", 501, 1],
    ['xchunked', "${POST}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400, 1],
    ['chunked with a parameter', "${POST}Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n", 400, 1],
    ['empty Transfer-Encoding', "${POST}Transfer-Encoding: \r\n\r\n0\r\n\r\n", 400, 1],
    ['Chunked in capitals is chunked', "${GETB}Transfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, 0, body => "aaa\n"],

    # --- chunked framing: RFC 9112 7.1 (nginx CVE-2013-2028, llhttp
    # CVE-2024-22019)
    ['a well-framed chunked body', "$GETB$TE\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['chunk size not hex', "$GETB$TE\r\nzz\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['negative chunk size', "$GETB$TE\r\n-5\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['chunk size with 0x', "$GETB$TE\r\n0x5\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['chunk size overflow', "$GETB$TE\r\n10000000000000000\r\nhello\r\n0\r\n\r\n", [400, 413], 1],
    ['chunk size beyond max_body_bytes', "$GETB$TE\r\nffffffffffffffff\r\nhello\r\n0\r\n\r\n", [400, 413], 1],
    ['space before a chunk size', "$GETB$TE\r\n 5\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['space after a chunk size', "$GETB$TE\r\n5 \r\nhello\r\n0\r\n\r\n", 400, 1],
    ['chunk longer than its size', "$GETB$TE\r\n3\r\nhello\r\n0\r\n\r\n", 400, 1, split => 1],
    ['chunk shorter than its size', "$GETB$TE\r\n5\r\nhi\r\n0\r\n\r\n", 400, 1],
    ['no last chunk before the next request', "$GETB$TE\r\n5\r\nhello\r\n", 400, 1, split => 1],
    ['chunk extension without a name', "$GETB$TE\r\n5;\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['space inside a chunk extension', "$GETB$TE\r\n5;a b\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['chunk extensions past the limit', "$GETB$TE\r\n" . join('', map { "1;x=" . ('a' x 1000) . "\r\nx\r\n" } 1 .. 9) . "0\r\n\r\n", 413, 1],
    ['chunk extensions are allowed', "$GETB$TE\r\n5;name=value\r\nhello\r\n1;a;b\r\n!\r\n0;last=1\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    # RFC 9112 7.1.1: chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ).
    ['several extensions with values', "$GETB$TE\r\n5;a=1;b=2\r\nhello\r\n3;q=\"x\";t=tok;n\r\nabc\r\n1;n;v=1;w=\"2\"\r\n!\r\n0;a=1;b=2\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['an empty extension after a value', "$GETB$TE\r\n5;a=1;\r\nhello\r\n0\r\n\r\n", 400, 1],
    ['a chunk size of endless zeros', "$GETB$TE\r\n" . ('0' x 50_000) . "5\r\nhello\r\n0\r\n\r\n", 413, 1],
    ['last chunk with leading zeros', "$GETB$TE\r\n5\r\nhello\r\n000\r\n\r\n", 200, 0, body => "aaa\n"],

    # --- trailers: RFC 9110 6.5, RFC 9112 7.1.2 (issue 8 #3): dropped,
    # never request headers, never framing
    ['trailer Range does not make a 206', "$GETB$TE\r\n1\r\nx\r\n0\r\nRange: bytes=0-1\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['trailer If-None-Match does not make a 304', "$GETB$TE\r\n1\r\nx\r\n0\r\nIf-None-Match: *\r\n\r\n", 200, 0, body => "aaa\n"],
    ['trailer Content-Length frames nothing', "$GETB$TE\r\n1\r\nx\r\n0\r\nContent-Length: 30\r\n\r\n", 200, 0, body => "aaa\n"],
    # llhttp refuses this one itself; dropping it would be as good.
    ['trailer Transfer-Encoding frames nothing', "$GETB$TE\r\n1\r\nx\r\n0\r\n$TE\r\n", [200, 400], -1],
    # Strict llhttp reads connection options again after the trailers: the
    # response said keep-alive, so the next request must still be served.
    ['trailer Connection: close changes nothing', "$GETB$TE\r\n1\r\nx\r\n0\r\nConnection: close\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['trailer Host does not choose a vhost', "$GETB$TE\r\n1\r\nx\r\n0\r\nHost: policy.test\r\n\r\n", 200, 0, body => "aaa\n"],
    ['trailer X-User does not pass a policy',
        "GET /admin/x.txt HTTP/1.1\r\nHost: policy.test\r\n$TE\r\n1\r\nx\r\n0\r\nX-User: admin\r\n\r\n", 403, 0],
    ['header X-User passes that policy', "GET /admin/x.txt HTTP/1.1\r\nHost: policy.test\r\nX-User: admin\r\n\r\n", 200, 0, body => "admin only\n"],
    ['space before the colon in a trailer', "$GETB$TE\r\n1\r\nx\r\n0\r\nX-A : b\r\n\r\n", 400, 1],
    ['trailer line without a colon', "$GETB$TE\r\n1\r\nx\r\n0\r\nNoColon\r\n\r\n", 400, 1],
    ['trailer section past max_header_bytes', "$GETB$TE\r\n1\r\nx\r\n0\r\nX-A: " . ('a' x 9000) . "\r\n\r\n", 431, 1],

    # --- Expect: RFC 9110 10.1.1 (issue 8 #17)
    ['100-continue in HTTP/1.0 is ignored', "POST /a.txt HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", 405, 1],
    # The client waits for the 100 before it sends anything more: a
    # follow-up would be its body.
    ['100-continue for a request refused (405): no 100', "${POST}Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", 405, 1, nofollow => 1],
    ['100-continue over max_body_bytes: 413, no 100', "${POST}Content-Length: 2000000\r\nExpect: 100-continue\r\n\r\n", 413, 1],
    ['100-continue with the body already sent', "${GETB}Content-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", 200, 0, body => "aaa\n"],
    ['an expectation luxd cannot meet', "${GETB}Content-Length: 5\r\nExpect: tea\r\n\r\nhello", 417, 1],

    # --- Upgrade (issue 8 #18): luxd switches to nothing, answers in HTTP/1.1
    ['Upgrade: websocket is answered as HTTP/1.1', "${GET}Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['Upgrade: h2c is answered as HTTP/1.1', "${GET}Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", 200, 0, body => "aaa\n"],

    # --- ranges: RFC 9110 14
    ['a valid range', "${GET}Range: bytes=0-1\r\n\r\n", 206, 0, body => "aa"],
    ['a range that is no ranges-specifier', "${GET}Range: bytes=abc\r\n\r\n", 200, 0, body => "aaa\n"],
    ['an unknown range unit', "${GET}Range: pages=1-2\r\n\r\n", 200, 0, body => "aaa\n"],
    ['a range past the end', "${GET}Range: bytes=100-\r\n\r\n", 416, 0],
    ['a zero-length suffix range', "${GET}Range: bytes=-0\r\n\r\n", 416, 0],

    # --- the one-run parse of a request without a body, and known field
    # names matched by length, first letter and eight bytes a step
    # (issue 9, t/112 has the rest)
    ['Content-Length: 0 is no body', "${GETB}Content-Length: 0\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['an empty chunked body', "$GETB$TE\r\n0\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['HTTP/1.0 keep-alive without a body', "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['known field names in capitals', "GET /a.txt HTTP/1.1\r\nHOST: localhost\r\nCONNECTION: keep-alive\r\nTRANSFER-ENCODING: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['a name one letter off Host is no Host', "GET /a.txt HTTP/1.1\r\nHosu: localhost\r\n\r\n", 400, 1, split => 1],
    ['a name one letter off Transfer-Encoding frames nothing', "${GETB}Transfer-Encodinf: chunked\r\n\r\n", 200, 0, body => "aaa\n", split => 1],
    ['a name one letter off Connection closes nothing', "${GET}Connectioo: close\r\n\r\n", 200, 0, body => "aaa\n", split => 1],

    # --- connection management
    ['Connection: close', "${GET}Connection: close\r\n\r\n", 200, 1, body => "aaa\n"],
    ['HTTP/1.0 without keep-alive', "GET /a.txt HTTP/1.0\r\n\r\n", 200, 1, body => "aaa\n"],
);

my %follow;    # follow-up tag => 1 (must run) or 0 (must not run)
my $tag_n = 0;

sub follow_up { my ($tag) = @_; "GET /a.txt?f=$tag HTTP/1.1\r\nHost: localhost\r\n\r\n" }

# Checks what one connection got back for a case.
sub check_case {
    my ($c, $case, $label, $tag) = @_;
    my ($name, $req, $status, $closed, %o) = @$case;
    my $r = $c->response(timeout => 5);
    my @allowed = ref $status ? @$status : ($status);
    my $st = $r ? $r->{status} : undef;
    my $ok = ok(defined $st && grep({ $_ == $st } @allowed), "$label: status " . join('|', @allowed))
      or diag('got ' . ($st // 'no response') . ': ' . Luxd::_short($r ? $r->{raw} : $c->buffered));
    return 0 unless defined $st;
    if ($closed < 0) {
        $closed = $st >= 400 ? 1 : 0;
        $follow{$tag} = 1 - $closed if defined $tag;
    }
    if (defined $o{body}) {
        $ok &= is($r->{body}, $o{body}, "$label: body");
    }
    if ($closed) {
        $ok &= is(lc($r->{headers}{connection} // ''), 'close', "$label: Connection: close");
        $ok &= ok($c->wait_closed(5), "$label: closed");
        $ok &= is($c->buffered, '', "$label: nothing after the answer")
          or diag(Luxd::_short($c->buffered));
    } else {
        my $f = $c->response(timeout => 5);
        $ok &= ok($f && ($f->{status} // 0) == 200 && $f->{body} eq "aaa\n", "$label: the follow-up is answered on the same connection")
          or diag('got ' . Luxd::_short($f ? $f->{raw} : $c->buffered));
        $ok &= ok(!$c->eof, "$label: still open");
    }
    return $ok;
}

ok(scalar(@cases) >= 80, scalar(@cases) . ' cases');

for my $case (@cases) {
    my ($name, $req, $status, $closed, %o) = @$case;
    my $tag = 'c' . ++$tag_n;
    $follow{$tag} = $closed ? 0 : 1 unless $o{nofollow};
    subtest $name => sub {
        my $c = $s->connect;
        $c->send($req . ($o{nofollow} ? '' : follow_up($tag)));
        check_case($c, $case, $name, $o{nofollow} ? undef : $tag);
        $c->close;
    };
}

# Every cut of the split cases: part one on all connections, a pause so the
# server reads it alone, then part two.
for my $case (grep { my %o = @$_[4 .. $#$_]; $o{split} } @cases) {
    my ($name, $req, $status, $closed) = @$case;
    subtest "$name, cut at every byte" => sub {
        my (@conns, @tags);
        for my $cut (1 .. length($req) - 1) {
            my $tag = 'c' . ++$tag_n;
            $follow{$tag} = $closed ? 0 : 1;
            my $c = $s->connect;
            $c->send(substr($req, 0, $cut));
            push @conns, [$c, $cut, $tag];
        }
        sleep 0.05;
        $_->[0]->send(substr($req, $_->[1]) . follow_up($_->[2])) for @conns;
        my $bad = 0;
        for my $e (@conns) {
            my ($c, $cut, $tag) = @$e;
            my $ok;
            subtest "cut at $cut" => sub { $ok = check_case($c, $case, "cut at $cut", $tag) };
            $bad++ unless $ok;
            $c->close;
        }
        is($bad, 0, 'every cut answered alike');
    };
}

# The witness: each follow-up ran exactly when its case left the framing
# intact. A last request, logged after all the others, says the log is
# complete.
subtest 'access log: no follow-up after a framing error ran' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt?f=last HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    $c->response;
    $c->close;
    my $deadline = time + 5;
    sleep 0.05 while $s->access_log !~ /f=last / && time < $deadline;
    my $log = $s->access_log;
    my %ran;
    $ran{$1}++ while $log =~ /GET \/a\.txt\?f=(c\d+) /g;
    my @wrong = grep { ($ran{$_} // 0) != $follow{$_} } sort keys %follow;
    is(scalar @wrong, 0, scalar(keys %follow) . ' follow-ups, each ran only where it should')
      or diag(join "\n", map { "$_: ran " . ($ran{$_} // 0) . ", expected $follow{$_}" } @wrong[0 .. ($#wrong < 20 ? $#wrong : 19)]);
};

$s->stop;
done_testing;
