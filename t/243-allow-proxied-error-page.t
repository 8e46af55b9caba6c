# Review of issue 17 #4 (405 with Allow): a 405 of luxd's own whose error
# page is served by a proxied location. luxd writes the Allow of the target
# (the static file's GET, HEAD); the page's backend answers for the page,
# /err/405, and its Allow (here "GET, POST") describes that page, not the
# target. It was relayed too: two Allow lines, which a client joins into
# one list (RFC 9110 5.3) that says POST is allowed on the very target the
# 405 refuses POST on. The 405 must carry exactly luxd's Allow.
#
# A backend's own 405 (a proxied request, no error page) keeps the
# backend's Allow, alone; another status's page keeps the page's fields.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend kill_backend);

$SIG{PIPE} = 'IGNORE';

my $be = raw_backend(sub {
    my ($c) = @_;
    my $buf = '';
    while (1) {
        while ($buf !~ /\r\n\r\n/) { sysread($c, $buf, 65536, length $buf) or return }
        $buf =~ s/\A(.*?)\r\n\r\n//s;
        my $h = $1;
        my ($m, $p) = $h =~ /\A(\S+) (\S+)/;
        my $cl = $h =~ /^content-length:\s*(\d+)/mi ? $1 : 0;
        while (length $buf < $cl) { sysread($c, $buf, 65536, length $buf) or return }
        substr($buf, 0, $cl, '');
        my $st = $p =~ m{^/app/} ? '405 Method Not Allowed' : '200 OK';
        my $b = "page $m $p\n";
        syswrite $c, "HTTP/1.1 $st\r\nAllow: GET, POST\r\nContent-Length: " . length($b) . "\r\n\r\n"
          . ($m eq 'HEAD' ? '' : $b);
    }
});

my $s = Luxd->new(
    files  => { 'www/f.txt' => "f\n" },
    config => qq{upstream "u" { "$be->[1]" }\n} . <<'EOF');
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  error_pages = { [405] = "/err/405", [404] = "/err/404" },
  location "/err/" { proxy = "u" },
  location "/app/" { proxy = "u" },
}
EOF

# The Allow lines of a raw response, in order.
sub allows { my ($r) = @_; [($r // {raw => ''})->{raw} =~ /^Allow:[ \t]*([^\r\n]*)\r?$/mgi] }

for my $req (["POST /f.txt", "POST /f.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc"],
             ["DELETE /f.txt", "DELETE /f.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"]) {
    my ($name, $bytes) = @$req;
    my $c = $s->connect;
    $c->send($bytes);
    my $r = $c->response(timeout => 5);
    is $r && $r->{status}, 405, "$name: 405";
    like $r && $r->{body}, qr{^page GET /err/405$}, "$name: the proxied page";
    is_deeply allows($r), ['GET, HEAD'], "$name: one Allow, the target's (not the page's)";
    $c->close;
}

my $r = $s->http(method => 'PUT', path => '/app/x', body => 'x');
is $r->{status}, 405, "a backend's own 405: 405";
is_deeply allows($r), ['GET, POST'], "a backend's own 405: the backend's Allow, alone";

$r = $s->http(method => 'GET', path => '/nope');
is $r->{status}, 404, 'a 404 whose page is proxied: 404';
like $r->{body}, qr{^page GET /err/404$}, '... the page';

$s->stop;
kill_backend($be);
done_testing;
