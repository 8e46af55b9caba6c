# TLS configuration (issue 19): what `luxd -t` says of certificates and
# keys, with file:line (a missing file, an unreadable key, a key of another
# certificate, a TLS listener without any certificate, two certificates of
# one key type, keys not built yet, tls in a location, the PROXY protocol
# with TLS), expiry as a warning; -T shows them. A reload reads them anew:
# a new certificate for new handshakes while an open keep-alive connection
# goes on; a reload with a broken one keeps the old generation serving and
# says why. r.scheme tells a policy HTTPS from HTTP (the redirect of the
# reference works).
use strict;
use warnings;
use Test::More;
use IPC::Open3 qw(open3);
use lib 't/lib';
use Luxd;
use File::Temp ();
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test', 'b.test');
my $rsa = TLSTest::cert($cdir, 'a.test', type => 'rsa');
my $ec2 = TLSTest::cert($cdir, 'a.test', tag => '2');
my $old = TLSTest::cert($cdir, 'old.test', days => -1);
my $A = TLSTest::tls_lua($c->{'a.test'});
my $enc = "$cdir/a.enc.key";
system("openssl pkey -in $c->{'a.test'}{key} -aes256 -passout pass:secret -out $enc") == 0 or die 'openssl pkey';

sub conf {
    my ($vhost, %o) = @_;
    my $listen = $o{listen} // '{ { "127.0.0.1:$PORT", tls = true } }';
    return qq{server { listen = $listen, error_log = "\$DIR/error.log", pid_file = "\$DIR/luxd.pid" }\n$vhost};
}

# -t: the errors, each at the line of the tls table.
my @bad = (
    [ 'a missing cert file', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$cdir/none.pem", key = "$c->{'a.test'}{key}" } }\n},
      qr/luxd\.lua:4: vhost "a\.test": tls cert "\Q$cdir\E\/none\.pem": No such file or directory/ ],
    [ 'a key of another certificate', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$c->{'a.test'}{cert}", key = "$c->{'b.test'}{key}" } }\n},
      qr/luxd\.lua:4: vhost "a\.test": tls key "[^"]+b\.test\.ec\.key" does not belong to cert "[^"]+a\.test\.ec\.pem"/ ],
    [ 'a cert file that is no certificate', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$c->{'a.test'}{key}", key = "$c->{'a.test'}{key}" } }\n},
      qr/luxd\.lua:4: vhost "a\.test": tls cert "[^"]+": no start line/ ],
    [ 'two certificates of one key type', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { { cert = "$c->{'a.test'}{cert}", key = "$c->{'a.test'}{key}" }, { cert = "$ec2->{cert}", key = "$ec2->{key}" } } }\n},
      qr/luxd\.lua:4: .*have keys of the same type: two certificates are one ECDSA and one RSA/ ],
    [ 'a TLS listener and no certificate', qq{vhost "a.test" { default = true, root = "/tmp" }\n},
      qr/luxd\.lua:1: listen 127\.0\.0\.1:\d+: tls = true, but no vhost has a certificate/ ],
    [ 'a cert without its key', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$c->{'a.test'}{cert}" } }\n},
      qr/luxd\.lua:4: .*"key" is missing/ ],
    [ 'refusing handshakes per vhost (not built)', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$c->{'a.test'}{cert}", key = "$c->{'a.test'}{key}", reject_handshake = true } }\n},
      qr/luxd\.lua:4: .*unknown key "reject_handshake" \(refusing handshakes per vhost: not built in this version of luxd\)/ ],
    [ 'tls in a location', qq{vhost "a.test" {\n default = true, root = "/tmp", $A,\n location "/x/" { $A } }\n},
      qr/luxd\.lua:4: .*unknown key "tls" \(a certificate is chosen when a connection starts/ ],
    [ 'the PROXY protocol with TLS', qq{vhost "a.test" { default = true, root = "/tmp", $A }\n},
      qr/luxd\.lua:1: .*proxy_protocol together with tls is not supported yet/,
      '{ { "127.0.0.1:$PORT", tls = true, proxy_protocol = true } }' ],
    [ 'a key encrypted with a passphrase', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$c->{'a.test'}{cert}", key = "$enc" } }\n},
      qr/luxd\.lua:4: .*tls key "[^"]+": the key is encrypted with a passphrase, which luxd does not ask for/ ],
    [ 'three certificates', qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { { cert = "a", key = "b" }, { cert = "a", key = "b" }, { cert = "a", key = "b" } } }\n},
      qr/luxd\.lua:4: .*3 certificates: at most two, one ECDSA and one RSA/ ],
);
for my $b (@bad) {
    my ($what, $vh, $re, $listen) = @$b;
    my ($rc, $out) = Luxd::check_config(conf($vh, listen => $listen));
    is($rc, 1, "-t refuses $what");
    like($out, $re, "$what: said with file:line") or diag $out;
}

