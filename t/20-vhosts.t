# Choosing the vhost from Host: exact names, aliases, "*." wildcards (the
# longest wins), case, ports, a trailing dot, absolute-form targets, the
# default vhost, and what happens when there is no default vhost.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

# Every site has an index.html saying "site NAME\n" and a file naming it.
my @SITES = qw(a b org star deep p1star p1deep p2star p2deep def);
my %files;
for my $n (@SITES) {
    $files{"$n/index.html"} = "site $n\n";
    $files{"$n/x"}          = "x of $n\n";
}

my $s = Luxd->new(
    config => <<'LUA',
vhost "a.example"   { root = "$DIR/a", aliases = { "www.a.example", "alias-of-a.test" } }
vhost "b.example"   { root = "$DIR/b" }
vhost "org.test"    { root = "$DIR/org", aliases = { "*.example.org" } }
-- "*.example" is declared before the longer "*.a.example" ...
vhost "star.test"   { root = "$DIR/star", aliases = { "*.example" } }
vhost "deep.test"   { root = "$DIR/deep", aliases = { "*.a.example" } }
-- ... and here the longer one comes first: order must not matter.
vhost "p2deep.test" { root = "$DIR/p2deep", aliases = { "*.in.p2.test" } }
vhost "p2star.test" { root = "$DIR/p2star", aliases = { "*.p2.test" } }
vhost "p1star.test" { root = "$DIR/p1star", aliases = { "*.p1.test" } }
vhost "p1deep.test" { root = "$DIR/p1deep", aliases = { "*.in.p1.test" } }
vhost "default.test" { root = "$DIR/def", default = true }
LUA
    files => \%files,
);
my $port = $s->port;

