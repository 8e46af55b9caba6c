# Defects a review found in the policy fixes of issue 8 (#1, #12), each
# checked against a real luxd with a pipelined request behind every case so
# that a response which frames wrongly shows as a broken second response.
#  - A location prefix holding a NUL byte was accepted by luxd -t; C sees the
#    prefix only up to the NUL, so "/a\0x" became "/a": two such locations
#    failed the start with "declares two policies", one next to "/a" had its
#    policy silently moved. The DSL now refuses the prefix.
#  - Statuses were cast to int before the range check: r:respond(2^32+200)
#    answered 200, r:respond(204.5) and `return 204.9` answered 204. A status
#    must now be an integer 200..599 (301/302/303/307/308 for r:redirect).
#  - r:set_header copied the whole header block on every call (quadratic in
#    time the budget does not count, and in arena memory policy_memory does
#    not bound: 3000 calls of 1 KB held a worker for over 20 s). The headers
#    a policy adds are now limited to 65536 bytes in all, grown by doubling.
#  - luxd -t never bound the policies, so a config whose second run
#    declares them elsewhere was "ok" and then failed the start.
#  - luxd.shared took any ttl: an infinite or huge one overflowed the cast
#    (set() said true, the entry had already expired), a NaN one never
#    expired. A ttl is now 0..2147483647 seconds; anything else is an error.
#  - 205 Reset Content carried content (r:respond(205, body), or an HTML page
#    for `return 205`); RFC 9110 15.3.6 forbids it. Now Content-Length: 0.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

subtest 'a location prefix with a NUL byte is refused by luxd -t, with file:line' => sub {
    for my $second ('location "/a\0y" { policy = function(r) return 452 end }', 'location "/a" { }') {
        my ($rc, $out, $file) = Luxd::check_config(<<"LUA");
vhost "a.test" { default = true, root = "\$DIR/www",
  location "/a\\0x" { policy = function(r) return 451 end },
  $second,
}
LUA
        isnt($rc, 0, "refused next to $second") or diag($out);
        like($out, qr/\Q$file\E:2: .*the prefix must not contain a NUL byte/, 'the message names the location')
          or diag($out);
    }
    my ($rc, $out) = Luxd::check_config(qq{vhost "a.test" { default = true, root = "\$DIR/www", location "/a%00x" { } }\n});
    is($rc, 0, 'a prefix without a NUL byte is still fine') or diag($out);
};

