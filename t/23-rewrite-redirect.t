# rewrite (internal, captures $1..$9, query merge, first match only) and
# redirect (301/302/303/307/308, default 302, relative and absolute Location,
# captures; redirects are tried before rewrites).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SECRET = 'SECRET-OUTSIDE-THE-ROOT';

my $s = Luxd->new(
    server => { access_log_buffer => 0 },
    files => {
        'www/index.html'       => "home\n",
        'www/new/page.html'    => "new page\n",
        'www/new/a/b.txt'      => "new a/b\n",
        'www/old/page.html'    => "WRONG: the old page, not rewritten\n",
        'www/old/a.txt'        => "old a\n",
        'www/new/a.txt'        => "WRONG: rewritten twice\n",
        'www/user.html'        => "user page\n",
        'www/userdir/index.html' => "userdir\n",
        'www/y/x.txt'          => "swapped\n",
        'www/987654321.txt'    => "nine captures\n",
        'www/one.txt'          => "first rewrite\n",
        'www/two.txt'          => "WRONG: second rewrite\n",
        'www/secret.txt'       => "inside the root\n",
        'secret.txt'           => "$SECRET\n",
        'outside/passwd'       => "$SECRET passwd\n",
        'www/special-target'   => "WRONG: rewritten, not redirected\n",
        'www/data/ok.txt'      => "data ok\n",
        'www/data/secret.inc'  => "WRONG: the forced .txt extension was bypassed\n",
        'www/a?b.txt'          => "question mark file\n",
        'www/admin/f'          => "WRONG: admin file through a rewrite\n",
    },
    config => <<'LUA',
vhost "localhost" {
  default = true, root = "$DIR/www",
  rewrite = {
    { [[^/old/(.*)\.html$]], "/new/$1.html" },
    { [[^/u/(\w+)$]], "/user.html?name=$1" },
    { [[^/d/(\w+)$]], "/userdir?name=$1" },
    { [[^/two/(\w+)/(\w+)$]], "/$2/$1.txt" },
    { [[^/nine/(.)(.)(.)(.)(.)(.)(.)(.)(.)$]], "/$9$8$7$6$5$4$3$2$1.txt" },
    { [[^/first/]], "/one.txt" },
    { [[^/first/]], "/two.txt" },
    { [[^/chain/(.*)$]], "/old/$1" },
    { [[^/old/(.*)$]], "/new/$1" },
    { [[^/esc/(.*)$]], "/sub/../../../$1" },
    { [[^/esc2/(.*)$]], "/../../outside/$1" },
    { [[^/multi/(\w+)/(\w+)$]], "/new/$1/$2.txt" },
    { [[^/special$]], "/special-target" },
    { [[^/files/(.*)$]], "/data/$1.txt" },
    { [[^/q/(.*)$]], "/$1.txt" },
    { [[^/sneak/(.*)$]], "/admin/$1" },
  },
  access = { deny { prefix = "/admin/" } },
  redirect = {
    { [[^/home$]], "/", status = 301 },
    { [[^/r302/(.*)$]], "/target/$1" },
    { [[^/r303$]], "/see-other", status = 303 },
    { [[^/r307/(\w+)$]], "/temp/$1", status = 307 },
    { [[^/r308/(\w+)/(\w+)$]], "/perm/$2/$1", status = 308 },
    { [[^/abs/(.*)$]], "https://other.example/$1", status = 301 },
    { [[^/abs2/(\w+)$]], "http://$1.example/x?from=luxd", status = 302 },
    { [[^/special$]], "/special-redirected", status = 308 },
    { [[^/old/moved\.html$]], "/new/page.html", status = 301 },
  },
}
LUA
);

sub get { my ($path) = @_; return $s->get($path) }

subtest 'rewrite is internal: the client sees 200 and the target' => sub {
    my $r = get('/old/page.html');
    check_response($r, { status => 200, body => "new page\n", headers => { location => undef } }, '/old/page.html');
    check_response(get('/old/page.html?z=1'), { status => 200, body => "new page\n" }, 'with a client query');
    check_response(get('/u/bob'), { status => 200, body => "user page\n" }, 'a target with a query string');
    check_response(get('/u/bob?x=1'), { status => 200, body => "user page\n" }, 'target query merged with the request query');
    check_response(get('/u/bob/x'), { status => 404 }, 'the regex is anchored: no match, no rewrite');
};

subtest 'captures $1..$9' => sub {
    check_response(get('/two/x/y'), { status => 200, body => "swapped\n" }, '$2 and $1 swapped');
    check_response(get('/nine/123456789'), { status => 200, body => "nine captures\n" }, '$9..$1');
    check_response(get('/multi/a/b'), { status => 200, body => "new a/b\n" }, 'two captures into a deeper path');
};

