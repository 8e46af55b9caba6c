# The output writer with proxied streams written by uv_try_write first
# (624ed1b): on one keep-alive connection, pipelined, a chunked proxied
# stream of unknown length in small chunks, a static file, a multipart
# range response, HEAD of a proxied response, a length-delimited proxied
# stream, a static file again; byte-exact and in order, for a client that
# reads at once and one with a small window that reads in small bites.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(sleep time);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body body_piece);

my $be = Luxd::Backend->start(name => 's');
my $addr = $be->addr;
my $file = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. 100 * 1024 / 4 - 1;
my $s = Luxd->new(
    files  => { 'www/f.bin' => $file },
    config => qq{upstream "s" { "$addr", read_timeout = 30 }
vhost "l" { default = true, root = "\$DIR/www",
  location "/chunked/" { proxy = "s" }, location "/ok/" { proxy = "s" } }
});

my $CH = 3 * 1024 * 1024;
my @reqs = (
    Luxd::request(path => "/chunked/$CH/1000"),
    Luxd::request(path => '/f.bin'),
    Luxd::request(path => '/f.bin', headers => [Range => 'bytes=0-99,50000-60000,-7']),
    Luxd::request(method => 'HEAD', path => '/ok/5000'),
    Luxd::request(path => '/ok/2000000'),
    Luxd::request(path => '/f.bin', close => 1),
);

sub unchunk {
    my ($b) = @_;
    my $out = '';
    while ($b =~ s/\A([0-9a-f]+)\r\n//) {
        my $n = hex $1;
        last if $n == 0;
        $out .= substr($b, 0, $n, '');
        $b =~ s/\A\r\n// or return undef;
    }
    return $out;
}

for my $slow (0, 1) {
    my $what = $slow ? 'slow client' : 'fast client';
    my $c = $slow ? $s->connect(rcvbuf => 4096) : $s->connect;
    $c->send(join '', @reqs);
    my $t0 = time;
    while (!$c->{eof} && time - $t0 < 60) {
        if ($slow) {
            my $n = sysread($c->{sock}, my $chunk, 3000);
            if (!$n) { $c->{eof} = 1; last }
            $c->{buf} .= $chunk;
            sleep 0.0005 if length($c->{buf}) % 7 == 0;
        } else {
            $c->_fill(1);
        }
    }
    my $raw = $c->{buf};
    $c->close;
    my @r;
    for my $i (0 .. $#reqs) {
        my $r = Luxd::parse_one(\$raw, head => $i == 3, eof => 1);
        last unless $r;
        push @r, $r;
    }
    is(scalar @r, scalar @reqs, "$what: every response came") or next;
    my $b0 = $r[0]{body};
    $b0 = unchunk($b0) if ($r[0]{headers}{'transfer-encoding'} // '') =~ /chunked/ && $b0 =~ /\A[0-9a-f]+\r\n/;
    ok($r[0]{status} == 200 && defined $b0 && $b0 eq body($CH), "$what: the chunked stream byte-exact")
      or diag "status $r[0]{status}, " . length($b0 // '') . " bytes";
    ok($r[1]{status} == 200 && $r[1]{body} eq $file, "$what: the file after it");
    ok($r[2]{status} == 206 && index($r[2]{body}, substr($file, 50000, 10001)) > 0
         && index($r[2]{body}, substr($file, 0, 100)) > 0 && index($r[2]{body}, substr($file, -7)) > 0,
       "$what: multipart ranges");
    ok($r[3]{status} == 200 && ($r[3]{headers}{'content-length'} // '') eq '5000', "$what: HEAD of a proxied response");
    ok($r[4]{status} == 200 && $r[4]{body} eq body(2000000), "$what: the length-delimited stream");
    ok($r[5]{status} == 200 && $r[5]{body} eq $file, "$what: the last file");
    is(length $raw, 0, "$what: nothing after the last response");
}

$s->stop;
$be->stop;
done_testing;
