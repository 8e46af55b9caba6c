# HTTPS (issue 19): a listener with tls = true speaks TLS, each vhost with
# its own certificate chosen by the ClientHello's server name through the
# same exact/wildcard table as Host, the default vhost's for a name that
# matches none or for no name; ALPN says http/1.1; plain HTTP on the port
# gets a 400 that says so; files of every size go out whole (no sendfile
# under TLS: read into records), ranges too, to a slow reader as well;
# keep-alive works; sessions resume under the vhost that issued them and
# never under another (tickets of TLS 1.3, ids and tickets of TLS 1.2).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;
use Luxd::Backend qw(hdr);

my ($c) = TLSTest::certs('a.test', 'b.test', 'w.wild.test');
my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $big = join('', map { chr(($_ * 7 + ($_ >> 11)) & 255) } 0 .. 3 * 1024 * 1024 + 99);
my ($s, $tp) = TLSTest::server(
    config => <<"EOF",
upstream "be" { "$addr" }
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]},
  location "/be/" { proxy = "be" } }
vhost "b.test" { root = "\$DIR/b", @{[TLSTest::tls_lua($c->{'b.test'})]} }
vhost "*.wild.test" { root = "\$DIR/b", @{[TLSTest::tls_lua($c->{'w.wild.test'})]} }
EOF
    files => { 'www/index.html' => "hello a\n", 'b/index.html' => "hello b\n", 'www/big.bin' => $big },
);

sub curl_tls {
    my ($name, $cafile, $path, @more) = @_;
    return $s->curl('--cacert', $cafile, '--resolve', "$name:$tp:127.0.0.1", @more,
                    "https://$name:$tp$path");
}

# Certificates by server name, verified by a real client.
my ($out, $rc) = curl_tls('a.test', $c->{'a.test'}{cert}, '/');
is($rc, 0, 'curl verifies a.test\'s certificate');
is($out, "hello a\n", 'and gets a.test\'s page');
($out, $rc) = curl_tls('b.test', $c->{'b.test'}{cert}, '/');
is($out, "hello b\n", 'b.test: its own certificate and page');
($out, $rc) = curl_tls('b.test', $c->{'a.test'}{cert}, '/');
isnt($rc, 0, 'b.test is not served a.test\'s certificate');
is(TLSTest::subject(TLSTest::s_client($tp, servername => 'x.wild.test')), 'w.wild.test',
   'a wildcard vhost\'s certificate for a name under it');
is(TLSTest::subject(TLSTest::s_client($tp, servername => 'B.TEST.')), 'b.test',
   'server names match without case and with a final dot, as Host does');
is(TLSTest::subject(TLSTest::s_client($tp, servername => 'nowhere.test')), 'a.test',
   'an unknown server name gets the default vhost\'s certificate');
is(TLSTest::subject(TLSTest::s_client($tp)), 'a.test', 'no server name: the default vhost\'s');

# ALPN: http/1.1 when offered; a list without it goes on without ALPN.
my $t = TLSTest::s_client($tp, servername => 'a.test', alpn => 'h2,http/1.1');
like($t, qr{^ALPN protocol: http/1\.1$}m, 'ALPN h2,http/1.1: http/1.1 chosen');
$t = TLSTest::s_client($tp, servername => 'a.test', alpn => 'h2');
like($t, qr{^No ALPN negotiated$}m, 'ALPN h2 alone: no protocol chosen, the handshake goes on');
like($t, qr{^New, TLSv1\.3, }m, 'TLS 1.3 by default');
$t = TLSTest::s_client($tp, servername => 'a.test', tls12 => 1);
like($t, qr{^New, TLSv1\.2, }m, 'TLS 1.2 too');
$t = TLSTest::s_client($tp, servername => 'a.test', args => ['-tls1_1']);
like($t, qr{alert protocol version.*^New, \(NONE\), Cipher is \(NONE\)$}ms, 'TLS 1.1 refused');

# Plain HTTP on the TLS port.
my ($data, $info) = $s->raw("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", port => $tp);
my $r = Luxd::parse_one(\$data, eof => 1);
is($r->{status}, 400, 'plain HTTP on the TLS port: 400');
ok($info->{closed}, 'and the connection closed');
like($r->{body}, qr/this port speaks HTTPS/, 'which says why');

# Keep-alive: two requests, one connection, one handshake.
($out) = curl_tls('a.test', $c->{'a.test'}{cert}, '/', '-w', '[%{num_connects}]',
                  '-o', '/dev/null', "https://a.test:$tp/index.html", '-o', '/dev/null');
is($out, '[1][0]', 'keep-alive over TLS: the second request reuses the connection');

# Files: whole, in ranges, and to a slow reader, byte for byte.
($out, $rc) = curl_tls('a.test', $c->{'a.test'}{cert}, '/big.bin');
ok($rc == 0 && $out eq $big, '3 MiB file over TLS, byte for byte (' . length($out) . ' bytes)');
($out) = curl_tls('a.test', $c->{'a.test'}{cert}, '/big.bin', '-r', '1000000-1300099');
ok($out eq substr($big, 1000000, 300100), 'a range of it');
($out) = curl_tls('a.test', $c->{'a.test'}{cert}, '/big.bin', '--limit-rate', '8M');
ok($out eq $big, 'to a slow reader (8 MB/s), byte for byte');
my $head = curl_tls('a.test', $c->{'a.test'}{cert}, '/big.bin', '-I');
like($head, qr/^content-length: 3145828\r$/mi, 'HEAD: the length, no body');

# Resumption: under the vhost that issued the session, never another.
my $dir = $s->dir;
my $req = "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
for my $v (['3', []], ['2', ['-tls1_2']], ['2', ['-tls1_2', '-no_ticket']]) {
    my ($ver, $args) = @$v;
    my $what = "TLS 1.$ver" . (grep({ $_ eq '-no_ticket' } @$args) ? ' session id' : ' ticket');
    unlink "$dir/sess";
    $t = TLSTest::s_client($tp, servername => 'a.test', sess_out => "$dir/sess", input => $req, args => $args);
    is(TLSTest::resumed($t), 'New', "$what: a full handshake first");
    like($t, qr/hello a/, "$what: the page");
    $t = TLSTest::s_client($tp, servername => 'a.test', sess_in => "$dir/sess", input => $req, args => $args);
    is(TLSTest::resumed($t), 'Reused', "$what: resumed under a.test");
    $t = TLSTest::s_client($tp, servername => 'b.test', sess_in => "$dir/sess",
                           input => "GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n", args => $args);
    is(TLSTest::resumed($t), 'New', "$what: not resumed under b.test");
    is(TLSTest::subject($t), 'b.test', "$what: b.test's certificate then");
}

# The backend hears which scheme the client used (a break review: it was
# told http over HTTPS).
curl_tls('a.test', $c->{'a.test'}{cert}, '/be/ok/3');
my ($q) = grep { $_->{target} =~ m{^/be/ok/3} } $be->requests;
is(hdr($q, 'X-Forwarded-Proto'), 'https', 'proxied over HTTPS: X-Forwarded-Proto: https');
$s->get('/be/ok/4');
($q) = grep { $_->{target} =~ m{^/be/ok/4} } $be->requests;
is(hdr($q, 'X-Forwarded-Proto'), 'http', 'over the plain listener: http');

# The plain listener is as it was.
is($s->get('/')->{body}, "hello a\n", 'the plain listener beside it serves as before');

$s->stop;
$be->stop;
done_testing;
