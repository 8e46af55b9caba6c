# luxd -t --explain: every decision of the routing told with the file:line
# of the config that makes it: vhost (exact, alias, wildcard, default,
# Host header), redirect and rewrite with their captures, location (longest
# prefix), access (allow and deny by from, by regex), policy (told, not
# run), handler chain, static file (existing, missing, index, directory),
# proxy and fallback upstreams; and the errors for what is no request.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $up = Luxd::free_port();
my $s = Luxd->new(
    no_start => 1,
    files    => {
        'www/index.html'       => "hi\n",
        'www/files/file.txt'   => "file\n",
        'www/new/a/b'          => "ab\n",
        'www/docs/index.html'  => "docs\n",
        'www/empty/'           => '',
        'wild/index.html'      => "wild\n",
        'fb/here.html'         => "here\n",
    },
    config => <<LUA,
upstream "app" {                                    -- L:up
  { "127.0.0.1:$up", weight = 2 },                  -- L:srv1
  "127.0.0.1:@{[$up + 1]}",                         -- L:srv2
}
vhost "example.com" {                               -- L:ex
  aliases = { "www.example.com" },
  root = "\$DIR/www",
  index = { "index.htm", "index.html" },
  redirect = {
    { "^/old/(.*)\$", "http://example.com/new/\$1", status = 301 },   -- L:redir
  },
  rewrite = {
    { "^/r/([a-z]+)/(.*)\$", "/files/\$2?k=\$1" },                    -- L:rewrite
  },
  access = {
    allow { prefix = "/priv/", from = "127.0.0.0/8" },                -- L:allow
    deny { prefix = "/priv/", from = { "10.0.0.0/8", "::1" } },       -- L:deny
    deny { regex = [[\\.bak\$]], status = 404 },                      -- L:regex
  },
  location "/api/" { proxy = "app" },                                 -- L:api
  location "/api/v2/" { root = "\$DIR/www" },                         -- L:apiv2
  location "/pol/" {                                                  -- L:polloc
    policy =
      function(r) return 403 end,                                     -- L:pol
  },
}
vhost "wild" { aliases = { "*.wild.test" }, root = "\$DIR/wild" }     -- L:wild
vhost "fb.test" { root = "\$DIR/fb", fallback = "app" }               -- L:fb
vhost "fallback" { root = "\$DIR/www", default = true, dir_listing = true }  -- L:def
LUA
);
my $file = $s->config_file;
my $dir  = $s->dir;

# The line of each "-- L:name" marker in the config as written to disk.
my %L;
my $n = 0;
for (split /\n/, $s->{config_text}) {
    $n++;
    $L{$1} = $n if /-- L:(\w+)/;
}
sub at { "$file:$L{$_[0]}" }

sub run_explain {
    my (@args) = @_;
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $file, '--explain', @args);
    return ($rc, $out);
}

# Runs --explain and checks that it exits 0 and prints each line given
# (whole lines, in that order).
sub explains {
    my ($args, $lines, $name) = @_;
    my ($rc, $out) = run_explain(@$args);
    my @got = split /\n/, $out;
    my $ok = $rc == 0;
    my $i = 0;
    for my $want (@$lines) {
        $i++ while $i < @got && $got[$i] ne $want;
        if ($i == @got) { $ok = 0; diag "missing line: $want"; last }
        $i++;
    }
    ok $ok, $name or diag "exit $rc, output:\n$out";
    return $out;
}

# vhost: exact name, alias, Host header (case and port), wildcard, default.
explains(['GET http://example.com/'],
    [qq{vhost: "example.com" at @{[at('ex')]} (exact name "example.com")}], 'exact name');
explains(['http://www.example.com/'],
    [qq{vhost: "example.com" at @{[at('ex')]} (exact name "www.example.com")}], 'alias, method left out');
explains(['/', '-H', 'Host: WWW.Example.COM:8080'],
    [qq{request: GET / HTTP/1.1, Host "WWW.Example.COM:8080", from 127.0.0.1},
     qq{vhost: "example.com" at @{[at('ex')]} (exact name "www.example.com")}], '-H Host: case and port');
explains(['http://a.b.wild.test/'],
    [qq{vhost: "wild" at @{[at('wild')]} (wildcard "*.wild.test")}], 'wildcard');
explains(['http://wild.test/'],
    [qq{vhost: "fallback" at @{[at('def')]} (default: no vhost is named "wild.test")}],
    'the wildcard does not name its own suffix: default');
explains(['http://nope.test/'],
    [qq{vhost: "fallback" at @{[at('def')]} (default: no vhost is named "nope.test")}], 'default');
