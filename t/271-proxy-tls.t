# Upstreams over TLS (issue 19): upstream { tls = true | { verify, ca,
# name } }. The backend is a real luxd with a TLS listener. The server's
# certificate is checked against ca for name (or the server's host, an IP
# address checked as such); a failed check is a 502 with a log line that
# says why (hostname mismatch, an unknown CA, a backend that speaks plain
# HTTP); verify = false speaks TLS without checking. Pooled connections are
# reused over TLS, and new connections resume the pool's session (the
# backend's own counters show both). A plain and a TLS pool on one address
# never lend each other's connections. Bodies both ways, large ones too.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($dir) = File::Temp::tempdir('luxd-ptls-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $be = TLSTest::cert($dir, 'be.test');
# One whose subjectAltName has the address too.
system("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $dir/ip.key -out $dir/ip.pem "
       . "-days 30 -subj /CN=ip -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1") == 0 or die 'openssl';
my $big = join '', map { chr(($_ * 13) & 255) } 1 .. 3_000_000;
my ($b, $btp) = TLSTest::server(
    config => qq{vhost "be.test" { root = "\$DIR/www", @{[TLSTest::tls_lua($be)]},
  policy = function(r) if r.path == "/echo" then return r:respond(200, r.method .. " " .. (r.headers["content-length"] or "-")) end end }
vhost "ip" { default = true, root = "\$DIR/www", tls = { cert = "$dir/ip.pem", key = "$dir/ip.key" },
  location "/status" { status = true } }\n},
    files => { 'www/index.html' => "backend\n", 'www/big.bin' => $big, 'www/ip/index.html' => "ip\n",
               'www/nocheck/index.html' => "nocheck\n", 'www/clear/index.html' => "clear\n" });
my $plain = $b->port;

my $UP = <<"EOF";
upstream "be" { "127.0.0.1:$btp", tls = { ca = "$be->{cert}", name = "be.test" } }
upstream "fresh" { "127.0.0.1:$btp", tls = { ca = "$be->{cert}", name = "be.test" }, keepalive = 0 }
upstream "wrongname" { "127.0.0.1:$btp", tls = { ca = "$dir/ip.pem", name = "other.test" } }
upstream "noca" { "127.0.0.1:$btp", tls = { name = "be.test" } }
upstream "ip" { "127.0.0.1:$btp", tls = { ca = "$dir/ip.pem" } }
upstream "nocheck" { "127.0.0.1:$btp", tls = { verify = false } }
upstream "plainbe" { "127.0.0.1:$plain", tls = true }
upstream "clear" { "127.0.0.1:$plain" }
EOF
# The Host sent is the certificate's name: luxd (the backend) answers 421
# to a Host whose vhost has another certificate than the SNI chose.
my $s = Luxd->new(config => $UP . q{vhost "fe" { default = true, root = "$DIR/www", proxy = "be", proxy_host = "be.test",
  location "/fresh/" { proxy = "fresh" }, location "/wrongname/" { proxy = "wrongname" },
  location "/noca/" { proxy = "noca" }, location "/ip/" { proxy = "ip", proxy_host = "ip" },
  location "/nocheck/" { proxy = "nocheck", proxy_host = "ip" }, location "/plainbe/" { proxy = "plainbe" },
  location "/clear/" { proxy = "clear" } }
}, files => { 'www/x' => 'x' });

