# issue 17 #16: policies can test addresses. luxd.cidr{ ... } compiles a set
# of IPv4 and IPv6 prefixes when the config loads (the CIDR sets the access
# rules use, src/dispatch/cidr.c); set:contains(addr) answers true or false
# per request, nil and "not an IP address" for a string that is none. IPv4
# prefixes hold the IPv4-mapped IPv6 form of their addresses. A bad entry is
# a config error with file:line; building a set while a request runs is a
# policy fault.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    config => <<'EOF_CONF',
local office = luxd.cidr{ "10.0.0.0/8", "2001:db8::/32" }
local sets = {
  office = office,
  all4 = luxd.cidr{ "0.0.0.0/0" },
  all = luxd.cidr{ "::/0" },
  host32 = luxd.cidr{ "192.0.2.1/32" },
  host128 = luxd.cidr{ "2001:db8::1/128" },
  bare = luxd.cidr{ "192.0.2.9", "::1" },
  empty = luxd.cidr{},
  mapped = luxd.cidr{ "::ffff:192.0.2.0/120" },
  merged = luxd.cidr{ "10.0.0.0/9", "10.128.0.0/9", "10.0.0.0/16" },
}
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  real_ip = { from = { "127.0.0.1" }, header = "X-Forwarded-For" },
  -- /t/SET answers what SET:contains(X-A) returned.
  location "/t/" {
    policy = function(r)
      local set = sets[r.path:sub(4)]
      local got, why = set:contains(r.headers["x-a"])
      return r:respond(200, tostring(got) .. (why and " " .. why or ""))
    end,
  },
  -- The allow-list of luxd.lua(5).
  location "/office/" {
    policy = function(r)
      if not office:contains(r.remote_addr) then return 403 end
    end,
  },
  location "/late/" { policy = function(r) luxd.cidr{ "10.0.0.0/8" } end },
  location "/str/" { policy = function(r) return r:respond(200, tostring(office)) end },
}
EOF_CONF
    files => { 'www/office/f.txt' => "office file\n" },
);