explains(['/'], [qq{request: GET / HTTP/1.0, Host (none), from 127.0.0.1},
    qq{vhost: "fallback" at @{[at('def')]} (default: the request names no host)}], 'no Host: default');
explains(['http://example.com/', '-H', 'Host: a.wild.test'],
    [qq{host: the URL's host "example.com" is used, not the Host header (RFC 9112 3.2.2)},
     qq{vhost: "example.com" at @{[at('ex')]} (exact name "example.com")}], 'absolute URL over Host');
explains(['/', '-H', 'Host: a@b'], [q{host: "a@b" is no host name -> 400}, 'answer: 400'], 'bad Host: 400');
explains(['GET / HTTP/1.1'], ['host: an HTTP/1.1 request without Host -> 400', 'answer: 400'],
    'HTTP/1.1 without Host: 400');

# redirect with its captures; the client's query goes along.
explains(['GET http://example.com/old/a/b?q=1'],
    [qq{redirect: rule at @{[at('redir')]}: redirect regex=^/old/(.*)\$ -> http://example.com/new/\$1 status=301},
     q{  captures: $0="/old/a/b" $1="a/b"},
     q{  -> 301 Location: http://example.com/new/a/b?q=1},
     'answer: 301'], 'redirect with captures');

# rewrite: captures, the new path and query, then the file it serves.
explains(['http://example.com/r/ab/file.txt'],
    ['redirect: none of 1 matched',
     qq{rewrite: rule at @{[at('rewrite')]}: rewrite regex=^/r/([a-z]+)/(.*)\$ -> /files/\$2?k=\$1},
     q{  captures: $0="/r/ab/file.txt" $1="ab" $2="file.txt"},
     q{  "/r/ab/file.txt" -> "/files/file.txt" query k=ab},
     q{location: none matches "/files/file.txt" (the vhost's own settings)},
     'chain: static',
     "file: $dir/www/files/file.txt exists, 5 bytes -> 200",
     'answer: 200'], 'rewrite with captures, then the file');
explains(['http://example.com/r/AB/file.txt'], ['redirect: none of 1 matched', 'rewrite: none of 1 matched'],
    'rewrite regex one character past: no match');

# location: the longest prefix, and one path past it.
explains(['http://example.com/api/v2/x'],
    [qq{location: "/api/v2/" at @{[at('apiv2')]} (longest prefix of "/api/v2/x")}, 'chain: static',
     "file: $dir/www/api/v2/x does not exist -> 404", 'answer: 404'], 'longest prefix');
explains(['http://example.com/api/v2'],
    [qq{location: "/api/" at @{[at('api')]} (longest prefix of "/api/v2")}, 'chain: proxy'],
    '"/api/v2" is not under "/api/v2/"');

# access: allow and deny by from (IPv4, IPv6), deny by regex (at the limit and past it).
explains(['http://example.com/priv/x'],
    [qq{access: rule at @{[at('allow')]}: allow prefix=/priv/ from=127.0.0.0/8 -> allowed}], 'allowed from 127.0.0.1');
explains(['http://example.com/priv/x', '--from', '10.1.2.3'],
    ['request: GET http://example.com/priv/x HTTP/1.1, Host "example.com", from 10.1.2.3',
     qq{access: rule at @{[at('deny')]}: deny prefix=/priv/ from=::1,10.0.0.0/8 status=403 -> denied, 403},
     'answer: 403'], 'denied from 10.1.2.3');
explains(['http://example.com/priv/x', '--from', '::1'],
    [qq{access: rule at @{[at('deny')]}: deny prefix=/priv/ from=::1,10.0.0.0/8 status=403 -> denied, 403}], 'denied from ::1');
explains(['http://example.com/priv/x', '--from', '11.0.0.1'],
    ['access: none of 3 rules matched -> allowed'], 'from one network past 10.0.0.0/8: allowed');
explains(['http://example.com/a.bak'],
    [qq{access: rule at @{[at('regex')]}: deny regex=\\.bak\$ status=404 -> denied, 404}, 'answer: 404'], 'deny by regex');
explains(['http://example.com/a.bak~'], ['access: none of 3 rules matched -> allowed'], 'regex one byte past: allowed');

# policy: told where it is, not run (it would answer 403).
explains(['http://example.com/pol/x'],
    [qq{location: "/pol/" at @{[at('polloc')]} (longest prefix of "/pol/x")},
     'chain: policy, static',
     "policy: policy at @{[at('pol')]} would run (not run by --explain): it may answer, change the request or hand it to an upstream; if it goes on:",
     "file: $dir/www/pol/x does not exist -> 404",
     'answer: 404 (unless the policy decides)'], 'policy');

# proxy location: the upstream and its servers.
explains(['POST http://example.com/api/x'],
    [qq{location: "/api/" at @{[at('api')]} (longest prefix of "/api/x")},
     'chain: proxy',
     qq{upstream: "app" at @{[at('up')]} (proxy)},
     "  server 127.0.0.1:$up weight 2 at @{[at('srv1')]}",
     "  server 127.0.0.1:@{[$up + 1]} weight 1 at @{[at('srv2')]}",
     'answer: from the upstream'], 'proxy upstream');

# fallback: a file that is there, one that is not, a method that is not GET.
explains(['http://fb.test/here.html'],
    ['chain: static, proxy', "file: $dir/fb/here.html exists, 5 bytes -> 200", 'answer: 200'], 'fallback: file exists');
explains(['http://fb.test/gone.html'],
    ["file: $dir/fb/gone.html does not exist -> the fallback", qq{upstream: "app" at @{[at('up')]} (fallback)},
     'answer: from the upstream'], 'fallback: file missing');
explains(['PUT http://fb.test/here.html'],
    ['static: PUT is not GET or HEAD -> the fallback', qq{upstream: "app" at @{[at('up')]} (fallback)}], 'fallback: PUT');

# static: index files in order, a directory without a slash, without an index, a listing.
explains(['http://example.com/docs/'],
    ["index: $dir/www/docs/index.htm (index \"index.htm\") does not exist",
     "index: $dir/www/docs/index.html (index \"index.html\") exists, 5 bytes -> 200",
     'answer: 200'], 'second index file');
explains(['http://example.com/docs'], ["file: $dir/www/docs is a directory -> 301 to \"/docs/\"", 'answer: 301'],
    'directory without its slash');
explains(['http://example.com/empty/'], ["directory: $dir/www/empty/ has no index file -> 403", 'answer: 403'],
    'directory without an index');
explains(['http://nope.test/empty/'],
    ['chain: static, listing', "directory: $dir/www/empty/ has no index file -> the listing",
     'listing: the directory is listed -> 200'], 'dir_listing');
explains(['http://example.com/new/a/../a/b'],
    [q{path: "/new/a/../a/b" is "/new/a/b" once decoded and normalised}, "file: $dir/www/new/a/b exists, 3 bytes -> 200"],
    'dot segments');
explains(['http://example.com/../x'], [q{path: "/../x" does not normalise ("..'' above the root?) -> 400} =~ s/''/"/r, 'answer: 400'],
    'above the root: 400');

# What is no request: exit 2 and a message that says what is wanted.
for my $bad (['GET'], ['GET x'], ['GET / HTTP/1.1 x'], ['BREW http://example.com/'], ['GET /x HTTP/2.0'],
             ['GET /a b']) {
    my ($rc, $out) = run_explain(@$bad);
    is $rc, 2, "exit 2 for \"$bad->[0]\"";
    like $out, qr/^luxd: --explain: cannot parse the request "\Q$bad->[0]\E": /, "message for \"$bad->[0]\"";
}
{
    my ($rc, $out) = run_explain('/', '-H', 'NoColon');
    is $rc, 2, '-H without a colon';
    like $out, qr/^luxd: -H "NoColon": want one "Name: value" line/, '-H message';
    ($rc, $out) = run_explain('/', '--from', '10.0.0.0/8');
    is $rc, 2, '--from a network';
    like $out, qr/^luxd: --from "10.0.0.0\/8": want an IPv4 or IPv6 address/, '--from message';
    ($rc, $out) = run_explain('/', '-H', 'Host: a', '-H', 'Host: b');
    is $rc, 2, 'two Host headers';
    ($rc, $out) = Luxd::run_luxd('-t', '-c', $file, '-H', 'Host: a');
    is $rc, 2, '-H without --explain';
    like $out, qr/-H and --from go with --explain/, 'says so';
    ($rc, $out) = Luxd::run_luxd('-c', $file, '--explain', '/');
    is $rc, 0, '--explain alone implies -t: explains, starts nothing';
    like $out, qr/^answer: 200$/m, 'and answers';
    my $broken = "$dir/broken.lua";
    open my $fh, '>', $broken or die; print $fh "vhost \"x\" { root = 1 }\n"; close $fh;
    ($rc, $out) = Luxd::run_luxd('-t', '-c', $broken, '--explain', '/');
    is $rc, 1, 'a broken config: exit 1';
    like $out, qr/^\Q$broken\E:1: /, 'with the config error';
}

done_testing;
