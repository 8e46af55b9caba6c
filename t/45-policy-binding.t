# Policies are bound to the vhost and location that declared them (issue 8
# #1). Each worker runs the config again in its own Lua state to get its own
# copies of the policy closures; LuaJIT seeds string hashes per state, so a
# `for name, st in pairs(sites)` loop declares the vhosts in a different order
# on every run. Binding by position gave most hosts another vhost's policy.
# Now every policy is found again by its vhost name and location prefix, and
# a re-run that declares policies on other vhosts or locations than the first
# run fails the start or the reload with a clear message instead of guessing.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $N = 30;
my @names = map { sprintf('h%02d.test', $_) } 1 .. $N;

# The config the issue describes: vhosts made in a pairs() loop, each policy
# a closure over its own status. $base moves the statuses on a reload.
sub config {
    my ($base) = @_;
    return <<"LUA";
local sites = {}
for i = 1, $N do sites[("h%02d.test"):format(i)] = $base + i end
for name, st in pairs(sites) do
  vhost(name) {
    root = "\$DIR/www",
    policy = function(r) return st end,
    location "/loc/" { policy = function(r) return r:respond(200, "loc of " .. name .. " " .. st) end },
  }
end
vhost "localhost" { default = true, root = "\$DIR/www" }
LUA
}

sub want_status { my ($base, $i) = @_; $base + $i }

