# Defects the final cold review found (issue 8, review).
#
# An absolute-form target with an empty authority ("http:///") named the
# default vhost, overriding the Host header: RFC 9110 4.2.1 says a
# recipient MUST reject an http URI with an empty host as invalid, and a
# front proxy that routes by Host would send the request to one site while
# luxd answered it from another.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    workers => 2,
    config  => <<'C',
vhost "d.test" { default = true, root = "$DIR/www/d", index = { "index.html" } }
vhost "a.test" { root = "$DIR/www/a", index = { "index.html" } }
C
    files => { 'www/a/index.html' => "A\n", 'www/d/index.html' => "D\n" },
);

for my $t ('http:///', 'http://?x', 'http:///index.html', 'HTTPS:///', 'http://:80/') {
    # Whole, and split at every byte boundary of the request line.
    my $req = "GET $t HTTP/1.1\r\nHost: a.test\r\n\r\nGET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    my $line = length("GET $t HTTP/1.1\r\n");
    for my $cut (0 .. $line) {
        my $c = $s->connect;
        if ($cut) {
            $c->send(substr($req, 0, $cut));
            select(undef, undef, undef, 0.01);
            $c->send(substr($req, $cut));
        } else {
            $c->send($req);
        }
        my $r = $c->response(timeout => 5);
        is $r && $r->{status}, 400, "empty authority in [$t], split at $cut: 400";
        ok $c->wait_closed(2), "[$t] split at $cut: closed, the pipelined request not run";
        $c->close;
    }
}

# A real authority still wins over Host, and a named vhost still answers.
my $buf = $s->raw("GET http://a.test/ HTTP/1.1\r\nHost: d.test\r\nConnection: close\r\n\r\n");
my $r = Luxd::parse_one(\$buf);
is $r->{status}, 200, 'absolute-form with a host: 200';
is $r->{body}, "A\n", 'absolute-form host chooses the vhost';

$s->stop;
done_testing;
