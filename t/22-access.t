# Access rules: allow/deny by prefix, suffix, regex, method and from (IPv4
# and IPv6 CIDR), combined in one rule; in order, the first match decides;
# deny answers 403 unless it names a status. Rules see the decoded,
# normalised path, never the raw one (lighttpd CVE-2008-4359).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $port6 = Luxd::free_port();

# Every file the rules guard exists, and says its own path, so a 200 that
# should have been a deny shows what leaked.
my @PATHS = qw(
  /index.html /admin/index.html /admin/x.html /adminx.html /secret.inc /secret.txt /index.html~
  /sub/conf.inc /sub/a.php~ /x/a.txt /x/a.html /y/a.txt /r/a.bak /r/a.txt /a.bak /f.bak /f.swp
  /f.bak.txt /priv12/x /a/priv1/x /a/secret/b /hidden/f /gone/f /p/f /p/public/f /p/other
  /lan/f /far/f /c1/f /c2/f /c3/f /c4/f /c5/f /c6/f /v6/f /v6b/f /v6c/f /v4only/f /ro/f /f /m/f
  /y/only-from/f /x/a.bak
);
my @INDEX_PATHS = (qw(/beta/x /alpha/x /UPPER/x /opional/x /optional/x /sta/x /starrr/x /bracx/x /bracex/x /x.BIN /a.g
  /a.gz /ex.y/x /a.orig /a.old /Class/x /class/x /mix/x.b /mix/x.c /x.three /x.one /mixed/a.z /mixed/a.y /mixed/a.w /plain),
  '/deep/' . ('d' x 90), '/deep/' . ('d' x 70));
my %files;
for my $v (qw(norm classic order1 order2 order3 method from combo kinds)) {
    $files{"$v$_"} = "$v$_\n" for @PATHS;
}
$files{"index$_"} = "index$_\n" for @INDEX_PATHS;