# Two pairs, ECDSA and RSA: each client gets what it supports.
my $both = qq{vhost "a.test" { default = true, root = "\$DIR/www",
  tls = { { cert = "$c->{'a.test'}{cert}", key = "$c->{'a.test'}{key}" }, { cert = "$rsa->{cert}", key = "$rsa->{key}" } } }\n};
my ($rc, $out) = Luxd::check_config(conf($both));
is($rc, 0, 'an ECDSA and an RSA pair side by side') or diag $out;
# Expired: a warning, not an error.
my $exp = qq{vhost "old.test" {\n default = true, root = "/tmp",\n tls = { cert = "$old->{cert}", key = "$old->{key}" } }\n};
($rc, $out) = Luxd::check_config(conf($exp));
is($rc, 0, 'an expired certificate does not stop the load');
like($out, qr/luxd\.lua:4: vhost "old\.test": tls cert "[^"]+" has expired: clients will refuse it/, 'it is a warning with file:line');
# A certificate with no listener to use it: a warning.
($rc, $out) = Luxd::check_config(conf(qq{vhost "a.test" {\n default = true, root = "/tmp",\n $A }\n}, listen => '"127.0.0.1:$PORT"'));
like($out, qr/luxd\.lua:4: .*no listen entry has tls = true/, 'a certificate no listener uses: a warning');
# A default vhost without a certificate beside one with: clients without a
# known name are refused; a warning says so, at the default's line.
($rc, $out) = Luxd::check_config(conf(qq{vhost "a.test" {\n root = "/tmp",\n $A }\nvhost "d.test" {\n default = true, root = "/tmp" }\n}));
is($rc, 0, 'a default vhost without a certificate does not stop the load') or diag $out;
like($out, qr/luxd\.lua:5: vhost "d\.test" is the default but has no certificate: a TLS client that sends no server name, or a name no vhost with a certificate has, is refused/,
     'it is a warning with file:line');
unlike(join('', (Luxd::check_config(conf($both)))[1]), qr/is the default but has no certificate/, 'a default with a certificate: no such warning');
# -T.
($rc, $out) = Luxd::run_luxd('-T', '-c', (Luxd::check_config(conf($both)))[2]);
like($out, qr/^  listen 127\.0\.0\.1:\d+ tls$/m, '-T: the listener says tls');
like($out, qr/^  tls cert \Q$rsa->{cert}\E key \Q$rsa->{key}\E  \(\S*luxd\.lua:\d+\)$/m, '-T: each pair');

# A running server: both key types by what the client offers.
my ($s, $tp) = TLSTest::server(config => $both, files => { 'www/index.html' => "v1\n" });
like(TLSTest::s_client($tp, servername => 'a.test', tls12 => 1, args => ['-sigalgs', 'RSA-PSS+SHA256:RSA+SHA256']),
     qr/^Peer signature type: RSA/m, 'a client that signs only with RSA gets the RSA certificate');
like(TLSTest::s_client($tp, servername => 'a.test'), qr/^Peer signature type: ECDSA$/m, 'others the ECDSA one');
$s->stop;

# Reload: new certificates for new handshakes; an open connection goes on.
($s, $tp) = TLSTest::server(
    config => qq{vhost "a.test" { default = true, root = "\$DIR/www", $A,
  policy = function(r) if r.path == "/scheme" then return r:respond(200, r.scheme) end end }\n},
    files => { 'www/index.html' => "v1\n" });
is($s->curl('-k', "https://127.0.0.1:$tp/scheme"), 'https', 'r.scheme: https over TLS');
is($s->get('/scheme')->{body}, 'http', 'r.scheme: http on the plain listener');
my $fp1 = fingerprint(TLSTest::s_client($tp, servername => 'a.test', args => ['-showcerts']));
# An open keep-alive connection: s_client reading requests from a pipe.
my $pid = open3(my $in, my $outfh, undef, 'timeout', '30', 'openssl', 's_client', '-connect',
                "127.0.0.1:$tp", '-servername', 'a.test', '-quiet', '-ign_eof');
