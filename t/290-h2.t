# HTTP/2 (issue 20): a listener with http2 = true speaks h2 by prior
# knowledge in the clear and HTTP/1 beside it, and h2 by ALPN over TLS;
# each stream is a request of the same core: static files whole and in
# ranges, conditionals, error pages, the proxy both ways (a POST body
# streamed up, a response streamed down), the access log's HTTP/2.0.
# Limits at exactly the limit and one past: concurrent streams, the header
# section, CONTINUATION frames; Rapid Reset; a request cut at every byte.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;
use Luxd::Backend qw(body hdr);

my $PY = '/usr/bin/python3'; # Debian's, with python3-h2
my $PROBE = 't/lib/h2probe.py';
my ($c) = TLSTest::certs('a.test');
my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $tport = Luxd::free_port();
my $nport = Luxd::free_port();
my $big = join('', map { chr(($_ * 7 + ($_ >> 11)) & 255) } 0 .. 3 * 1024 * 1024 + 99);
my $MAXH = 4096;
my $s = Luxd->new(
    test_handlers => 1,
    server => {
        listen => \qq{{ { "127.0.0.1:\$PORT", http2 = true }, { "127.0.0.1:$tport", tls = true, http2 = true },
                        { "127.0.0.1:$nport", tls = true } }},
        max_header_bytes => $MAXH,
        max_body_bytes   => 4 * 1024 * 1024,
        keepalive_requests => 100000,
        real_ip          => \'{ from = "127.0.0.1", header = "X-Real-IP" }',
    },
    config => <<"EOF",
upstream "be" { "$addr" }
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]},
  error_pages = { [404] = "/404.html" }, gzip_static = true,
  location "/status" { status = true }, location "/t/" { test_handler = true },
  location "/pol/" { policy = function(r)
      if r.headers["x-key"] ~= "k1" then return 403 end
      r:set_header("X-Seen", r.remote_addr .. " " .. (r.headers["cookie"] or "-"))
    end } }
vhost "be.test" { root = "\$DIR/www", location "/" { proxy = "be" } }
EOF
    files => { 'www/index.html' => "hello h2\n", 'www/big.bin' => $big, 'www/404.html' => "no such page\n",
               'www/pol/index.html' => "policy page\n", 'www/gz.txt' => "plain text\n",
               'www/gz.txt.gz' => "GZIPPED" },
);
my $port = $s->port;
my $url = "http://127.0.0.1:$port";

sub h2c { $s->curl('--http2-prior-knowledge', @_) }
sub h2s {
    my ($p, $path, @more) = @_;
    return $s->curl('--http2', '--cacert', $c->{'a.test'}{cert}, '--resolve', "a.test:$p:127.0.0.1",
                    @more, "https://a.test:$p$path");
}
sub probe { my $out = `timeout 60 $PY $PROBE $port @_ 2>&1`; chomp $out; $out }

# h2c by prior knowledge, HTTP/1 on the same port.
my ($out, $rc) = h2c('-w', '%{http_version} %{http_code}', "$url/");
is($out, "hello h2\n2 200", 'h2c by prior knowledge: HTTP/2 200 and the page');
($out) = $s->curl('-w', '%{http_version}', "$url/");
is($out, "hello h2\n1.1", 'HTTP/1.1 on the same listener');
# h2 by ALPN; a TLS listener without http2 stays HTTP/1.1.
($out, $rc) = h2s($tport, '/', '-w', '%{http_version}');
is($out, "hello h2\n2", 'h2 over TLS by ALPN');
($out) = h2s($nport, '/', '-w', '%{http_version}');
is($out, "hello h2\n1.1", 'a TLS listener without http2: ALPN chooses http/1.1');
my $t = TLSTest::s_client($tport, servername => 'a.test', alpn => 'h2,http/1.1');
like($t, qr{^ALPN protocol: h2$}m, 'ALPN h2,http/1.1: h2 chosen (the server prefers it)');
$t = TLSTest::s_client($tport, servername => 'a.test', alpn => 'http/1.1');
like($t, qr{^ALPN protocol: http/1\.1$}m, 'ALPN http/1.1 alone: http/1.1');

# Static files: whole, a range, HEAD, conditionals, the error page.
($out) = h2c("$url/big.bin");
ok($out eq $big, '3 MiB over h2c, byte for byte (' . length($out) . ')');
($out) = h2s($tport, '/big.bin');
ok($out eq $big, '3 MiB over h2 and TLS, byte for byte');
($out) = h2c('--limit-rate', '4M', "$url/big.bin");
ok($out eq $big, 'to a slow reader (4 MB/s): whole');
($out) = h2c('-r', '1000000-1300099', "$url/big.bin");
ok($out eq substr($big, 1000000, 300100), 'a range of it');
($out) = h2c('-I', "$url/big.bin");
like($out, qr{^HTTP/2 200}m, 'HEAD: 200');
like($out, qr{^content-length: 3145828\r$}m, 'HEAD: the length GET would send');
unlike($out, qr{^(connection|transfer-encoding|keep-alive):}mi, 'no connection-specific field');
my ($etag) = $out =~ /^etag: (\S+)\r$/m;
($out) = h2c('-o', '/dev/null', '-w', '%{http_code}', '-H', "If-None-Match: $etag", "$url/big.bin");
is($out, '304', 'If-None-Match: 304');
($out) = h2c('-w', ' %{http_code}', "$url/nothere");
is($out, "no such page\n 404", 'the error page, with 404');

