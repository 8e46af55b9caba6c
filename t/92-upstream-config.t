# issue 10, the configuration side of the reverse proxy: upstream "name"
# { servers, keys }, and proxy / fallback / proxy_host / proxy_headers /
# proxy_via on vhosts and locations. Each mistake is refused by `luxd -t`
# at its file:line with what is wrong; each limit is accepted at the limit
# and refused one past it; server names resolve at load (to every address,
# shown by -T) and a name that does not resolve is an error; a reload whose
# upstream does not resolve keeps serving the running generation.
#
# These are config tests only: whether a request is proxied is the proxy
# handler's to show.
use strict;
use warnings;
use Test::More;
use Socket qw(getaddrinfo getnameinfo AF_INET6 AF_UNSPEC SOCK_STREAM NI_NUMERICHOST NI_NUMERICSERV);
use Time::HiRes qw(time);
use File::Temp qw(tempdir);
use lib 't/lib';

# Names resolve through the system's resolver, and what it knows differs
# from machine to machine (a minimal root may have no "localhost" in
# /etc/hosts at all). So the test runs itself again with a getaddrinfo
# shim preloaded (t/lib/fakehosts.c) that answers localhost with two
# addresses from a file of its own, in luxd and in this script alike.
unless ($ENV{LUXD_FAKE_HOSTS}) {
    my $d = tempdir('luxd-hosts-XXXXXX', TMPDIR => 1); # removed by the run below
    open my $h, '>', "$d/hosts" or die "hosts: $!";
    print $h "localhost 127.0.0.1 ::1\n";
    # The name that must not resolve ($NOHOST below), listed without
    # addresses: the shim answers EAI_NONAME at once instead of asking the
    # real resolver, which may wait for a DNS server that does not answer.
    print $h "luxd-no-such-host.invalid\n";
    close $h;
    system('cc', '-shared', '-fPIC', '-O1', '-o', "$d/fakehosts.so", 't/lib/fakehosts.c', '-ldl') == 0
      or die "cc t/lib/fakehosts.c failed";
    $ENV{LUXD_FAKE_HOSTS} = "$d/hosts";
    $ENV{LD_PRELOAD} = "$d/fakehosts.so";
    # An ASan build wants its runtime first among the libraries.
    $ENV{ASAN_OPTIONS} = join ':', grep { length } $ENV{ASAN_OPTIONS} // '', 'verify_asan_link_order=0';
    exec $^X, 't/92-upstream-config.t' or die "exec: $!";
}
END { require File::Path; File::Path::remove_tree($1) if ($ENV{LUXD_FAKE_HOSTS} // '') =~ m{^(.*)/hosts$} }
require Luxd;
no warnings "once"; # $Luxd::ROOT, set by the module required at run time

# A name that must not resolve: .invalid is reserved for that (RFC 6761),
# and the hosts file of the shim lists it with no address (EAI_NONAME).
# Checked here first, so a failure below is luxd's, not the resolver's.
my $NOHOST = 'luxd-no-such-host.invalid';
my $t0 = time;
my ($gai_err) = getaddrinfo($NOHOST, 80, { socktype => SOCK_STREAM });
my $gai_secs = time - $t0;
ok $gai_err, "$NOHOST does not resolve here ($gai_err)";
cmp_ok $gai_secs, '<', 5, "and the resolver says so at once (${\ sprintf '%.3f', $gai_secs} s)";

# `luxd -t` must refuse $text at $file:$line with a message matching $re.
sub refuses {
    my ($name, $text, $line, $re, %o) = @_;
    subtest $name => sub {
        my ($rc, $out, $file, $dir) = Luxd::check_config($text, %o);
        my $where = $o{in} ? "$dir/$o{in}" : $file;
        is $rc, 1, 'luxd -t exits 1' or diag $out;
        like $out, qr/^\Q$where\E:$line: /m, "the message names $where:$line" or diag $out;
        like $out, $re, 'and says what is wrong' or diag $out;
        unlike $out, qr/stack traceback/, 'no Lua traceback';
    };
}

# `luxd -t` must accept $text; returns its output.
sub accepted {
    my ($name, $text, %o) = @_;
    my ($rc, $out) = Luxd::check_config($text, %o);
    is $rc, 0, "$name: luxd -t accepts it" or diag $out;
    return $out;
}

# `luxd -T` of $text: (exit code, output).
sub dump_of {
    my ($text, %o) = @_;
    my ($rc0, $out0, $file, $dir) = Luxd::check_config($text, %o);
    my ($rc, $out) = Luxd::run_luxd('-T', '-c', $file);
    return ($rc, $out, $file, $dir);
}

my $U = qq{upstream "app" { "127.0.0.1:8081" }\n};
sub vh { qq{vhost "a.test" {\n  root = "\$DIR/www",\n  $_[0]\n}\n} }

# --- upstream blocks --------------------------------------------------------
refuses 'no server', qq{upstream "app" {\n  keepalive = 4,\n}\n}, 1,
  qr/upstream "app": needs at least one server: upstream "name" \{ "127\.0\.0\.1:8081" \}/;
refuses 'the same name twice', qq{$U\nupstream "app" { "127.0.0.1:8082" }\n}, 3,
  qr/upstream "app": the name is already used by upstream "app" \(\S+:1\)/;
refuses 'a name with a space', qq{upstream "my app" { "127.0.0.1:80" }\n}, 1,
  qr/upstream "my app": the name may only hold letters, digits, "_", "-" and "\."/;
refuses 'no table', qq{upstream "app"\n}, 1,
  qr/missing \{ \.\.\. \} after the name: upstream "app" \{ "127\.0\.0\.1:8081" \}/;
refuses 'servers as a key', qq{upstream "app" {\n  servers = { "127.0.0.1:1" },\n}\n}, 2,
  qr/unknown key "servers" \(list the servers without a key/;
refuses 'a misspelt key', qq{upstream "app" {\n  "127.0.0.1:1",\n  read_timout = 5,\n}\n}, 3,
  qr/upstream "app": unknown key "read_timout" \(did you mean "read_timeout"\?\)/;
refuses 'a weight on the upstream', qq{upstream "app" {\n  "127.0.0.1:1",\n  weight = 2,\n}\n}, 3,
  qr/unknown key "weight" \(a weight belongs to one server: upstream "name" \{ \{ "127\.0\.0\.1:8081", weight = 2 \} \}\)/;
refuses 'an upstream key in a vhost', qq{$U} . vh("proxy = \"app\",\n  connect_timeout = 1,"), 5,
  qr/vhost "a\.test": unknown key "connect_timeout" \(it belongs in upstream "name" \{ \.\.\. \}\)/;
refuses 'a key of both in a vhost', vh("send_timeout = 1,"), 3,
  qr/unknown key "send_timeout" \(it belongs in server \{ \.\.\. \} or upstream "name" \{ \.\.\. \}\)/;

# Servers: each error at the server's own line.
refuses 'a server without a port', qq{upstream "app" {\n  "127.0.0.1:1",\n  "127.0.0.1",\n}\n}, 3,
  qr/upstream "app": server "127\.0\.0\.1" is not "host:port", "\[IPv6\]:port" or "unix:\/path"/;
refuses 'port 0', qq{upstream "app" {\n  "127.0.0.1:1",\n  "127.0.0.1:0",\n}\n}, 3,
  qr/server "127\.0\.0\.1:0" has a port outside 1\.\.65535/;
refuses 'port 65536', qq{upstream "app" {\n  "127.0.0.1:1",\n  "[::1]:65536",\n}\n}, 3,
  qr/server "\[::1\]:65536" has a port outside 1\.\.65535/;
refuses 'a bad IPv6 address', qq{upstream "app" {\n  "[fe80::zz]:80",\n}\n}, 2,
  qr/server "\[fe80::zz\]:80" has an invalid IPv6 address/;
refuses 'a bad host', qq{upstream "app" {\n  "-bad-.test:80",\n}\n}, 2,
  qr/server "-bad-\.test:80" has an invalid host/;
refuses 'the same server twice, in another case', qq{upstream "app" {\n  "app.test:80",\n  "APP.test:80",\n}\n}, 3,
  qr/server "APP\.test:80" is given twice \(as "app\.test:80"\)/;
refuses 'a number as a server', qq{upstream "app" {\n  8080,\n}\n}, 1,
  qr/server 1 must be a string "host:port" or \{ "127\.0\.0\.1:8081", weight = 2 \}, got number/;
refuses 'weight 0', qq{upstream "app" {\n  "127.0.0.1:1",\n  { "127.0.0.1:2", weight = 0 },\n}\n}, 3,
  qr/upstream "app": server 2: "weight" must be between 1 and 100, got 0/;
refuses 'weight 101', qq{upstream "app" {\n  "127.0.0.1:1",\n  { "127.0.0.1:2", weight = 101 },\n}\n}, 3,
  qr/server 2: "weight" must be between 1 and 100, got 101/;
refuses 'weight 1.5', qq{upstream "app" {\n  { "127.0.0.1:2", weight = 1.5 },\n}\n}, 2,
  qr/server 1: "weight" must be an integer, got 1\.5/;
refuses 'two addresses in one table', qq{upstream "app" {\n  { "127.0.0.1:2", "127.0.0.1:3" },\n}\n}, 2,
  qr/a server given as a table holds one address: \{ "127\.0\.0\.1:8081", weight = 2 \}, got 2 items/;
refuses 'a misspelt server key', qq{upstream "app" {\n  { "127.0.0.1:2", wieght = 2 },\n}\n}, 2,
  qr/server 1: unknown key "wieght" \(did you mean "weight"\?\)/;
refuses 'unix: without a path', qq{upstream "app" {\n  "127.0.0.1:1",\n  "unix:",\n}\n}, 3,
  qr/server "unix:" needs the socket's path: "unix:\/run\/app\.sock"/;
refuses 'unix: a directory', qq{upstream "app" {\n  "unix:/run/",\n}\n}, 2,
  qr/server "unix:\/run\/" names a directory, not a socket/;

# Keys: the limits, and one past them.
for my $c (
    [ keepalive => -1, qr/"keepalive" must be between 0 and 10000, got -1/ ],
    [ keepalive => 10001, qr/"keepalive" must be between 0 and 10000, got 10001/ ],
    [ keepalive => 1.5, qr/"keepalive" must be an integer, got 1\.5/ ],
    [ max_header_bytes => 1023, qr/"max_header_bytes" must be between 1024 and 1048576, got 1023/ ],
    [ max_header_bytes => 1048577, qr/"max_header_bytes" must be between 1024 and 1048576, got 1048577/ ],
    [ max_fails => -1, qr/"max_fails" must be between 0 and 1000000, got -1/ ],
    (map { [ $_ => 0, qr/"$_" must be > 0, got 0/ ] }
       qw(keepalive_timeout connect_timeout read_timeout send_timeout fail_timeout)),
    [ connect_timeout => '"5"', qr/"connect_timeout" must be a number, got string/ ],
) {
    my ($k, $v, $re) = @$c;
    refuses "$k = $v", qq{upstream "app" {\n  "127.0.0.1:1",\n  $k = $v,\n}\n}, 3, qr/upstream "app": $re/;
}
accepted 'every key at its limit', <<'LUA';
upstream "app" {
  "127.0.0.1:65535", "[::1]:1",
  { "127.0.0.1:2", weight = 100 }, { "127.0.0.1:3", weight = 1 },
  keepalive = 10000, keepalive_timeout = 0.001, connect_timeout = 0.5, read_timeout = 3600,
  send_timeout = 3600, max_fails = 0, fail_timeout = 0.1, max_header_bytes = 1048576,
}
upstream "low" { "127.0.0.1:1", keepalive = 0, max_header_bytes = 1024, max_fails = 1000000 }
vhost "a.test" { proxy = "app", location "/l/" { proxy = "low" } }
LUA

# A Unix socket path: 107 bytes fit a sockaddr_un (108 with the NUL), 108
# do not; refused by the loader at the server's line.
{
    my $fit = '/tmp/' . ('s' x 102);    # 107 bytes
    is length($fit), 107, 'a 107-byte socket path';
    accepted 'a unix path of 107 bytes', qq{upstream "app" {\n  "unix:$fit",\n}\nvhost "a.test" { proxy = "app" }\n};
    my ($rc, $dump) = dump_of(qq{upstream "app" {\n  "unix:$fit",\n}\nvhost "a.test" { proxy = "app" }\n});
    like $dump, qr/^  server unix:\Q$fit\E weight 1  \("unix:\Q$fit\E", /m, '-T shows the whole path';
    refuses 'a unix path of 108 bytes', qq{upstream "app" {\n  "127.0.0.1:1",\n  "unix:${fit}x",\n}\n}, 3,
      qr/upstream "app": server "unix:\Q$fit\Ex": the socket path \Q${fit}x\E is 108 bytes long; a Unix socket address holds at most 107/;
}

# --- proxy and fallback -----------------------------------------------------
refuses 'proxy to an upstream that is not declared', qq{$U} . vh(qq{proxy = "ap",}), 4,
  qr/vhost "a\.test": "proxy" names upstream "ap", which is not declared \(did you mean "app"\?\)/;
refuses 'fallback with no upstream at all', vh(qq{fallback = "app",}), 3,
  qr/vhost "a\.test": "fallback" names upstream "app", but there is none; declare it: upstream "app" \{ "127\.0\.0\.1:8081" \}/;
refuses 'a location proxy to an undeclared upstream',
  qq{$U} . vh(qq{location "/api/" {\n    proxy = "appp",\n  },}), 5,
  qr/vhost "a\.test": location "\/api\/": "proxy" names upstream "appp", which is not declared \(did you mean "app"\?\)/;
refuses 'proxy = true', qq{$U} . vh(qq{proxy = true,}), 4,
  qr/"proxy" must be the name of an upstream \("app"\) or false, got true/;
refuses 'fallback = ""', qq{$U} . vh(qq{fallback = "",}), 4, qr/"fallback" must not be empty/;
refuses 'proxy and fallback in one block', qq{$U} . vh(qq{proxy = "app",\n  fallback = "app",}), 5,
  qr/"fallback" would never be used: "proxy" sends every request here to upstream "app"; set one of them/;
accepted 'an upstream declared after its use', vh(qq{proxy = "app",}) . $U;
accepted 'an upstream declared in an included file',
  vh(qq{fallback = "inc",}) . qq{include "conf.d/*.lua"\n},
  files => { 'conf.d/u.lua' => qq{upstream "inc" { "127.0.0.1:1" }\n} };
refuses 'an included file names an undeclared upstream',
  qq{$U\ninclude "conf.d/*.lua"\n},
  2, qr/vhost "b\.test": "proxy" names upstream "apx", which is not declared \(did you mean "app"\?\)/,
  files => { 'conf.d/v.lua' => qq{vhost "b.test" {\n  proxy = "apx",\n}\n} }, in => 'conf.d/v.lua';

# proxy_host
refuses 'proxy_host with a space', qq{$U} . vh(qq{proxy = "app",\n  proxy_host = "a b",}), 5,
  qr/"proxy_host": "a b" is not a host name \(letters, digits, "-" and "\."\), an IPv4 address or "\[IPv6\]"/;
refuses 'proxy_host port 65536', qq{$U} . vh(qq{proxy = "app",\n  proxy_host = "a.test:65536",}), 5,
  qr/"proxy_host": "a\.test:65536" has a port outside 1\.\.65535/;
refuses 'proxy_host with a bad IPv6 address', qq{$U} . vh(qq{proxy = "app",\n  proxy_host = "[::g]",}), 5,
  qr/"proxy_host": "\[::g\]" has an invalid IPv6 address/;
refuses 'proxy_host empty', qq{$U} . vh(qq{proxy = "app",\n  proxy_host = "",}), 5,
  qr/"proxy_host" must not be empty/;
accepted 'proxy_host forms', qq{$U} . vh(qq{proxy = "app", proxy_host = "API.test:65535",
  location "/a/" { proxy_host = "10.0.0.1" }, location "/b/" { proxy_host = "[::1]:8080" },
  location "/c/" { proxy_host = false },});

# proxy_headers
for my $h (qw(Connection Keep-Alive TE Trailer Transfer-Encoding Upgrade Proxy-Authorization proxy-connection)) {
    refuses "proxy_headers refuses $h", qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-Ok"] = "1",\n    ["$h"] = "x",\n  },}), 7,
      qr/"proxy_headers": "\Q$h\E" is a hop-by-hop field: luxd removes it from what it forwards and manages the connection to the upstream itself/;
}
refuses 'proxy_headers refuses Host', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    host = "x",\n  },}), 6,
  qr/"proxy_headers": "host" is set with proxy_host = "name\[:port\]"/;
refuses 'proxy_headers refuses Content-Length', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["Content-Length"] = "5",\n  },}), 6,
  qr/"proxy_headers": "Content-Length" is set from the body that is forwarded, not by the config/;
