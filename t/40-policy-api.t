# Policies (issue 5), the request API: policy = function(r) ... end on a
# vhost or a location sees r.method, r.path (decoded, after rewrite),
# r.query (raw, "" if none), r.host (without port), r.remote_addr and
# r.headers[name] (any case, nil if absent); r:set_header adds a header to
# whatever response the request gets; r:redirect and r:respond answer; a
# returned status answers (error_pages apply); nil continues to the static
# handler; anything else is a 500; r is read-only. A location's policy
# overrides its vhost's; a location without one inherits the vhost's.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(sleep);
use lib 't/lib';
use Luxd;

my %files = (
    'www/index.html'        => "home\n",
    'www/new/x'             => "new x\n",
    'www/new/q.txt'         => "new q\n",
    'www/a b/c.txt'         => "spaced\n",
    'www/denied/f'          => "WRONG: denied file\n",
    'www/errors/403.html'   => "custom 403 page\n",
    'www/errors/404.html'   => "custom 404 page\n",
    'www/inherit/f'         => "inherit f\n",
    'www/own/f'             => "own f\n",
    'www/open/f'            => "open f\n",
    'www/loconly/f'         => "loconly f\n",
    'www2/index.html'       => "nopolicy home\n",
    'www2/loconly/f'        => "nopolicy loconly f\n",
);

