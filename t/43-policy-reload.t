# Policies (issue 5) and hot reload: a reload swaps the policies with the
# generation (the next request on an open keep-alive connection runs the new
# one, in every worker loop); a reload whose policy file does not compile
# keeps the old policy; luxd.shared values survive reloads, even through a
# generation without any policy.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

# ---- helpers (reloads: $s->reload in t/lib/Luxd.pm) ------------------------

# Writes $DIR/$rel with $DIR replaced, atomically (a reload never reads half).
sub put_file {
    my ($s, $rel, $text) = @_;
    my $dir = $s->dir;
    $text =~ s/\$DIR\b/$dir/g;
    $s->write_file_atomic($rel, $text);
}

sub policy {
    my ($v, %o) = @_;
    my $gated = $o{gated} ? 'return 403' : 'return nil';
    my $extra = $o{extra} // '';
    return <<"LUA";
vhost "localhost" {
  default = true, root = "\$DIR/www",
  policy = function(r)
    r:set_header("X-Policy", "$v")
    $extra
    if r.path == "/visit" then return r:respond(200, "$v visit " .. luxd.shared.incr("visits")) end
    if r.path == "/note" then return r:respond(200, "$v note " .. tostring(luxd.shared.get("note"))) end
    if r.path == "/set-note" then luxd.shared.set("note", "kept across reloads") return r:respond(200, "set") end
    if r.path == "/gated" then $gated end
    return nil
  end,
}
LUA
}

my $NO_POLICY = <<'LUA';
vhost "localhost" { default = true, root = "$DIR/www" }
LUA

my %files = ('www/index.html' => "home\n", 'www/gated' => "gated file\n");

sub ask {
    my ($c, $path) = @_;
    $c->send(Luxd::request(path => $path));
    return $c->response(timeout => 5) // { status => undef, headers => {}, hlist => {}, body => undef };
}

# ---- one worker --------------------------------------------------------------

my $s = Luxd->new(files => \%files, config => qq{include "\$DIR/policy.lua"\n}, no_start => 1,
                  server => { keepalive_timeout => 60 });
put_file($s, 'policy.lua', policy('v1', gated => 1));
$s->start;
my $c = $s->connect;

subtest 'generation 1 runs policy v1' => sub {
    my $r = ask($c, '/index.html');
    is($r->{status}, 200, 'status 200');
    is($r->{headers}{'x-policy'}, 'v1', 'X-Policy: v1');
    $r = ask($c, '/gated');
    is($r->{status}, 403, 'v1 closes /gated');
    is(ask($c, "/visit")->{body}, "v1 visit $_", "visit $_ counted by v1") for 1 .. 3;
    is(ask($c, '/set-note')->{body}, 'set', 'v1 stores a note in luxd.shared');
};