binmode $outfh;
$in->autoflush(1);
print $in "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
like(read_response($outfh), qr/\r\n\r\nv1\n\z/, 'keep-alive connection: a first response');
(my $conf = $s->{config_text}) =~ s/\Q$c->{'a.test'}{cert}\E/$ec2->{cert}/;
$conf =~ s/\Q$c->{'a.test'}{key}\E/$ec2->{key}/;
$s->write_config($conf);
like($s->reload // $s->reload_error, qr/^ok/, 'a reload with another certificate');
my $fp2 = fingerprint(TLSTest::s_client($tp, servername => 'a.test', args => ['-showcerts']));
ok($fp1 && $fp2 && $fp1 ne $fp2, 'a new handshake gets the new certificate');
print $in "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
like(read_response($outfh), qr/\r\n\r\nv1\n\z/, 'the connection opened before the reload goes on');
# A broken certificate: the reload fails, the old generation serves.
(my $broken = $conf) =~ s/\Q$ec2->{key}\E/$c->{'b.test'}{key}/;
$s->write_config($broken);
my $r = $s->reload;
ok(!defined $r || $r !~ /^ok/, 'a reload with a key of another certificate fails');
like($s->error_log, qr/does not belong to cert/, 'and says why');
is(fingerprint(TLSTest::s_client($tp, servername => 'a.test', args => ['-showcerts'])), $fp2,
   'the certificate of the last good generation is still served');
print $in "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
like(read_response($outfh), qr/\r\n\r\nv1\n\z/, 'and the open connection still goes on');
close $in;
waitpid $pid, 0;
$s->stop;
# Started as root with user = nobody: a key nobody cannot read loads now
# and would fail every reload; -t says so (the file, or a directory above
# it, by its mode bits).
{
    my $kd = File::Temp::tempdir('luxd-keys-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    chmod 0755, $kd;
    system('cp', $c->{'a.test'}{key}, "$kd/a.key") == 0 && system('cp', $c->{'a.test'}{cert}, "$kd/a.pem") == 0 or die;
    chmod 0644, "$kd/a.pem";
    my $conf = qq{server { listen = { { "127.0.0.1:\$PORT", tls = true } }, user = "nobody" }\n}
             . qq{vhost "a.test" {\n default = true, root = "/tmp",\n tls = { cert = "$kd/a.pem", key = "$kd/a.key" } }\n};
    chmod 0600, "$kd/a.key";
    my ($rc, $out) = Luxd::check_config($conf);
    is($rc, 0, 'as root: a key only root may read loads');
    like($out, qr/luxd\.lua:4: vhost "a\.test": tls file "\Q$kd\E\/a\.key" is not readable by user "nobody": it loads now, as root, and every reload \(as nobody\) will fail; see luxd\(8\), "TLS keys"/,
         'with a warning that the next reload as nobody will fail') or diag $out;
    chmod 0644, "$kd/a.key";
    ($rc, $out) = Luxd::check_config($conf);
    unlike($out, qr/not readable by user/, 'readable by all: no warning');
    chmod 0700, $kd;
    ($rc, $out) = Luxd::check_config($conf);
    like($out, qr/tls file "\Q$kd\E\/a\.key" is not readable by user "nobody"/, 'a directory nobody may not enter: warned too');
}

done_testing;

# The SHA-256 of the server's certificate from s_client -showcerts.
sub fingerprint {
    my ($text) = @_;
    my ($pem) = $text =~ /(-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----)/s or return '';
    require Digest::SHA;
    require MIME::Base64;
    (my $b64 = $pem) =~ s/-----[^-]+-----|\s//g;
    return Digest::SHA::sha256_hex(MIME::Base64::decode_base64($b64));
}

# One response (headers and a Content-Length body) from a handle.
sub read_response {
    my ($fh) = @_;
    my $buf = '';
    my $deadline = time + 10;
    while (time < $deadline) {
        if ($buf =~ /\r\n\r\n/ && $buf =~ /^Content-Length: (\d+)\r$/mi) {
            my $need = index($buf, "\r\n\r\n") + 4 + $1;
            return $buf if length($buf) >= $need;
        }
        my $n = sysread($fh, $buf, 65536, length $buf);
        last unless $n;
    }
    return $buf;
}
