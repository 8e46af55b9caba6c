# issue 17 #7, review: an error page's guard under what t/233 does not
# try: a policy that runs out of its budget or raises for the page, HEAD
# to a page a policy answers with a body, a policy that answers 2xx for a
# request (its own answer) and for a page (the page, with the request's
# status), try_files landing in a denied location whose 403 page is in
# that same location, an access rule that denies only HEAD, and the
# connection kept in step after each.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    server => { policy_budget => 100000 },
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true, root = "$DIR/www",
  error_pages = { [404] = "/p/404.html", [403] = "/den/403.html", [410] = "/h/410.html" },
  location "/p/" {
    policy = function(r)
      local how = r.headers["x-how"]
      if not r.error_status then
        if how == "mine" then return r:respond(200, "policy answer " .. r.method) end
        return
      end
      if how == "spin" then while true do end end
      if how == "raise" then error("boom") end
      if how == "page" then return r:respond(201, "policy page " .. r.error_status) end
    end,
  },
  location "/t/" { try_files = { "$uri", "/den/fallback.html" } },
  location "/den/" { access = { deny { all = true } } },
  location "/h/" { access = { deny { method = "HEAD" } } },
  location "/gone/" { access = { deny { all = true, status = 410 } } },
}
EOF_CONF
    files => {
        'www/p/404.html'       => "P PAGE\n",
        'www/den/403.html'     => "DENIED PLACE PAGE\n",
        'www/den/fallback.html' => "FALLBACK SECRET\n",
        'www/h/410.html'       => "H PAGE\n",
        'www/index.html'       => "home\n",
    },
);

my $b404 = qr{<h1>404 Not Found</h1>};
$s->run_cases(
    { name => 'a page whose policy spins out of its budget: the built-in 404',
      request => { path => '/missing', headers => ['X-How' => 'spin'] }, status => 404, body => $b404 },
    { name => 'a page whose policy raises: the built-in 404',
      request => { path => '/missing', headers => ['X-How' => 'raise'] }, status => 404, body => $b404 },
    { name => 'a page a policy answers 201 with a body: its body, status 404',
      request => { path => '/missing', headers => ['X-How' => 'page'] }, status => 404, body => "policy page 404" },
    { name => 'HEAD: the same page\'s head, no body, status 404',
      request => { method => 'HEAD', path => '/missing', headers => ['X-How' => 'page'] }, status => 404,
      headers => { 'Content-Length' => length("policy page 404") } },
    { name => 'the policy\'s own 200 for a request stays a 200',
      request => { path => '/p/x', headers => ['X-How' => 'mine'] }, status => 200, body => 'policy answer GET' },
    { name => 'the page\'s file when the policy lets it through',
      request => { path => '/missing' }, status => 404, body => "P PAGE\n" },
    { name => 'HEAD to the page\'s file: its length',
      request => { method => 'HEAD', path => '/missing' }, status => 404,
      headers => { 'Content-Length' => length("P PAGE\n") } },
    { name => 'try_files into a denied location: 403, its page (in the denied place) not served',
      request => { path => '/t/nothing' }, status => 403, body => qr{^(?!.*(DENIED PLACE|FALLBACK))}s },
    { name => 'a page in a location that denies HEAD: GET gets it',
      request => { path => '/gone/x' }, status => 410, body => "H PAGE\n" },
    { name => '... HEAD gets the built-in page\'s head',
      request => { method => 'HEAD', path => '/gone/x' }, status => 410,
      headers => { 'Content-Length' => qr/^(?!\Q${\ length "H PAGE\n"}\E$)\d+$/ } },
);

# The loop survives a spinning page policy, and a kept-alive connection
# stays in step across refused and served pages.
my $c = $s->connect;
$c->send(Luxd::request(path => '/missing', headers => ['X-How' => 'spin']));
$c->send(Luxd::request(method => 'HEAD', path => '/missing', headers => ['X-How' => 'page']));
$c->send(Luxd::request(path => '/t/nothing'));
$c->send(Luxd::request(path => '/index.html'));
my @r;
push @r, $c->response(timeout => 5);
push @r, $c->response(head => 1, timeout => 5);
push @r, $c->response(timeout => 5);
push @r, $c->response(timeout => 5);
is(join(' ', map { $_ ? $_->{status} : 'none' } @r), '404 404 403 200', 'kept alive: four answers in step');
is($r[3] && $r[3]{body}, "home\n", '... the last one the file');
$c->close;
done_testing;