# gzip_static, a policy (headers, the client's address by real_ip, cookie
# fields joined), the status counters.
($out) = h2c('-H', 'Accept-Encoding: gzip', '-D', '-', "$url/gz.txt");
like($out, qr{^content-encoding: gzip\r$}m, 'gzip_static: the .gz sibling') and like($out, qr/GZIPPED$/, '  its bytes');
($out) = h2c('-w', ' %{http_code}', "$url/pol/");
like($out, qr/ 403$/, 'a policy refuses a stream without its key');
($out) = h2c('-D', '-', '-H', 'x-key: k1', '-H', 'X-Real-IP: 192.0.2.9', '-H', 'Cookie: a=1',
             '-H', 'Cookie: b=2', "$url/pol/");
like($out, qr{^x-seen: 192\.0\.2\.9 a=1; b=2\r$}m,
     'and lets one with it through: real_ip applied, the cookie fields joined');
like($out, qr/policy page$/, '  the page');
($out) = h2c("$url/status?format=json");
like($out, qr/"requests"/, 'the status page over h2');

# The proxy: a response down, a 1 MiB POST body up, streamed both ways.
my $be_url = "http://be.test:$port";
my @be = ('--resolve', "be.test:$port:127.0.0.1");
($out) = h2c(@be, '-w', ' %{http_code}', "$be_url/ok/5000");
ok($out eq body(5000) . ' 200', 'proxied GET over h2') or diag(substr($out, -80));
($out) = h2c(@be, "$be_url/chunked/70000/1000");
ok($out eq body(70000), 'a chunked backend response, streamed as DATA');
my $post = body(1024 * 1024);
$s->write_file('post.bin', $post);
($out) = h2c(@be, '--data-binary', '@' . $s->dir . '/post.bin', "$be_url/echo");
ok($out eq $post, 'a 1 MiB POST body through h2 to the backend and back')
  or diag(length($out) . ' bytes back: ' . substr($out, 0, 80));
my @r = $be->requests;
is(hdr($r[-1], 'Content-Length'), length($post), 'sent up with its Content-Length');
$out = `printf abc | curl -s --max-time 30 --http2-prior-knowledge @be -T - $be_url/echo`;
is($out, 'abc', 'a body without content-length (curl -T -): sent up, echoed');
@r = $be->requests;
is(hdr($r[-1], 'Transfer-Encoding'), 'chunked', 'chunked up');

# Many streams at once (h2load: 4 connections, 10 streams each).
my $h2load = `h2load -n 400 -c 4 -m 10 $url/index.html 2>&1`;
like($h2load, qr/requests: 400 total, 400 started, 400 done, 400 succeeded, 0 failed/,
     'h2load: 400 requests over 4 connections, 10 streams at once, none failed');

# The access log says HTTP/2.0.
ok(Luxd::wait_for(sub { $s->access_log =~ m{"GET /big\.bin HTTP/2\.0" 200 3145828} }),
   'access log: "GET /big.bin HTTP/2.0" 200');

# A request cut at every byte (preface, SETTINGS, HEADERS), each answered.
like(probe('split', '/'), qr/^ok=(\d+) of=\1$/, 'the request cut in two at every byte: each answered');

# Limits.
like(probe('streams', 100), qr/^refused=0 /, '100 streams open at once: none refused');
like(probe('streams', 101), qr/^refused=1 /, '101: the 101st refused (REFUSED_STREAM)');
my $fixed = 46 + 5;    # pseudo-fields and the x-pad name (names and values count)
like(probe('get', '/', 'x-pad=' . ('a' x ($MAXH - $fixed))), qr/^status=200 /,
     "a header section of exactly max_header_bytes ($MAXH): 200");
like(probe('get', '/', 'x-pad=' . ('a' x ($MAXH - $fixed + 1))), qr/^status=431 /,
     'one byte more: 431');
like(probe('get', '/', 'x-pad=' . ('a' x (5 * $MAXH))), qr/^status=reset/,
     'far past it (a decompression bomb): the stream is reset');
like(probe('continuation', 8), qr/^status=200 /, '8 CONTINUATION frames: answered');
like(probe('continuation', 9), qr/goaway=11$/, '9: GOAWAY ENHANCE_YOUR_CALM (the CONTINUATION flood)');
like(probe('rapid', 3000), qr/^goaway=2 /, 'Rapid Reset: 3000 HEADERS+RST_STREAM end in GOAWAY');
# MadeYouReset: streams the client makes luxd reset (a body longer than its
# content-length) while a handler reads the body count as resets too.
{
    local $ENV{H2_PATH} = '/t/body';
    like(probe('madeyoureset', 500, 'cl'), qr/^goaway=none resets=500 /,
         'MadeYouReset: 500 resets luxd is made to send are taken (the burst is 1000)');
    like(probe('madeyoureset', 3000, 'cl'), qr/^goaway=11 /, '3000 end in GOAWAY ENHANCE_YOUR_CALM');
}
ok($s->alive, 'luxd is still up');

# keepalive_requests bounds the streams of a connection as it bounds HTTP/1's
# requests: GOAWAY after the 5th (h2load does not open another connection).
my $k = Luxd->new(server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }', keepalive_requests => 5 },
                  files => { 'www/index.html' => "k\n" });
my $kp = $k->port;
my $kl = `h2load -n 10 -c 1 -m 1 http://127.0.0.1:$kp/ 2>&1`;
like($kl, qr/requests: 10 total, 5 started, 5 done, 5 succeeded, 5 failed/,
     'keepalive_requests = 5: the connection takes 5 streams, then GOAWAY');
($out) = h2c("$url/");
is($out, "hello h2\n", 'and serves the next client');

done_testing;