# luxd -t bound no policies, so a config whose second run declares them on
# other vhosts (here by a counter in luxd.shared, which every run in the
# process shares) was "ok" and then failed the start.
subtest 'luxd -t binds the policies as a worker does' => sub {
    my ($rc, $out, $file) = Luxd::check_config(<<'LUA');
local run = luxd.shared.incr("review-runs")
vhost "a.test" { root = "$DIR/www", policy = (run % 2 == 1) and function(r) return 451 end or nil }
vhost "b.test" { root = "$DIR/www", policy = (run % 2 == 0) and function(r) return 452 end or nil }
vhost "localhost" { default = true, root = "$DIR/www" }
LUA
    isnt($rc, 0, 'a config that binds differently on its second run is refused') or diag($out);
    like($out, qr/\Q$file\E:2: vhost "a\.test" has a policy when the config first ran, but not when it ran again/,
         'with the file:line of the vhost') or diag($out);
    ($rc, $out) = Luxd::check_config(<<'LUA');
local sites = {}
for i = 1, 30 do sites[("h%02d.test"):format(i)] = 400 + i end
for name, st in pairs(sites) do
  vhost(name) { root = "$DIR/www", policy = function(r) return st end,
    location "/l/" { policy = function(r) return st end } }
end
vhost "localhost" { default = true, root = "$DIR/www", policy = function(r) return nil end }
LUA
    is($rc, 0, 'policies from a pairs() loop bind: ok') or diag($out);
    like($out, qr/is ok \(31 vhosts/, 'and -t says so');
};

# -- statuses, header totals, 205 --------------------------------------------

my $MAX = 65536;
my $CONFIG = <<"LUA";
vhost "localhost" {
  default = true, root = "\$DIR/www",
  policy = function(r)
    local c = r.query
    if r.path ~= "/p" then return nil end
    if c == "rf204" then return r:respond(204.5) end
    if c == "rf200" then return r:respond(200.5, "x") end
    if c == "rbig200" then return r:respond(2^32 + 200, "x") end
    if c == "rbig204" then return r:respond(2^32 + 204) end
    if c == "rneg" then return r:respond(-(2^32) + 200, "x") end
    if c == "rhuge" then return r:respond(1e300, "x") end
    if c == "rnan" then return r:respond(0/0, "x") end
    if c == "ret204f" then return 204.9 end
    if c == "retbig" then return 2^32 + 204 end
    if c == "retnan" then return 0/0 end
    if c == "redirf" then return r:redirect("/a", 302.5) end
    if c == "redirbig" then return r:redirect("/a", 2^32 + 302) end
    if c == "rint" then return r:respond(201.0, "made") end
    if c == "rstr" then return r:respond("202", "taken") end
    if c == "retint" then return 403.0 end
    if c == "redirok" then return r:redirect("/a", 301.0) end
    if c == "hmax" then r:set_header("X-A", string.rep("v", $MAX - 7)) return nil end
    if c == "hover" then r:set_header("X-A", string.rep("v", $MAX - 6)) return nil end
    if c == "hsplit" then r:set_header("X-A", string.rep("v", $MAX - 30)) r:set_header("X-B", string.rep("w", 6)) r:set_header("X-C", "123") return nil end
    if c == "hsplit1" then r:set_header("X-A", string.rep("v", $MAX - 30)) r:set_header("X-B", string.rep("w", 6)) r:set_header("X-C", "1234") return nil end
    if c == "hmany" then for i = 1, 1000 do r:set_header("X-H" .. i, tostring(i)) end return nil end
    if c == "hloop" then for i = 1, 200 do r:set_header("X-L", string.rep("v", 1000)) end return nil end
    local ttl = ({ tmax = 2147483647, tover = 2147483648, thuge = 1e300, tinf = 1/0, tnan = 0/0 })[c]
    if ttl then
      local ok, e = pcall(luxd.shared.set, "ttl-" .. c, "v", ttl)
      local ok2, e2 = pcall(luxd.shared.incr, "ttl-incr-" .. c, 1, ttl)
      return r:respond(200, ("set %s %s incr %s %s get %s ttl %s"):format(tostring(ok), tostring(e),
        tostring(ok2), tostring(e2), tostring(luxd.shared.get("ttl-" .. c)), tostring(luxd.shared.ttl("ttl-" .. c))))
    end
    if c == "r205" then return r:respond(205) end
    if c == "r205body" then return r:respond(205, "reset") end
    if c == "ret205" then return 205 end
    return nil
  end,
}
LUA

my $s = Luxd->new(files => { 'www/index.html' => "home\n", 'www/p' => "p file\n" }, config => $CONFIG);

# The case and a pipelined GET /index.html in one write: (raw bytes, parsed
# responses).
sub pipelined {
    my ($case) = @_;
    my $c = $s->connect;
    $c->send(Luxd::request(path => "/p?$case") . Luxd::request(path => '/index.html', close => 1));
    my $raw = $c->read_all(10);
    $c->close;
    return ($raw, Luxd::parse_responses($raw));
}

sub framed {
    my ($case, $raw, @r) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is(scalar @r, 2, "$case: two responses") or diag(Luxd::_short($raw));
    ok(!grep({ $_->{error} } @r), "$case: both well framed") or diag(Luxd::_short($raw));
    is($r[1] && $r[1]{body}, "home\n", "$case: the pipelined request gets its file");
}

subtest 'a status is an integer 200..599, checked before any cast' => sub {
    my %msg = (
        rf204 => qr/r:respond: the status must be 200\.\.599, not 204\.5/,
        rf200 => qr/r:respond: the status must be 200\.\.599, not 200\.5/,
        rbig200 => qr/r:respond: the status must be 200\.\.599, not 4294967496/,
        rbig204 => qr/r:respond: the status must be 200\.\.599, not 4294967500/,
        rneg => qr/r:respond: the status must be 200\.\.599, not -4294967096/,
        rhuge => qr/r:respond: the status must be 200\.\.599, not 1e\+300/,
        rnan => qr/r:respond: the status must be 200\.\.599, not -?nan/,
        ret204f => qr/returned 204\.9, not a status/,
        retbig => qr/returned 4294967500, not a status/,
        retnan => qr/returned -?nan, not a status/,
        redirf => qr/r:redirect: the status is 301, 302, 303, 307 or 308, not 302\.5/,
        redirbig => qr/r:redirect: the status is 301, 302, 303, 307 or 308, not 4294967598/,
    );
    for my $case (sort keys %msg) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 500, "$case: 500");
        framed($case, $raw, @r);
        ok($s->wait_log($msg{$case}, 3, poll => 0.02), "$case: logged") or diag($s->error_log);
    }
    my %ok = (rint => [201, 'made'], rstr => [202, 'taken'], retint => [403, undef], redirok => [301, undef]);
    for my $case (sort keys %ok) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, $ok{$case}[0], "$case: an integral number is a status ($ok{$case}[0])");
        is($r[0]{body}, $ok{$case}[1], "$case: its body") if defined $ok{$case}[1];
        framed($case, $raw, @r);
    }
};