refuses 'proxy_headers refuses $variables', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-Real-IP"] = "\$remote_addr",\n  },}), 6,
  qr/"proxy_headers"\["X-Real-IP"\]: variables are not supported in proxy_headers; write the value itself/;
refuses 'proxy_headers refuses a line break', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-A"] = "a\\r\\nX-B: b",\n  },}), 6,
  qr/"proxy_headers"\["X-A"\] must not contain a line break/;
refuses 'proxy_headers refuses NUL', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-A"] = "a\\0b",\n  },}), 6,
  qr/"proxy_headers"\["X-A"\] must not contain a NUL byte/;
refuses 'proxy_headers refuses other control characters', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-A"] = "a\\127b",\n  },}), 6,
  qr/"proxy_headers"\["X-A"\] must not contain a control character/;
refuses 'proxy_headers refuses white space around a value', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-A"] = " a",\n  },}), 6,
  qr/"proxy_headers"\["X-A"\] must not start or end with white space/;
refuses 'proxy_headers refuses a name that is not a token', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = { ["X A"] = "1" },}), 5,
  qr/"proxy_headers": "X A" is not a header name; write \{ \["X-Name"\] = "value" \}/;
refuses 'proxy_headers refuses a name twice', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = {\n    ["X-A"] = "1",\n    ["x-a"] = "2",\n  },}), 7,
  qr/"proxy_headers": header "x-a" is given twice \(as "X-A"\)/;
