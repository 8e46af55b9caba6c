# Break review of 2b63251/e22871d: a vhost without a certificate of its own
# is covered by the wildcard above it ("wiki.corp.test" by "*.corp.test",
# lx_tls_pick): a connection made for its name gets the wildcard's context,
# which requires a client certificate. A connection made for another name
# (the default vhost, no client certificate) with Host wiki.corp.test is
# served (misdirected() looks only at r->vhost->tls.ctx, NULL here): the
# client-certificate requirement is bypassed by the Host header.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $dir) = TLSTest::certs('pub.test', 'w.corp.test', 'ca.test');
my $CONF = <<"EOF2";
vhost "pub.test" { default = true, root = "\$DIR/p", @{[TLSTest::tls_lua($c->{'pub.test'})]} }
vhost "*.corp.test" { root = "\$DIR/w",
  tls = { cert = "$c->{'w.corp.test'}{cert}", key = "$c->{'w.corp.test'}{key}", client_ca = "$c->{'ca.test'}{cert}" } }
vhost "wiki.corp.test" { root = "\$DIR/wiki" }
EOF2
my ($s, $tp) = TLSTest::server(config => $CONF,
    files => { 'p/index.html' => "p\n", 'w/index.html' => "w\n", 'wiki/index.html' => "secret wiki\n" });

sub get {
    my ($sni, $host) = @_;
    my ($out) = $s->curl('-k', '-s', '-o', '-', '-w', '%{http_code}', '--resolve', "$sni:$tp:127.0.0.1",
                         '-H', "Host: $host", "https://$sni:$tp/");
    return $out =~ /^(.*?)(\d{3})\z/s ? "$2 $1" : "no answer: $out";
}
unlike(get('wiki.corp.test', 'wiki.corp.test'), qr/^200/, 'SNI wiki.corp.test without a client certificate: refused');
unlike(get('x.corp.test', 'wiki.corp.test'), qr/^200/, 'SNI x.corp.test without a client certificate: refused');
my $r = get('pub.test', 'wiki.corp.test');
unlike($r, qr/^200/, "SNI pub.test, Host wiki.corp.test: not served without a client certificate (got: $r)");
$s->stop;
done_testing;