# The vhost policy is driven by the X-Do request header, so paths, queries
# and the other headers stay free to test the fields.
my $s = Luxd->new(
    files  => \%files,
    config => <<'LUA',
vhost "api.test" {
  default = true, root = "$DIR/www",
  headers = { ["X-Site"] = "api" },
  error_pages = { [403] = "/errors/403.html", [404] = "/errors/404.html" },
  rewrite = { { [[^/old/(.*)$]], "/new/$1" }, { [[^/q/(\w+)$]], "/new/q.txt?name=$1" } },
  access = { deny { prefix = "/denied/" } },

  policy = function(r)
    -- The error pages are under this policy too (it runs for them, with
    -- r.error_status set): they are for everyone, and the X-Do cases below
    -- are about the request, not its page.
    if r.error_status then return nil end
    r:set_header("X-Ran", "vhost")
    local d = r.headers["x-do"]
    if d == nil then return nil end
    if d == "fields" then
      r:set_header("X-Method", r.method)
      r:set_header("X-Path", "[" .. r.path .. "]")
      r:set_header("X-Query", "[" .. r.query .. "]")
      r:set_header("X-Host", "[" .. r.host .. "]")
      r:set_header("X-Remote", r.remote_addr)
      r:set_header("X-H-Lower", tostring(r.headers["x-probe"]))
      r:set_header("X-H-Upper", tostring(r.headers["X-PROBE"]))
      r:set_header("X-H-Mixed", tostring(r.headers["X-Probe"]))
      r:set_header("X-H-Dup", tostring(r.headers["x-dup"]))
      r:set_header("X-H-Host", tostring(r.headers["host"]))
      r:set_header("X-H-Missing", type(r.headers["x-missing"]) .. " " .. tostring(r.headers["x-missing"] == nil))
      return nil
    end
    if d == "two-headers" then
      r:set_header("X-Multi", "one")
      r:set_header("X-Multi", "two")
      r:set_header("X-Other", "three")
      return nil
    end
    if d == "bad-header-name" then r:set_header("Bad Name", "x") return nil end
    local st = d:match("^status:(%d+)$")
    if st then return tonumber(st) end
    local rs = d:match("^redirect:(%w+)$")
    if rs then
      if rs == "default" then return r:redirect("https://example.test/landing?x=1") end
      return r:redirect("/elsewhere/page.html", tonumber(rs))
    end
    if d == "respond-body" then return r:respond(202, "hello\nworld \226\156\147") end
    if d == "respond-empty-body" then return r:respond(200, "") end
    local rn = d:match("^respond%-nobody:(%d+)$")
    if rn then return r:respond(tonumber(rn)) end
    if d == "respond-bad" then return r:respond(42, "x") end
    if d == "return-string" then return "403" end
    if d == "return-true" then return true end
    if d == "return-table" then return {} end
    if d == "return-false" then return false end
    if d == "return-42" then return 42 end
    if d == "return-600" then return 600 end
    if d == "assign-field" then r.path = "/new/x" return nil end
    if d == "assign-new" then r.anything = 1 return nil end
    if d == "assign-header" then r.headers["x-do"] = "other" return nil end
    return nil
  end,

  location "/inherit/" { cache_control = "no-cache" },
  location "/own/"     { policy = function(r) r:set_header("X-Ran", "own") end },
  location "/open/"    { policy = function(r) return nil end },
}

vhost "shared.test" {
  root = "$DIR/www",
  policy = function(r)
    local sh, out = luxd.shared, {}
    local function put(k, ...) local t = { ... } for i = 1, select("#", ...) do t[i] = tostring(t[i]) end out[#out + 1] = k .. "=" .. table.concat(t, ",") end
    if r.path == "/api" then
      put("set", sh.set("s", "str")); put("get", sh.get("s"))
      put("setn", sh.set("n", 5)); put("getn", sh.get("n"), type(sh.get("n")))
      put("incr", sh.incr("n")); put("incr10", sh.incr("n", 10)); put("decr", sh.incr("n", -1))
      put("fresh", sh.incr("fresh", 2)); put("ttl0", sh.ttl("s")); put("ttlnone", sh.ttl("missing"))
      put("getnone", sh.get("missing")); put("incrstr", sh.incr("s"))
      put("del", sh.set("s", nil)); put("gone", sh.get("s"))
      sh.set("d", "x"); put("delete", sh.delete("d")); put("deleted", sh.get("d"))
      return r:respond(200, table.concat(out, ";"))
    end
    if r.path == "/ttl-start" then
      sh.set("t1", "v", 1); put("c1", sh.incr("c1", 1, 1)); put("c1b", sh.incr("c1", 1, 100))
      local t1, c1 = sh.ttl("t1"), sh.ttl("c1")
      put("t1", t1 > 0 and t1 <= 1); put("c1ttl", c1 > 0 and c1 <= 1)
      return r:respond(200, table.concat(out, ";"))
    end
    if r.path == "/ttl-check" then
      put("t1", sh.get("t1")); put("t1ttl", sh.ttl("t1")); put("c1", sh.incr("c1"))
      put("c1ttl", sh.ttl("c1"))
      return r:respond(200, table.concat(out, ";"))
    end
    if r.path == "/bad-key" then sh.get("") end
  end,
}

vhost "nopolicy.test" {
  root = "$DIR/www2",
  location "/loconly/" { policy = function(r) r:set_header("X-Ran", "loconly") return 451 end },
}
LUA
);

# One request on a new connection (optionally from another loopback address).
sub req {
    my (%o) = @_;
    my $from = delete $o{from};
    my $bytes = Luxd::request(host => 'api.test', close => 1, %o);
    my $c;
    if ($from) {
        my $sock = IO::Socket::INET->new(
            PeerAddr => '127.0.0.1', PeerPort => $s->port, LocalAddr => $from, Proto => 'tcp', Timeout => 5,
        ) or die "connect from $from: $!";
        $c = Luxd::Conn->new($sock);
    } else {
        $c = $s->connect;
    }
    $c->send($bytes);
    my $r = $c->response(head => ($o{method} // 'GET') eq 'HEAD', timeout => 5);
    $c->close;
    return $r // { status => undef, headers => {}, hlist => {}, body => undef };
}

sub do_ { my ($what, %o) = @_; req(%o, headers => [ 'X-Do' => $what, @{ $o{headers} || [] } ]) }

sub hdrs { my ($r, $name) = @_; $r->{hlist}{ lc $name } || [] }

# ---- fields ----------------------------------------------------------------

subtest 'r.method' => sub {
    for my $m (qw(GET POST DELETE OPTIONS)) {
        my $r = do_('fields', method => $m, path => '/index.html', body => ($m eq 'POST' ? 'x=1' : undef));
        is($r->{headers}{'x-method'}, $m, "$m request: r.method is $m");
    }
    my $r = do_('fields', method => 'HEAD', path => '/index.html');
    is($r->{headers}{'x-method'}, 'HEAD', 'HEAD request: r.method is HEAD');
};

subtest 'r.path: decoded, normalised, after rewrite' => sub {
    my %cases = (
        '/index.html'          => '/index.html',
        '/a%20b/c.txt'         => '/a b/c.txt',
        '/new/./../new/x'      => '/new/x',
        '/old/x'               => '/new/x',          # rewritten
        '/q/abc'               => '/new/q.txt',      # rewritten, query added
        '/caf%C3%A9'           => "/caf\xc3\xa9",
    );
    for my $p (sort keys %cases) {
        my $r = do_('fields', path => $p);
        is($r->{headers}{'x-path'}, "[$cases{$p}]", "GET $p: r.path is $cases{$p}");
    }
    my $r = do_('fields', path => '/old/x');
    is($r->{status}, 200, 'the rewritten request is served') and is($r->{body}, "new x\n", 'from the rewritten path');
};

subtest 'r.query: raw, "" when absent, including what a rewrite adds' => sub {
    my %cases = (
        '/index.html'                 => '',
        '/index.html?'                => '',
        '/index.html?a=1&b=%20x+y'    => 'a=1&b=%20x+y',
        '/index.html?q=%3F%26'        => 'q=%3F%26',
        '/q/abc'                      => 'name=abc',
        '/q/abc?x=1'                  => 'name=abc&x=1',
    );
    for my $p (sort keys %cases) {
        my $r = do_('fields', path => $p);
        is($r->{headers}{'x-query'}, "[$cases{$p}]", "GET $p: r.query is \"$cases{$p}\"");
    }
};

subtest 'r.host: the Host header without its port' => sub {
    my $port = $s->port;
    my %cases = ('api.test' => 'api.test', "api.test:$port" => 'api.test', 'api.test:8080' => 'api.test',
                 'other.example:1' => 'other.example');
    for my $h (sort keys %cases) {
        my $r = req(host => $h, path => '/index.html', headers => [ 'X-Do' => 'fields' ]);
        is($r->{headers}{'x-host'}, "[$cases{$h}]", "Host: $h -> r.host $cases{$h}");
        is($r->{headers}{'x-h-host'}, $h, "Host: $h -> r.headers.host keeps the port");
    }
};

subtest 'r.remote_addr' => sub {
    my $r = do_('fields', path => '/index.html');
    is($r->{headers}{'x-remote'}, '127.0.0.1', 'from 127.0.0.1');
    $r = do_('fields', path => '/index.html', from => '127.0.0.2');
    is($r->{headers}{'x-remote'}, '127.0.0.2', 'from 127.0.0.2');
    $r = do_('fields', path => '/index.html', from => '127.9.8.7');
    is($r->{headers}{'x-remote'}, '127.9.8.7', 'from 127.9.8.7');
};

subtest 'r.headers[name]: any case, the first of several, nil when absent' => sub {
    my $r = do_('fields', path => '/index.html',
                headers => [ 'x-PrObE' => 'probe value', 'X-Dup' => 'first', 'X-Dup' => 'second' ]);
    is($r->{headers}{'x-h-lower'}, 'probe value', 'r.headers["x-probe"]');
    is($r->{headers}{'x-h-upper'}, 'probe value', 'r.headers["X-PROBE"]');
    is($r->{headers}{'x-h-mixed'}, 'probe value', 'r.headers["X-Probe"]');
    is($r->{headers}{'x-h-dup'}, 'first', 'two X-Dup headers: the first one');
    is($r->{headers}{'x-h-missing'}, 'nil true', 'a missing header is nil');
    $r = do_('fields', path => '/index.html');
    is($r->{headers}{'x-h-lower'}, 'nil', 'X-Probe absent on the next request: nil (nothing kept from the last one)');
};

# ---- set_header --------------------------------------------------------------

subtest 'r:set_header on whatever response the request gets' => sub {
    my $r = req(path => '/index.html');
    is($r->{status}, 200, 'static 200');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], 'static 200 carries the header (once)');
    is($r->{headers}{'x-site'}, 'api', 'and the vhost headers');
    is($r->{body}, "home\n", 'and the file');
    my $etag = $r->{headers}{etag};
    ok($etag, 'the 200 has an ETag');

    $r = req(path => '/index.html', headers => [ 'If-None-Match' => $etag ]);
    is($r->{status}, 304, 'conditional GET: 304');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], '304 carries the header');

    $r = req(path => '/no-such-file');
    is($r->{status}, 404, 'missing file: 404');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], '404 carries the header');
    is($r->{body}, "custom 404 page\n", '404 with its error page');

    $r = req(method => 'POST', path => '/index.html', body => 'x');
    ok($r->{status} && $r->{status} >= 400, "POST to a file: an error ($r->{status})");
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], 'the error carries the header');

    $r = do_('status:451', path => '/index.html');
    is($r->{status}, 451, 'a returned status');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], 'carries the header');

    $r = do_('two-headers', path => '/index.html');
    is($r->{status}, 200, 'several set_header calls');
    is_deeply(hdrs($r, 'X-Multi'), ['one', 'two'], 'the same name twice: both lines');
    is($r->{headers}{'x-other'}, 'three', 'another name');

    $r = do_('two-headers', method => 'HEAD', path => '/index.html');
    is_deeply(hdrs($r, 'X-Multi'), ['one', 'two'], 'on HEAD too');

    $r = do_('bad-header-name', path => '/index.html');
    is($r->{status}, 500, 'set_header with a name that is no token: 500');
};

