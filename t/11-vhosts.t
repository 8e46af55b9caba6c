# Host-based virtual hosts: exact names, aliases, wildcards, case, ports,
# the default vhost, absolute-form targets.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(
    config => <<'LUA',
vhost "a.test" { root = "$DIR/a", index = { "index.html" }, aliases = { "www.a.test", "*.wild.test" } }
vhost "b.test" { default = true, root = "$DIR/b", index = { "index.html" } }
vhost "c.test" { root = "$DIR/c", index = { "index.html" }, aliases = { "*.c.test" } }
vhost "exact.c.test" { root = "$DIR/d", index = { "index.html" } }
LUA
    files => {
        'a/index.html' => "site A\n", 'a/only-a.txt' => "only in A\n",
        'b/index.html' => "site B\n",
        'c/index.html' => "site C\n",
        'd/index.html' => "site D\n",
    },
);
my $port = $s->port;

sub site {
    my ($host, $want, $name) = @_;
    my $r = $s->get('/', Host => $host);
    check_response($r, { status => 200, body => "site $want\n" }, $name // "Host: $host -> $want");
}

site('a.test', 'A');
site('b.test', 'B');
site('www.a.test', 'A', 'alias');
site('x.wild.test', 'A', 'wildcard alias');
site('deep.x.wild.test', 'A', 'wildcard alias, two labels');
site('wild.test', 'B', '*.wild.test does not match wild.test itself');
site('A.TEST', 'A', 'case-insensitive Host');
site('Www.A.Test', 'A', 'case-insensitive alias');
site("a.test:$port", 'A', 'port in Host ignored');
site('a.test:1234', 'A', 'any port in Host ignored');
site('unknown.test', 'B', 'unknown Host: the default vhost');
site('127.0.0.1', 'B', 'IP address Host: the default vhost');
site("127.0.0.1:$port", 'B', 'IP:port Host: the default vhost');
site("[::1]:$port", 'B', 'IPv6 literal Host: the default vhost');
site('exact.c.test', 'D', 'an exact name wins over a wildcard');
site('other.c.test', 'C', 'the wildcard for other names');

subtest 'files come from the selected root only' => sub {
    check_response($s->get('/only-a.txt', Host => 'a.test'), { status => 200, body => "only in A\n" }, 'A has it');
    is($s->get('/only-a.txt', Host => 'b.test')->{status}, 404, 'B does not');
};

subtest 'HTTP/1.0 without Host: the default vhost' => sub {
    my ($r) = parse_responses(scalar $s->raw("GET / HTTP/1.0\r\n\r\n"));
    check_response($r, { status => 200, body => "site B\n" }, 'HTTP/1.0');
};

subtest 'absolute-form target: its host wins over the Host header' => sub {
    my ($r) = parse_responses(scalar $s->raw("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n"));
    check_response($r, { status => 200, body => "site A\n" }, 'http://a.test/ with Host: b.test');
    ($r) = parse_responses(scalar $s->raw("GET http://A.TEST:$port/only-a.txt HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n"));
    check_response($r, { status => 200, body => "only in A\n" }, 'with a port and upper case');
};

subtest 'keep-alive requests may switch vhosts' => sub {
    my $c = $s->connect;
    $c->send(Luxd::request(host => 'a.test') . Luxd::request(host => 'b.test') . Luxd::request(host => 'www.a.test', close => 1));
    my @r = $c->responses(3);
    is(join('', map { $_->{body} // '' } @r), "site A\nsite B\nsite A\n", 'each request gets its own vhost');
    $c->close;
};

$s->stop;
done_testing;
