# Policies (issue 5), faults fail closed: a Lua error answers 500 and logs
# "policy of vhost NAME failed for PATH: FILE:LINE: message"; a runaway loop
# is stopped by server.policy_budget within a fraction of a second; memory is
# bounded by server.policy_memory; io, os.execute, require, dofile... are
# refused while serving; require "ffi" is refused even at config time; the
# worker survives all of it and serves the next request.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my %files = ('www/index.html' => "home\n", 'www/loc/f' => "loc f\n");

# The policy picks its fault by path. Each line that raises is marked with
# -- @name so the test can find the line number the log must name.
my $CONFIG = <<'LUA';
local IO = require "io"          -- captured while the config loads: works then
local OS = require "os"
local DEBUG = require "debug"
local _, ffi_err = pcall(require, "ffi")
FFI_ERR = ffi_err

vhost "faulty.test" {
  default = true, root = "$DIR/www",
  policy = function(r)
    local p = r.path
    if p == "/error" then error("boom in policy") end -- @error
    if p == "/index-nil" then local t = nil; return t.field end -- @index-nil
    if p == "/loop" then while true do end end
    if p == "/mem" then local t = {} for i = 1, 1e8 do t[i] = i end end
    if p == "/memstr" then local s = "x" for i = 1, 40 do s = s .. s end end
    if p == "/alloc-ok" then
      local t = {} for i = 1, 20000 do t[i] = tostring(i) end
      return r:respond(200, "allocated " .. #t)
    end
    if p == "/spin" then for i = 1, 5e6 do end return r:respond(200, "spun") end
    if p == "/io-global" then io.open("/etc/passwd") end -- @io-global
    if p == "/io-open" then IO.open("/etc/passwd") end -- @io-open
    if p == "/io-lines" then for l in IO.lines("/etc/passwd") do end end -- @io-lines
    if p == "/io-popen" then IO.popen("id") end -- @io-popen
    if p == "/os-global" then os.execute("true") end -- @os-global
    if p == "/os-execute" then OS.execute("true") end -- @os-execute
    if p == "/os-remove" then OS.remove("$DIR/index.html") end -- @os-remove
    if p == "/os-exit" then OS.exit(0) end -- @os-exit
    if p == "/require" then local m = require("string") return r:respond(200, "required a " .. type(m)) end -- @require
    if p == "/require-ffi" then local m = require("ffi") return r:respond(200, "got ffi") end -- @require-ffi
    if p == "/dofile" then dofile("/etc/passwd") end -- @dofile
    if p == "/sethook" then DEBUG.sethook() end -- @sethook
    if p == "/ffi-err" then return r:respond(200, tostring(FFI_ERR)) end
    if p == "/bad-return" then return "oops" end
    return nil
  end,
  location "/loc/" { policy = function(r) if r.query == "fail" then error("location boom") end end }, -- @loc
}
LUA

sub line_of {
    my ($s, $tag) = @_;
    my @l = split /\n/, $s->{config_text};
    for my $i (0 .. $#l) { return $i + 1 if $l[$i] =~ /-- \@\Q$tag\E$/ }
    die "no line tagged $tag";
}

sub timed_get {
    my ($s, $path, $timeout) = @_;
    my $t0 = time;
    my $c = $s->connect;
    $c->send(Luxd::request(host => 'faulty.test', path => $path, close => 1));
    my $r = $c->response(timeout => $timeout // 10);
    $c->close;
    return ($r // { status => undef, headers => {}, body => undef }, time - $t0);
}

sub get_ { my ($s, $path) = @_; (timed_get($s, $path))[0] }

sub threads_of { my ($pid) = @_; opendir my $d, "/proc/$pid/task" or return -1; scalar grep { /^\d+$/ } readdir $d }

my $s = Luxd->new(files => \%files, config => $CONFIG, server => { policy_memory => 4 * 1048576 });
my $file = $s->config_file;

subtest 'a Lua error answers 500 and logs file:line: message with the vhost' => sub {
    for my $case ([ '/error', 'error', qr/boom in policy/ ],
                  [ '/index-nil', 'index-nil', qr/attempt to index local 't' \(a nil value\)/ ]) {
        my ($path, $tag, $msg) = @$case;
        my $r = get_($s, $path);
        is($r->{status}, 500, "$path: 500");
        unlike($r->{body} // '', qr/boom|attempt|\.lua/, "$path: the 500 does not show the error to the client");
        my $line = line_of($s, $tag);
        ok($s->wait_log(qr/\[error\] policy of vhost "faulty\.test" failed for \Q$path\E: \Q$file\E:$line: $msg/, 10, poll => 0.02),
           "$path: logged as: policy of vhost \"faulty.test\" failed for $path: $file:$line: ...")
          or diag($s->error_log);
    }
    my $r = get_($s, '/loc/f?fail');
    is($r->{status}, 500, "a location's policy fails: 500");
    my $line = line_of($s, 'loc');
    ok($s->wait_log(qr/\[error\] policy of vhost "faulty\.test" failed for \/loc\/f: \Q$file\E:$line: location boom/, 10, poll => 0.02),
       "logged with the vhost's name and the location policy's line") or diag($s->error_log);
    $r = get_($s, '/loc/f');
    is($r->{status}, 200, 'the same location serves the next request');
    is($r->{body}, "loc f\n", 'its file');
    $r = get_($s, '/index.html');
    is($r->{status}, 200, 'the vhost serves the next request');
};

subtest 'a runaway loop is stopped by the default budget within a second' => sub {
    for my $i (1 .. 3) {
        my ($r, $dt) = timed_get($s, '/loop', 10);
        is($r->{status}, 500, "while true do end (#$i): 500");
        # The budget takes well under a second; the bounds are 5 s for a
        # loaded machine's stalls: a loop not stopped holds the worker for
        # good (the response times out at 10 s).
        cmp_ok($dt, '<', 5, sprintf("#%d: answered in %.3f s (< 5 s)", $i, $dt));
        my ($r2, $dt2) = timed_get($s, '/index.html');
        is($r2->{status}, 200, "#$i: the next request is served");
        cmp_ok($dt2, '<', 5, sprintf("#%d: promptly (%.3f s)", $i, $dt2));
    }
    ok($s->wait_log(qr/\[error\] policy of vhost "faulty\.test" failed for \/loop: policy stopped: it ran more than \d+ instructions/, 10, poll => 0.02),
       'logged: policy stopped: it ran more than N instructions') or diag($s->error_log);
    # The budget is per call, not per worker: calls that stay under it pass.
    for my $i (1 .. 5) {
        my $r = get_($s, '/spin');
        is($r->{status}, 200, "a 5-million-iteration loop under the 10-million budget passes (#$i)");
    }
};

subtest 'a memory bomb is stopped by policy_memory = 4 MiB' => sub {
    for my $path ('/mem', '/memstr', '/mem') {
        my ($r, $dt) = timed_get($s, $path, 10);
        is($r->{status}, 500, "$path: 500");
        ok($s->wait_log(qr/\[error\] policy of vhost "faulty\.test" failed for \Q$path\E: out of memory \(policy_memory\)/, 10, poll => 0.02),
           "$path: logged as out of memory (policy_memory)") or diag($s->error_log);
        my $r2 = get_($s, '/alloc-ok');
        is($r2->{status}, 200, "$path: the worker still runs policies that allocate");
        is($r2->{body}, 'allocated 20000', "$path: the memory was given back");
        is(get_($s, '/index.html')->{status}, 200, "$path: and serves files");
    }
    ok($s->alive, 'the server is alive');
};

subtest 'blocking and loading functions are refused while serving' => sub {
    # Captured from the config (where they work) or reached as globals.
    my @refused = (
        [ '/io-open',    'io.open' ],
        [ '/io-lines',   'io.lines' ],
        [ '/io-popen',   'io.popen' ],
        [ '/os-execute', 'os.execute' ],
        [ '/os-remove',  'os.remove' ],
        [ '/os-exit',    'os.exit' ],
        [ '/sethook',    'debug.sethook' ],
        [ '/require',    'require' ],
    );
    for my $case (@refused) {
        my ($path, $what) = @$case;
        my $r = get_($s, $path);
        is($r->{status}, 500, "$path: 500");
        my $line = line_of($s, substr($path, 1));
        ok($s->wait_log(qr/failed for \Q$path\E: \Q$file\E:$line: \Q$what\E is not available while serving requests/, 10, poll => 0.02),
           "$path: logged: $file:$line: $what is not available while serving requests")
          or diag(join "\n", grep { /\Q$path\E/ } split /\n/, $s->error_log);
    }
    # Names the config environment does not have at all: still a 500 that
    # names the line, never the function's effect.
    for my $path ('/io-global', '/os-global', '/dofile') {
        my $r = get_($s, $path);
        is($r->{status}, 500, "$path: 500");
        my $line = line_of($s, substr($path, 1));
        ok($s->wait_log(qr/failed for \Q$path\E: \Q$file\E:$line: /, 10, poll => 0.02), "$path: logged with $file:$line")
          or diag(join "\n", grep { /\Q$path\E/ } split /\n/, $s->error_log);
    }
    ok(-e $s->dir . '/www/index.html', 'os.remove removed nothing');
    my $r = get_($s, '/require-ffi');
    is($r->{status}, 500, 'require "ffi" in a policy: 500');
    $r = get_($s, '/ffi-err');
    like($r->{body} // '', qr/ffi/, 'require "ffi" failed while the config loaded too (pcall)');
    ok($s->alive, 'os.exit did not exit');
    is(get_($s, '/index.html')->{status}, 200, 'and the worker serves');
};

subtest 'require "ffi" in a config fails luxd -t' => sub {
    my ($rc, $out, $cfg) = Luxd::check_config(<<'LUA');
local ffi = require "ffi"
vhost "localhost" { default = true, root = "$DIR" }
LUA
    is($rc, 1, 'luxd -t exits 1');
    like($out, qr/\Q$cfg\E:1: .*ffi/, 'and names the file, line 1 and ffi') or diag($out);
    ($rc, $out, $cfg) = Luxd::check_config(<<'LUA');
vhost "localhost" { default = true, root = "$DIR", policy = function(r) return nil end }
server { policy_memory = 1000 }
LUA
    is($rc, 1, 'policy_memory below 1 MiB: luxd -t exits 1');
    like($out, qr/policy_memory/, 'and says policy_memory') or diag($out);
};

subtest 'the worker survives 50 faults in a row' => sub {
    my $pid = $s->pid;
    my $threads = threads_of($pid);
    my $before = () = $s->error_log =~ /policy of vhost "faulty\.test" (?:failed|returned)/g;
    my @kinds = ('/error', '/index-nil', '/loop', '/mem', '/bad-return', '/io-open', '/memstr', '/os-execute',
                 '/loc/f?fail', '/sethook');
    my $fails = 0;
    for my $i (0 .. 49) {
        my $path = $kinds[$i % @kinds];
        my ($r, $dt) = timed_get($s, $path, 10);
        $fails++ unless ($r->{status} // 0) == 500 && $dt < 5;    # not held until the 10 s timeout
    }
    is($fails, 0, '50 faults: each a 500 within 5 s');
    my $deadline = time + 10;
    my $after;
    while (1) {
        $after = () = $s->error_log =~ /policy of vhost "faulty\.test" (?:failed|returned)/g;
        last if $after - $before >= 50 || time > $deadline;
        sleep 0.05;
    }
    is($after - $before, 50, 'each one logged');
    ok(kill(0, $pid), "same process $pid");
    is($s->pid, $pid, 'never restarted');
    is(threads_of($pid), $threads, "same number of threads ($threads)");
    my $r = get_($s, '/index.html');
    is($r->{status}, 200, 'still serving files');
    is($r->{body}, "home\n", 'the file');
    $r = get_($s, '/alloc-ok');
    is($r->{body}, 'allocated 20000', 'still running policies');
};

ok($s->stop, 'stopped cleanly');

# ---- ways around the budget ------------------------------------------------
# Each on its own server: when the budget is escaped the worker spins for
# good, so the server is killed at the end.

my %escapes = (
    'a runaway loop after pcall caught the budget error' => <<'LUA',
    pcall(function() while true do end end)
    while true do end
LUA
    'a runaway loop after jit.on() (jit captured while the config loads)' => <<'LUA',
    JIT.on()
    local i = 0
    while true do i = i + 1 end
LUA
    'a runaway loop after require("jit").on() at request time' => <<'LUA',
    require("jit").on()
    local i = 0
    while true do i = i + 1 end
LUA
    'a runaway string pattern (backtracking inside string.find)' => <<'LUA',
    local s = string.rep("a", 20000)
    if s:find(".-.-.-b") then return 403 end
LUA
);

for my $name (sort keys %escapes) {
    subtest $name => sub {
        my $body = $escapes{$name};
        my $t = Luxd->new(files => \%files, config => <<"LUA");
local JIT = require "jit"
vhost "faulty.test" {
  default = true, root = "\$DIR/www",
  policy = function(r)
    if r.path ~= "/bad" then return nil end
$body
  end,
}
LUA
        # An escape spins for good: the answer never comes (10 s timeout);
        # 5 s leaves room for a loaded machine's stalls.
        my ($r, $dt) = timed_get($t, '/bad', 10);
        is($r->{status}, 500, 'answers 500');
        cmp_ok($dt, '<', 5, sprintf('within 5 s (%.3f s)', $dt));
        my ($r2) = timed_get($t, '/index.html', 10);
        is($r2->{status}, 200, 'the next request is served');
        $t->stop(timeout => 10);
    };
}

done_testing;
