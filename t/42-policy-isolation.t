# Policies (issue 5), isolation: one vhost's policy never runs for another
# vhost's requests (exact names, aliases, wildcards, the default vhost, on
# one keep-alive connection too); a request object kept in a global does not
# carry one request's data into the next; luxd.shared is one store for all
# worker loops, so counters are exact under load with workers = 2.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my %files;
for my $v (qw(a b c d)) { $files{"$v/index.html"} = "$v home\n"; $files{"$v/f.txt"} = "$v f\n" }

my $s = Luxd->new(
    files  => \%files,
    config => <<'LUA',
vhost "a.test" {
  aliases = { "www.a.test", "*.a-wild.test" }, root = "$DIR/a",
  policy = function(r)
    luxd.shared.incr("runs:a")
    r:set_header("X-Policy", "a")
    return 418
  end,
}

vhost "b.test" {
  aliases = { "www.b.test", "*.b-wild.test" }, root = "$DIR/b", default = true,
}

vhost "c.test" {
  aliases = { "*.c-wild.test" }, root = "$DIR/c",
  policy = function(r)
    luxd.shared.incr("runs:c")
    r:set_header("X-Policy", "c")
    if r.path == "/deny" then return 403 end
    if r.path == "/peek" then
      -- what a request object kept from an earlier request shows now
      return r:respond(200, table.concat({
        tostring(STASH ~= nil), tostring(STASH and STASH.path), tostring(STASH and STASH.query),
        tostring(STASH and STASH.host), tostring(STASH_H and STASH_H["authorization"]),
        tostring(STASH_PATH) }, "|"))
    end
    return nil
  end,
}

vhost "d.test" {
  root = "$DIR/d",
  policy = function(r)
    if r.path == "/stash" then
      STASH, STASH_H, STASH_PATH = r, r.headers, r.path
      return r:respond(200, "stashed")
    end
    if r.path == "/runs" then
      return r:respond(200, string.format("a=%d c=%d",
        luxd.shared.get("runs:a") or 0, luxd.shared.get("runs:c") or 0))
    end
    return nil
  end,
}
LUA
);

sub on {
    my ($host, $path, @h) = @_;
    return $s->http(host => $host, path => $path, headers => [@h]);
}

sub runs {
    my $r = on('d.test', '/runs');
    return $r->{body} =~ /^a=(\d+) c=(\d+)$/ ? ($1, $2) : (-1, -1);
}

subtest "vhost a's policy answers for a's names only" => sub {
    for my $h ('a.test', 'www.a.test', 'x.a-wild.test', 'A.TEST', "a.test:" . $s->port) {
        my $r = on($h, '/f.txt');
        is($r->{status}, 418, "Host: $h -> a's policy: 418");
        is($r->{headers}{'x-policy'}, 'a', "Host: $h -> X-Policy: a");
    }
    my ($a0, $c0) = runs();
    for my $h ('b.test', 'www.b.test', 'x.b-wild.test', 'unknown.example', 'a.test.example', 'xa.test', 'a-wild.test') {
        my $r = on($h, '/f.txt');
        is($r->{status}, 200, "Host: $h -> b (no policy): 200");
        is($r->{body}, "b f\n", "Host: $h -> b's file");
        ok(!defined $r->{hlist}{'x-policy'}, "Host: $h -> no policy header");
    }
    for my $h ('c.test', 'x.c-wild.test') {
        my $r = on($h, '/f.txt');
        is($r->{status}, 200, "Host: $h -> c's policy lets it through");
        is_deeply($r->{hlist}{'x-policy'}, ['c'], "Host: $h -> only c's policy ran");
        is($r->{body}, "c f\n", "Host: $h -> c's file");
        $r = on($h, '/deny');
        is($r->{status}, 403, "Host: $h /deny -> c's 403, not a's 418");
    }
    my ($a1, $c1) = runs();
    is($a1, $a0, "a's policy did not run for any of those requests (runs:a stayed $a0)");
    is($c1, $c0 + 4, "c's policy ran exactly for c's 4 requests");
};

