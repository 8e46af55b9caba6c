# issue 17 #7: an error page served from a location with access rules or a
# policy skipped them, so a page kept in a protected place went to any client
# whose request failed anywhere in the vhost. The page's location now guards
# it as it guards a request (nginx runs the access phase again on the
# internal redirect): its access rules and its policy run for the page, and
# a client they refuse gets the original status with the built-in page,
# never the page's bytes, and never a loop. `luxd -t` warns about each page
# that lands in such a location, naming the error_pages entry and the rule
# or policy by file:line.
use strict;
use warnings;
use Test::More;
use Luxd;

my $SECRET = "SECRET-404 office only\n";
my $s = Luxd->new(
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  -- The test client is 127.0.0.1; X-Forwarded-For names the client it plays.
  real_ip = { from = { "127.0.0.1" }, header = "X-Forwarded-For" },
  error_pages = { [404] = "/office/404.html", [403] = "/keyed/403.html", [410] = "/internal/410.html" },
  location "/office/" { access = { allow { from = { "10.0.0.0/8", "2001:db8::/32" } }, deny { all = true } } },
  location "/closed/" { access = { deny { all = true } } },
  location "/gone/" { access = { deny { all = true, status = 410 } } },
  location "/keyed/" { policy = function(r) if r.headers["x-key"] ~= "k1" then return 401 end end },
  -- Pages clients may not fetch themselves: only an error page passes.
  location "/internal/" { policy = function(r) if not r.error_status then return 404 end end },
  -- A page in the location that failed, denied by the same rule: no loop.
  location "/self/" { access = { deny { all = true, status = 404 } }, error_pages = { [404] = "/self/404.html" } },
  location "/ploop/" { policy = function(r) return 404 end, error_pages = { [404] = "/ploop/404.html" } },
  -- A policy's own answers to an error page: a success is the page (with
  -- the request's status); anything else refuses it.
  location "/presp/" {
    policy = function(r)
      if not r.error_status then return 404 end
      local how = r.headers["x-how"]
      if how == "ok" then return r:respond(200, "policy page " .. r.error_status .. " " .. r.method) end
      if how == "refuse" then return r:respond(403, "POLICY REFUSAL BODY") end
      if how == "redirect" then return r:redirect("/elsewhere") end
    end,
    error_pages = { [404] = "/presp/404.html" },
  },
}
EOF_CONF
    files => {
        'www/office/404.html'   => $SECRET,
        'www/keyed/403.html'    => "keyed 403 page\n",
        'www/internal/410.html' => "internal 410 page\n",
        'www/self/404.html'     => "SELF PAGE\n",
        'www/ploop/404.html'    => "PLOOP PAGE\n",
        'www/presp/404.html'    => "PRESP FILE\n",
        'www/index.html'        => "home\n",
    },
);

