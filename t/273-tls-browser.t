# The demo site over HTTPS in a real browser (issue 19): Debian's headless
# Chromium, with a test CA put in a throwaway NSS database (libnss3-tools'
# certutil, in the run's own HOME), loads https://demo.test:PORT/ from a
# luxd serving www/ with a certificate that CA signed. What a visitor sees:
# the page's title and heading in the DOM after load, and the page and its
# stylesheet fetched over TLS 1.3 by Chromium (the access log: protocol,
# server name, user agent). Without the CA, the same load fails: Chromium
# really checked the certificate.
use strict;
use warnings;
use Test::More;
use Luxd;
use Chromium;
use TLSTest;
use Time::HiRes qw(time sleep);

unless (Chromium::path()) {
    ok(0, 'chromium is installed') or diag('`make deps-test` installs it (deps/packages-test.txt)');
    done_testing;
    exit;
}
my $certutil;
for my $d (split /:/, $ENV{PATH} // '') { $certutil //= "$d/certutil" if -x "$d/certutil" }
ok($certutil, 'certutil (libnss3-tools) is installed') or do { done_testing; exit };

# A CA, and a certificate for demo.test it signed.
my ($dir) = File::Temp::tempdir('luxd-browser-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
sub run { system("@_ >/dev/null 2>&1") == 0 or die "failed: @_" }
run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $dir/ca.key -out $dir/ca.pem "
    . "-days 30 -subj '/CN=luxd test CA' -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign");
run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $dir/demo.key -out $dir/demo.csr -subj /CN=demo.test");
{
    open my $fh, '>', "$dir/ext" or die;
    print $fh "subjectAltName=DNS:demo.test\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n";
}
run("openssl x509 -req -in $dir/demo.csr -CA $dir/ca.pem -CAkey $dir/ca.key -CAcreateserial -days 30 "
    . "-extfile $dir/ext -out $dir/demo.pem");

my ($s, $tp) = TLSTest::server(
    config => qq{vhost "demo.test" { default = true, root = "$Luxd::ROOT/www",
  tls = { cert = "$dir/demo.pem", key = "$dir/demo.key" } }\n},
    server => { access_log => \'{ path = "$DIR/access.log", format = "$tls_protocol $tls_sni $request $status \\"$http_user_agent\\"" }',
                access_log_buffer => 0 });
my $url = "https://demo.test:$tp/";
my @resolve = (resolve => "MAP demo.test 127.0.0.1");

sub lines_after {
    my ($from, @want) = @_;
    my @lines;
    Luxd::wait_for(sub {
        @lines = split /\n/, substr($s->access_log, $from);
        for my $re (@want) { return 0 unless grep { $_ =~ $re } @lines }
        1;
    }, 10);
    return @lines;
}

# With the CA trusted.
my $from = length $s->access_log;
my ($dom) = Chromium::run($url, @resolve, flags => ['--dump-dom'], home => sub {
    my ($home) = @_;
    mkdir "$home/.pki";
    mkdir "$home/.pki/nssdb";
    run("$certutil -d sql:$home/.pki/nssdb -N --empty-password");
    run("$certutil -d sql:$home/.pki/nssdb -A -t C,, -n luxd-test-ca -i $dir/ca.pem");
});
like($dom, qr{<title>luxd is running</title>}, 'the page\'s title after load, over HTTPS');
like($dom, qr{<h1>luxd is running</h1>}, 'and its heading');
my $chrome = qr/HeadlessChrome\/[\d.]+/;
my @lines = lines_after($from, qr{^TLSv1\.3 demo\.test GET / HTTP/1\.1 200 "[^"]*$chrome}, qr{^TLSv1\.3 demo\.test GET /style\.css HTTP/1\.1 200 "[^"]*$chrome});
ok((grep { m{^TLSv1\.3 demo\.test GET / HTTP/1\.1 200 "[^"]*$chrome} } @lines), 'Chromium fetched / over TLS 1.3, with the server name demo.test')
  or diag join "\n", @lines;
ok((grep { m{^TLSv1\.3 demo\.test GET /style\.css HTTP/1\.1 200 } } @lines), 'and the page\'s stylesheet');

# Without it: the certificate is refused and nothing is fetched.
$from = length $s->access_log;
my (undef, $err) = Chromium::run($url, @resolve, flags => ['--dump-dom'], expect_load => 0);
like($err, qr/ERR_CERT_AUTHORITY_INVALID/, 'a browser without the CA refuses the certificate');
is(substr($s->access_log, $from), '', 'and requests nothing');
$s->stop;
done_testing;
