# Basic static serving: GET, HEAD, Date/Server, 404/403, index files,
# directory redirects, MIME types, 405 with Allow, IPv6 listen.
use strict;
use warnings;
use Test::More;
use Time::Local qw(timegm);
use lib 't/lib';
use Luxd;

my %files = (
    'www/index.html'       => "<h1>home</h1>\n",
    'www/a.txt'            => "hello, a\n",
    'www/style.css'        => "body { color: red }\n",
    'www/app.js'           => "console.log(1);\n",
    'www/data.json'        => "{\"a\":1}\n",
    'www/pic.png'          => "\x89PNG\r\n\x1a\n" . ("\0" x 40),
    'www/PIC2.PNG'         => "\x89PNG\r\n\x1a\n" . ("\1" x 40),
    'www/mod.wasm'         => "\0asm\1\0\0\0",
    'www/thing.custom'     => "custom\n",
    'www/noext'            => "no extension\n",
    'www/unknown.zzqx'     => "unknown\n",
    'www/dir/index.html'   => "<p>dir index</p>\n",
    'www/dir/page.html'    => "<p>page</p>\n",
    'www/empty/'           => undef,
    'www/sub/deeper/x.txt' => "x\n",
);

my $s = Luxd->new(
    config => <<'LUA',
server {
  listen = { "127.0.0.1:$PORT", "[::1]:$PORT" },
  workers = 1,
  error_log = "$DIR/error.log",
  access_log = "$DIR/access.log",
  error_log_level = "info",
  pid_file = "$DIR/luxd.pid",
}
mime { [".wasm"] = "application/wasm", [".custom"] = "application/x-custom" }
vhost "localhost" { default = true, root = "$DIR/www", index = { "index.html" } }
LUA
    files => \%files,
);

my $port = $s->port;