my $builtin404 = qr{<h1>404 Not Found</h1>};
sub from { [ 'X-Forwarded-For' => $_[0], @_[1 .. $#_] ] }

$s->run_cases(
    # Access rules.
    { name => 'a client the page\'s rules deny: 404, the built-in page',
      request => { path => '/missing', headers => from('192.0.2.7') }, status => 404, body => $builtin404 },
    { name => 'an allowed client (IPv4) gets the page',
      request => { path => '/missing', headers => from('10.1.2.3') }, status => 404, body => $SECRET },
    { name => 'an allowed client (IPv6) gets the page',
      request => { path => '/missing', headers => from('2001:db8::5') }, status => 404, body => $SECRET },
    { name => 'the page fetched directly by a denied client: 403 (not the page)',
      request => { path => '/office/404.html', headers => from('192.0.2.7') }, status => 403 },
    { name => 'HEAD by a denied client: the built-in page\'s length, not the page\'s',
      request => { method => 'HEAD', path => '/missing', headers => from('192.0.2.7') }, status => 404,
      headers => { 'Content-Length' => qr/^(?!\Q${\ length $SECRET}\E$)\d+$/ } },
    # A policy guarding the page.
    { name => 'a policy that refuses the page (returns 401): the original 403, built-in',
      request => { path => '/closed/x' }, status => 403, body => qr{<h1>403 Forbidden</h1>} },
    { name => 'the same policy letting the client through: the 403 page',
      request => { path => '/closed/x', headers => [ 'X-Key' => 'k1' ] }, status => 403, body => "keyed 403 page\n" },
    { name => 'a policy that lets only error pages through: the page',
      request => { path => '/gone/x' }, status => 410, body => "internal 410 page\n" },
    { name => '... and the page fetched directly: the policy\'s 404',
      request => { path => '/internal/410.html' }, status => 404, body => qr{^(?!internal)} },
    # No loop: a page denied by the rule that denied the request.
    { name => 'a page behind the deny that answered the request: built-in, no loop',
      request => { path => '/self/x' }, status => 404, body => $builtin404 },
    { name => 'a page behind the policy that answered the request: built-in, no loop',
      request => { path => '/ploop/x' }, status => 404, body => $builtin404 },
    # The policy's own answers while it guards a page.
    { name => 'r:respond(200, body) for a page: that body, with the request\'s status',
      request => { method => 'POST', path => '/presp/x', headers => [ 'X-How' => 'ok', 'Content-Length' => 0 ] },
      status => 404, body => "policy page 404 GET" },
    { name => 'r:respond(403, body) for a page: refused, the built-in 404',
      request => { path => '/presp/x', headers => [ 'X-How' => 'refuse' ] }, status => 404, body => $builtin404 },
    { name => 'r:redirect for a page: refused, the built-in 404 without Location',
      request => { path => '/presp/x', headers => [ 'X-How' => 'redirect' ] }, status => 404, body => $builtin404,
      headers => { Location => undef } },
    { name => 'nil for a page: the page\'s file',
      request => { path => '/presp/x' }, status => 404, body => "PRESP FILE\n" },
);

# Not a byte of the page on a kept-alive connection, and the connection stays
# in step after a refused page.
my $c = $s->connect;
$c->send(Luxd::request(path => '/missing', headers => from('192.0.2.7')));
$c->send(Luxd::request(path => '/index.html'));
my @r = $c->responses(2, timeout => 5);
is($r[0] && $r[0]{status}, 404, 'kept alive: the refused page answers 404');
is($r[1] && $r[1]{body}, "home\n", '... and the next request on the connection gets its file');
$c->close;
# Read once luxd has stopped (the log is buffered: read before, it passed
# only for being empty); the one 200 is the file asked for after the page.
$s->stop;
my @log = split /\n/, $s->access_log;
is(scalar(grep { m{"GET /index\.html HTTP/1\.1" 200 } } @log), 1, 'the log has the file\'s 200')
  or diag($s->access_log);
my @others = grep { !m{"GET /index\.html HTTP/1\.1" 200 } } @log;
ok(@others >= 10, 'and a line for each request before it (' . scalar(@others) . ')');
unlike(join("\n", @others), qr/ 200 /, 'no other request was logged as a 200 page') or diag($s->access_log);

# luxd -t warns, with the entry's file:line and the guarding rule or policy.
my ($rc, $out, $file) = Luxd::check_config(<<'EOF_T');
vhost "x" {
  root = "$DIR",
  error_pages = {
    [404] = "/office/404.html",
    [500] = "/open/500.html",
    [403] = "/p/403.html",
  },
  access = { deny { prefix = "/denied/" } },
  location "/office/" {
    access = { allow { from = { "10.0.0.0/8" } },
               deny { all = true } },
  },
  location "/p/" {
    policy = function(r)
      return 401
    end,
  },
  location "/q/" { error_pages = { [404] = "/q/404.html" }, access = { deny { prefix = "/q/" } } },
}
EOF_T
is($rc, 0, 'luxd -t: the config is accepted') or diag($out);
like($out, qr{warning: \Q$file\E:4: vhost "x": error_pages\[404\] "/office/404.html" is served from location "/office/" \(\Q$file\E:9\), whose access rule at \Q$file\E:11 applies to it}, 'a page behind access rules: the entry\'s line, the location and the deny rule') or diag($out);
like($out, qr{warning: \Q$file\E:6: vhost "x": error_pages\[403\] "/p/403.html" is served from location "/p/" \(\Q$file\E:13\), whose policy \(\Q$file\E:14\) runs for it}, 'a page behind a policy: the entry\'s line, the location and the policy') or diag($out);
like($out, qr{warning: \Q$file\E:18: vhost "x": error_pages\[404\] "/q/404.html" is served from location "/q/" \(\Q$file\E:18\), whose access rule at \Q$file\E:18}, 'a location\'s own table') or diag($out);
unlike($out, qr{/open/500\.html}, 'no warning for a page no rule guards (the vhost\'s deny is for another prefix)') or diag($out);
my @w = $out =~ /warning:/g;
is(scalar @w, 3, 'three warnings, one per guarded page') or diag($out);

done_testing;
