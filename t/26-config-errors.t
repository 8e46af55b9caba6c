# `luxd -t -c FILE` on bad configs: exit 1 and exactly one line
# "FILE:LINE: message" for each class of mistake; `luxd -T` prints the
# compiled tables.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SERVER = 'server { listen = { "127.0.0.1:$PORT" }, workers = 1, error_log = "$DIR/error.log", access_log = false }';

# bad(name, config, line, qr/message/): the whole output must be the one line
# "FILE:LINE: message\n".
sub bad {
    my ($name, $text, $line, @res) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    subtest $name => sub {
        my ($rc, $out, $file) = Luxd::check_config($text);
        is($rc, 1, 'exit code 1') or diag($out);
        my @lines = ref $line ? @$line : ($line);
        my $alt = join '|', @lines;
        like($out, qr/\A\Q$file\E:(?:$alt): [^\n]+\n\z/, "exactly one line, FILE:LINE: ... on line " . join(' or ', @lines))
          or diag("output: $out");
        like($out, $_, "says $_") for @res;
        unlike($out, qr/stack traceback|\.lua:\d+: in /, 'no Lua traceback');
        unlike($out, qr{luxd/(?:schema\w*|validate|config)\.lua}, "no location inside luxd's own modules");
    };
}

# --- unknown keys, with did-you-mean -------------------------------------

bad('unknown vhost key "rooot"', <<"LUA", 4, qr/vhost "a\.test"/, qr/unknown key "rooot"/, qr/\(did you mean "root"\?\)/);
$SERVER
vhost "a.test" {
  default = true,
  rooot = "\$DIR/www",
}
LUA

bad('unknown vhost key "cache_contol"', <<"LUA", 3, qr/unknown key "cache_contol"/, qr/did you mean "cache_control"/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  cache_contol = "no-cache" }
LUA

bad('unknown location key', <<"LUA", 4, qr/location "\/static\/"/, qr/unknown key "idnex"/, qr/did you mean "index"/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  location "/static/" {
    idnex = { "a.html" },
  },
}
LUA

bad('unknown access rule key', <<"LUA", 4, qr/unknown key "prefx"/, qr/did you mean "prefix"/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = {
    deny { prefx = "/admin/" },
  },
}
LUA

bad('unknown server key', <<'LUA', 3, qr/unknown key "vhostdir"/, qr/did you mean "vhost_dir"/);
server { listen = { "127.0.0.1:$PORT" },
  workers = 1,
  vhostdir = "$DIR/sites",
}
vhost "a.test" { default = true, root = "$DIR/www" }
LUA

# --- wrong types -------------------------------------------------------------

bad('wrong type: etag = "yes"', <<"LUA", 3, qr/etag/, qr/boolean|true or false/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  etag = "yes" }
LUA

bad('wrong type: root = 5', <<"LUA", 3, qr/root/, qr/string|path/);
$SERVER
vhost "a.test" { default = true,
  root = 5 }
LUA

bad('wrong type: access = "deny"', <<"LUA", 3, qr/access/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = "deny" }
LUA

bad('wrong type: deny status = "403"', <<"LUA", 4, qr/status/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = {
    deny { prefix = "/x/", status = "403" },
  } }
LUA

bad('wrong type: headers = "X-A: b"', <<"LUA", 3, qr/headers/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  headers = "X-A: b" }
LUA

bad('wrong value: redirect status 200', <<"LUA", 3, qr/status/, qr/301/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  redirect = { { "^/a\$", "/b", status = 200 } } }
LUA

# --- invalid regexes ---------------------------------------------------------

bad('invalid regex in an access rule', <<"LUA", 4, qr/offset/, qr/regex|\(/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = {
    deny { regex = "^/(a|b" },
  } }
LUA

# A rewrite entry is a plain table: its line may be that of the rewrite key.
bad('invalid regex in a rewrite', <<"LUA", [3, 4], qr/offset/, qr/rewrite/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  rewrite = {
    { "^/x[", "/y" },
  } }
LUA

bad('invalid regex in a redirect', <<"LUA", 3, qr/offset/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  redirect = { { "*bad", "/y", status = 301 } } }
LUA

# --- invalid CIDR ------------------------------------------------------------

bad('invalid CIDR 10.0.0.0/33', <<"LUA", 4, qr{10\.0\.0\.0/33});
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = {
    allow { prefix = "/admin/", from = { "127.0.0.1", "10.0.0.0/33" } },
  } }