sub site {
    my ($host, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $r = $s->get('/', Host => $host);
    check_response($r, { status => 200, body => "site $want\n" }, $name // "Host: $host -> $want");
}

subtest 'exact names and aliases' => sub {
    site('a.example', 'a');
    site('b.example', 'b');
    site('www.a.example', 'a', 'alias');
    site('alias-of-a.test', 'a', 'an alias in another domain');
    site('org.test', 'org', 'the name of a vhost that also has a wildcard');
};

subtest '"*.example.org" wildcard' => sub {
    site('sub.example.org', 'org', 'one label');
    site('a.b.example.org', 'org', 'two labels');
    site('x.y.z.example.org', 'org', 'three labels');
    site('example.org', 'def', 'not example.org itself');
    site('badexample.org', 'def', 'not a name that merely ends in "example.org"');
    site('example.org.evil.test', 'def', 'not a name that merely contains it');
};

subtest 'the longest wildcard wins' => sub {
    site('x.a.example', 'deep', '*.a.example over *.example');
    site('y.x.a.example', 'deep', '*.a.example over *.example, two labels');
    site('x.example', 'star', '*.example for the rest');
    site('a.b.example', 'star', 'a.b.example is not under a.example');
    site('xa.example', 'star', 'xa.example is not under a.example');
    site('a.example', 'a', 'the exact name over *.example');
    site('www.a.example', 'a', 'an exact alias over *.a.example');
    site('q.in.p1.test', 'p1deep', 'longer wildcard declared after the shorter');
    site('q.p1.test', 'p1star', 'shorter wildcard (declared first)');
    site('q.in.p2.test', 'p2deep', 'longer wildcard declared before the shorter');
    site('q.p2.test', 'p2star', 'shorter wildcard (declared last)');
    site('in.p2.test', 'p2star', '"in.p2.test" is matched by *.p2.test, not *.in.p2.test');
};

# "*." stands for one or more labels; an empty label is none. nginx answers
# 400 to a Host with "..", so either that or the default vhost is right.
subtest 'a wildcard does not match empty labels' => sub {
    for my $h ('.example.org', 'a..example.org', '..example.org') {
        my $r = $s->get('/', Host => $h);
        ok(($r->{status} // 0) == 400 || (($r->{status} // 0) == 200 && $r->{body} eq "site def\n"),
           "Host: $h -> 400 or the default vhost, not *.example.org")
          or diag("got $r->{status}: $r->{body}");
    }
};

subtest 'Host is case-insensitive' => sub {
    site('A.EXAMPLE', 'a');
    site('Www.A.Example', 'a', 'alias in mixed case');
    site('SUB.Example.ORG', 'org', 'wildcard in mixed case');
    site('X.A.EXAMPLE', 'deep', 'the longest wildcard in upper case');
};

subtest 'the port in Host is ignored' => sub {
    site("a.example:$port", 'a', 'the real port');
    site('a.example:80', 'a', 'port 80');
    site('a.example:1', 'a', 'any port');
    site('sub.example.org:8080', 'org', 'wildcard with a port');
    site('x.a.example:443', 'deep', 'longest wildcard with a port');
    site("unknown.test:$port", 'def', 'unknown name with a port');
};

subtest 'a trailing dot names the same host' => sub {
    site('a.example.', 'a', 'exact name');
    site('www.a.example.', 'a', 'alias');
    site('sub.example.org.', 'org', 'wildcard');
    site('x.a.example.', 'deep', 'longest wildcard');
    site('A.Example.:8080', 'a', 'with case and a port');
};

subtest 'unknown Host: the default vhost' => sub {
    site('unknown.test', 'def');
    site('example', 'def', 'a single label');
    site('127.0.0.1', 'def', 'an address');
    site('localhost', 'def', 'localhost');
    my ($r) = parse_responses(scalar $s->raw("GET / HTTP/1.0\r\n\r\n"));
    check_response($r, { status => 200, body => "site def\n" }, 'HTTP/1.0 without Host');
};

subtest 'absolute-form target: the vhost comes from the target' => sub {
    my $get = sub {
        my ($target, $host) = @_;
        my ($r) = parse_responses(scalar $s->raw("GET $target HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n"));
        return $r;
    };
    check_response($get->('http://b.example/x', 'a.example'), { status => 200, body => "x of b\n" },
                   'http://b.example/x with Host: a.example');
    check_response($get->('http://a.example/x', 'b.example'), { status => 200, body => "x of a\n" },
                   'http://a.example/x with Host: b.example');
    check_response($get->("http://B.EXAMPLE:$port/x", 'a.example'), { status => 200, body => "x of b\n" },
                   'with upper case and a port');
    check_response($get->('http://sub.example.org/x', 'a.example'), { status => 200, body => "x of org\n" },
                   'a wildcard in the target');
    check_response($get->('http://b.example/x?q=1', 'a.example'), { status => 200, body => "x of b\n" },
                   'with a query');
    check_response($get->('http://b.example', 'a.example'), { status => 200, body => "site b\n" },
                   'a target without a path: "/" of the target host');
    check_response($get->('HTTP://B.Example/x', 'a.example'), { status => 200, body => "x of b\n" },
                   'the scheme in upper case');
    check_response($get->('http://nowhere.test/x', 'a.example'), { status => 200, body => "x of def\n" },
                   'an unknown host in the target: the default vhost, not the Host header');
};

subtest 'keep-alive: each request picks its own vhost' => sub {
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/x', host => 'b.example')
           . Luxd::request(path => '/x', host => 'q.p1.test')
           . Luxd::request(path => '/x', host => 'a.example', close => 1));
    my @r = $c->responses(3);
    is(join('', map { $_->{body} // '' } @r), "x of b\nx of p1star\nx of a\n", 'three vhosts on one connection');
    $c->close;
};

$s->stop;

# Without a default vhost: an unknown Host is 404, no Host at all is 400.
my $n = Luxd->new(
    config => <<'LUA',
vhost "only.example" { root = "$DIR/only", aliases = { "*.only.example" } }
LUA
    files => { 'only/index.html' => "only\n", 'only/x' => "x of only\n" },
);

subtest 'no default vhost' => sub {
    check_response($n->get('/', Host => 'only.example'), { status => 200, body => "only\n" }, 'the one vhost');
    check_response($n->get('/', Host => 'ONLY.example.:99'), { status => 200, body => "only\n" }, 'case, dot, port');
    check_response($n->get('/x', Host => 'w.only.example'), { status => 200, body => "x of only\n" }, 'its wildcard');
    my $r = $n->get('/', Host => 'unknown.example');
    check_response($r, { status => 404 }, 'unknown Host -> 404');
    unlike($r->{body} // '', qr/^only\n$/, 'not the content of the only vhost');
    check_response($n->get('/x', Host => 'only.example.org'), { status => 404 }, 'a name that merely starts alike');
    check_response($n->get('/', Host => 'example'), { status => 404 }, 'the parent domain of a wildcard');

    my ($r10) = parse_responses(scalar $n->raw("GET / HTTP/1.0\r\n\r\n"));
    check_response($r10, { status => 400 }, 'HTTP/1.0 without Host -> 400');
    my ($r11) = parse_responses(scalar $n->raw("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    check_response($r11, { status => 400 }, 'HTTP/1.1 without Host -> 400');
    my ($ra) = parse_responses(scalar $n->raw("GET http://nowhere.example/ HTTP/1.1\r\nHost: only.example\r\nConnection: close\r\n\r\n"));
    check_response($ra, { status => 404 }, 'absolute form naming an unknown host -> 404 even with a known Host');
    my ($rb) = parse_responses(scalar $n->raw("GET http://only.example/x HTTP/1.1\r\nHost: nowhere.example\r\nConnection: close\r\n\r\n"));
    check_response($rb, { status => 200, body => "x of only\n" }, 'absolute form naming the vhost');
};

$n->stop;
done_testing;
