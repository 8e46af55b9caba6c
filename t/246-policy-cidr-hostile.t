# issue 17 #16, review: luxd.cidr with what t/234 does not give it: zone
# ids, leading zeros, spaces, a prefix length with leading zeros or a huge
# one, sparse tables, a set of 10,000 prefixes (the answer per address,
# checked against a model), contains() called with "." instead of ":",
# with a number, a table, a string of 63, 64 and 1,000 bytes, and a NUL.
use strict;
use warnings;
use Test::More;
use Luxd;

# 10,000 /24s: 10.(i/256).(i%256).0/24 for even i only, so neighbours of a
# member are outside.
my @pre = map { my $i = 2 * $_; sprintf('"10.%d.%d.0/24"', int($i / 256) % 256, $i % 256) } 0 .. 9999;
my $list = join ', ', @pre;

my $s = Luxd->new(
    config => <<"EOF_CONF",
local big = luxd.cidr{ $list }
local v6 = luxd.cidr{ "2001:db8::/32", "::ffff:1.2.3.4/120" }
vhost "localhost" {
  default = true, root = "\$DIR/www",
  location "/big" { policy = function(r) return r:respond(200, tostring(big:contains(r.headers["x-a"]))) end },
  location "/dot" { policy = function(r) return r:respond(200, tostring(big.contains(r.headers["x-a"]))) end },
  location "/num" { policy = function(r) return r:respond(200, tostring(v6:contains(10))) end },
  location "/tab" { policy = function(r) return r:respond(200, tostring(v6:contains({}))) end },
  location "/v6"  {
    policy = function(r)
      local a = r.headers["x-a"]
      if a == "NUL" then a = "1.2.3.4\\0" end
      if a == "LSP" then a = " 1.2.3.4" end -- a field's OWS never reaches r.headers
      if a == "TSP" then a = "1.2.3.4\\t" end
      local got, why = v6:contains(a)
      return r:respond(200, tostring(got) .. (why and " " .. why or ""))
    end,
  },
  location "/mt" { policy = function(r) return r:respond(200, tostring(pcall(function() getmetatable(v6).__index.contains = nil end))) end },
}
EOF_CONF
);

is($s->http(path => '/big', headers => ['X-A' => '1.2.3.4'])->{status}, 200, 'a set of 10,000 prefixes loads');
srand(246);
my $bad = 0;
for (1 .. 200) {
    my ($b, $c) = (int(rand 80), int(rand 256));
    my $i = $b * 256 + $c;
    my $want = ($i % 2 == 0 && $i / 2 < 10000) ? 'true' : 'false';
    my $r = $s->http(path => '/big', headers => ['X-A' => "10.$b.$c." . int(rand 256)]);
    $bad++, diag("10.$b.$c.x: $r->{body}, want $want") unless ($r->{body} // '') eq $want;
}
is($bad, 0, '200 addresses against the model of the 10,000 prefixes');
is($s->http(path => '/dot', headers => ['X-A' => '10.0.0.1'])->{status}, 500, 'set.contains(a) (a "." for ":"): a policy fault, 500');
like($s->error_log, qr/bad argument #1 to 'contains'/, '... logged') or diag($s->error_log);
is($s->http(path => '/num')->{body}, 'nil', 'contains(10): no address, nil');
is($s->http(path => '/tab')->{status}, 500, 'contains({}): a policy fault, 500');
my @v6 = (
    ['2001:db8::1', 'true'], ['2001:db8::1%eth0', 'nil not an IP address'],
    ['fe80::1%eth0', 'nil not an IP address'], ['010.0.0.1', 'nil not an IP address'],
    ['LSP', 'nil not an IP address'], ['TSP', 'nil not an IP address'],
    ['1.2.3.9', 'true'], ['1.2.4.0', 'false'], ['::ffff:1.2.3.255', 'true'],
    ['NUL', 'nil not an IP address'],
    ['0:0:0:0:0:ffff:1.2.3.4', 'true'],
    [('0' x 60) . '::1', 'nil not an IP address'],
    ['a' x 1000, 'nil not an IP address'],
);
for my $c (@v6) {
    my ($a, $want) = @$c;
    my $r = $s->http(path => '/v6', headers => ['X-A' => $a]);
    is("$r->{status} " . ($r->{body} // ''), "200 $want", "v6:contains(\"" . substr($a, 0, 20) . "\")");
}
is($s->http(path => '/mt')->{body}, 'false', 'the methods table cannot be reached through getmetatable');
is($s->http(path => '/v6', headers => ['X-A' => '2001:db8::1'])->{body}, 'true', '... and contains still works');

my @bad = (
    '"fe80::1%eth0"', '"fe80::/10%eth0"', '"010.0.0.1"', '"010.0.0.0/8"', '" 10.0.0.0/8"',
    '"10.0.0.0/8 "', '"10.0.0.0 /8"', '"10.0.0.0/ 8"', '"1.2.3.4/33"', '"::ffff:1.2.3.4/129"',
    '"10.0.0.0/99999999999999999999999"', '"10.0.0.0/8/8"', '""', '"/8"', 'true',
    '[1] = "10.0.0.0/8", [3] = "11.0.0.0/8"', '"' . ('0' x 60) . '::/8"',
);
for my $e (@bad) {
    my ($rc, $out, $file) = Luxd::check_config(qq{local o = luxd.cidr{ $e }\nvhost "x" { root = "\$DIR" }\n});
    isnt($rc, 0, "luxd.cidr{ $e }: refused");
    like($out, qr/^\Q$file\E:1: luxd\.cidr: /m, '... at file:line') or diag($out);
}
# Accepted, as the forms inet_pton and a router take them.
for my $e ('"::ffff:1.2.3.4/120"', '"10.0.0.0/08"', '"10.1.2.3/8"', '"::/0", "0.0.0.0/0"') {
    my ($rc, $out) = Luxd::check_config(qq{local o = luxd.cidr{ $e }\nvhost "x" { root = "\$DIR" }\n});
    is($rc, 0, "luxd.cidr{ $e }: accepted") or diag($out);
}

done_testing;