sub backend_tls {
    return $b->get('/status?format=json')->{body} =~ /"tls":\{"handshakes":(\d+),"resumed":(\d+)/ ? ($1, $2) : (-1, -1);
}

my $r = $s->get('/index.html');
is($r->{status}, 200, 'proxied over TLS');
is($r->{body}, "backend\n", 'the backend\'s page');
my ($h0) = backend_tls();
$s->get('/index.html') for 1 .. 5;
my ($h1) = backend_tls();
is($h1, $h0, 'five more requests: no new handshake (the pooled connection is reused)');

# Each request a new connection: the pool's session is resumed.
my ($hb, $rb) = backend_tls();
is($s->get('/fresh/x')->{status}, 404, "keepalive = 0: request $_ answered (the backend's 404)") for 1 .. 4;
my ($ha, $ra) = backend_tls();
cmp_ok($ha - $hb, '>=', 4, 'new handshakes for them');
cmp_ok($ra - $rb, '>=', 3, 'and they resume the session: ' . ($ra - $rb) . ' of ' . ($ha - $hb));

# Failures: 502 and why.
is($s->get('/wrongname/')->{status}, 502, 'a certificate for another name: 502');
ok(Luxd::wait_for(sub { $s->error_log =~ /upstream wrongname: connect to 127\.0\.0\.1:\d+: TLS handshake: certificate verify failed: hostname mismatch \(checked for other\.test\)/ }),
   'the log says why') or diag $s->error_log;
is($s->get('/noca/')->{status}, 502, 'a CA the system does not know: 502');
ok(Luxd::wait_for(sub { $s->error_log =~ /upstream noca: .*certificate verify failed: self-signed certificate/ }),
   'the log says why');
is($s->get('/plainbe/')->{status}, 502, 'a backend that speaks plain HTTP: 502');
ok(Luxd::wait_for(sub { $s->error_log =~ /upstream plainbe: .*TLS handshake: (wrong version number|packet length too long|record layer failure)/ }),
   'the log says why') or diag $s->error_log;
is($s->get('/ip/index.html')->{body}, "ip\n", 'an address checked against the certificate\'s IP subjectAltName (no SNI: the default vhost\'s)');
is($s->get('/nocheck/index.html')->{body}, "nocheck\n", 'verify = false: TLS without a check');
is($s->get('/clear/index.html')->{body}, "clear\n", 'the same backend in plain HTTP beside');
is($s->get('/index.html')->{body}, "backend\n", 'and over TLS again: the pools are apart');

# Bodies both ways.
$r = $s->get('/big.bin');
ok($r->{body} eq $big, '3 MB response over TLS, byte for byte');
$r = $s->http(method => 'POST', path => '/echo', body => 'y' x 200000, headers => [ 'Content-Type' => 'x/y' ]);
is($r->{body}, 'POST 200000', 'a 200 KB request body over TLS');

# -t: name at its limit (253 bytes, a DNS name's most) and one past.
{
    my $n253 = join('.', ('a' x 63) x 3) . '.' . ('b' x 61);
    is(length $n253, 253, 'a name of 253 bytes');
    my ($rc, $out) = Luxd::check_config(qq{upstream "u" { "127.0.0.1:9", tls = { name = "$n253" } }\nvhost "v" { default = true, proxy = "u" }\n});
    is($rc, 0, 'tls name of 253 bytes: accepted') or diag $out;
    ($rc, $out) = Luxd::check_config(qq{upstream "u" { "127.0.0.1:9", tls = { name = "${n253}b" } }\nvhost "v" { default = true, proxy = "u" }\n});
    isnt($rc, 0, 'one past, 254: refused');
    like($out, qr/luxd\.lua:1: .*name/, 'at its line') or diag $out;
}
for my $c (
    [ 'a missing ca', qq{tls = { ca = "$dir/none.pem" }}, qr/luxd\.lua:1: upstream "u": tls ca "[^"]+none\.pem": No such file or directory/ ],
    [ 'a ca without a certificate', qq{tls = { ca = "$be->{key}" }}, qr/luxd\.lua:1: upstream "u": tls ca "[^"]+": no CA certificate in it/ ],
    [ 'verify = false with a ca', qq{tls = { verify = false, ca = "$be->{cert}" }}, qr/luxd\.lua:1: .*verify = false checks no certificate/ ],
    [ 'a name that is none', q{tls = { name = "a b" }}, qr/luxd\.lua:1: .*must be a host name or an IP address/ ],
    [ 'tls to a unix socket', q{tls = true, "unix:/tmp/x.sock"}, qr/luxd\.lua:1: .*tls to a unix: socket .* is not supported/ ],
) {
    my ($what, $kv, $re) = @$c;
    my ($rc, $out) = Luxd::check_config(qq{upstream "u" { "127.0.0.1:9", $kv }\nvhost "v" { default = true, proxy = "u" }\n});
    isnt($rc, 0, "-t refuses $what");
    like($out, $re, "$what: file:line and why") or diag $out;
}
$s->stop;
$b->stop;
done_testing;