subtest "the headers a policy adds: $MAX bytes in all, one more is refused" => sub {
    for my $case (qw(hmax hsplit)) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 200, "$case: exactly $MAX bytes of header lines: 200");
        my $h = $r[0] ? $r[0]{headers} : {};
        is(length($h->{'x-a'} // ''), $case eq 'hmax' ? $MAX - 7 : $MAX - 30, "$case: X-A whole");
        is($h->{"x-c"}, "123", "$case: the last header there") if $case eq 'hsplit';
        framed($case, $raw, @r);
    }
    for my $case (qw(hover hsplit1 hloop)) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 500, "$case: past $MAX bytes: 500");
        framed($case, $raw, @r);
        ok($s->wait_log(qr/r:set_header: X-[ACL]: the headers a policy adds are limited to $MAX bytes/, 3, poll => 0.02),
           "$case: logged") or diag($s->error_log);
    }
    my ($raw, @r) = pipelined('hmany');
    is($r[0] && $r[0]{status}, 200, '1000 small headers: 200');
    my @bad = grep { ($r[0]{headers}{"x-h$_"} // '') ne $_ } 1 .. 1000;
    is(scalar @bad, 0, 'every one of them there, each with its own value') or diag("missing: @bad[0 .. ($#bad < 9 ? $#bad : 9)]");
    framed('hmany', $raw, @r);
};

subtest 'luxd.shared ttl: 0..2147483647 seconds, anything else refused' => sub {
    my ($raw, @r) = pipelined('tmax');
    like($r[0] && $r[0]{body}, qr/^set true true incr true 1 get v ttl (\d+(?:\.\d+)?)$/, 'at 2147483647 s: stored, incr too');
    my ($left) = ($r[0]{body} // '') =~ /ttl (\S+)$/;
    ok(defined $left && $left > 2147483647 - 60 && $left <= 2147483647, 'ttl() gives it back') or diag($r[0]{body});
    framed('tmax', $raw, @r);
    for my $case (qw(tover thuge tinf tnan)) {
        ($raw, @r) = pipelined($case);
        like($r[0] && $r[0]{body}, qr/^set false .*ttl must be 0\.\.2147483647 seconds.* incr false .*ttl must be 0\.\.2147483647 seconds.* get nil ttl nil$/,
             "$case: set and incr refuse it, nothing is stored") or diag($r[0] && $r[0]{body});
        framed($case, $raw, @r);
    }
};

subtest '205 Reset Content has no content' => sub {
    for my $case (qw(r205 ret205)) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 205, "$case: 205");
        is($r[0] && $r[0]{headers}{'content-length'}, '0', "$case: Content-Length: 0");
        is($r[0] && $r[0]{body}, '', "$case: no body");
        framed($case, $raw, @r);
    }
    my ($raw, @r) = pipelined('r205body');
    is($r[0] && $r[0]{status}, 500, 'r:respond(205, body): 500');
    framed('r205body', $raw, @r);
    ok($s->wait_log(qr/r:respond: a 205 response has no body/, 3, poll => 0.02), 'logged') or diag($s->error_log);
};

$s->stop;
done_testing;