# ---- redirect ------------------------------------------------------------------

subtest 'r:redirect' => sub {
    my $r = do_('redirect:default', path => '/index.html');
    is($r->{status}, 302, 'default status 302');
    is($r->{headers}{location}, 'https://example.test/landing?x=1', 'Location as given');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], 'set_header before the redirect is kept');
    unlike($r->{body} // '', qr/^home$/m, 'not the file');
    for my $st (301, 302, 303, 307, 308) {
        $r = do_("redirect:$st", path => '/index.html');
        is($r->{status}, $st, "explicit $st");
        is($r->{headers}{location}, '/elsewhere/page.html', "$st: Location");
    }
    for my $bad (200, 300, 304, 404) {
        $r = do_("redirect:$bad", path => '/index.html');
        is($r->{status}, 500, "redirect with status $bad: 500");
        ok(!defined $r->{headers}{location}, "$bad: no Location");
    }
    like($s->error_log, qr/\[error\] policy of vhost "api\.test" failed for \/index\.html: .*redirect/,
         'the bad redirect is logged');
};

# ---- respond -------------------------------------------------------------------

subtest 'r:respond with and without a body' => sub {
    my $r = do_('respond-body', path => '/index.html');
    is($r->{status}, 202, 'status 202');
    is($r->{body}, "hello\nworld \xe2\x9c\x93", 'the body as given');
    is($r->{headers}{'content-type'}, 'text/plain; charset=utf-8', 'text/plain; charset=utf-8');
    is($r->{headers}{'content-length'}, length("hello\nworld \xe2\x9c\x93"), 'Content-Length');
    is($r->{headers}{'x-site'}, 'api', 'vhost headers');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], 'set_header headers');

    $r = do_('respond-body', method => 'HEAD', path => '/index.html');
    is($r->{status}, 202, 'HEAD: 202');
    is($r->{headers}{'content-length'}, length("hello\nworld \xe2\x9c\x93"), 'HEAD: same Content-Length');

    $r = do_('respond-empty-body', path => '/index.html');
    is($r->{status}, 200, 'an empty body: 200');
    is($r->{body}, '', 'empty');
    is($r->{headers}{'content-length'}, '0', 'Content-Length: 0');

    for my $st (403, 418, 503) {
        $r = do_("respond-nobody:$st", path => '/index.html');
        is($r->{status}, $st, "without body: $st");
        like($r->{headers}{'content-type'} // '', qr{^text/html}, "$st: an HTML page");
        like($r->{body} // '', qr/<html>.*\b$st\b/s, "$st: the page names the status");
    }
    $r = do_('respond-bad', path => '/index.html');
    is($r->{status}, 500, 'r:respond(42): 500');
};

# ---- returned values -------------------------------------------------------------

subtest 'a returned status answers; error_pages apply' => sub {
    my $r = do_('status:403', path => '/index.html');
    is($r->{status}, 403, 'return 403');
    is($r->{body}, "custom 403 page\n", 'with the vhost error page');
    $r = do_('status:404', path => '/index.html');
    is($r->{status}, 404, 'return 404 for an existing file');
    is($r->{body}, "custom 404 page\n", 'with the 404 error page, not the file');
    $r = do_('status:451', path => '/index.html');
    is($r->{status}, 451, 'return 451 (no error page)');
    like($r->{body}, qr/451/, 'the built-in page');
    unlike($r->{body}, qr/^home$/m, 'not the file');
    $r = do_('status:503', path => '/index.html');
    is($r->{status}, 503, 'return 503');
};

subtest '204 and 304 from a policy have no body (keep-alive stays in sync)' => sub {
    for my $case ([ 'status:204', 204, 'return 204' ], [ 'respond-nobody:204', 204, 'r:respond(204)' ],
                  [ 'status:304', 304, 'return 304' ]) {
        my ($do, $st, $what) = @$case;
        my $c = $s->connect;
        $c->send(Luxd::request(host => 'api.test', path => '/index.html', headers => [ 'X-Do' => $do ]));
        $c->send(Luxd::request(host => 'api.test', path => '/index.html'));
        my $r1 = $c->response(timeout => 5);
        is($r1 && $r1->{status}, $st, "$what: $st");
        my $cl = $r1 && $r1->{headers}{'content-length'};
        if ($st == 204) {
            ok(!defined $cl, "$what: no Content-Length (RFC 9110 forbids it on a 204)") or diag("Content-Length: $cl");
        }
        my $r2 = $c->response(timeout => 5);
        ok($r2 && !$r2->{error} && ($r2->{status} // 0) == 200, "$what: the next request on the connection gets its 200")
          or diag(explain($r2 && { status => $r2->{status}, error => $r2->{error} }));
        is($r2 && $r2->{body}, "home\n", "$what: and its file");
        $c->close;
    }
};

subtest 'nil continues to the static handler' => sub {
    my $r = req(path => '/index.html');
    is($r->{status}, 200, 'no X-Do: nil: 200');
    is($r->{body}, "home\n", 'the file');
    $r = do_('return-nothing-known', path => '/new/x');
    is($r->{status}, 200, 'another nil');
    is($r->{body}, "new x\n", 'the file');
};

subtest 'anything else returned is a 500' => sub {
    for my $what (qw(return-string return-true return-table return-false return-42 return-600)) {
        my $r = do_($what, path => '/index.html');
        is($r->{status}, 500, "$what: 500");
        unlike($r->{body} // '', qr/^home$/m, "$what: not the file");
    }
    like($s->error_log, qr/\[error\] policy of vhost "api\.test" returned a string/, 'the log says what was returned');
};

subtest 'the request object is read-only' => sub {
    for my $what (qw(assign-field assign-new assign-header)) {
        my $r = do_($what, path => '/index.html');
        is($r->{status}, 500, "$what: 500");
        unlike($r->{body} // '', qr/^(home|new x)$/m, "$what: no file");
    }
    like($s->error_log, qr/read-only/, 'the log says the request object is read-only');
};

subtest 'policies run after the compiled access rules' => sub {
    my $r = do_('respond-body', path => '/denied/f');
    is($r->{status}, 403, 'a deny rule answers first');
    is_deeply(hdrs($r, 'X-Ran'), [], 'the policy did not run');
    unlike($r->{body} // '', qr/hello|WRONG/, 'neither the policy body nor the file');
};

# ---- locations -----------------------------------------------------------------

subtest "a location's policy overrides the vhost's; one without inherits" => sub {
    my $r = req(path => '/own/f', headers => [ 'X-Do' => 'status:403' ]);
    is($r->{status}, 200, 'the vhost policy (403) does not run in /own/');
    is_deeply(hdrs($r, 'X-Ran'), ['own'], "only the location's policy ran");
    is($r->{body}, "own f\n", 'the file');

    $r = req(path => '/open/f', headers => [ 'X-Do' => 'status:403' ]);
    is($r->{status}, 200, 'a location with an empty policy opens what the vhost policy closes');
    is_deeply(hdrs($r, 'X-Ran'), [], 'no X-Ran: the vhost policy did not run');

    $r = req(path => '/inherit/f', headers => [ 'X-Do' => 'status:403' ]);
    is($r->{status}, 403, 'a location without policy: the vhost policy answers 403');
    is_deeply(hdrs($r, 'X-Ran'), ['vhost'], "the vhost's policy ran");
    $r = req(path => '/inherit/f');
    is($r->{status}, 200, 'and lets the file through when it returns nil');
    is($r->{body}, "inherit f\n", 'the file');
    is($r->{headers}{'cache-control'}, 'no-cache', "the location's own keys apply");

    $r = req(host => 'nopolicy.test', path => '/index.html');
    is($r->{status}, 200, 'a vhost without policy');
    is($r->{body}, "nopolicy home\n", 'its file');
    is_deeply(hdrs($r, 'X-Ran'), [], 'no policy ran');
    $r = req(host => 'nopolicy.test', path => '/loconly/f');
    is($r->{status}, 451, 'its location with a policy: the policy answers');
    is_deeply(hdrs($r, 'X-Ran'), ['loconly'], "the location's policy ran");
};

subtest 'luxd.shared: get, set, incr, ttl, delete' => sub {
    my $r = req(host => 'shared.test', path => '/api');
    is($r->{status}, 200, 'status 200');
    is($r->{body}, join(';', 'set=true', 'get=str', 'setn=true', 'getn=5,number', 'incr=6', 'incr10=16', 'decr=15',
                         'fresh=2', 'ttl0=0', 'ttlnone=nil', 'getnone=nil', 'incrstr=nil,not a number',
                         'del=true', 'gone=nil', 'delete=true', 'deleted=nil'),
       'values, numbers, incr by, a missing key, a string that cannot be incremented, delete');
    $r = req(host => 'shared.test', path => '/ttl-start');
    is($r->{body}, 'c1=1;c1b=2;t1=true;c1ttl=true',
       'set with a ttl; incr of a new key takes the ttl, of an existing key keeps its expiry');
    sleep 1.3;
    $r = req(host => 'shared.test', path => '/ttl-check');
    is($r->{body}, 't1=nil;t1ttl=nil;c1=1;c1ttl=0', 'after the ttl: the value is gone and the counter starts again (no ttl now)');
    $r = req(host => 'shared.test', path => '/bad-key');
    is($r->{status}, 500, 'an empty key is an error: 500');
};

ok($s->alive, 'the server is still running');
ok($s->stop, 'stopped cleanly');
done_testing;
