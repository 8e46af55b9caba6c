# Config checking: luxd -t, FILE:LINE messages, did-you-mean, wrong types,
# Lua syntax and runtime errors; Lua loops and functions in a config; -V.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SERVER = 'server { listen = { "127.0.0.1:$PORT" }, workers = 1, error_log = "$DIR/error.log", access_log = false }';

# Expects `luxd -t` to fail with "FILE:LINE: ..." where LINE is in @lines and
# the message matches $re.
sub bad_config {
    my ($name, $text, $lines, $re) = @_;
    subtest $name => sub {
        my ($rc, $out, $file) = Luxd::check_config($text);
        is($rc, 1, 'exit code 1') or diag($out);
        my @l = ref $lines ? @$lines : ($lines);
        my ($line) = $out =~ /\Q$file\E:(\d+):/;
        ok(defined $line, 'the message names FILE:LINE') or diag("output: $out");
        ok(defined $line && grep({ $_ == $line } @l), 'on line ' . join(' or ', @l)) or diag("output: $out");
        like($out, $re, 'says what is wrong') if $re;
        unlike($out, qr/stack traceback/, 'no Lua traceback for the user');
    };
}

subtest 'a good config passes -t' => sub {
    my ($rc, $out) = Luxd::check_config(<<"LUA", files => { 'www/index.html' => "x\n" });
$SERVER
mime { [".wasm"] = "application/wasm" }
vhost "localhost" {
  default = true, root = "\$DIR/www", index = { "index.html" },
  aliases = { "www.localhost", "*.example.org" },
  etag = true, last_modified = false, cache_control = "no-cache",
  headers = { ["X-A"] = "b" }, gzip_static = true,
}
LUA
    is($rc, 0, 'exit code 0') or diag($out);
};

bad_config('unknown vhost key with did-you-mean', <<"LUA", [2 .. 5], qr/vhost "example\.com".*unknown key "rooot".*did you mean "root"/);
$SERVER
vhost "example.com" {
  default = true,
  rooot = "\$DIR/www",
}
LUA

bad_config('unknown server key with did-you-mean', <<'LUA', [1 .. 4], qr/unknown key "keepalive_timout".*did you mean "keepalive_timeout"/);
server {
  listen = { "127.0.0.1:$PORT" },
  keepalive_timout = 5,
}
vhost "localhost" { default = true, root = "$DIR/www" }
LUA

bad_config('wrong type for a server key', <<'LUA', [1 .. 4], qr/keepalive_timeout/);
server {
  listen = { "127.0.0.1:$PORT" },
  keepalive_timeout = "soon",
}
vhost "localhost" { default = true, root = "$DIR/www" }
LUA

bad_config('wrong type for a vhost key', <<"LUA", [2 .. 5], qr/etag/);
$SERVER
vhost "localhost" {
  default = true, root = "\$DIR/www",
  etag = "yes",
}
LUA

bad_config('wrong type: index not a list', <<"LUA", [2 .. 4], qr/index/);
$SERVER
vhost "localhost" {
  default = true, root = "\$DIR/www", index = 5,
}
LUA

bad_config('Lua syntax error', <<"LUA", 3, qr/near|unexpected|expected/);
$SERVER
vhost "localhost" {
  root = ,
}
LUA

bad_config('Lua runtime error', <<"LUA", 3, qr/boom/);
$SERVER
local x = 1
if x == 1 then error("boom") end
vhost "localhost" { default = true, root = "\$DIR/www" }
LUA

bad_config('calling an unknown function', <<"LUA", 2, qr/vhosst/);
$SERVER
vhosst "localhost" { default = true, root = "\$DIR/www" }
LUA

bad_config('bad listen address', <<'LUA', [1 .. 3], qr/listen|address|nonsense/i);
server {
  listen = { "nonsense" },
}
vhost "localhost" { default = true, root = "$DIR/www" }
LUA

subtest 'a missing config file' => sub {
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', '/nonexistent/luxd-test.lua');
    is($rc, 1, 'exit code 1');
    like($out, qr{/nonexistent/luxd-test\.lua}, 'names the file');
};

subtest 'starting with a bad config fails fast with the message' => sub {
    my ($rc0, $out0, $file) = Luxd::check_config(<<"LUA");
$SERVER
vhost "localhost" { default = true, rooot = "x" }
LUA
    my ($rc, $out) = Luxd::run_luxd('-c', $file);
    is($rc, 1, 'exit code 1');
    like($out, qr/\Q$file\E:2:.*rooot/, 'FILE:LINE: message');
};

subtest 'an unknown option' => sub {
    my ($rc, $out) = Luxd::run_luxd('--no-such-option');
    ok($rc != 0 && $rc != -1 && $rc < 128, 'non-zero exit, no crash') or diag("rc $rc: $out");
};

subtest 'luxd -V' => sub {
    my ($rc, $out) = Luxd::run_luxd('-V');
    is($rc, 0, 'exit code 0');
    like($out, qr/luxd.*\d+\.\d+/i, 'prints luxd and a version');
};

subtest 'Lua loops, functions, string functions and os.getenv build vhosts' => sub {
    my %files = ('getenv/index.html' => "from getenv\n", 'fmt/index.html' => "from format\n");
    $files{"sites/h$_.test/index.html"} = "site h$_\n" for 1 .. 50;
    local $ENV{LUXD_T_ROOT} = 'getenv';
    my $s = Luxd->new(config => <<'LUA', files => \%files);
local base = "$DIR"
local function site(name, opts)
  opts = opts or {}
  vhost(name) {
    root = base .. "/sites/" .. name,
    index = { "index.html" },
    default = opts.default or false,
  }
end
for i = 1, 50 do
  site("h" .. i .. ".test", { default = (i == 1) })
end
vhost(string.format("fmt%d.test", 7)) { root = base .. "/fmt", index = { "index.html" } }
vhost "env.test" { root = base .. "/" .. os.getenv("LUXD_T_ROOT"), index = { "index.html" } }
LUA
    for my $i (1, 7, 50) {
        check_response($s->get('/', Host => "h$i.test"), { status => 200, body => "site h$i\n" }, "h$i.test");
    }
    check_response($s->get('/', Host => 'unknown.test'), { status => 200, body => "site h1\n" }, 'default vhost from the loop');
    check_response($s->get('/', Host => 'fmt7.test'), { status => 200, body => "from format\n" }, 'string.format name');
    check_response($s->get('/', Host => 'env.test'), { status => 200, body => "from getenv\n" }, 'os.getenv root');
    $s->stop;
};

done_testing;
