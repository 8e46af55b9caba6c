# Policies (issue 5): the five examples in conf/examples/ do what their
# comments say. Each runs as written, with only its server block (port,
# logs), its root and, where a test needs it, a constant replaced.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use IO::Socket::IP;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my @EXAMPLES = qw(policy-token-auth.lua policy-ip-allowlist.lua policy-rate-limit.lua
                  policy-maintenance.lua policy-ab-routing.lua);

sub slurp { my ($f) = @_; open my $fh, '<', $f or die "$f: $!"; local $/; <$fh> }

# Starts an example. Options: files, workers, listen6 (a port for [::1]),
# subst => [[qr/.../, 'replacement'], ...], env => { NAME => value }.
sub example {
    my ($name, %o) = @_;
    my $text = slurp("$Luxd::ROOT/conf/examples/$name");
    my $workers = $o{workers} // 1;
    my $listen = '"127.0.0.1:$PORT"' . ($o{listen6} ? qq{, "[::1]:$o{listen6}"} : '');
    my $block = <<"LUA";
server {
  listen     = { $listen },
  workers    = $workers,
  error_log  = "\$DIR/error.log",
  access_log = "\$DIR/access.log",
  error_log_level = "info",
  pid_file   = "\$DIR/luxd.pid",
}
LUA
    $text =~ s/^server \{\n.*?^\}\n/$block/ms or die "$name: no server block at the start of a line";
    $text =~ s/\broot(\s*)= "www"/root$1= "\$DIR\/www"/g or die "$name: no root = \"www\"";
    for my $s (@{ $o{subst} || [] }) {
        my ($re, $to) = @$s;
        $text =~ s/$re/$to/ or die "$name: $re not found";
    }
    local %ENV = (%ENV, %{ $o{env} || {} });
    return Luxd->new(config => $text, files => $o{files} || {});
}

