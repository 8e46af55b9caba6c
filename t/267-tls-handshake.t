# The handshake's bounds and the server-wide TLS settings (issue 19):
# handshake_timeout closes a connection whose handshake is not done in
# time, and once it is done, the first request has header_timeout; a
# ClientHello announcing more than 16 KiB is cut off on its first bytes,
# and so is more than 64 KiB before the handshake is done (exactly 16 and
# 64 KiB are not); server { tls = { protocols, ciphers } } change what is offered,
# and -t names a wrong one at its line; -T shows them. A vhost without a
# certificate gets the one of the wildcard vhost above it.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use IPC::Open3 qw(open3);
use Time::HiRes qw(time sleep);
use Errno qw(EAGAIN EWOULDBLOCK);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test', 'w.wild.test');
my $CONF = <<"EOF";
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }
vhost "*.wild.test" { root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'w.wild.test'})]} }
vhost "www.wild.test" { root = "\$DIR/www" }
EOF
my @FILES = (files => { 'www/index.html' => "hello\n" });

# Waits up to $secs for the peer to close $sock; true when it did.
sub closed_within {
    my ($sock, $secs) = @_;
    my $end = time + $secs;
    while (time < $end) {
        my $rin = '';
        vec($rin, fileno($sock), 1) = 1;
        next unless select($rin, undef, undef, $end - time) > 0;
        my $n = sysread($sock, my $buf, 65536);
        return 1 if !defined $n || $n == 0;
    }
    return 0;
}

# Whether $sock is still open: nothing to read and no end seen.
sub still_open {
    my ($sock) = @_;
    $sock->blocking(0);
    my $n = sysread($sock, my $buf, 65536);
    my $open = !defined $n && ($! == EAGAIN || $! == EWOULDBLOCK);
    $sock->blocking(1);
    return $open;
}

sub tcp { IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $_[0], Proto => 'tcp') or die "connect: $!" }

# --- handshake_timeout, then header_timeout --------------------------------
{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES,
                                   server => { header_timeout => 30, tls => \'{ handshake_timeout = 1 }' });
    # A client whose handshake is done and who then waits.
    my $pid = open3(my $in, my $out, undef, 'timeout', '60', 'openssl', 's_client', '-quiet',
                    '-connect', "127.0.0.1:$tp", '-servername', 'a.test');
    my $seen = '';
    # -quiet prints the verification lines once the handshake is done.
    while (defined(my $l = <$out>)) { $seen .= $l; last if $l =~ /^verify return:/ }
    like($seen, qr/^verify return:/m, 'a client finished its handshake and waits');
    my $t0 = time;
    my $stall = tcp($tp);
    syswrite $stall, "\x16\x03\x01\x02";    # four bytes of a record header, then nothing
    ok(closed_within($stall, 10), 'a handshake that stalls is closed');
    my $took = time - $t0;
    cmp_ok($took, '<', 8, sprintf('at handshake_timeout (1 s), not header_timeout (30 s): %.1f s', $took));
    ok(kill(0, $pid) && waitpid($pid, 1) == 0, 'the client whose handshake was done is still connected: '
       . 'its first request has header_timeout from the end of the handshake');
    print $in "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
    close $in;
    local $/;
    my $resp = <$out> // '';
    waitpid $pid, 0;
    like($resp, qr{^HTTP/1\.1 200 .*\r\n\r\nhello\n}ms, 'and its request is answered');
    $s->stop;
}

