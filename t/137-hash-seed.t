# issue 11: the host table, the file cache and luxd.shared hash with
# SipHash-1-3 under a key drawn from getrandom(2) once per process, so that
# keys a client chooses (Host names, paths, a policy's luxd.shared keys)
# cannot be picked to collide. The hash itself is checked against the
# published SipHash vectors in t/unit/test_hash.c; here: each process has a
# key of its own (-T prints a fingerprint of it, not the key), and the
# tables keyed with it still find what they hold, in a running server.
use strict;
use warnings;
use Test::More;
use Luxd;

# --- a key per process --------------------------------------------------------
my $conf = qq{server { listen = "127.0.0.1:\$PORT" }\nvhost "a.test" { root = "\$DIR" }\n};
my (undef, undef, $file) = Luxd::check_config($conf);
my %seen;
for my $i (1 .. 3) {
    my ($rc, $out) = Luxd::run_luxd('-T', '-c', $file);
    is $rc, 0, "-T run $i";
    my ($fp) = $out =~ /^hosts \(\d+ slots, hash key fingerprint ([0-9a-f]{16})\)$/m;
    ok $fp, "run $i prints the key's fingerprint" or diag $out;
    $seen{$fp // "none$i"}++;
}
is scalar(keys %seen), 3, 'three runs, three keys';
# d1fba762150c532c: SipHash-1-3 of "" under the all-zero key, what a
# process that never drew its key would print (t/unit/test_hash.c).
ok !$seen{'d1fba762150c532c'}, 'none is the fingerprint of the all-zero key';

# --- the keyed tables find what they hold ---------------------------------------
# 60 vhosts, with aliases and wildcards: every name finds its own root.
my (%files, $vhosts);
for my $i (1 .. 60) {
    $files{"v$i/index.html"} = "vhost $i\n";
    $vhosts .= qq{vhost "h$i.test" { root = "\$DIR/v$i", aliases = { "alias$i.test", "*.w$i.test" } }\n};
}
$vhosts .= qq{vhost "default.test" { default = true, root = "\$DIR/www" }\n};
$files{'www/index.html'} = "default\n";
$files{"v7/p$_.txt"} = "path $_\n" for 1 .. 200;
my $s = Luxd->new(files => \%files, config => $vhosts . <<'EOF_P', workers => 2);
vhost "shared.test" {
  root = "$DIR/www",
  policy = function(r)
    local sh = luxd.shared
    if r.path == "/fill" then
      for i = 1, 2000 do sh.set("k" .. i, "v" .. i) end
      return r:respond(200, "filled")
    end
    if r.path == "/check" then
      local bad = 0
      for i = 1, 2000 do if sh.get("k" .. i) ~= "v" .. i then bad = bad + 1 end end
      return r:respond(200, "bad " .. bad)
    end
  end,
}
EOF_P
my $wrong = 0;
for my $i (1 .. 60) {
    for my $h ("h$i.test", "alias$i.test", "x.w$i.test", "H$i.TEST") {
        my $r = $s->http(host => $h, path => '/');
        $wrong++ unless ($r->{body} // '') eq "vhost $i\n";
    }
}
is $wrong, 0, '240 Host names (names, aliases, wildcards, any case) each reach their own vhost';
is $s->http(host => 'nobody.test', path => '/')->{body}, "default\n", 'an unknown name: the default vhost';
my $miss = 0;
for my $i (1 .. 200) {
    $miss++ unless ($s->http(host => 'h7.test', path => "/p$i.txt")->{body} // '') eq "path $i\n";
}
is $miss, 0, '200 paths through the file cache, each its own file';
is $s->http(host => 'shared.test', path => '/fill')->{body}, 'filled', 'a policy sets 2000 luxd.shared keys';
is $s->http(host => 'shared.test', path => '/check')->{body}, 'bad 0', '... and reads each back (either loop)';
is $s->http(host => 'shared.test', path => '/check')->{body}, 'bad 0', '... again';
# A reload keeps the process, its key and so luxd.shared's contents.
like $s->reload // 'timeout', qr/^ok generation 2 /, 'reload';
is $s->http(host => 'shared.test', path => '/check')->{body}, 'bad 0', 'after a reload the store still finds every key';
is $s->http(host => 'h60.test', path => '/')->{body}, "vhost 60\n", '... and the new host table its names';
$s->stop;

done_testing;
