# What an operator sees of TLS (issue 19): the access log's $tls_protocol,
# $tls_cipher, $tls_sni and $tls_session_reused ("-" over plain HTTP); a
# policy's r.tls (nil over plain HTTP); the status endpoint's handshakes,
# resumptions and failures by why, each failure made once by a real or a
# hostile client and counted under its own reason, in both formats.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test', 'b.test');
my ($s, $tp) = TLSTest::server(
    config => <<"EOF",
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]},
  policy = function(r)
    if r.path == "/tls" then
      local t = r.tls
      if not t then return r:respond(200, "plain") end
      return r:respond(200, table.concat({ t.protocol, t.cipher, t.sni or "none", tostring(t.resumed) }, " "))
    end
  end,
  location "/status" { status = true } }
vhost "b.test" { root = "\$DIR/www" }
EOF
    files => { 'www/index.html' => "a\n" },
    server => {
        access_log => \'{ path = "$DIR/access.log", format = "$request_uri $tls_protocol $tls_cipher $tls_sni $tls_session_reused" }',
        access_log_buffer => 0,
        tls => \'{ protocols = "TLSv1.3", handshake_timeout = 0.5 }',
    },
);

my $REQ = "GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
sub tcp { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $tp) or die "connect: $!" }
sub wait_closed {
    my ($x) = @_;
    my $rin = '';
    vec($rin, fileno($x), 1) = 1;
    select($rin, undef, undef, 10);
    sysread($x, my $b, 100);
}

# --- the access log and r.tls ------------------------------------------------
my $sess = "$cdir/s1";
my $t = TLSTest::s_client($tp, servername => 'a.test', input => $REQ, sess_out => $sess);
like($t, qr/^New, TLSv1\.3, Cipher is (\S+)$/m, 'a handshake');
my ($cipher) = $t =~ /^New, TLSv1\.3, Cipher is (\S+)$/m;
$t = TLSTest::s_client($tp, servername => 'a.test', input => $REQ, sess_in => $sess);
is(TLSTest::resumed($t), 'Reused', 'and one that resumes');
TLSTest::s_client($tp, input => $REQ);    # no server name
$s->get('/index.html');
Luxd::wait_for(sub { ($s->access_log =~ tr/\n//) >= 4 }, 10);
my @lines = split /\n/, $s->access_log;
is($lines[0], "/index.html TLSv1.3 $cipher a.test .", 'access log: protocol, cipher, server name, not resumed');
is($lines[1], "/index.html TLSv1.3 $cipher a.test r", 'a resumed session: r');
is($lines[2], "/index.html TLSv1.3 $cipher - .", 'no server name: -');
is($lines[3], '/index.html - - - -', 'plain HTTP: - for each');
my ($out) = $s->curl('-k', '--resolve', "a.test:$tp:127.0.0.1", "https://a.test:$tp/tls");
like($out, qr/^TLSv1\.3 \S+ a\.test false$/, 'r.tls: protocol, cipher, sni, resumed');
is($s->get('/tls')->{body}, 'plain', 'r.tls is nil over plain HTTP');

# --- failures, one of each --------------------------------------------------
# version: a TLS 1.2 client (the server speaks 1.3 only).
unlike(TLSTest::s_client($tp, servername => 'a.test', tls12 => 1), qr/^New, TLSv/m, 'version: refused');
# cipher: a TLS 1.3 client offering a suite the server does not enable.
unlike(TLSTest::s_client($tp, servername => 'a.test', args => ['-ciphersuites', 'TLS_AES_128_CCM_8_SHA256']),
       qr/^New, TLSv/m, 'cipher: refused');
# name: b.test has no certificate and neither has... the default has one;
# so a server without certificates for a name needs its own server (below).
# alert: curl that does not trust the certificate.
my (undef, $rc) = $s->curl('-s', '--resolve', "a.test:$tp:127.0.0.1", "https://a.test:$tp/");
isnt($rc, 0, 'alert: curl refuses a certificate it does not trust');
# plain HTTP on the TLS port.
my $x = tcp();
syswrite $x, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
wait_closed($x);
# closed: a client that goes mid-handshake.
$x = tcp();
syswrite $x, "\x16\x03\x01";
close $x;
# unfinished: one that stays silent past handshake_timeout.
$x = tcp();
syswrite $x, "\x16\x03\x01";
wait_closed($x);
# too large: 70000 bytes of ClientHello.
$x = tcp();
my $body = "\x01" . substr(pack('N', 100000), 1) . ("\0" x 80000);
while (length $body > 10000) { syswrite $x, "\x16\x03\x01" . pack('n', 16384) . substr($body, 0, 16384, '') }
wait_closed($x);
# protocol: a record that is no handshake.
$x = tcp();
syswrite $x, "\x16\x03\x01\x00\x04\x09\x00\x00\x00";
wait_closed($x);

my $want = { unfinished => 1, closed => 1, plain_http => 1, too_large => 1, version => 1,
             cipher => 1, name => 0, alert => 1, client_cert => 0, protocol => 1 };
my $j;
ok(Luxd::wait_for(sub {
    my $r = $s->get('/status?format=json');
    ($j) = $r->{body} =~ /"tls":(\{.*?\}\})/s;
    $j && $j =~ /"closed":1\b/ && $j =~ /"unfinished":1\b/;
}, 10), 'the status endpoint counts the failures') or diag $j;
like($j, qr/^\{"handshakes":4,"resumed":1,/, 'handshakes 4 (the r.tls request too), resumed 1') or diag $j;
for my $k (sort keys %$want) {
    like($j, qr/"$k":$want->{$k}\b/, "failures: $k $want->{$k}") or diag $j;
}
my $p = $s->get('/status?format=prometheus')->{body};
like($p, qr/^luxd_tls_handshakes_total\{session="new"\} 3$/m, 'prometheus: new handshakes');
like($p, qr/^luxd_tls_handshakes_total\{session="resumed"\} 1$/m, 'prometheus: resumed');
like($p, qr/^luxd_tls_handshake_failures_total\{reason="too_large"\} 1$/m, 'prometheus: failures by reason');
$s->stop;

# name: no vhost has a certificate for the name, and the default has none.
($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }
vhost "d.test" { default = true, root = "\$DIR/www", location "/status" { status = true } }\n},
    files => { 'www/index.html' => "a\n" });
unlike(TLSTest::s_client($tp, servername => 'x.test'), qr/^New, TLSv/m, 'name: no certificate, refused');
like(TLSTest::s_client($tp, servername => 'a.test'), qr/^New, TLSv/m, 'a.test is served');
ok(Luxd::wait_for(sub { $s->get('/status?format=json')->{body} =~ /"name":1\b/ }, 10),
   'failures: name 1');
$s->stop;

done_testing;