subtest 'one keep-alive connection going from vhost to vhost' => sub {
    my ($a0, $c0) = runs();
    my @seq = (('a.test', 'b.test', 'c.test', 'd.test') x 5, 'x.a-wild.test', 'x.b-wild.test');
    my %want = ('a.test' => [418, 'a'], 'x.a-wild.test' => [418, 'a'], 'b.test' => [200, undef],
                'x.b-wild.test' => [200, undef], 'c.test' => [200, 'c'], 'd.test' => [200, undef]);
    my $c = $s->connect;
    $c->send(join '', map { Luxd::request(host => $_, path => '/f.txt') } @seq);
    my @r = $c->responses(scalar @seq, timeout => 5);
    is(scalar @r, scalar @seq, scalar(@seq) . ' pipelined responses');
    my $bad = 0;
    for my $i (0 .. $#r) {
        my ($st, $pol) = @{ $want{ $seq[$i] } };
        my $got = $r[$i]{hlist}{'x-policy'};
        my $ok = $r[$i]{status} == $st && (defined $pol ? ($got && "@$got" eq $pol) : !$got);
        $bad++ unless $ok;
        diag("#$i $seq[$i]: $r[$i]{status} X-Policy " . ($got ? "@$got" : 'none')) unless $ok;
    }
    is($bad, 0, 'every response came from its own vhost and its own policy');
    $c->close;
    my ($a1, $c1) = runs();
    is($a1 - $a0, 6, "a's policy ran for a's 6 requests only");
    is($c1 - $c0, 5, "c's policy ran for c's 5 requests only");
};

subtest 'a request object kept in a global does not carry an earlier request' => sub {
    my $r = on('d.test', '/stash?token=SECRET-QUERY', 'Authorization' => 'Bearer SECRET-TOKEN');
    is($r->{body}, 'stashed', 'd.test kept r, r.headers and r.path in globals');
    $r = on('c.test', '/peek?mine');
    is($r->{status}, 200, 'another vhost reads them on the next request');
    my ($has, $path, $query, $host, $auth, $plain) = split /\|/, $r->{body} // '';
    is($has, 'true', 'the global is there (one Lua state per loop)');
    is($path, '/peek', "the kept object's path is the current request's");
    is($query, 'mine', "the kept object's query is the current request's");
    is($host, 'c.test', "the kept object's host is the current request's");
    is($auth, 'nil', "the kept headers do not show the earlier Authorization");
    unlike($r->{body}, qr/SECRET/, 'nothing of the earlier request shows');
    is($plain, '/stash', 'a plain string copied into a global stays what it was (the policy kept it)');
};

ok($s->stop, 'stopped cleanly');

subtest 'workers = 2: luxd.shared counters are shared by both loops and exact' => sub {
    my $w = Luxd->new(
        workers => 2,
        files   => { 'www/index.html' => "home\n" },
        config  => <<'LUA',
local LOOP = luxd.shared.incr("loops")   -- runs once per Lua state: one id per loop
vhost "count.test" {
  default = true, root = "$DIR/www",
  policy = function(r)
    if r.path == "/total" then return r:respond(200, tostring(luxd.shared.get("hits"))) end
    local n = luxd.shared.incr("hits")
    r:set_header("X-Count", string.format("%d", n))
    r:set_header("X-Loop", tostring(LOOP))
    return r:respond(200, "ok")
  end,
}
LUA
    );
    my ($nconn, $depth, $rounds) = (40, 5, 10);
    my @c = map { $w->connect } 1 .. $nconn;
    my (%count, %loops);
    my ($got, $bad) = (0, 0);
    for my $round (1 .. $rounds) {
        $_->send(Luxd::request(host => 'count.test', path => '/x') x $depth) for @c;
        for my $c (@c) {
            for my $r ($c->responses($depth, timeout => 10)) {
                $got++;
                my $n = $r->{headers}{'x-count'};
                if ($r->{status} != 200 || !defined $n) { $bad++; next }
                $count{$n}++;
                $loops{ $r->{headers}{'x-loop'} }++;
            }
        }
    }
    $_->close for @c;
    my $total = $nconn * $depth * $rounds;
    is($got, $total, "$total responses");
    is($bad, 0, 'all 200 with X-Count');
    is(scalar(keys %loops), 2, 'both loops answered (' . join(', ', map { "loop $_: $loops{$_}" } sort keys %loops) . ')');
    is(scalar(grep { $count{$_} > 1 } keys %count), 0, 'no count was handed out twice');
    is_deeply([ sort { $a <=> $b } keys %count ], [ 1 .. $total ], "the counts are exactly 1..$total");
    my $r = $w->http(host => 'count.test', path => '/total');
    is($r->{body}, $total, "luxd.shared.get(\"hits\") is $total");
    ok($w->stop, 'stopped cleanly');
};

done_testing;