sub http_date_ok {
    my ($v, $name) = @_;
    my %mon = (Jan => 0, Feb => 1, Mar => 2, Apr => 3, May => 4, Jun => 5, Jul => 6, Aug => 7, Sep => 8, Oct => 9, Nov => 10, Dec => 11);
    if (defined $v && $v =~ /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d\d) (\w{3}) (\d{4}) (\d\d):(\d\d):(\d\d) GMT$/ && exists $mon{$3}) {
        my $t = timegm($7, $6, $5, $2, $mon{$3}, $4);
        my @wd = qw(Sun Mon Tue Wed Thu Fri Sat);
        is($wd[(gmtime $t)[6]], $1, "$name: weekday matches the date");
        return $t;
    }
    fail("$name: IMF-fixdate") or diag("got: " . ($v // 'undef'));
    return undef;
}

subtest 'GET /' => sub {
    my $r = $s->get('/');
    check_response($r, {
        status  => 200,
        body    => $files{'www/index.html'},
        headers => { 'content-length' => length $files{'www/index.html'}, 'content-type' => qr{^text/html\b} },
    }, 'GET /');
    is($r->{version}, 'HTTP/1.1', 'answers HTTP/1.1');
    my $t = http_date_ok($r->{headers}{date}, 'Date');
    ok(defined $t && abs($t - time) <= 5, 'Date is now') or diag("Date: " . ($r->{headers}{date} // 'none'));
    like($r->{headers}{server}, qr/^luxd\b/i, 'Server header names luxd');
    is(scalar @{ $r->{hlist}{date} || [] }, 1, 'one Date header');
    is(scalar @{ $r->{hlist}{'content-length'} || [] }, 1, 'one Content-Length header');
};

subtest 'GET a file, with a query string, absolute-form' => sub {
    check_response($s->get('/a.txt'), { status => 200, body => "hello, a\n",
        headers => { 'content-type' => qr{^text/plain\b}, 'content-length' => 9 } }, '/a.txt');
    check_response($s->get('/a.txt?x=1&y=../../etc/passwd'), { status => 200, body => "hello, a\n" }, 'query string ignored');
    check_response($s->get('/sub/deeper/x.txt'), { status => 200, body => "x\n" }, 'nested path');
    # RFC 9112 3.2.2: a server MUST accept the absolute-form.
    my $raw = $s->raw("GET http://localhost:$port/a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    my ($r) = parse_responses($raw);
    check_response($r, { status => 200, body => "hello, a\n" }, 'absolute-form target');
};

subtest 'HEAD has the same headers as GET and no body' => sub {
    for my $p ('/', '/a.txt', '/pic.png', '/nope.html') {
        my $g = $s->get($p);
        my ($raw, $info) = $s->raw("HEAD $p HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        ok($info->{closed}, "HEAD $p: server closed after Connection: close");
        my $end = index($raw, "\r\n\r\n");
        ok($end > 0, "HEAD $p: a header block");
        is(length($raw) - ($end + 4), 0, "HEAD $p: nothing after the header block") if $end > 0;
        my ($h) = parse_responses($raw, head => 1);
        is($h->{status}, $g->{status}, "HEAD $p: same status as GET");
        for my $name (qw(content-length content-type etag last-modified server)) {
            is($h->{headers}{$name}, $g->{headers}{$name}, "HEAD $p: same $name");
        }
    }
};

subtest '404 and 403 with small bodies' => sub {
    for my $p ('/nope', '/nope.html', '/dir/nope', '/a.txt/x') {
        my $r = $s->get($p);
        check_response($r, { status => 404, body_max => 1024, body => qr/\S/ }, "GET $p");
        is($r->{headers}{'content-length'}, length $r->{body}, "GET $p: Content-Length matches the body");
        like($r->{headers}{'content-type'}, qr{^text/(html|plain)\b}, "GET $p: text Content-Type");
    }
    # A directory without an index file and dir_listing off: 403, as nginx.
    my $r = $s->get('/empty/');
    check_response($r, { status => 403, body_max => 1024, body => qr/\S/ }, 'GET /empty/');
    is($r->{headers}{'content-length'}, length $r->{body}, '403: Content-Length matches the body');
};

subtest 'index files and directory redirects' => sub {
    check_response($s->get('/dir/'), { status => 200, body => "<p>dir index</p>\n",
        headers => { 'content-type' => qr{^text/html\b} } }, '/dir/ serves its index');
    check_response($s->get('/dir/page.html'), { status => 200, body => "<p>page</p>\n" }, '/dir/page.html');
    check_response($s->get('/dir'), { status => 301, headers => { location => qr{^(?:http://localhost(?::$port)?)?/dir/$} } },
        '/dir redirects to /dir/');
    check_response($s->get('/dir?a=1'), { status => 301, headers => { location => qr{^(?:http://localhost(?::$port)?)?/dir/\?a=1$} } },
        '/dir?a=1 redirects to /dir/?a=1');
    check_response($s->get('/empty'), { status => 301, headers => { location => qr{^(?:http://localhost(?::$port)?)?/empty/$} } },
        '/empty redirects to /empty/');
    check_response($s->get('/sub/deeper'), { status => 301, headers => { location => qr{^(?:http://localhost(?::$port)?)?/sub/deeper/$} } },
        'nested directory redirects');
    my $h = $s->head('/dir');
    is($h->{status}, 301, 'HEAD /dir: 301');
};

subtest 'Content-Type' => sub {
    my %want = (
        '/index.html'     => qr{^text/html; ?charset=utf-8$}i,
        '/style.css'      => qr{^text/css\b},
        '/app.js'         => qr{^(text|application)/javascript\b},
        '/data.json'      => qr{^application/json\b},
        '/pic.png'        => qr{^image/png$},
        '/PIC2.PNG'       => qr{^image/png$},
        '/mod.wasm'       => qr{^application/wasm$},
        '/thing.custom'   => qr{^application/x-custom$},
        '/noext'          => qr{^application/octet-stream$},
        '/unknown.zzqx'   => qr{^application/octet-stream$},
    );
    for my $p (sort keys %want) {
        my $r = $s->get($p);
        is($r->{status}, 200, "$p: 200");
        like($r->{headers}{'content-type'}, $want{$p}, "$p: Content-Type");
    }
};

subtest '405 with Allow for methods the static handler does not serve' => sub {
    for my $m (qw(POST PUT DELETE PATCH)) {
        my $r = $s->http(method => $m, path => '/a.txt', body => 'hello');
        is($r->{status}, 405, "$m /a.txt: 405");
        my $allow = $r->{headers}{allow} // '';
        my %a = map { uc($_) => 1 } split /\s*,\s*/, $allow;
        ok($a{GET} && $a{HEAD}, "$m: Allow lists GET and HEAD") or diag("Allow: $allow");
        ok(!$a{$m}, "$m: Allow does not list $m");
        is($r->{headers}{'content-length'}, length $r->{body}, "$m: Content-Length matches the body");
    }
    # Without a body, on the index.
    my $r = $s->http(method => 'DELETE', path => '/');
    is($r->{status}, 405, 'DELETE /: 405');
    # The connection stays usable after a 405 whose body was read.
    my $c = $s->connect;
    $c->send("POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhelloGET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    my @r = $c->responses(2);
    is($r[0]{status}, 405, 'pipelined POST: 405');
    check_response($r[1], { status => 200, body => "hello, a\n" }, 'then GET on the same connection');
    $c->close;
};

subtest 'IPv6 listener' => sub {
    my $c = IO::Socket::IP->new(PeerHost => '::1', PeerPort => $port, Proto => 'tcp', Timeout => 3);
    ok($c, 'connects to [::1]') or return;
    $c->autoflush(1);
    my $conn = Luxd::Conn->new($c);
    $conn->send("GET /a.txt HTTP/1.1\r\nHost: [::1]:$port\r\nConnection: close\r\n\r\n");
    check_response($conn->response, { status => 200, body => "hello, a\n" }, 'GET over IPv6');
    $conn->close;
};

subtest 'pid_file' => sub {
    my $pid = $s->file('luxd.pid');
    ok(defined $pid && $pid =~ /^(\d+)\n?$/ && $1 == $s->pid, 'pid_file holds the server pid') or diag('pid file: ' . ($pid // 'missing'));
};

$s->stop;
done_testing;