my @cases = (
    # IPv4 and IPv6 prefixes, each edge and one address past it.
    [ office => '10.0.0.0', 'true' ], [ office => '10.255.255.255', 'true' ],
    [ office => '9.255.255.255', 'false' ], [ office => '11.0.0.0', 'false' ],
    [ office => '10.1.2.3', 'true' ],
    [ office => '2001:db8::', 'true' ], [ office => '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'true' ],
    [ office => '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', 'false' ], [ office => '2001:db9::', 'false' ],
    [ office => '2001:DB8:0:0:0:0:0:1', 'true' ],
    # IPv4-mapped IPv6 against IPv4 prefixes.
    [ office => '::ffff:10.1.2.3', 'true' ], [ office => '::ffff:a01:203', 'true' ],
    [ office => '::ffff:11.1.2.3', 'false' ], [ office => '::10.1.2.3', 'false' ],
    # /0: all of IPv4 (and its mapped form), none of the rest of IPv6; ::/0 all.
    [ all4 => '0.0.0.0', 'true' ], [ all4 => '255.255.255.255', 'true' ],
    [ all4 => '::ffff:1.2.3.4', 'true' ], [ all4 => '::1', 'false' ], [ all4 => '::', 'false' ],
    [ all4 => '2001:db8::1', 'false' ],
    [ all => '::', 'true' ], [ all => 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'true' ],
    [ all => '1.2.3.4', 'true' ],
    # /32 and /128: the one address, not its neighbours.
    [ host32 => '192.0.2.1', 'true' ], [ host32 => '192.0.2.0', 'false' ],
    [ host32 => '192.0.2.2', 'false' ], [ host32 => '::ffff:192.0.2.1', 'true' ],
    [ host128 => '2001:db8::1', 'true' ], [ host128 => '2001:db8::', 'false' ],
    [ host128 => '2001:db8::2', 'false' ],
    # Addresses without a length are /32 and /128.
    [ bare => '192.0.2.9', 'true' ], [ bare => '192.0.2.10', 'false' ],
    [ bare => '::1', 'true' ], [ bare => '::2', 'false' ],
    [ empty => '1.2.3.4', 'false' ], [ empty => '::', 'false' ],
    # A mapped-IPv6 prefix holds the IPv4 addresses it maps.
    [ mapped => '192.0.2.200', 'true' ], [ mapped => '192.0.3.0', 'false' ],
    # Overlapping and adjacent prefixes merge into 10/8.
    [ merged => '10.127.255.255', 'true' ], [ merged => '10.128.0.0', 'true' ],
    [ merged => '10.255.255.255', 'true' ], [ merged => '11.0.0.0', 'false' ],
    # No address: nil and the message (false in an `if`).
    (map { [ office => $_, 'nil not an IP address' ] }
       '-', '10.0.0.0/8', '1.2.3', '10.1.2.3.4', 'example.com', '10.1.2.3 x', 'fe80::1%eth0',
       '::ffff:10.1.2.300', '1:2:3:4:5:6:7:8:9'),
);
for my $c (@cases) {
    my ($set, $a, $want) = @$c;
    my $r = $s->http(path => "/t/$set", headers => [ 'X-A' => $a ]);
    is($r->{status} . ' ' . ($r->{body} // ''), "200 $want", "$set:contains(\"$a\") -> $want");
}
my $r = $s->http(path => '/t/office');
is($r->{status}, 500, 'contains(nil): a policy fault, 500');
like($s->error_log, qr/bad argument #1 to 'contains' \(string expected, got nil\)/, '... logged') or diag($s->error_log);
is($s->http(path => '/str/')->{body}, 'luxd.cidr (2 ranges)', 'tostring(set) says what it is');

# The allow-list, with the client's address as the server sees it.
$s->run_cases(
    { name => 'office allow-list: 10.1.2.3 gets the file',
      request => { path => '/office/f.txt', headers => [ 'X-Forwarded-For' => '10.1.2.3' ] }, status => 200, body => "office file\n" },
    { name => 'office allow-list: 2001:db8::7 gets the file',
      request => { path => '/office/f.txt', headers => [ 'X-Forwarded-For' => '2001:db8::7' ] }, status => 200, body => "office file\n" },
    { name => 'office allow-list: 192.0.2.7 is refused',
      request => { path => '/office/f.txt', headers => [ 'X-Forwarded-For' => '192.0.2.7' ] }, status => 403 },
    { name => 'office allow-list: 2001:db9::7 is refused',
      request => { path => '/office/f.txt', headers => [ 'X-Forwarded-For' => '2001:db9::7' ] }, status => 403 },
    { name => 'office allow-list: the peer itself (127.0.0.1) is refused',
      request => { path => '/office/f.txt' }, status => 403 },
);

# Compiled once: building a set while a request runs is refused.
$r = $s->http(path => '/late/x');
is($r->{status}, 500, 'luxd.cidr inside a policy: 500');
like($s->error_log, qr/luxd\.cidr is only available while the config loads/, '... and the log says why') or diag($s->error_log);
$s->stop;

# Bad input at load: luxd -t fails with file:line and the entry.
my @bad = (
    [ '"10.0.0.0/8", "10.0.0.0/33"', qr/entry 2 \("10\.0\.0\.0\/33"\) is not an IPv4 or IPv6 address or prefix/ ],
    [ '"::/129"',                     qr/entry 1 \("::\/129"\) is not/ ],
    [ '"10.0.0"',                     qr/entry 1 \("10\.0\.0"\) is not/ ],
    [ '"10.0.0.0/"',                  qr/entry 1 \("10\.0\.0\.0\/"\) is not/ ],
    [ '"10.0.0.0/+8"',                qr/entry 1 \("10\.0\.0\.0\/\+8"\) is not/ ],
    [ '"office.example"',             qr/entry 1 \("office\.example"\) is not/ ],
    [ '"10.0.0.0/8\0"',               qr/entry 1 \("10\.0\.0\.0\/8"\) is not/ ],
    [ '"10.0.0.0/8", 8',              qr/entry 2 \(a number\) is not/ ],
    [ '{ "10.0.0.0/8" }',             qr/entry 1 \(a table\) is not/ ],
    [ 'office = "10.0.0.0/8"',        qr/expects a list \(keys 1\.\.n\)/ ],
);
for my $b (@bad) {
    my ($entries, $want) = @$b;
    my ($rc, $out, $file) = Luxd::check_config(qq{-- the office\nlocal office = luxd.cidr{ $entries }\nvhost "x" { root = "\$DIR" }\n});
    isnt($rc, 0, "luxd.cidr{ $entries }: luxd -t fails");
    like($out, qr/^\Q$file\E:2: luxd\.cidr: /m, '... at file:line of the call') or diag($out);
    like($out, $want, '... naming the entry') or diag($out);
}
my ($rc, $out, $file) = Luxd::check_config(qq{\nlocal office = luxd.cidr("10.0.0.0/8")\nvhost "x" { root = "\$DIR" }\n});
isnt($rc, 0, 'luxd.cidr("10.0.0.0/8") (no table): luxd -t fails');
like($out, qr/^\Q$file\E:2: luxd\.cidr: expects a list of addresses and prefixes.*got string/m, '... with file:line') or diag($out);

done_testing;