refuses 'proxy_headers as a string', qq{$U} . vh(qq{proxy = "app",\n  proxy_headers = "X-A: 1",}), 5,
  qr/"proxy_headers" must be a table like \{ \["X-Forwarded-Port"\] = "443" \}, got string/;
refuses 'proxy_via as a string', qq{$U} . vh(qq{proxy = "app",\n  proxy_via = "off",}), 5,
  qr/"proxy_via" must be true or false, got string/;

# --- name resolution, -t and -T ------------------------------------------------
# What getaddrinfo(AF_UNSPEC, SOCK_STREAM) gives for localhost here, in
# luxd's addr_text form: luxd must list each address once, in this order.
my $port = Luxd::free_port();
my ($err, @ai) = getaddrinfo('localhost', $port, { socktype => SOCK_STREAM, family => AF_UNSPEC });
ok !$err, "localhost resolves here" or diag $err;
my (@want, %seen);
for my $a (@ai) {
    my ($e, $h, $s) = getnameinfo($a->{addr}, NI_NUMERICHOST | NI_NUMERICSERV);
    my $t = $a->{family} == AF_INET6 ? "[$h]:$s" : "$h:$s";
    push @want, $t unless $seen{$t}++;
}
ok @want >= 1, 'localhost has ' . join(', ', @want);