my $s = Luxd->new(
    server => { listen => ['127.0.0.1:$PORT', "[::1]:$port6"] },
    files  => \%files,
    config => <<'LUA',
vhost "norm.test" { root = "$DIR/norm", default = true,
  access = { deny { prefix = "/admin/" }, deny { suffix = ".inc" } } }

-- lighttpd: url.access-deny = ( "~", ".inc" )
vhost "classic.test" { root = "$DIR/classic",
  access = { deny { suffix = { "~", ".inc" } } } }

vhost "order1.test" { root = "$DIR/order1",
  access = { allow { prefix = "/p/" }, deny { prefix = "/p/" } } }
vhost "order2.test" { root = "$DIR/order2",
  access = { deny { prefix = "/p/" }, allow { prefix = "/p/" } } }
vhost "order3.test" { root = "$DIR/order3",
  access = { allow { prefix = "/p/public/" }, deny { prefix = "/p/" },
             deny { suffix = ".txt", status = 404 }, deny { suffix = ".txt", status = 451 } } }

vhost "method.test" { root = "$DIR/method",
  access = { deny { method = { "DELETE", "TRACE" }, status = 405 },
             deny { method = "POST", prefix = "/ro/" },
             deny { method = "HEAD", prefix = "/m/" } } }

vhost "from.test" { root = "$DIR/from",
  access = {
    allow { prefix = "/lan/", from = { "10.0.0.0/8", "127.0.0.0/8" } }, deny { prefix = "/lan/" },
    allow { prefix = "/far/", from = "192.168.0.0/16" },                 deny { prefix = "/far/" },
    deny { prefix = "/c1/", from = "127.0.0.0/8" },
    deny { prefix = "/c2/", from = "127.0.0.0/31" },
    deny { prefix = "/c3/", from = "128.0.0.0/1" },
    deny { prefix = "/c4/", from = "0.0.0.0/1" },
    deny { prefix = "/c5/", from = "0.0.0.0/0" },
    deny { prefix = "/c6/", from = { "127.0.0.2", "126.255.255.255/32", "127.0.0.1/32" } },
    deny { prefix = "/v6/", from = "::1" },
    allow { prefix = "/v6b/", from = "::1/128" }, deny { prefix = "/v6b/" },
    deny { prefix = "/v6c/", from = { "fe80::/10", "::2", "2001:db8::/32" } },
    deny { prefix = "/v4only/", from = "127.0.0.1" },
  } }

vhost "combo.test" { root = "$DIR/combo",
  access = {
    deny { prefix = "/x/", suffix = ".txt", method = "GET", status = 451 },
    deny { prefix = "/y/", from = "10.0.0.0/8" },
    deny { prefix = "/r/", regex = [[\.bak$]] },
    deny { prefix = "/y/only-from/", method = { "GET", "HEAD" }, from = { "::1", "127.0.0.1" }, status = 404 },
  } }

vhost "kinds.test" { root = "$DIR/kinds",
  access = {
    deny { regex = [[\.(bak|swp)$]] },
    deny { regex = [[^/priv[0-9]+/]] },
    deny { regex = "secret" },
    deny { prefix = "/hidden/", status = 404 },
    deny { prefix = "/gone/", status = 451 },
  } }

-- Rules are looked up by the literal prefix or suffix they need; none of
-- these may be skipped by that index.
local acc = {
  deny { regex = "^/alpha|^/beta" },
  deny { regex = "(?i)^/upper/" },
  deny { regex = "^/opt?ional/" },
  deny { regex = "^/star*/" },
  deny { regex = "^/brace{0,1}x/" },
  deny { regex = [[\.(?i:bin)$]] },
  deny { regex = [[\.gz?$]] },
  deny { regex = [[^/e\Qx.y\E/]] },
  deny { regex = "(old|orig)$" },
  deny { regex = "^/[Cc]lass/" },
  deny { prefix = "/mix/", suffix = { ".a", ".b" } },
  deny { suffix = { ".one", ".two", ".three" } },
  deny { suffix = ".z" },
  allow { suffix = ".y" },
  allow { regex = "^/mixed/.*\\.w$" },
  deny { prefix = "/mixed/" },
}
-- A path that meets more literals than the index merges at once.
for i = 1, 80 do acc[#acc + 1] = allow { prefix = "/deep/" .. string.rep("d", i), method = "POST" } end
acc[#acc + 1] = allow { prefix = "/deep/" .. string.rep("d", 85) }
acc[#acc + 1] = deny { prefix = "/deep/", status = 451 }
vhost "index.test" { root = "$DIR/index", access = acc }
LUA
);

# One request; Host picks the vhost. Options: method, from6 (over ::1).
sub req {
    my ($host, $path, %o) = @_;
    my $method = $o{method} // 'GET';
    my $bytes = "$method $path HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n";
    my $c = $o{from6} ? $s->connect(host => '::1', port => $port6) : $s->connect;
    $c->send($bytes);
    my $r = $c->response(head => $method eq 'HEAD', timeout => 5);
    $c->close;
    return $r // { status => undef, headers => {}, body => '' };
}

# expect(host, path, status[, name, %opts]): a 200 must carry the file.
sub expect {
    my ($host, $path, $status, $name, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $r = req($host, $path, %o);
    my $what = ($o{method} // 'GET') . " $path on $host" . ($o{from6} ? ' from ::1' : '') . ($name ? " ($name)" : '');
    my $ok = is($r->{status}, $status, "$what -> $status");
    if ($status != 200 && defined $r->{status} && ($o{method} // 'GET') ne 'HEAD') {
        (my $v = $host) =~ s/\..*//;
        unlike($r->{body}, qr/^\Q$v\E\//m, "$what: no file content in the answer");
    } elsif ($status == 200 && ($o{method} // 'GET') eq 'GET' && $o{file}) {
        (my $v = $host) =~ s/\..*//;
        is($r->{body}, "$v$o{file}\n", "$what: the file");
    }
    return $r;
}

subtest 'prefix and suffix rules' => sub {
    expect('norm.test', '/index.html', 200, 'no rule matches', file => '/index.html');
    expect('norm.test', '/admin/x.html', 403, 'prefix');
    expect('norm.test', '/admin/', 403, 'the prefix itself');
    expect('norm.test', '/adminx.html', 200, '"/admin/" does not match "/adminx.html"', file => '/adminx.html');
    expect('norm.test', '/secret.inc', 403, 'suffix');
    expect('norm.test', '/secret.txt', 200, 'other suffix', file => '/secret.txt');
    expect('norm.test', '/secret.inc?x=1', 403, 'the query is not part of the path');
};

subtest 'rules see the decoded, normalised path' => sub {
    for my $p ('/%61dmin/x.html', '/%61%64%6d%69%6e/x.html', '/x/../admin/x.html', '//admin/x.html',
               '/./admin/x.html', '/admin/./x.html', '/admin//x.html', '/x/y/../../admin/x.html',
               '/%2e/admin/x.html', '/x/%2e%2e/admin/x.html', '///admin///x.html') {
        expect('norm.test', $p, 403, 'denied by prefix "/admin/"');
    }
    for my $p ('/secret%2einc', '/secret%2Einc', '/secret.%69nc', '/x/../secret.inc', '//secret.inc', '/./secret.inc') {
        expect('norm.test', $p, 403, 'denied by suffix ".inc"');
    }
    # Climbing above the root may be refused as a bad request instead.
    my $up = req('norm.test', '/../admin/x.html');
    ok(grep({ $_ == ($up->{status} // 0) } 400, 403), '/../admin/x.html -> 400 or 403') or diag("got $up->{status}");
    # Whatever %2f decodes to, it must not reach the admin file.
    my $r = req('norm.test', '/admin%2fx.html');
    ok(($r->{status} // 0) != 200 || $r->{body} !~ m{^norm/admin/}, '/admin%2fx.html does not serve /admin/x.html')
      or diag("got $r->{status}: $r->{body}");
    expect('kinds.test', '/f%2ebak', 403, 'regex on the decoded path');
    expect('kinds.test', '/%70riv12/x', 403, 'anchored regex on the decoded path');
    expect('kinds.test', '/x/../priv12/x', 403, 'anchored regex on the normalised path');
};

subtest "lighttpd's url.access-deny = (\"~\", \".inc\")" => sub {
    expect('classic.test', '/index.html', 200, '', file => '/index.html');
    expect('classic.test', '/index.html~', 403, 'a backup file');
    expect('classic.test', '/index.html%7e', 403, 'an encoded ~');
    expect('classic.test', '/sub/a.php~', 403, 'in a subdirectory');
    expect('classic.test', '/secret.inc', 403, '.inc');
    expect('classic.test', '/sub/conf.inc', 403, '.inc in a subdirectory');
    expect('classic.test', '/secret.txt', 200, '', file => '/secret.txt');
};

subtest 'the first matching rule decides' => sub {
    expect('order1.test', '/p/f', 200, 'allow before deny: allowed', file => '/p/f');
    expect('order2.test', '/p/f', 403, 'deny before allow: denied');
    expect('order3.test', '/p/public/f', 200, 'a narrower allow before a broader deny', file => '/p/public/f');
    expect('order3.test', '/p/other', 403, 'the broader deny for the rest');
    expect('order3.test', '/x/a.txt', 404, 'of two denies the first gives the status');
    expect('order3.test', '/index.html', 200, 'no match: allowed', file => '/index.html');
};

subtest 'method rules; status = 405 answers with Allow' => sub {
    for my $m (qw(DELETE TRACE)) {
        my $r = expect('method.test', '/f', 405, 'deny by method', method => $m);
        ok(defined $r->{headers}{allow}, "$m: an Allow header") or diag($r->{raw_headers});
        like($r->{headers}{allow} // '', qr/\bGET\b/, "$m: Allow names GET");
        unlike($r->{headers}{allow} // '', qr/\b$m\b/, "$m: Allow does not name $m");
    }
    expect('method.test', '/f', 200, 'GET is not denied', file => '/f');
    expect('method.test', '/ro/f', 403, 'method and prefix: default status 403', method => 'POST');
    expect('method.test', '/ro/f', 200, 'GET on that prefix', file => '/ro/f');
    expect('method.test', '/m/f', 403, 'HEAD denied by its own rule', method => 'HEAD');
    expect('method.test', '/m/f', 200, 'GET there is allowed', file => '/m/f');
    expect('method.test', '/f', 200, 'HEAD elsewhere', method => 'HEAD');
};

subtest 'from: IPv4 CIDR (client 127.0.0.1)' => sub {
    expect('from.test', '/lan/f', 200, 'allowed from 127.0.0.0/8', file => '/lan/f');
    expect('from.test', '/far/f', 403, 'not in 192.168.0.0/16: the deny after it');
    expect('from.test', '/c1/f', 403, '127.0.0.0/8');
    expect('from.test', '/c2/f', 403, '127.0.0.0/31 holds 127.0.0.1');
    expect('from.test', '/c3/f', 200, '128.0.0.0/1 does not hold 127.0.0.1', file => '/c3/f');
    expect('from.test', '/c4/f', 403, '0.0.0.0/1 holds 127.0.0.1');
    expect('from.test', '/c5/f', 403, '0.0.0.0/0 holds everything');
    expect('from.test', '/c6/f', 403, 'a list: the third entry matches');
    expect('from.test', '/v6/f', 200, '::1 does not match an IPv4 client', file => '/v6/f');
    expect('from.test', '/v6b/f', 403, 'allow from ::1/128 does not match 127.0.0.1');
    expect('from.test', '/v4only/f', 403, '127.0.0.1');
};

subtest 'from: IPv6 (client ::1)' => sub {
    expect('from.test', '/v6/f', 403, 'deny from ::1', from6 => 1);
    expect('from.test', '/v6b/f', 200, 'allow from ::1/128', from6 => 1, file => '/v6b/f');
    expect('from.test', '/v6c/f', 200, 'fe80::/10, ::2, 2001:db8::/32 do not hold ::1', from6 => 1, file => '/v6c/f');
    expect('from.test', '/v4only/f', 200, 'an IPv4 rule does not match ::1', from6 => 1, file => '/v4only/f');
    expect('from.test', '/lan/f', 403, 'not in the IPv4 allow list: the deny after it', from6 => 1);
    expect('from.test', '/c1/f', 200, '127.0.0.0/8 does not hold ::1', from6 => 1, file => '/c1/f');
    expect('from.test', '/c4/f', 200, '0.0.0.0/1 does not hold ::1', from6 => 1, file => '/c4/f');
};

subtest 'combined conditions: all must match' => sub {
    expect('combo.test', '/x/a.txt', 451, 'prefix + suffix + method all match');
    expect('combo.test', '/x/a.html', 200, 'suffix does not match', file => '/x/a.html');
    expect('combo.test', '/y/a.txt', 200, 'prefix does not match', file => '/y/a.txt');
    expect('combo.test', '/x/a.txt', 200, 'method does not match', method => 'HEAD');
    expect('combo.test', '/y/a.txt', 200, 'prefix matches, from 10.0.0.0/8 does not', file => '/y/a.txt');
    expect('combo.test', '/r/a.bak', 403, 'prefix + regex');
    expect('combo.test', '/r/a.txt', 200, 'prefix without the regex', file => '/r/a.txt');
    expect('combo.test', '/a.bak', 200, 'the regex without the prefix', file => '/a.bak');
    expect('combo.test', '/x/a.bak', 200, 'the regex under another prefix', file => '/x/a.bak');
    expect('combo.test', '/y/only-from/f', 404, 'prefix + method list + from list, over IPv4');
    expect('combo.test', '/y/only-from/f', 404, 'the same over IPv6', from6 => 1);
};

subtest 'regex rules and custom statuses' => sub {
    expect('kinds.test', '/f.bak', 403, 'regex alternation');
    expect('kinds.test', '/f.swp', 403, 'regex alternation');
    expect('kinds.test', '/f.bak.txt', 200, '$ anchors the end', file => '/f.bak.txt');
    expect('kinds.test', '/priv12/x', 403, '^ anchored regex');
    expect('kinds.test', '/a/priv1/x', 200, '^ anchors the start', file => '/a/priv1/x');
    expect('kinds.test', '/a/secret/b', 403, 'unanchored regex without a literal prefix');
    expect('kinds.test', '/hidden/f', 404, 'deny with status = 404');
    expect('kinds.test', '/gone/f', 451, 'deny with status = 451');
    expect('kinds.test', '/index.html', 200, 'no match', file => '/index.html');
    my $r = req('kinds.test', '/f.bak');
    is($r->{status}, 403, 'default deny status 403');
};

subtest 'the rule index never hides a match, and keeps the written order' => sub {
    my @denied = qw(/beta/x /alpha/x /UPPER/x /opional/x /optional/x /sta/x /starrr/x /bracx/x /bracex/x /x.BIN /a.g
                    /a.gz /ex.y/x /a.orig /a.old /Class/x /class/x /mix/x.b /x.three /x.one);
    expect('index.test', $_, 403) for @denied;
    expect('index.test', '/mix/x.c', 200, 'prefix without one of the suffixes', file => '/mix/x.c');
    expect('index.test', '/plain', 200, 'no rule', file => '/plain');
    expect('index.test', '/mixed/a.z', 403, 'a suffix deny written before a prefix allow');
    expect('index.test', '/mixed/a.y', 200, 'a suffix allow written before a prefix deny', file => '/mixed/a.y');
    expect('index.test', '/mixed/a.w', 200, 'a regex allow written before a prefix deny', file => '/mixed/a.w');
    expect('index.test', '/deep/' . ('d' x 90), 200, 'more than 80 prefixes meet the path: the allow written first',
           file => '/deep/' . ('d' x 90));
    expect('index.test', '/deep/' . ('d' x 70), 451, 'the deny when the allow does not match');
};

$s->stop;

# On a dual-stack listener (":PORT") an IPv4 client arrives as
# ::ffff:127.0.0.1; IPv4 rules must still match it, and IPv6 rules must not.
subtest 'from on a dual-stack listener' => sub {
    my $d = Luxd->new(
        server => { listen => [':$PORT'] },
        files  => { map { ("www/$_/f" => "$_\n") } qw(v4 v6 lan all4) },
        config => <<'LUA',
vhost "localhost" { default = true, root = "$DIR/www", access = {
  deny { prefix = "/v4/", from = "127.0.0.1" },
  deny { prefix = "/v6/", from = "::1" },
  allow { prefix = "/lan/", from = "127.0.0.0/8" }, deny { prefix = "/lan/" },
  deny { prefix = "/all4/", from = "0.0.0.0/0" },
} }
LUA
    );
    my %want = (
        '127.0.0.1' => { '/v4/f' => 403, '/v6/f' => 200, '/lan/f' => 200, '/all4/f' => 403 },
        '::1'       => { '/v4/f' => 200, '/v6/f' => 403, '/lan/f' => 403, '/all4/f' => 200 },
    );
    for my $client (sort keys %want) {
        for my $path (sort keys %{ $want{$client} }) {
            my $c = $d->connect(host => $client);
            $c->send(Luxd::request(path => $path, close => 1));
            my $r = $c->response(timeout => 5) // { status => undef };
            $c->close;
            is($r->{status}, $want{$client}{$path}, "from $client: $path -> $want{$client}{$path}");
        }
    }
    $d->stop;
};

done_testing;
