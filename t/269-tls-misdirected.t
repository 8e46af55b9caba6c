# 421 Misdirected Request (RFC 9110 15.5.20, issue 19): over TLS, a request
# whose Host names a vhost with a certificate of its own other than the
# one the connection's server name chose is refused with 421, so that a
# client never reaches a vhost whose certificate it did not check (nginx
# does so only under client certificates). A vhost without a certificate
# of its own is served over any connection; names under one wildcard share
# it; a reload between the handshake and the request changes nothing.
use strict;
use warnings;
use Test::More;
use IPC::Open3 qw(open3);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c) = TLSTest::certs('a.test', 'b.test', 'w.wild.test');
my $CONF = <<"EOF2";
vhost "a.test" { default = true, root = "\$DIR/a", @{[TLSTest::tls_lua($c->{'a.test'})]} }
vhost "b.test" { root = "\$DIR/b", @{[TLSTest::tls_lua($c->{'b.test'})]} }
vhost "*.wild.test" { root = "\$DIR/w", @{[TLSTest::tls_lua($c->{'w.wild.test'})]} }
vhost "plain.test" { root = "\$DIR/p" }
EOF2
my ($s, $tp) = TLSTest::server(config => $CONF,
    files => { 'a/index.html' => "a\n", 'b/index.html' => "b\n", 'w/index.html' => "w\n", 'p/index.html' => "p\n" });

# (status, body) of GET / over a connection made for $sni with Host $host.
sub get {
    my ($sni, $host) = @_;
    my ($out) = $s->curl('-k', '-s', '-o', '-', '-w', '%{http_code}', '--resolve', "$sni:$tp:127.0.0.1",
                         '-H', "Host: $host", "https://$sni:$tp/");
    return $out =~ /^(.*?)(\d{3})\z/s ? "$2 $1" : "no answer: $out";
}

is(get('a.test', 'a.test'), "200 a\n", 'server name and Host agree: served');
like(get('a.test', 'b.test'), qr/^421 /, 'a connection made for a.test, Host b.test (its own certificate): 421');
like(get('b.test', 'a.test'), qr/^421 /, 'and the other way');
is(get('b.test', 'B.TEST.'), "200 b\n", 'Host in another case, with a final dot: the same vhost');
is(get('a.test', 'plain.test'), "200 p\n", 'a vhost without a certificate of its own is served');
is(get('x.wild.test', 'y.wild.test'), "200 w\n", 'two names under one wildcard share its certificate');
like(get('x.wild.test', 'a.test'), qr/^421 /, 'a wildcard\'s connection, Host a.test: 421');
is(get('a.test', 'nowhere.test'), "200 a\n", 'an unknown Host goes to the default vhost, whose certificate it got');
my ($out) = $s->curl('-k', '-s', '-w', '%{http_code}', '-H', 'Host: b.test', "https://127.0.0.1:$tp/");
like($out, qr/421\z/, 'no server name (the default\'s certificate), Host b.test: 421');
is($s->get('/', 'Host' => 'b.test')->{body}, "b\n", 'plain HTTP is not concerned');

# A keep-alive connection for a.test across a reload: still a.test.
my $pid = open3(my $in, my $rd, undef, 'timeout', '30', 'openssl', 's_client', '-quiet', '-ign_eof',
                '-connect', "127.0.0.1:$tp", '-servername', 'a.test');
binmode $rd;
$in->autoflush(1);
sub response {
    my $head = '';
    while (defined(my $l = <$rd>)) {
        next if $head eq '' && $l !~ /^HTTP\//;
        $head .= $l;
        last if $l eq "\r\n";
    }
    my ($len) = $head =~ /^Content-Length: (\d+)/mi;
    read($rd, my $body, $len // 0);
    return ($head =~ /^HTTP\/1\.1 (\d+)/ ? $1 : 'none') . " $body";
}
print $in "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
is(response(), "200 a\n", 'keep-alive: a first request');
like($s->reload // $s->reload_error, qr/^ok/, 'a reload');
print $in "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
is(response(), "200 a\n", 'the same connection after the reload: served, not 421');
print $in "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
like(response(), qr/^421 /, 'and Host b.test on it: 421, the connection kept');
print $in "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
is(response(), "200 a\n", 'a request after the 421 on the same connection');
close $in;
waitpid $pid, 0;
$s->stop;
done_testing;
