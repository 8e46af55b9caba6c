# luxd.shared never runs Lua with the store's lock held (issue 8 #4). At the
# policy_memory ceiling, luxd.shared.get used to push its value with the lock
# held; the push raised "not enough memory", the error unwound past the
# unlock, and from then on every worker that touched the store blocked for
# good, static requests on it included. Now the value is copied out under the
# lock and pushed after it is released: the policy gets its 500 and every
# worker keeps serving.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

# /fill eats the worker's Lua memory down to a few bytes (each step under
# pcall, into a table sized beforehand, so only the allocations being
# measured can fail), then reads a 4096-byte value from the store; /fill-ttl
# and /fill-incr do the same before ttl() and incr(), whose results also need
# a push. /incr and /get use the store normally.
my $CONFIG = <<'LUA';
vhost "localhost" {
  default = true, root = "$DIR/www",
  policy = function(r)
    local p = r.path
    if p == "/setbig" then
      luxd.shared.set("big", string.rep("b", 4096))
      luxd.shared.set("ttl-key", 1, 3600)
      return r:respond(200, "set")
    end
    if p == "/incr" then return r:respond(200, "n=" .. luxd.shared.incr("hits")) end
    if p == "/get" then return r:respond(200, "len=" .. #luxd.shared.get("big")) end
    if p == "/get-body" then return r:respond(200, luxd.shared.get(r.query) or "(nil)") end
    if p == "/set" then
      local k, n = r.query:match("^(%w+)=(%d+)$")
      local ok, err = pcall(luxd.shared.set, k, string.rep("v", tonumber(n) - 1) .. "e")
      return r:respond(200, ok and "stored" or ("refused: " .. tostring(err)))
    end
    local what = p:match("^/fill%-?(%a*)$")
    if what then
      local hold = {}
      for i = 1, 4096 do hold[i] = false end
      local n = 0
      local function mk(size, k) return string.rep("x", size) .. k end
      for _, size in ipairs({ 65536, 8192, 1024, 128, 16, 1 }) do
        while n < 4096 do
          local ok, s = pcall(mk, size, n)
          if not ok then break end
          n = n + 1
          hold[n] = s
        end
      end
      -- Nearly nothing is left: the value this reads cannot be pushed.
      if what == "" then return r:respond(200, "got " .. #luxd.shared.get("big")) end
      if what == "ttl" then return r:respond(200, "ttl " .. tostring(luxd.shared.ttl("ttl-key"))) end
      if what == "incr" then return r:respond(200, "incr " .. tostring(luxd.shared.incr("hits", 0.5))) end
    end
    return nil
  end,
}
LUA

my %files = ('www/index.html' => "home\n");

sub ask {
    my ($c, $path, $timeout) = @_;
    $c->send(Luxd::request(path => $path));
    return $c->response(timeout => $timeout // 3);
}

my $s = Luxd->new(files => \%files, config => $CONFIG, workers => 2,
                  server => { policy_memory => 1048576 });

my $r = $s->http(path => '/setbig');
is($r->{status}, 200, 'a 4096-byte value is stored');

subtest 'values at the 4096-byte limit come back whole; one byte more is refused' => sub {
    my $r = $s->http(path => '/set?at=4096');
    is($r->{body}, 'stored', '4096 bytes: stored');
    $r = $s->http(path => '/get-body?at');
    is(length($r->{body} // ''), 4096, '4096 bytes read back');
    is($r->{body}, ('v' x 4095) . 'e', 'byte for byte, the last one included');
    $r = $s->http(path => '/set?past=4097');
    like($r->{body}, qr/^refused: .*value longer than 4096 bytes/, '4097 bytes: refused');
    $r = $s->http(path => '/get-body?past');
    is($r->{status}, 200, 'nothing stored under that key');
    is($r->{body}, "(nil)", "get gives nil");
};

my $wedged = 0;
for my $fill ('/fill', '/fill-ttl', '/fill-incr') {
    subtest "$fill: the push fails after the unlock; every worker still serves" => sub {
        # A server wedged by the previous case would only time out again.
        ok(!$wedged, 'the server is not wedged by the previous case') or return;
        # The same connection, so the same worker, runs the fault and then
        # takes the lock again: before the fix it blocked on its own mutex.
        my $c = $s->connect;
        my $t0 = time;
        my $r = ask($c, $fill, 10);
        ok($r, sprintf('%s answered (%.2f s)', $fill, time - $t0));
        # /fill-ttl and /fill-incr may find the few bytes a number needs;
        # /fill cannot push 4 KB. None of them may hang.
        if ($fill eq '/fill') {
            is($r && $r->{status}, 500, "$fill: 500");
        } else {
            ok($r && ($r->{status} == 500 || $r->{status} == 200), "$fill: 500 or 200 (" . ($r ? $r->{status} : 'none') . ')');
        }
        $r = ask($c, '/incr', 3);
        is($r && $r->{status}, 200, 'the same worker takes the store\'s lock again at once');
        $r = ask($c, '/get', 3);
        is($r && $r->{body}, 'len=4096', 'and reads the big value');
        $c->close;

        # Many fresh connections reach both workers (SO_REUSEPORT spreads
        # them); each must answer a store call and a static file promptly.
        my ($ok, $n) = (0, 16);
        my $worst = 0;
        for my $i (1 .. $n) {
            my $c2 = $s->connect;
            my $t1 = time;
            my $a = ask($c2, '/incr', 3);
            my $b = ask($c2, '/index.html', 3);
            $worst = time - $t1 if time - $t1 > $worst;
            my $good = $a && $a->{status} == 200 && $b && $b->{status} == 200 && $b->{body} eq "home\n";
            $c2->close;
            last unless $good; # one wedged worker is enough to know
            $ok++;
        }
        $wedged = 1 if $ok < $n;
        is($ok, $n, sprintf('%d/%d connections: store and static file answered (slowest %.3f s)', $ok, $n, $worst));
    };
}

ok($s->wait_log(qr/\[error\] policy of vhost "localhost" failed for \/fill: out of memory \(policy_memory\)/, 3),
   'the fault is logged as policy_memory') or diag($s->error_log);
$s->stop;
done_testing;