subtest 'a reload swaps the policy on the same keep-alive connection' => sub {
    put_file($s, 'policy.lua', policy('v2'));
    like($s->reload // 'timeout', qr/^ok /, 'reload ok');
    my $r = ask($c, '/index.html');
    ok(!$c->eof, 'the connection stayed open');
    is($r->{headers}{'x-policy'}, 'v2', 'the next request on it runs v2');
    is_deeply($r->{hlist}{'x-policy'}, ['v2'], 'only v2');
    $r = ask($c, '/gated');
    is($r->{status}, 200, 'v2 opens /gated');
    is($r->{body}, "gated file\n", 'the file');
    is(ask($c, '/visit')->{body}, 'v2 visit 4', 'the counter went on from where v1 left it');
    is(ask($c, '/note')->{body}, 'v2 note kept across reloads', 'the note set under v1 is there');
    is($s->get('/index.html')->{headers}{'x-policy'}, 'v2', 'a new connection runs v2');
};

subtest 'a reload whose policy file does not compile keeps the old policy' => sub {
    my $file = $s->dir . '/policy.lua';
    my $broken = policy('v3') =~ s/return nil\n  end,/return nil\n  en,/r;    # a syntax error
    put_file($s, 'policy.lua', $broken);
    my $out = $s->reload;
    like($out // 'timeout', qr/^failed \Q$file\E:\d+: /, 'reload failed, naming the policy file and a line')
      or diag($out);
    like($s->error_log, qr/\[error\] reload failed, still serving generation \d+: \Q$file\E:\d+: /,
         'logged') or diag($s->error_log);
    my $r = ask($c, '/index.html');
    is($r->{headers}{'x-policy'}, 'v2', 'the open connection still runs v2');
    is(ask($c, '/visit')->{body}, 'v2 visit 5', 'and counts on');
    is(ask($c, '/gated')->{status}, 200, 'v2 still decides /gated');
    is($s->get('/index.html')->{headers}{'x-policy'}, 'v2', 'a new connection runs v2 too');
};

subtest 'a reload to a policy that fails at run time, then back' => sub {
    put_file($s, 'policy.lua', policy('v4', extra => 'if r.path ~= "/visit" then error("v4 is broken") end'));
    like($s->reload // 'timeout', qr/^ok /, 'reload ok (the error is at run time)');
    my $r = ask($c, '/index.html');
    is($r->{status}, 500, 'v4 fails closed: 500');
    is(ask($c, '/visit')->{body}, 'v4 visit 6', 'what v4 does not break still works');
    put_file($s, 'policy.lua', policy('v2'));
    like($s->reload // 'timeout', qr/^ok /, 'reload back to v2');
    $r = ask($c, '/index.html');
    is($r->{status}, 200, 'v2 again: 200');
    is($r->{headers}{'x-policy'}, 'v2', 'X-Policy: v2');
};

subtest 'luxd.shared survives a generation without policies' => sub {
    put_file($s, 'policy.lua', $NO_POLICY);
    like($s->reload // 'timeout', qr/^ok /, 'reload to a config without policies');
    my $r = ask($c, '/gated');
    is($r->{status}, 200, 'no policy: /gated served');
    ok(!defined $r->{hlist}{'x-policy'}, 'no X-Policy header');
    $r = ask($c, '/visit');
    is($r->{status}, 404, '/visit is just a missing file now');
    put_file($s, 'policy.lua', policy('v5', gated => 1));
    like($s->reload // 'timeout', qr/^ok /, 'reload to v5');
    is(ask($c, '/visit')->{body}, 'v5 visit 7', 'the counter is still there');
    is(ask($c, '/note')->{body}, 'v5 note kept across reloads', 'and the note');
    is(ask($c, '/gated')->{status}, 403, 'v5 closes /gated');
};

$c->close;
ok($s->stop, 'stopped cleanly');

# ---- two workers -------------------------------------------------------------

subtest 'workers = 2: every loop swaps its policy' => sub {
    my $w = Luxd->new(files => \%files, config => qq{include "\$DIR/policy.lua"\n}, no_start => 1, workers => 2,
                      server => { keepalive_timeout => 60 });
    put_file($w, 'policy.lua', policy('v1', extra => 'r:set_header("X-Loop", tostring(LOOP))')
                                 =~ s/^/local LOOP = luxd.shared.incr("loops")\n/r);
    $w->start;
    my @c = map { $w->connect } 1 .. 30;
    my %loops;
    my $v1 = 0;
    for my $conn (@c) {
        my $r = ask($conn, '/index.html');
        $v1++ if ($r->{headers}{'x-policy'} // '') eq 'v1';
        $loops{ $r->{headers}{'x-loop'} // '?' }++;
    }
    is($v1, 30, '30 keep-alive connections run v1');
    is(scalar(keys %loops), 2, 'spread over both loops (' . join(', ', map { "$_: $loops{$_}" } sort keys %loops) . ')');
    put_file($w, 'policy.lua', policy('v2'));
    like($w->reload // 'timeout', qr/^ok /, 'reload to v2');
    my $v2 = 0;
    for my $conn (@c) {
        my $r = ask($conn, '/index.html');
        $v2++ if ($r->{hlist}{'x-policy'} && "@{ $r->{hlist}{'x-policy'} }" eq 'v2');
    }
    is($v2, 30, 'the next request on each of them runs v2');
    my $fresh = 0;
    for (1 .. 20) { $fresh++ if ($w->get('/index.html')->{headers}{'x-policy'} // '') eq 'v2' }
    is($fresh, 20, '20 new connections run v2');
    $_->close for @c;
    ok($w->stop, 'stopped cleanly');
};

done_testing;