# One request on a new connection from a loopback address of our choice.
sub from {
    my ($s, $addr, %o) = @_;
    my $sock;
    if ($addr =~ /:/) {
        $sock = IO::Socket::IP->new(PeerHost => $addr, PeerPort => $o{port}, Proto => 'tcp', Timeout => 5)
          or die "connect to [$addr]:$o{port}: $@";
    } else {
        $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port, LocalAddr => $addr,
                                      Proto => 'tcp', Timeout => 5) or die "connect from $addr: $!";
    }
    delete $o{port};
    my $c = Luxd::Conn->new($sock);
    $c->send(Luxd::request(close => 1, %o));
    my $r = $c->response(head => ($o{method} // 'GET') eq 'HEAD', timeout => 5);
    $c->close;
    return $r // { status => undef, headers => {}, hlist => {}, body => undef };
}

subtest 'the five examples pass luxd -t as written' => sub {
    for my $ex (@EXAMPLES) {
        my ($rc, $out) = Luxd::run_luxd('-t', '-c', "conf/examples/$ex");
        is($rc, 0, "luxd -t -c conf/examples/$ex") or diag($out);
        like(slurp("$Luxd::ROOT/conf/examples/$ex"), qr/\bpolicy\s*=/, "$ex declares a policy");
    }
};

# ---- token auth ----------------------------------------------------------------

subtest 'policy-token-auth.lua: 401 with WWW-Authenticate, 200 with a token' => sub {
    my $deploy = 'deploy-0123456789abcdef';
    my $s = example('policy-token-auth.lua',
                    files => { 'www/index.html' => "api home\n", 'www/static/readme.txt' => "open readme\n" },
                    env => { LUXD_DEPLOY_TOKEN => $deploy });
    my $r = $s->get('/index.html');
    is($r->{status}, 401, 'no Authorization: 401');
    is($r->{headers}{'www-authenticate'}, 'Bearer realm="api"', 'WWW-Authenticate: Bearer realm="api"');
    unlike($r->{body} // '', qr/api home/, 'not the file');
    $r = $s->head('/index.html');
    is($r->{status}, 401, 'HEAD without Authorization: 401');
    for my $bad ('Bearer wrong-token-123456', 'Basic YWxpY2U6c2VjcmV0', 'Bearer ALICE-7F3C9E2B5D1A',
                 'Bearer alice-7f3c9e2b5d1ax', 'Bearer', 'alice-7f3c9e2b5d1a', 'Bearer alice-7f3c9e2b5d1a extra') {
        $r = $s->get('/index.html', Authorization => $bad);
        is($r->{status}, 401, "Authorization: $bad -> 401");
        is($r->{headers}{'www-authenticate'}, 'Bearer realm="api", error="invalid_token"', '... error="invalid_token"');
        unlike($r->{body} // '', qr/api home/, '... not the file');
    }
    for my $good ('Bearer alice-7f3c9e2b5d1a', 'bearer bob-0e8d4c6a2f91e5', 'BEARER alice-7f3c9e2b5d1a',
                  "Bearer $deploy") {
        $r = $s->get('/index.html', Authorization => $good);
        is($r->{status}, 200, "Authorization: $good -> 200");
        is($r->{body}, "api home\n", '... the file');
        ok(!defined $r->{headers}{'www-authenticate'}, '... no challenge');
    }
    $r = $s->get('/static/readme.txt');
    is($r->{status}, 200, '/static/ needs no token (its location has an open policy)');
    is($r->{body}, "open readme\n", 'the file');
    ok($s->stop, 'stopped cleanly');
};

# ---- IP allow-list -------------------------------------------------------------

subtest 'policy-ip-allowlist.lua: 403 outside the list, 200 inside' => sub {
    my $port6 = Luxd::free_port();
    my $s = example('policy-ip-allowlist.lua', listen6 => $port6,
                    files => { 'www/index.html' => "intranet\n" },
                    env => { LUXD_ALLOW => '127.0.0.4/30 127.1.2.3' });
    my %want = (
        '127.0.0.1' => 200,    # in the file
        '127.0.0.2' => 403, '127.0.0.3' => 403,
        '127.0.0.4' => 200, '127.0.0.5' => 200, '127.0.0.7' => 200,    # LUXD_ALLOW 127.0.0.4/30
        '127.0.0.8' => 403, '127.0.0.0' => 403,
        '127.1.2.3' => 200, '127.1.2.4' => 403,                      # LUXD_ALLOW single address
        '127.10.0.1' => 403,
    );
    for my $addr (sort keys %want) {
        my $r = from($s, $addr, path => '/index.html');
        is($r->{status}, $want{$addr}, "from $addr: $want{$addr}");
        if ($want{$addr} == 200) { is($r->{body}, "intranet\n", "from $addr: the page") }
        else { unlike($r->{body} // '', qr/intranet/, "from $addr: not the page") }
    }
    my $r = from($s, '::1', port => $port6, path => '/index.html');
    is($r->{status}, 200, 'from ::1 (in the file): 200');
    ok($s->stop, 'stopped cleanly');

    my ($rc, $out) = do {
        local $ENV{LUXD_ALLOW} = '10.0.0.0/8 300.1.2.3';
        Luxd::run_luxd('-t', '-c', 'conf/examples/policy-ip-allowlist.lua');
    };
    is($rc, 1, 'a bad entry in LUXD_ALLOW: luxd -t fails');
    like($out, qr{policy-ip-allowlist\.lua:\d+: luxd\.cidr: entry 7 \("300\.1\.2\.3"\) is not an IPv4 or IPv6 address}, 'and says which, with file:line') or diag($out);
};

# ---- rate limit ----------------------------------------------------------------

subtest 'policy-rate-limit.lua: 429 with Retry-After after 20 requests, per address, across loops' => sub {
    my $s = example('policy-rate-limit.lua', workers => 2, files => { 'www/index.html' => "home\n" });
    my ($ok, @remaining) = (0);
    for my $i (1 .. 20) {
        my $r = from($s, '127.0.0.1', path => '/index.html');
        $ok++ if $r->{status} == 200 && $r->{body} eq "home\n";
        push @remaining, $r->{headers}{'x-ratelimit-remaining'} // '?';
    }
    is($ok, 20, '20 requests on 20 new connections, workers = 2: all 200');
    is("@remaining", join(' ', reverse 0 .. 19), 'X-RateLimit-Remaining counts down 19..0, one count for both loops');
    for my $i (21, 22) {
        my $r = from($s, '127.0.0.1', path => '/index.html');
        is($r->{status}, 429, "request $i: 429");
        my $ra = $r->{headers}{'retry-after'};
        ok(defined $ra && $ra =~ /^\d+$/ && $ra >= 1 && $ra <= 60, "request $i: Retry-After in 1..60 s ("
           . ($ra // 'none') . ')');
        is($r->{headers}{'x-ratelimit-remaining'}, '0', "request $i: X-RateLimit-Remaining: 0");
        unlike($r->{body} // '', qr/^home$/m, "request $i: not the file");
    }
    my $r = from($s, '127.0.0.2', path => '/index.html');
    is($r->{status}, 200, 'another address has its own count: 200');
    is($r->{headers}{'x-ratelimit-remaining'}, '19', 'X-RateLimit-Remaining: 19');
    ok($s->stop, 'stopped cleanly');

    # The window ends: with WINDOW = 5, the count starts again after it.
    # 5 s, not 1, so that the first four requests fall in one window even
    # on a loaded machine; the end of the window is awaited, not slept.
    $s = example('policy-rate-limit.lua', files => { 'www/index.html' => "home\n" },
                 subst => [ [ qr/local LIMIT, WINDOW = \d+, \d+/, 'local LIMIT, WINDOW = 3, 5' ] ]);
    my @st = map { from($s, '127.0.0.1', path => '/index.html')->{status} } 1 .. 4;
    is("@st", '200 200 200 429', 'LIMIT 3: 200 200 200 429');
    $r = from($s, '127.0.0.1', path => '/index.html');
    my $ra = $r->{headers}{'retry-after'} // 'none';
    ok($ra =~ /^\d+$/ && $ra >= 1 && $ra <= 5, "Retry-After in 1..5 with a 5 s window ($ra)");
    ok(wait_for(sub { ($r = from($s, '127.0.0.1', path => '/index.html'))->{status} == 200 }, 15),
       'after the window: 200 again');
    is($r->{headers}{'x-ratelimit-remaining'}, '2', 'a new window (remaining 2)');
    ok($s->stop, 'stopped cleanly');
};

# ---- maintenance ---------------------------------------------------------------

subtest 'policy-maintenance.lua: 503 with Retry-After, except for an admin address' => sub {
    my %files = ('www/index.html' => "site\n");
    my $s = example('policy-maintenance.lua', files => \%files, env => { LUXD_MAINTENANCE => '1' });
    for my $addr ('127.0.0.2', '127.0.0.3') {
        my $r = from($s, $addr, path => '/index.html');
        is($r->{status}, 503, "LUXD_MAINTENANCE=1, from $addr: 503");
        is($r->{headers}{'retry-after'}, '600', 'Retry-After: 600');
        like($r->{body} // '', qr/maintenance/i, 'the maintenance message');
        unlike($r->{body} // '', qr/^site$/m, 'not the page');
    }
    my $r = from($s, '127.0.0.2', method => 'HEAD', path => '/index.html');
    is($r->{status}, 503, 'HEAD: 503');
    $r = from($s, '127.0.0.1', path => '/index.html');
    is($r->{status}, 200, 'from the admin address 127.0.0.1: 200');
    is($r->{body}, "site\n", 'the page');
    ok(!defined $r->{headers}{'retry-after'}, 'no Retry-After');
    ok($s->stop, 'stopped cleanly');

    # The flag file, switched with a reload.
    my $s2 = do {
        local %ENV = %ENV;
        delete $ENV{LUXD_MAINTENANCE};
        example('policy-maintenance.lua', files => \%files,
                subst => [ [ qr{"conf/maintenance\.on"}, '"$DIR/maintenance.on"' ] ]);
    };
    my $flag = $s2->dir . '/maintenance.on';
    $r = from($s2, '127.0.0.2', path => '/index.html');
    is($r->{status}, 200, 'no flag file: 200');
    is($r->{body}, "site\n", 'the page');
    ok(!defined $r->{hlist}{'retry-after'}, 'no Retry-After');
    open my $fh, '>', $flag or die "$flag: $!";
    close $fh;
    like($s2->reload // 'timeout', qr/^ok /, 'flag file created, reload ok');
    $r = from($s2, '127.0.0.2', path => '/index.html');
    is($r->{status}, 503, 'maintenance on: 503');
    is($r->{headers}{'retry-after'}, '600', 'Retry-After: 600');
    is(from($s2, '127.0.0.1', path => '/index.html')->{status}, 200, 'the admin still gets 200');
    unlink $flag or die;
    like($s2->reload // 'timeout', qr/^ok /, 'flag file removed, reload ok');
    $r = from($s2, '127.0.0.2', path => '/index.html');
    is($r->{status}, 200, 'maintenance off: 200');
    is($r->{body}, "site\n", 'the page');
    ok($s2->stop, 'stopped cleanly');
};

# ---- A/B routing ----------------------------------------------------------------

subtest 'policy-ab-routing.lua: stable buckets by cookie, Set-Cookie for new visitors' => sub {
    my $s = example('policy-ab-routing.lua', files => {
        'www/a/index.html' => "A home\n", 'www/b/index.html' => "B home\n",
        'www/a/page.html'  => "A page\n", 'www/b/page.html'  => "B page\n",
        'www/a/my page.html' => "A my page\n", 'www/b/my page.html' => "B my page\n",
        'www/page.html' => "WRONG: outside the buckets\n",
    });
    my %seen;
    for my $i (1 .. 10) {
        my $r = $s->get('/page.html');
        is($r->{status}, 302, "new visitor $i: 302");
        my ($b) = ($r->{headers}{location} // '') =~ m{^/([ab])/page\.html$};
        ok($b, "new visitor $i: Location /a/page.html or /b/page.html") or diag($r->{headers}{location});
        my $sc = $r->{headers}{'set-cookie'} // '';
        like($sc, qr/^ab=([ab]); Path=\/; Max-Age=\d+/, "new visitor $i: Set-Cookie ab=...");
        my ($cb) = $sc =~ /^ab=([ab])/;
        is($cb, $b, "new visitor $i: the cookie names the bucket redirected to");
        $seen{$b // '?'}++;
    }
    is_deeply(\%seen, { a => 5, b => 5 }, '10 new visitors: 5 in a, 5 in b');

    for my $b (qw(a b)) {
        my @loc;
        for (1 .. 5) {
            my $r = $s->get('/page.html', Cookie => "ab=$b");
            push @loc, ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') . ' '
              . (defined $r->{headers}{'set-cookie'} ? 'set-cookie' : 'no-cookie');
        }
        is_deeply(\@loc, [ ("302 /$b/page.html no-cookie") x 5 ], "cookie ab=$b: always /$b/page.html, no new cookie");
        my $r = $s->get("/$b/page.html", Cookie => "ab=$b");
        is($r->{status}, 200, "cookie ab=$b on /$b/page.html: 200");
        is($r->{body}, uc($b) . " page\n", 'the bucket\'s page');
        ok(!defined $r->{headers}{'set-cookie'}, 'no Set-Cookie');
        my $o = $b eq 'a' ? 'b' : 'a';
        $r = $s->get("/$o/page.html", Cookie => "ab=$b");
        is($r->{status}, 302, "cookie ab=$b on a link to /$o/page.html: 302");
        is($r->{headers}{location}, "/$b/page.html", "back to /$b/page.html");
    }
    my $r = $s->get('/page.html', Cookie => 'theme=dark; ab=b; lang=en');
    is($r->{headers}{location}, '/b/page.html', 'ab=b among other cookies');
    $r = $s->get('/page.html', Cookie => 'xab=a; ab=b');
    is($r->{headers}{location}, '/b/page.html', 'a cookie named xab is not ab');
    $r = $s->get('/page.html?x=1&y=%20', Cookie => 'ab=a');
    is($r->{headers}{location}, '/a/page.html?x=1&y=%20', 'the query is kept');
    $r = $s->get('/my%20page.html', Cookie => 'ab=b');
    is($r->{headers}{location}, '/b/my%20page.html', 'the path is encoded again');
    $r = $s->get('/b/my%20page.html', Cookie => 'ab=b');
    is($r->{body}, "B my page\n", 'and serves');
    $r = $s->get('/', Cookie => 'ab=a');
    is($r->{headers}{location}, '/a/', '/ -> /a/');
    $r = $s->get('/a/', Cookie => 'ab=a');
    is($r->{body}, "A home\n", "/a/ serves a's index");

    $r = $s->get('/b/page.html');
    is($r->{status}, 200, 'a new visitor arriving on /b/page.html is served');
    is($r->{body}, "B page\n", 'the b page');
    like($r->{headers}{'set-cookie'} // '', qr/^ab=b;/, 'and gets ab=b');
    $r = $s->get('/page.html', Cookie => 'ab=z');
    like($r->{headers}{'set-cookie'} // '', qr/^ab=[ab];/, 'an unknown bucket ab=z: a new cookie');
    ok($s->stop, 'stopped cleanly');
};

done_testing;