# --- a ClientHello over 16 KiB; more than 64 KiB before the handshake is done
{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES, server => { tls => \'{ handshake_timeout = 60 }' });
    # The first $sent bytes of a ClientHello announcing $len bytes, in
    # records of $rec bytes of it each.
    my $hello = sub {
        my ($len, $sent, $rec) = @_;
        my $body = "\x01" . substr(pack('N', $len), 1) . ("\0" x $len);
        my $wire = '';
        while (length($wire) < $sent) {
            my $left = $sent - length($wire);
            # The last record takes what is left (no record shorter than
            # its header is left over).
            my $n = $left < $rec + 5 + 6 ? $left - 5 : $rec;
            $wire .= "\x16\x03\x01" . pack('n', $n) . substr($body, 0, $n, '');
        }
        return $wire;
    };
    # OpenSSL makes room for the length announced: it is checked first.
    my $at = tcp($tp);
    syswrite $at, $hello->(16384, 8000, 16384);
    my $past = tcp($tp);
    syswrite $past, substr($hello->(16385, 8000, 16384), 0, 9);
    ok(closed_within($past, 10), 'a ClientHello announcing 16 KiB and a byte: closed on its first nine bytes');
    ok(still_open($at), 'one announcing exactly 16 KiB: it waits for the rest');
    # Its header cut across records of one byte: read all the same.
    my $cut = tcp($tp);
    syswrite $cut, $hello->(16385, 30, 1);
    ok(closed_within($cut, 10), 'announcing 16 KiB and a byte across one-byte records: closed');
    my $cut_at = tcp($tp);
    syswrite $cut_at, $hello->(16384, 30, 1);
    ok(still_open($cut_at), 'announcing exactly 16 KiB so: it waits');
    # In records of one byte each, the wire bytes pass 64 KiB long before
    # the message is whole: 10921 records of one byte and one of five.
    my $wire = $hello->(16000, 65536, 1);
    is(length($wire), 65536, 'a client sends exactly 64 KiB of one-byte records');
    my $at64 = tcp($tp);
    syswrite $at64, $wire;
    my $past64 = tcp($tp);
    syswrite $past64, $hello->(16000, 65537, 1);
    ok(closed_within($past64, 10), 'a byte past 64 KiB before the handshake is done: closed at once');
    ok(still_open($at64), 'exactly 64 KiB: it waits');
    syswrite $at64, "\x16";
    ok(closed_within($at64, 10), 'one more byte and it is closed too');
    my ($out) = $s->curl('-k', '--resolve', "a.test:$tp:127.0.0.1", "https://a.test:$tp/");
    is($out, "hello\n", 'a normal client is served meanwhile');
    $s->stop;
}

# --- protocols and ciphers --------------------------------------------------
{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES, server => { tls => \'{ protocols = "TLSv1.3" }' });
    like(TLSTest::s_client($tp, servername => 'a.test'), qr/^New, TLSv1\.3, /m, 'protocols = "TLSv1.3": 1.3 is spoken');
    unlike(TLSTest::s_client($tp, servername => 'a.test', tls12 => 1), qr/^New, TLSv/m, 'and a TLS 1.2 client is refused');
    $s->stop;
    ($s, $tp) = TLSTest::server(config => $CONF, @FILES,
                                server => { tls => \'{ protocols = { "TLSv1.2" }, ciphers = "ECDHE-ECDSA-CHACHA20-POLY1305" }' });
    like(TLSTest::s_client($tp, servername => 'a.test'), qr/^New, TLSv1\.2, Cipher is ECDHE-ECDSA-CHACHA20-POLY1305$/m,
         'protocols = { "TLSv1.2" } with ciphers: a client that could speak 1.3 gets 1.2 and that cipher');
    $s->stop;
}