subtest 'the query string of a target merges with the request query' => sub {
    # Observable through the directory redirect: "/userdir" is a directory,
    # so its answer is a 301 whose Location carries the merged query.
    my $r = get('/d/bob?x=1');
    is($r->{status}, 301, '/d/bob?x=1 -> a directory -> 301');
    my ($q) = ($r->{headers}{location} // '') =~ /\?(.*)$/;
    is($q, 'name=bob&x=1', 'the target query first, then the client query') or diag("Location: " . ($r->{headers}{location} // 'none'));
    $r = get('/d/bob');
    ($q) = ($r->{headers}{location} // '') =~ /\?(.*)$/;
    is($q, 'name=bob', 'the target query alone') or diag("Location: " . ($r->{headers}{location} // 'none'));
};

# A capture is path data: a "?" in it came from "%3F" in the request and
# is part of the path, not the start of a query (nginx splits the target at
# a "?" written in the target, never at one a capture brings in).
subtest 'a "?" inside a capture is not a query separator' => sub {
    check_response(get('/files/ok'), { status => 200, body => "data ok\n" }, '/files/ok -> /data/ok.txt');
    for my $p ('/files/secret.inc%3F', '/files/secret.inc%3Fx', '/files/secret.inc%3f') {
        my $r = get($p);
        isnt($r->{status}, 200, "$p: not served") or diag("got $r->{status}: $r->{body}");
        unlike($r->{body} // '', qr/WRONG/, "$p: the .txt the target forces is not cut off");
    }
    check_response(get('/q/a%3Fb'), { status => 200, body => "question mark file\n" },
                   '/q/a%3Fb -> the file "/a?b.txt"');
};

subtest 'access rules see the rewritten path' => sub {
    check_response(get('/sneak/f'), { status => 403 }, 'a rewrite into /admin/ meets deny { prefix = "/admin/" }');
};

subtest 'only the first matching rewrite applies' => sub {
    check_response(get('/first/x'), { status => 200, body => "first rewrite\n" }, 'two rules match: the first wins');
    check_response(get('/chain/a.txt'), { status => 200, body => "old a\n" },
                   '/chain/a.txt -> /old/a.txt is not rewritten again to /new/a.txt');
};

subtest 'a rewrite target cannot climb out of the root' => sub {
    for my $p ('/esc/secret.txt', '/esc/../secret.txt', '/esc2/passwd', '/esc/outside/passwd', '/esc2/../passwd') {
        my $r = get($p);
        ok(defined $r->{status}, "$p: an answer");
        unlike($r->{body} // '', qr/\Q$SECRET\E/, "$p: nothing from outside the root")
          or diag("got $r->{status}");
    }
    # "/sub/../../../secret.txt" stays inside the root: at most www/secret.txt.
    my $r = get('/esc/secret.txt');
    ok(grep({ $_ == ($r->{status} // 0) } 200, 400, 403, 404, 500), '/esc/secret.txt: a normal answer');
};

subtest 'redirect statuses and Location' => sub {
    my @cases = (
        ['/home',        301, '/'],
        ['/r302/a/b',    302, '/target/a/b'],
        ['/r303',        303, '/see-other'],
        ['/r307/abc',    307, '/temp/abc'],
        ['/r308/one/two', 308, '/perm/two/one'],
        ['/abs/x/y.html', 301, 'https://other.example/x/y.html'],
        ['/abs2/site',   302, 'http://site.example/x?from=luxd'],
    );
    for my $c (@cases) {
        my ($path, $st, $loc) = @$c;
        my $r = get($path);
        check_response($r, { status => $st, headers => { location => $loc } }, "$path -> $st $loc");
    }
    my $r = get('/r302/x');
    is($r->{status}, 302, 'the default redirect status is 302');
    check_response(get('/homex'), { status => 404, headers => { location => undef } }, 'the regex is anchored');
};

subtest 'captured bytes cannot break the Location header' => sub {
    my $r = get('/r302/a%20b');
    is($r->{status}, 302, 'a space in the capture');
    unlike($r->{headers}{location} // '', qr/ /, 'no raw space in Location');
    my ($raw) = $s->raw("GET /r302/x%0d%0aSet-Cookie:%20evil=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    my ($r2) = parse_responses($raw);
    ok(defined $r2 && defined $r2->{status}, 'an answer');
    ok(!defined $r2->{headers}{'set-cookie'}, 'no header injected through a capture') or diag($raw);
    unlike($r2->{raw_headers} // '', qr/\r\nSet-Cookie/i, 'no Set-Cookie line at all');

    # A capture of the decoded path must be encoded again: the client that
    # follows Location must ask for the same path the capture held.
    my %want = ('/r302/a%3Fb' => '/target/a?b', '/r302/100%25' => '/target/100%', '/r302/a%23b' => '/target/a#b',
                '/r302/a%20b' => '/target/a b');
    for my $p (sort keys %want) {
        my $r = get($p);
        my $loc = $r->{headers}{location} // '';
        is($r->{status}, 302, "$p: 302");
        unlike($loc, qr/[?#\s]/, "$p: no raw ?, # or space in Location") or diag("Location: $loc");
        unlike($loc, qr/%(?![0-9A-Fa-f]{2})/, "$p: every % starts an escape") or diag("Location: $loc");
        (my $dec = $loc) =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
        is($dec, $want{$p}, "$p: Location decodes to the captured path");
    }
};

subtest 'redirects win over rewrites' => sub {
    check_response(get('/special'), { status => 308, headers => { location => '/special-redirected' } },
                   '/special matches both: the redirect answers');
    check_response(get('/old/moved.html'), { status => 301, headers => { location => '/new/page.html' } },
                   '/old/moved.html: redirect, though the /old/ rewrite also matches');
};

subtest 'the access log shows the original request' => sub {
    ok($s->stop, 'stopped cleanly');
    my $log = $s->access_log;
    like($log, qr{"GET /old/page\.html HTTP/1\.1" 200 }, '/old/page.html logged as sent');
    like($log, qr{"GET /u/bob\?x=1 HTTP/1\.1" 200 }, '/u/bob?x=1 logged as sent');
    like($log, qr{"GET /two/x/y HTTP/1\.1" 200 }, '/two/x/y logged as sent');
    unlike($log, qr{"GET /new/page\.html HTTP/1\.1" 200 }, 'the rewritten path is not logged as the request')
      or diag($log);
};

done_testing;
