# HTTP/2 in a real browser (issue 20): Debian's headless Chromium, with a
# test CA in a throwaway NSS database (as t/273), loads the demo over HTTPS
# from a listener with http2 = true, and a page whose script writes the
# protocol the browser used for it (the Navigation Timing entry's
# nextHopProtocol) into its title: "h2". The access log says HTTP/2.0 for
# the page and its stylesheet, over TLS 1.3.
use strict;
use warnings;
use Test::More;
use Luxd;
use Chromium;
use TLSTest;

unless (Chromium::path()) {
    ok(0, 'chromium is installed') or diag('`make deps-test` installs it (deps/packages-test.txt)');
    done_testing;
    exit;
}
my $certutil;
for my $d (split /:/, $ENV{PATH} // '') { $certutil //= "$d/certutil" if -x "$d/certutil" }
ok($certutil, 'certutil (libnss3-tools) is installed') or do { done_testing; exit };

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

my $tp = Luxd::free_port();
my $s = Luxd->new(
    config => qq{vhost "demo.test" { default = true, root = "$Luxd::ROOT/www",
  tls = { cert = "$dir/demo.pem", key = "$dir/demo.key" },
  location "/probe/" { root = "\$DIR" } }\n},
    files => { 'probe/index.html' => <<'HTML' },
<!DOCTYPE html>
<html><head><title>unknown</title></head><body><p id="p">probe</p>
<script>document.title = performance.getEntriesByType('navigation')[0].nextHopProtocol;</script>
</body></html>
HTML
    server => { listen => \qq{{ "127.0.0.1:\$PORT", { "127.0.0.1:$tp", tls = true, http2 = true } }},
                access_log => \'{ path = "$DIR/access.log", format = "$tls_protocol $request $status \\"$http_user_agent\\"" }',
                access_log_buffer => 0 });
my @resolve = (resolve => "MAP demo.test 127.0.0.1");
my $home = sub {
    my ($h) = @_;
    mkdir "$h/.pki";
    mkdir "$h/.pki/nssdb";
    run("$certutil -d sql:$h/.pki/nssdb -N --empty-password");
    run("$certutil -d sql:$h/.pki/nssdb -A -t C,, -n luxd-test-ca -i $dir/ca.pem");
};

my ($dom) = Chromium::run("https://demo.test:$tp/probe/", @resolve, flags => ['--dump-dom'], home => $home);
like($dom, qr{<title>h2</title>}, 'the browser says it loaded the page over h2');
($dom) = Chromium::run("https://demo.test:$tp/", @resolve, flags => ['--dump-dom'], home => $home);
like($dom, qr{<h1>luxd is running</h1>}, 'the demo: its heading after load');
my $chrome = qr/HeadlessChrome\/[\d.]+/;
ok(Luxd::wait_for(sub { $s->access_log =~ m{^TLSv1\.3 GET /style\.css HTTP/2\.0 200 "[^"]*$chrome}m }),
   'its stylesheet fetched over HTTP/2 and TLS 1.3 (access log)') or diag($s->access_log);
like($s->access_log, qr{^TLSv1\.3 GET / HTTP/2\.0 200 }m, 'and the page');
$s->stop;
done_testing;