LUA

bad('invalid IPv4 address 300.1.1.1', <<"LUA", 3, qr{300\.1\.1\.1});
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = { deny { from = "300.1.1.1" } } }
LUA

bad('invalid IPv6 CIDR ::1/129', <<"LUA", 3, qr{::1/129});
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www",
  access = { deny { from = "::1/129" } } }
LUA

# --- two vhosts claiming one name --------------------------------------------

bad('two vhosts with one name', <<"LUA", 3, qr/"a\.test"/, qr/already used|claimed|twice|duplicate/i, qr/:2\b/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www" }
vhost "a.test" { root = "\$DIR/www" }
LUA

bad('an alias claiming the name of another vhost', <<"LUA", [4, 5], qr/vhost "b\.test"/, qr/vhost "a\.test"/, qr/"a\.test"/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www" }
vhost "b.test" { root = "\$DIR/www",
  aliases = { "a.test" },
}
LUA

bad('one wildcard in two vhosts', <<"LUA", 4, qr/vhost "b\.test"/, qr/vhost "a\.test"/, qr/\*\.w\.test/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www", aliases = { "*.w.test" } }
vhost "b.test" { root = "\$DIR/www",
  aliases = { "*.w.test" } }
LUA

bad('names differ only in case', <<"LUA", 3, qr/vhost "a\.test"/, qr/already used|claimed|twice|duplicate/i);
$SERVER
vhost "A.Test" { default = true, root = "\$DIR/www" }
vhost "a.TEST" { root = "\$DIR/www" }
LUA

# --- Lua syntax ----------------------------------------------------------------

bad('Lua syntax error', <<"LUA", 4, qr/near|expected|unexpected/);
$SERVER
vhost "a.test" {
  default = true,
  root = "\$DIR/www" index = { "index.html" },
}
LUA

bad('unfinished string', <<"LUA", 3, qr/unfinished|near/);
$SERVER
vhost "a.test" { default = true, root = "\$DIR/www" }
vhost "b.test { root = "\$DIR/www" }
LUA

# --- luxd -T ---------------------------------------------------------------------

subtest 'luxd -T prints the compiled tables' => sub {
    my ($rc0, $out0, $file) = Luxd::check_config(<<"LUA");
$SERVER
vhost "alpha.test" {
  default = true, root = "\$DIR/www",
  aliases = { "www.alpha.test", "*.alpha-wild.test" },
  access = {
    deny { suffix = { "~", ".inc" } },
    allow { prefix = "/admin/", from = { "127.0.0.1", "::1" } },
    deny { prefix = "/admin/", status = 451 },
  },
  rewrite = { { [[^/old/(.*)\$]], "/new/\$1" } },
  redirect = { { [[^/home\$]], "/", status = 301 } },
  location "/static/" {
    cache_control = "public",
    access = { deny { regex = [[\\.bak\$]] } },
  },
}
vhost "beta.test" { root = "\$DIR/beta" }
LUA
    is($rc0, 0, '-t passes') or diag($out0);
    my ($rc, $out) = Luxd::run_luxd('-T', '-c', $file);
    is($rc, 0, '-T exits 0') or diag($out);
    like($out, qr/alpha\.test/, 'names vhost alpha.test');
    like($out, qr/beta\.test/, 'names vhost beta.test');
    like($out, qr/www\.alpha\.test/, 'names the alias');
    like($out, qr/\*\.alpha-wild\.test/, 'names the wildcard');
    like($out, qr{^.*prefix=?\s*"?/admin/.*\Q$file\E:7\b}m, 'the allow rule with its file:line');
    like($out, qr{^.*/admin/.*451.*\Q$file\E:8\b}m, 'the deny rule with its status and file:line');
    like($out, qr{^.*~.*\.inc.*\Q$file\E:6\b}m, 'the suffix rule with its file:line');
    like($out, qr{^.*\^/old/.*/new/\$1.*\Q$file\E:10\b}m, 'the rewrite with its file:line');
    like($out, qr{^.*\^/home.*301.*\Q$file\E:11\b}m, 'the redirect with its status and file:line');
    like($out, qr{location\s+"?/static/.*\Q$file\E:12\b}m, 'the location with its file:line');
    like($out, qr{^.*\\\.bak.*\Q$file\E:14\b}m, "the location's rule with its file:line");
    like($out, qr{\Q$file\E:2\b}, "the vhost's file:line");
    unlike($out, qr/stack traceback/, 'no traceback');
};

# Two bad header names in one table: the same one is named on every run
# (they were taken in table order, which LuaJIT seeds at random per run, so
# one run named "X:A" and the next "X A"). The one named is the first in
# the order headers are sorted in, case-blind.
subtest 'two bad header names: the same message every run' => sub {
    my $text = <<"LUA";
$SERVER
vhost "a.test" {
  headers = { ["X:A"] = "v", ["X A"] = "v", ["x;b"] = "v", [7] = "v" },
}
LUA
    my %seen;
    for (1 .. 20) {
        my ($rc, $out, $file) = Luxd::check_config($text);
        is($rc, 1, 'exit code 1') if $_ == 1;
        $out =~ s/\A\Q$file\E:/FILE:/; # each run writes its own file
        $seen{$out}++;
    }
    is(scalar(keys %seen), 1, 'one message over 20 runs') or diag(join '', keys %seen);
    like((keys %seen)[0], qr/\AFILE:3: vhost "a\.test": "headers": "X A" is not a header name/,
         'the first bad name in case-blind order');
};

# The line of a DSL call made under N frames of code from no user file:
# the search for the config's own frame goes 250 levels up, the last one
# included (it stopped one short when it moved to C, and said line 0).
sub deep_vhost_call {
    my ($n) = @_;
    return <<"LUA";
$SERVER
local G = require("_G")
local rec = G.loadstring([[
  local function rec(n, f, ...)
    if n == 0 then local r = f(...); return r end
    local r = rec(n - 1, f, ...); return r
  end
  return rec]], "=nonuser")()
local f = rec($n, vhost, "bad name")
f { root = "/tmp" }
LUA
}
bad('a vhost call 246 frames below its config line', deep_vhost_call(246), 9,
    qr/"bad name" is not a valid host name/);
# One frame past: the search ends at level 250 and names no line (0).
bad('a vhost call 247 frames below its config line', deep_vhost_call(247), 0,
    qr/"bad name" is not a valid host name/);

# A config that reaches into luxd's own modules (require "luxd.schema") and
# adds to the locations list a vhost check returned: that list is its own,
# not one every vhost without a location shares (for a while it was, and
# the location showed up under every such vhost).
subtest 'a location planted through luxd.schema stays out of other vhosts' => sub {
    my ($rc0, $out0, $file) = Luxd::check_config(<<"LUA");
$SERVER
local V, S = require("luxd.validate"), require("luxd.schema")
local _, locs = S.vhost(V.named_ctx({ upstream_refs = {} }, "x.lua", 3, "vhost", "x"), {})
locs[1] = { prefix = "/planted/", root = "/etc", dir_listing = true, _file = "x.lua", _line = 5 }
vhost "a.example" { root = "/tmp" }
vhost "b.example" { root = "/tmp" }
LUA
    is($rc0, 0, '-t passes') or diag($out0);
    my ($rc, $out) = Luxd::run_luxd('-T', '-c', $file);
    is($rc, 0, '-T exits 0') or diag($out);
    like($out, qr/b\.example/, 'names vhost b.example');
    unlike($out, qr{/planted/}, 'no vhost has the planted location');
};

done_testing;