# Asks every host (its vhost policy and its location policy) on $nconn
# keep-alive connections; with two workers, each connection lands on one of
# them, so both workers' bindings are checked. Returns the mismatches.
sub check_all {
    my ($s, $base, $nconn) = @_;
    my @bad;
    my $asked = 0;
    for my $k (1 .. $nconn) {
        my $c = $s->connect;
        for my $i (1 .. $N) {
            my $host = $names[$i - 1];
            my $want = want_status($base, $i);
            $c->send(Luxd::request(host => $host, path => '/index.html'));
            my $r = $c->response(timeout => 5);
            $asked++;
            push @bad, "conn $k $host /index.html: got " . ($r ? $r->{status} : 'no answer') . ", want $want"
              unless $r && defined $r->{status} && $r->{status} == $want;
            $c->send(Luxd::request(host => $host, path => '/loc/x'));
            $r = $c->response(timeout => 5);
            $asked++;
            my $body = "loc of $host $want";
            push @bad, "conn $k $host /loc/x: got " . ($r ? "$r->{status} " . ($r->{body} // '') : 'no answer')
              . ", want 200 $body"
              unless $r && defined $r->{status} && $r->{status} == 200 && ($r->{body} // '') eq $body;
        }
        $c->close;
    }
    return ($asked, @bad);
}

my %files = ('www/index.html' => "home\n", 'www/loc/x' => "x\n");

subtest '30 vhosts from a pairs() loop, 2 workers: every host gets its own policy' => sub {
    my $s = Luxd->new(files => \%files, config => config(400), workers => 2);
    my ($asked, @bad) = check_all($s, 400, 12);
    is($asked, 12 * $N * 2, "asked $asked times");
    is(scalar @bad, 0, 'every vhost and location answered by its own policy')
      or diag(join("\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]));

    # A reload runs the config in fresh states again (other hash seeds, so
    # another pairs() order), and with other statuses.
    for my $round (1 .. 2) {
        my $base = 400 + 20 * $round;
        my $text = config($base);
        my $dir = $s->dir;
        $text =~ s/\$DIR\b/$dir/g;
        $s->write_config(($s->{config_text} =~ /\A(server \{.*?\n\}\n)/s)[0] . $text);
        my $out = $s->reload;
        like($out // 'no outcome', qr/^ok generation @{[ $round + 1 ]}\b/, "reload $round: ok");
        ($asked, @bad) = check_all($s, $base, 12);
        is(scalar @bad, 0, "after reload $round: every host answered by its own new policy ($asked requests)")
          or diag(join("\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]));
    }
    $s->stop;
};

# A config whose policies land on other vhosts on each run (a counter in
# luxd.shared, which the config can read while it loads and which every run
# in the process shares). The number of policies is the same on every run,
# so only a check of the binding itself can catch it.
my $FLIP = <<'LUA';
local run = luxd.shared.incr("binding-runs")
vhost "a.test" { root = "$DIR/www", policy = (run % 2 == 1) and function(r) return 451 end or nil }
vhost "b.test" { root = "$DIR/www", policy = (run % 2 == 0) and function(r) return 452 end or nil }
vhost "localhost" { default = true, root = "$DIR/www" }
LUA

subtest 'a re-run that declares policies elsewhere fails the start, clearly' => sub {
    my $s = Luxd->new(files => \%files, config => $FLIP, workers => 2, no_start => 1);
    local $Luxd::RUN_TIMEOUT = 8;
    my $t0 = time;
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    my $dt = time - $t0;
    isnt($rc, 0, 'luxd refuses to start') or diag($out);
    isnt($rc, -1, sprintf('it exits rather than serving (%.1f s)', $dt));
    my $file = $s->config_file;
    my @l = split /\n/, $s->{config_text};
    my ($line) = grep { $l[$_ - 1] =~ /^vhost "a\.test"/ } 1 .. @l;
    like($out . $s->error_log, qr/\Q$file\E:$line: vhost "a\.test" has a policy when the config first ran, but not when it ran again/,
         'the message names file:line of the vhost whose policy moved') or diag($out . $s->error_log);
    unlike($out . $s->error_log, qr/started: generation/, 'it never served');
};

# The other direction: a location policy that only the workers' runs see.
my $EXTRA = <<'LUA';
local run = luxd.shared.incr("binding-runs")
vhost "a.test" { root = "$DIR/www", policy = function(r) return 451 end }
vhost "b.test" {
  root = "$DIR/www",
  location "/q/" { policy = (run > 1) and function(r) return 452 end or nil },
}
LUA

subtest 'a re-run that declares an extra policy fails the start, naming it' => sub {
    my $s = Luxd->new(files => \%files, config => $EXTRA, workers => 2, no_start => 1);
    local $Luxd::RUN_TIMEOUT = 8;
    my ($rc, $out) = Luxd::run_luxd('-c', $s->config_file);
    isnt($rc, 0, 'luxd refuses to start') or diag($out);
    isnt($rc, -1, 'it exits rather than serving');
    my $file = $s->config_file;
    my @l = split /\n/, $s->{config_text};
    my ($line) = grep { $l[$_ - 1] =~ /^  location "\/q\/"/ } 1 .. @l;
    like($out . $s->error_log,
         qr/\Q$file\E:$line: vhost "b\.test" location "\/q\/" has a policy when the config ran again for a worker, but not when it first ran/,
         'the message names file:line of the location') or diag($out . $s->error_log);
};

subtest 'a reload whose re-run declares policies elsewhere fails; the old ones stay bound' => sub {
    my $s = Luxd->new(files => \%files, config => config(400), workers => 2);
    my $dir = $s->dir;
    (my $flip = $FLIP) =~ s/\$DIR\b/$dir/g;
    my $server = ($s->{config_text} =~ /\A(server \{.*?\n\}\n)/s)[0];
    $s->write_config($server . $flip);
    my $out = $s->reload;
    like($out // 'no outcome', qr/^failed .*vhost "[ab]\.test".*polic/, 'the reload fails, naming the vhost')
      or diag($out // $s->reload_error);
    my ($asked, @bad) = check_all($s, 400, 4);
    is(scalar @bad, 0, "the old generation still answers with its own policies ($asked requests)")
      or diag(join("\n", @bad[0 .. ($#bad < 19 ? $#bad : 19)]));
    my $r = $s->http(host => 'a.test', path => '/index.html');
    isnt($r->{status}, 452, 'a.test never runs b.test\'s policy');
    $s->stop;
};

done_testing;
