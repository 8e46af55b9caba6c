# Reloads under HTTPS load (issue 19): two workers doing handshakes
# (wrk with Connection: close, every request a new connection, half of
# them resuming) and keep-alive requests, while reloads swap the vhost's
# certificate back and forth. Not one request may fail, and both
# certificates are seen by new handshakes. Under `make tsan` this is the
# two loops' handshakes, tickets and session cache against reloads.
use strict;
use warnings;
use Test::More;
use POSIX qw(:sys_wait_h);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test');
my $two = TLSTest::cert($cdir, 'a.test', tag => '2');
sub conf {
    my ($p) = @_;
    return qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($p)]} }\n};
}
my ($s, $tp) = TLSTest::server(config => conf($c->{'a.test'}), workers => 2,
                               files => { 'www/1k' => 'x' x 1024 });
my $dir = $s->dir;

# Two wrk runs in the background, for as long as the reloads take.
my @wrk;
for my $mode ([ 'close', '-H', 'Connection: close' ], [ 'keepalive' ]) {
    my ($name, @h) = @$mode;
    my $pid = fork // die;
    if ($pid == 0) {
        open STDOUT, '>', "$dir/wrk-$name.out" or die;
        open STDERR, '>&', \*STDOUT;
        exec 'timeout', '60', 'wrk', '-t', '1', '-c', '4', '-d', '6', @h, "https://127.0.0.1:$tp/1k";
        exit 127;
    }
    push @wrk, [ $name, $pid ];
}

# Reloads, each awaited, swapping the certificate, while wrk runs.
my %seen;
my $reloads = 0;
for my $i (1 .. 8) {
    my $p = $i % 2 ? $two : $c->{'a.test'};
    (my $text = $s->{config_text}) =~ s/cert = "[^"]+", key = "[^"]+"/cert = "$p->{cert}", key = "$p->{key}"/;
    $s->write_config($text);
    $reloads++ if ($s->reload // '') =~ /^ok/;
    my $fp = `openssl x509 -in $p->{cert} -noout -fingerprint -sha256`;
    my $got = TLSTest::s_client($tp, servername => 'a.test', args => ['-showcerts']);
    my ($pem) = $got =~ /(-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----)/s;
    $seen{$i % 2} = 1 if $pem && `echo '$pem' | openssl x509 -noout -fingerprint -sha256` eq $fp;
}
is($reloads, 8, '8 reloads, each ok');
is(scalar(keys %seen), 2, 'new handshakes got each certificate in turn');

for my $w (@wrk) {
    my ($name, $pid) = @$w;
    waitpid $pid, 0;
    my $out = Luxd::_slurp("$dir/wrk-$name.out") // '';
    my ($n) = $out =~ /(\d+) requests in/;
    ok($n && $n > 0, "wrk $name: $n requests") or diag $out;
    unlike($out, qr/Non-2xx|Socket errors/, "wrk $name: no failed request and no socket error") or diag $out;
}
like($s->get('/1k')->{body}, qr/^x{1024}\z/, 'still serving');
$s->stop;
done_testing;