my $CONF = <<"LUA";
upstream "app" {
  "127.0.0.1:8081",
  { "localhost:$port", weight = 5 },
  "[::1]:8083",
  "unix:run/app.sock",
  keepalive = 8, read_timeout = 2.5,
}
upstream "spare" { "127.0.0.1:9" }
vhost "a.test" {
  root = "\$DIR/www",
  fallback = "app",
  proxy_headers = { ["X-Forwarded-Port"] = "443", ["X-Drop"] = "" },
  location "/api/" { proxy = "app", proxy_host = "api.internal:8080", proxy_via = false },
  location "/static/" { fallback = false },
}
LUA
{
    my ($rc, $out, $file) = dump_of($CONF);
    is $rc, 0, 'luxd -T exits 0' or diag $out;
    my @servers = $out =~ /^upstream app  \(\Q$file\E:1\)\n((?:  server .*\n)+)/m;
    my @got = ($servers[0] // '') =~ /^  server (\S+) weight (\d+)  \("([^"]*)", \S+:(\d+)\)$/mg;
    my @exp = (
        '127.0.0.1:8081', 1, '127.0.0.1:8081', 2,
        (map { ($_, 5, "localhost:$port", 3) } @want),
        '[::1]:8083', 1, '[::1]:8083', 4,
        "unix:$Luxd::ROOT/run/app.sock", 1, 'unix:run/app.sock', 5,
    );
    is_deeply \@got, \@exp, '-T: every resolved address with the weight given and the line written, '
      . 'a relative unix path from the prefix' or diag $out;
    like $out, qr/^  keepalive 8, keepalive_timeout 60000ms\n  connect_timeout 5000ms, read_timeout 2500ms, send_timeout 60000ms\n  max_fails 1, fail_timeout 10000ms, max_header_bytes 32768\n/m,
      '-T: the keys, timeouts in ms, defaults filled';
    like $out, qr/^  used by: vhost a\.test \(fallback\), vhost a\.test location \/api\/ \(proxy\)$/m, '-T: where it is used';
    like $out, qr/^upstream spare  \(\Q$file\E:8\)\n(?:  .*\n)*?  used by: no proxy or fallback \(a policy may: r:proxy\("spare"\)\)$/m,
      '-T: an upstream nothing names';
    my ($vh) = $out =~ /^(vhost a\.test .*?)(?=^  location )/ms;
    like $vh // '', qr/^  fallback app\n  proxy_host \(the client's Host\), proxy_via on\n  proxy_headers:\n    X-Drop \(removed\)\n    X-Forwarded-Port: 443\n/m,
      '-T: the vhost\'s proxy keys' or diag $out;
    my ($api) = $out =~ /^(  location \/api\/ .*?)(?=^  location |\z)/ms;
    like $api // '', qr/^    proxy app\n    fallback app\n    proxy_host api\.internal:8080, proxy_via off\n    proxy_headers:\n      X-Drop \(removed\)\n      X-Forwarded-Port: 443\n/m,
      '-T: a location inherits what it does not set' or diag $out;
    my ($static) = $out =~ /^(  location \/static\/ .*?)(?=^  location |\z)/ms;
    ok defined $static, '-T lists location /static/';
    unlike $static // '', qr/^    (?:proxy|fallback) /m, '-T: fallback = false in a location turns the vhost\'s off' or diag $static;

    my ($rc2, $t) = Luxd::run_luxd('-t', '-c', $file);
    is $rc2, 0, 'luxd -t exits 0';
    like $t, qr/^luxd: warning: \Q$file\E:8: upstream "spare" is not used by any proxy or fallback \(only a policy can send requests to it, with return r:proxy\("spare"\)\)$/m,
      '-t warns of an upstream nothing names, with file:line';
    unlike $t, qr/upstream "app" is not used/, 'and not of one that is used';
    like $t, qr/is ok \(1 vhosts, 2 upstreams, compiled in /, '-t counts the upstreams';
}

# proxy = false in a location, against the vhost's proxy.
{
    my ($rc, $out) = dump_of(qq{$U} . vh(qq{proxy = "app",\n  location "/files/" { proxy = false },\n  location "/more/" { },}));
    is $rc, 0, 'proxy = false in a location: -T exits 0' or diag $out;
    my ($files) = $out =~ /^(  location \/files\/ .*?)(?=^  location |\z)/ms;
    my ($more) = $out =~ /^(  location \/more\/ .*?)(?=^  location |\z)/ms;
    unlike $files // 'none', qr/^    proxy /m, 'proxy = false: the location is not proxied' or diag $out;
    like $more // '', qr/^    proxy app$/m, 'a location that does not set it is';
}

# A name that does not resolve: a config error at the server's file:line,
# with the resolver's own words.
refuses 'a server name that does not resolve', qq{upstream "app" {\n  "127.0.0.1:1",\n  "$NOHOST:8080",\n}\nvhost "a.test" { proxy = "app" }\n}, 3,
  qr/upstream "app": server "\Q$NOHOST\E:8080": \Q$gai_err\E$/m;

# --- start and reload ---------------------------------------------------------
my $srv = sub {
    my ($up) = @_;
    <<"LUA";
server { listen = { "127.0.0.1:$_[1]" }, workers = 1, error_log = "$_[2]/error.log", access_log = false, pid_file = "$_[2]/luxd.pid" }
upstream "app" {
  $up
}
upstream "spare" { "127.0.0.1:9" }
vhost "localhost" { default = true, root = "$_[2]/www", location "/api/" { proxy = "app" } }
LUA
};
{
    my $s = Luxd->new(no_start => 1, files => { 'www/index.html' => "static\n" });
    $s->write_config($srv->('"127.0.0.1:1",', $s->port, $s->dir));
    $s->start;
    ok $s->wait_log(qr/\[warn\] \S+luxd\.lua:5: upstream "spare" is not used by any proxy or fallback/),
      'the unused-upstream warning is logged at start';
    is $s->get('/')->{body}, "static\n", 'serving generation 1';

    $s->write_config($srv->(qq{"127.0.0.1:1",\n  "$NOHOST:80",}, $s->port, $s->dir));
    my $file = $s->config_file;
    my $out = $s->reload;
    like $out // 'timeout', qr/^failed \Q$file\E:4: upstream "app": server "\Q$NOHOST\E:80": \Q$gai_err\E/,
      'a reload whose upstream does not resolve fails at file:line';
    ok $s->wait_log(qr/\[error\] reload failed, still serving generation 1: \Q$file\E:4: /), 'logged; generation 1 kept';
    my $r = $s->get('/');
    is $r->{status}, 200, 'still serving after the failed reload';
    is $r->{body}, "static\n", 'from generation 1';

    $s->write_config($srv->(qq{"localhost:1",}, $s->port, $s->dir));
    like $s->reload // 'timeout', qr/^ok generation 2 /, 'a reload with a name that resolves succeeds';
    is $s->get('/')->{status}, 200, 'serving generation 2';

    my ($rc, $text) = Luxd::run_luxd('-c', do {
        my ($rc0, $o, $f) = Luxd::check_config($srv->(qq{"$NOHOST:80",}, Luxd::free_port(), $s->dir));
        $f;
    });
    is $rc, 1, 'starting with an upstream that does not resolve fails';
    like $text, qr/luxd\.lua:3: upstream "app": server "\Q$NOHOST\E:80": /, 'with file:line';
    $s->stop;
}

done_testing;