# --- the server's cipher order; the server name acknowledged ---------------
{
    my $rsa = TLSTest::cert($cdir, 'r.test', type => 'rsa');
    my ($s, $tp) = TLSTest::server(config => qq{vhost "r.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($rsa)]} }\n}, @FILES);
    like(TLSTest::s_client($tp, servername => 'r.test', tls12 => 1,
                           args => ['-cipher', 'DHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256']),
         qr/^New, TLSv1\.2, Cipher is ECDHE-RSA-AES128-GCM-SHA256$/m,
         'a client that lists DHE first gets ECDHE: the server\'s order (testssl rated the client\'s HIGH)');
    # TLS 1.3: Mozilla's order, whatever the client's (OpenSSL's puts
    # AES-256 first); ChaCha20 for a client that puts it first.
    like(TLSTest::s_client($tp, servername => 'r.test',
                           args => ['-ciphersuites', 'TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256']),
         qr/^New, TLSv1\.3, Cipher is TLS_AES_128_GCM_SHA256$/m, 'TLS 1.3: AES-128-GCM first, the server\'s order');
    like(TLSTest::s_client($tp, servername => 'r.test',
                           args => ['-ciphersuites', 'TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256']),
         qr/^New, TLSv1\.3, Cipher is TLS_CHACHA20_POLY1305_SHA256$/m, 'TLS 1.3: ChaCha20 for a client that puts it first');
    like(TLSTest::s_client($tp, servername => 'r.test', args => ['-ciphersuites', 'TLS_AES_256_GCM_SHA384']),
         qr/^New, TLSv1\.3, Cipher is TLS_AES_256_GCM_SHA384$/m, 'TLS 1.3: AES-256-GCM for a client that offers only it');
    like(TLSTest::s_client($tp, servername => 'r.test', args => ['-tlsextdebug']),
         qr/TLS server extension "server name" \(id=0\), len=0/, 'the server name is acknowledged (RFC 6066 3)');
    $s->stop;
}

# --- a vhost without a certificate under a wildcard that has one -----------
{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES);
    is(TLSTest::subject(TLSTest::s_client($tp, servername => 'www.wild.test')), 'w.wild.test',
       'www.wild.test (no certificate of its own) gets *.wild.test\'s, not the default vhost\'s');
    is(TLSTest::subject(TLSTest::s_client($tp, servername => 'x.wild.test')), 'w.wild.test', 'as x.wild.test does');
    $s->stop;
}

# --- the redirect to https and HSTS of luxd.lua(5), HTTPS -------------------
{
    open my $fh, '<', "$Luxd::ROOT/doc/luxd.lua.5" or die "luxd.lua.5: $!";
    my $doc = do { local $/; <$fh> };
    my ($policy) = $doc =~ /^\.Sh HTTPS\n.*?^  (policy = function\(r\)\n.*?^  end,)$/ms;
    ok($policy, 'the reference has the redirect policy') or diag 'not found';
    my ($s, $tp) = TLSTest::server(@FILES, config => qq{vhost "example.com" { default = true, root = "\$DIR/www",
  @{[TLSTest::tls_lua($c->{'a.test'})]},
  $policy
}\n});
    my $r = $s->get('/index.html?a=1&b=2');
    is($r->{status}, 301, 'plain HTTP: a redirect');
    is($r->{headers}{location}, 'https://example.com/index.html?a=1&b=2', 'to https, path and query kept');
    ok(!defined $r->{headers}{'strict-transport-security'}, 'no HSTS header over plain HTTP');
    $r = $s->get('/index.html');
    is($r->{headers}{location}, 'https://example.com/index.html', 'no query: no "?"');
    my ($out) = $s->curl('-k', '-i', '--resolve', "example.com:$tp:127.0.0.1", "https://example.com:$tp/");
    like($out, qr{^HTTP/1\.1 200 .*^Strict-Transport-Security: max-age=31536000\r\n.*hello\n\z}ms,
         'HTTPS: the page, with HSTS');
    $s->stop;
}

# --- -t -------------------------------------------------------------------------
sub conf_tls {
    my ($tls) = @_;
    return qq{server {\n listen = { { "127.0.0.1:\$PORT", tls = true } },\n tls = {\n  $tls } }\n$CONF};
}
for my $b (
    [ 'a cipher list OpenSSL does not know', 'ciphers = "NOPE-CIPHER"',
      qr/luxd\.lua:4: server tls ciphers "NOPE-CIPHER": OpenSSL knows no cipher of that list/ ],
    [ 'TLS 1.1', 'protocols = { "TLSv1.1", "TLSv1.2" }',
      qr/luxd\.lua:4: .*"TLSv1\.1" is not offered: it is broken and deprecated \(RFC 8996\)/ ],
    [ 'a protocol name misspelt', 'protocols = "TLS1.3"', qr/luxd\.lua:4: .*must be one of "TLSv1\.2", "TLSv1\.3"/ ],
    [ 'no protocol', 'protocols = {}', qr/luxd\.lua:4: .*must not be empty/ ],
    [ 'a certificate in server tls', 'cert = "/x"', qr/luxd\.lua:4: .*unknown key "cert" \(certificates belong to a vhost/ ],
    [ 'client certificates in server tls', 'client_ca = "/x"', qr/luxd\.lua:4: .*unknown key "client_ca" \(client certificates are a vhost's: vhost "name" \{ tls = \{ \.\.\., client_ca = \.\.\. \} \}\)/ ],
    [ 'a zero handshake_timeout', 'handshake_timeout = 0', qr/luxd\.lua:4: .*handshake_timeout/ ],
) {
    my ($what, $tls, $re) = @$b;
    my ($rc, $out) = Luxd::check_config(conf_tls($tls));
    isnt($rc, 0, "-t refuses $what");
    like($out, $re, "$what: file:line and why") or diag $out;
}
{
    my ($rc, $out) = Luxd::check_config(qq{vhost "a.test" { root = "/tmp", tls = { cert = "/x", key = "/y", ciphers = "X" } }\n});
    like($out, qr/unknown key "ciphers" \(it belongs in server \{ tls = \{ \.\.\. \} \}\)/,
         'ciphers on a vhost: -t says where it belongs');
    ($rc, $out) = Luxd::check_config(qq{server { tls = { handshake_timeout = 5 } }\n$CONF});
    is($rc, 0, 'server tls without a TLS listener is accepted');
    like($out, qr/luxd\.lua:1: server tls is set, but no listen entry has tls = true/, 'with a warning');
    ($rc, $out) = Luxd::run_luxd('-T', '-c', do {
        my (undef, undef, $file) = Luxd::check_config(conf_tls('ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256", handshake_timeout = 3'));
        $file });
    like($out, qr/tls protocols TLSv1\.2-TLSv1\.3, ciphers ECDHE-ECDSA-AES128-GCM-SHA256, handshake_timeout 3000ms/,
         '-T shows the server tls settings');
    like($out, qr/tls ticket keys the process's own, rotated hourly/, 'and where the ticket keys come from');
}

done_testing;
