# issue 11 review of --explain: for each request, the answer --explain
# prints is the status a running luxd with the same config file gives the
# same bytes on loopback (t/131's check, on what t/131 does not try). Each
# case names the part of the server --explain does not follow:
#  - a status = true location (handlers/status.c): its handler answers
#    (200, or 405 to a POST), it is no upstream;
#  - dir_listing beside fallback: the listing handler only takes a path
#    ending in "/" (handlers/listing.c), so a missing file goes on to the
#    fallback, and so does a missing directory (t/157: it was the
#    listing's 404);
#  - real_ip: behind a trusted proxy (--from), access `from` rules see the
#    address the header names (conn.c req_addr), not the proxy's;
#  - the head's limits (h1.c): max_header_bytes and 100 header lines are
#    refused with 431, a Content-Length over max_body_bytes with 413; a
#    request with a body (Content-Length) is routed as any other, and so
#    is one with Upgrade (luxd answers it as a plain request, or tunnels
#    it to an upstream).
# Each limit is tested at the limit (where --explain and the server agree
# today) and one past it.
use strict;
use warnings;
use Test::More;
use Luxd;
use Luxd::Backend;

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $s = Luxd->new(
    server => {
        real_ip          => { from => ['127.0.0.0/8'], header => 'X-Forwarded-For' },
        max_header_bytes => 1024,
        max_body_bytes   => 1000,
    },
    files => {
        'www/a.txt'       => "a\n",
        'www/d/x'         => "x\n",
        'www/plain/a.txt' => "a\n",
        'www/plain/lan/x' => "x\n",
    },
    config => <<"EOF",
upstream "be" { "$addr" }
vhost "localhost" {
  default = true, root = "\$DIR/www", dir_listing = true, fallback = "be",
  access = { deny { prefix = "/plain/lan/", from = "10.0.0.0/8", status = 451 } },
  location "/metrics" { status = true },
  location "/plain/" { fallback = false, dir_listing = false },
}
EOF
);

# The answer --explain gives (a status, "from the upstream", or rc=N when
# it gives none), and what the server answers to the request line and
# header lines as --explain would build them (its status, or "from the
# upstream" when the backend answered).
sub explained {
    my ($line, $h, %o) = @_;
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', $line,
                                    (map { ('-H', $_) } @$h), $o{from} ? ('--from', $o{from}) : ());
    my ($a) = $out =~ /^answer: (\d+|from the upstream)/m;
    return ($rc ? "rc=$rc" : $a // 'none', $out);
}
sub server {
    my ($line, $h, $body) = @_;
    my $d = $s->raw("$line\r\n" . join('', map { "$_\r\n" } @$h) . "\r\n" . ($body // ''), timeout => 5);
    # The backend's answers carry X-Backend: --explain says "from the upstream".
    return $d =~ m{\A[^\r]*\r\n(?:[^\r]+\r\n)*?X-Backend: be\r\n}i ? 'from the upstream'
      : $d =~ m{^HTTP/1\.1 (\d{3})} ? $1 : 'none';
}
sub agree {
    my ($what, $line, $h, %o) = @_;
    my ($want, $out) = explained($line, $h, %o);
    my $got = server($line, $h, $o{body});
    (my $short = $what) =~ s/(.{120}).*/$1.../;
    is $want, $got, "$short: --explain says what the server answers ($got)" or diag $out =~ s/([^\n]{200})[^\n]*/$1.../gr;
}
my @H = ('Host: localhost', 'Connection: close');

# --- a status location --------------------------------------------------------
agree('GET /metrics', 'GET /metrics HTTP/1.1', \@H);
agree('HEAD /metrics', 'HEAD /metrics HTTP/1.1', \@H);
agree('POST /metrics', 'POST /metrics HTTP/1.1', \@H);

# --- dir_listing beside fallback ----------------------------------------------
agree('a directory: the listing', 'GET /d/ HTTP/1.1', \@H);
agree('a missing file: the fallback (the backend answers 418)', 'GET /status/418 HTTP/1.1', \@H);
agree('a missing directory: the fallback (t/157)', 'GET /nodir/ HTTP/1.1', \@H);

# --- real_ip --------------------------------------------------------------------
agree('from 127.0.0.1, no X-Forwarded-For', 'GET /plain/lan/x HTTP/1.1', \@H, from => '127.0.0.1');
agree('from the trusted 127.0.0.1 for 10.1.2.3', 'GET /plain/lan/x HTTP/1.1', [@H, 'X-Forwarded-For: 10.1.2.3'],
      from => '127.0.0.1');
agree('from the trusted 127.0.0.1 for 192.0.2.1', 'GET /plain/lan/x HTTP/1.1', [@H, 'X-Forwarded-For: 192.0.2.1'],
      from => '127.0.0.1');

# --- the head's limits ------------------------------------------------------------
# The head counts from the request line to the end of the last field value.
my $head = length("GET /plain/a.txt HTTP/1.1\r\n" . join('', map { "$_\r\n" } @H) . "X: ");
agree('a head of max_header_bytes', 'GET /plain/a.txt HTTP/1.1', [@H, 'X: ' . ('v' x (1024 - $head))]);
agree('a head one byte over max_header_bytes', 'GET /plain/a.txt HTTP/1.1', [@H, 'X: ' . ('v' x (1025 - $head))]);
agree('100 header lines', 'GET /plain/a.txt HTTP/1.1', [@H, map { "X$_: y" } 1 .. 98]);
agree('101 header lines', 'GET /plain/a.txt HTTP/1.1', [@H, map { "X$_: y" } 1 .. 99]);
agree('POST, Content-Length 1000 (max_body_bytes): 405 from the static handler', 'POST /plain/a.txt HTTP/1.1',
      [@H, 'Content-Length: 1000'], body => 'b' x 1000);
agree('POST, Content-Length 1001', 'POST /plain/a.txt HTTP/1.1', [@H, 'Content-Length: 1001'], body => 'b' x 1001);
agree('GET with Upgrade: websocket', 'GET /plain/a.txt HTTP/1.1',
      ['Host: localhost', 'Connection: Upgrade, close', 'Upgrade: websocket']);

$s->stop;
$be->stop;
done_testing;
