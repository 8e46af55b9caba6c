# Break review of 60b3f4e: a reload that changes what an upstream's ca file
# holds (same path) keeps the pool, and its saved TLS session: new
# connections resume a session verified under the old CA and are never
# checked against the new one. A fresh luxd with the same config answers
# 502; the reloaded one keeps answering 200.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($dir) = File::Temp::tempdir('luxd-rv1-XXXXXX', TMPDIR => 1, CLEANUP => 1);
my $be = TLSTest::cert($dir, 'be.test');
my $other = TLSTest::cert($dir, 'other.test');
my ($b, $btp) = TLSTest::server(
    config => qq{vhost "be.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($be)]}, location "/status" { status = true } }\n},
    files => { 'www/index.html' => "backend\n" });

my $ca = "$dir/ca.pem";
sub put_ca { my ($src) = @_; system("cp $src $ca.tmp && mv $ca.tmp $ca") == 0 or die }
put_ca($be->{cert});
my $CONF = qq{upstream "be" { "127.0.0.1:$btp", tls = { ca = "$ca", name = "be.test" }, keepalive = 0 }
vhost "fe" { default = true, root = "\$DIR/www", proxy = "be", proxy_host = "be.test" }\n};
my $s = Luxd->new(config => $CONF, files => { 'www/x' => 'x' });
is($s->get('/index.html')->{status}, 200, 'ca holds the backend\'s certificate: 200');
is($s->get('/index.html')->{status}, 200, 'again (a session is saved in the pool)');

# The operator no longer trusts that certificate: ca now holds another.
put_ca($other->{cert});
like($s->reload // '', qr/^ok/, 'reload with the new ca');
my ($h0, $r0) = $b->get('/status?format=json')->{body} =~ /"handshakes":(\d+),"resumed":(\d+)/;
my @st = map { $s->get('/index.html')->{status} } 1 .. 3;
my ($h1, $r1) = $b->get('/status?format=json')->{body} =~ /"handshakes":(\d+),"resumed":(\d+)/;
diag "backend: handshakes +" . ($h1 - $h0) . ", resumed +" . ($r1 - $r0);
is("@st", "502 502 502", "after the reload, the backend's certificate is not trusted: 502");

my $f = Luxd->new(config => $CONF, files => { 'www/x' => 'x' });
is($f->get('/index.html')->{status}, 502, 'a fresh luxd with the same config: 502');
$f->stop;
$s->stop;
$b->stop;
done_testing;
