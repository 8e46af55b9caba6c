# issue 11: try_files = { "$uri", "$uri/", "/index.html" } (vhost and
# location), as nginx's: each entry but the last is tried as a file, one
# ending in "/" as a directory served by its index; the last is an internal
# redirect (the location chosen again) or "=CODE". Files are looked up
# through the file cache (the thread pool), below the root and under
# follow_symlinks, as the static handler opens them: "..", and links out of
# the root, are refused the same way. Against a real luxd on loopback.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use Luxd;

my %files = (
    'www/index.html'       => "spa index\n",
    'www/app.js'           => "console.log(1);\n",
    'www/about.html'       => "about page\n",
    'www/docs/index.html'  => "docs index\n",
    'www/docs/guide.html'  => "guide\n",
    'www/noindex/x.txt'    => "x\n",
    'www/e404.html'        => "custom 404\n",
    'www/pretty/a.html'    => "pretty a\n",
    'www/loc/page.txt'     => "loc page\n",
    'other/far/page.html'  => "far page from the other root\n",
    'outside/secret.txt'   => "SECRET\n",
    'outside/dir/index.html' => "SECRET DIR\n",
);

my $s = Luxd->new(
    no_start => 1,
    files    => \%files,
    server   => { access_log => { path => '$DIR/access.log', format => '$request_uri $uri $args $status' },
                  access_log_buffer => 0 },
    config   => <<'EOF_CONF',
upstream "app" { "127.0.0.1:1" }
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  follow_symlinks = false,
  try_files = { "$uri", "$uri/", "/index.html" },
  error_pages = { [404] = "/e404.html" },
  location "/pretty/" { try_files = { "$uri", "$uri.html", "=404" } },
  location "/gone/" { try_files = { "$uri", "=410" } },
  location "/plain/" { try_files = false },
  location "/far/" { root = "$DIR/other" },
  location "/to-far/" { try_files = { "$uri", "/far/page.html" } },
  location "/to-denied/" { try_files = { "$uri", "/denied/x" } },
  location "/denied/" { access = { deny { prefix = "/" } } },
  location "/cycle/" { try_files = { "$uri", "/cycle/again" } },
  location "/q/" { try_files = { "$uri", "/index.html?from=spa&$args" } },
  location "/fb/" { fallback = "app", try_files = { "$uri", "/index.html" } },
}
EOF_CONF
);
my $dir = $s->dir;
symlink "$dir/outside/secret.txt", "$dir/www/link.txt" or die "symlink: $!";
symlink "$dir/outside/dir", "$dir/www/linkdir" or die "symlink: $!";
symlink "$dir/outside/secret.txt", "$dir/www/docs/deep.txt" or die "symlink: $!";
$s->start;

sub got { my ($path, %o) = @_; my $r = $s->http(path => $path, %o); $r }

# --- $uri hits, $uri/ directories, the SPA fallback -----------------------
my $r = got('/app.js');
is $r->{status}, 200, '$uri: a file is served';
is $r->{body}, "console.log(1);\n", '... its bytes';
like $r->{headers}{'content-type'}, qr{javascript}, '... with its own type';
ok $r->{headers}{etag}, '... and validators, as the static handler sends';

$r = got('/docs');
is $r->{status}, 200, '$uri/: /docs is a directory: served by its index';
is $r->{body}, "docs index\n", '... docs/index.html';
$r = got('/docs/');
is "$r->{status} $r->{body}", "200 docs index\n", '/docs/ too';
$r = got('/');
is "$r->{status} $r->{body}", "200 spa index\n", '/: the root directory, its index';
$r = got('/noindex');
is $r->{status}, 403, 'a directory without an index: 403, as the static handler answers';

for my $route ('/some/spa/route', '/users/42', '/docs/missing.html', '/about.html/x') {
    $r = got($route);
    is "$r->{status} $r->{body}", "200 spa index\n", "SPA route $route: /index.html";
}
$r = got('/about.html');
is "$r->{status} $r->{body}", "200 about page\n", 'a file that exists is not redirected';

# HEAD: the same answer without a body; the length is the file's.
$r = got('/some/route', method => 'HEAD');
is $r->{status}, 200, 'HEAD of an SPA route: 200';
is $r->{headers}{'content-length'}, length("spa index\n"), '... the index page length';
is $r->{body} // '', '', '... and no body';
$r = got('/app.js', method => 'HEAD');
is "$r->{status} $r->{headers}{'content-length'}", '200 16', 'HEAD of a file hit';

# Conditional and range requests still work on a hit through try_files.
$r = got('/app.js', headers => [ 'If-None-Match' => got('/app.js')->{headers}{etag} ]);
is $r->{status}, 304, 'If-None-Match on a try_files hit: 304';
$r = got('/route', headers => [ Range => 'bytes=0-2' ]);
is "$r->{status} $r->{body}", '206 spa', 'Range on the redirected /index.html: 206';

# A method other than GET and HEAD: the file handler's 405, also after the
# redirect (nothing here takes a body).
$r = got('/app.js', method => 'POST', body => 'x');
is $r->{status}, 405, 'POST to a file: 405';
$r = got('/route', method => 'POST', body => 'x');
is $r->{status}, 405, 'POST to an SPA route: redirected to /index.html, then 405';

# --- "=CODE", pretty URLs, the site's error pages ----------------------------
$r = got('/pretty/a');
is "$r->{status} $r->{body}", "200 pretty a\n", '"$uri.html": /pretty/a is a.html';
like $r->{headers}{'content-type'}, qr{^text/html}, '... with the type of the file found';
$r = got('/pretty/a.html');
is "$r->{status} $r->{body}", "200 pretty a\n", '/pretty/a.html itself';
$r = got('/pretty/none');
is $r->{status}, 404, '"=404": 404';
is $r->{body}, "custom 404\n", '... with the error page, as any 404';
$r = got('/pretty/none', method => 'HEAD');
is $r->{status}, 404, '"=404" for HEAD';
$r = got('/gone/x');
is $r->{status}, 410, '"=410" in another location: 410';
$r = got('/gone/../app.js');
is $r->{status}, 200, '/gone/../app.js is /app.js (normalised before the location is chosen)';

# --- locations -----------------------------------------------------------------
$r = got('/plain/missing');
is "$r->{status} $r->{body}", "404 custom 404\n", 'try_files = false in a location: a plain 404';
$r = got('/to-far/x');
is "$r->{status} $r->{body}", "200 far page from the other root\n",
  'the redirect chooses the location again: /far/ and its own root';
$r = got('/to-denied/x');
is $r->{status}, 403, "the redirect's location applies its access rules";
$r = got('/cycle/x');
is $r->{status}, 500, 'a cycle of redirects stops with 500';
ok $s->wait_log(qr/try_files: more than 10 internal redirects/, 10), '... and says why in the error log';

# The query: kept when the last entry has none, replaced when it has one.
# (the log is appended to; the lines below are looked for among all)
got('/route?a=1&b=2');
got('/q/x?c=3');
got('/app.js?v=9');
# Each line is written as its request ends, which may be just after the
# answer went out: wait (10 s) for the last one; one loop writes them in turn.
my $log = '';
for (my $end = time + 10; ; sleep 0.05) {
    $log = $s->access_log;
    last if $log =~ m{^/app\.js\?v=9 }m || time > $end;
}
like $log, qr{^/route\?a=1&b=2 /index\.html a=1&b=2 200$}m, 'the client query stays on the redirect; $uri is the new path';
like $log, qr{^/q/x\?c=3 /index\.html from=spa&c=3 200$}m, '"/index.html?from=spa&$args" sets the query';
like $log, qr{^/app\.js\?v=9 /app\.js v=9 200$}m, 'a hit keeps $uri';

# --- root escapes and links out of the root ----------------------------------
for my $bad ('/../outside/secret.txt', '/%2e%2e/outside/secret.txt', '/docs/../../outside/secret.txt') {
    $r = got($bad);
    is $r->{status}, 400, "$bad: refused before try_files (400), as without it";
    unlike $r->{body} // '', qr/SECRET/, '... nothing of the file outside';
}
$r = got('/link.txt');
is $r->{status}, 403, 'a link out of the root (follow_symlinks = false): 403, not the SPA page';
unlike $r->{body}, qr/SECRET/, '... and not the file';
$r = got('/docs/deep.txt');
is $r->{status}, 403, 'a link further down: 403';
$r = got('/linkdir');
is $r->{status}, 403, 'a directory link out of the root: 403';
unlike $r->{body}, qr/SECRET/, '... its index is not served';
$r = got('/linkdir/');
is $r->{status}, 403, '/linkdir/ too';

# --- with fallback: GET and HEAD are try_files', other methods the backend's ---
$r = got('/fb/route');
is "$r->{status} $r->{body}", "200 spa index\n", 'fallback + try_files: GET of a route gets /index.html';
$r = got('/fb/route', method => 'POST', body => 'x');
is $r->{status}, 502, '... a POST goes to the backend (127.0.0.1:1 refuses: 502)';

# --- luxd -t --explain tells the same walk, and the same answer ---------------------
for my $path ('/app.js', '/docs', '/some/spa/route', '/pretty/a', '/pretty/none', '/gone/x',
              '/to-far/x', '/to-denied/x', '/cycle/x', '/link.txt', '/linkdir', '/noindex') {
    my $live = got($path)->{status};
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', "GET http://localhost$path");
    my ($said) = $out =~ /^answer: (\d+)/m;
    is $said, $live, "--explain $path: answer $live, as the server answers" or diag $out;
}
my (undef, $ex) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', 'GET http://localhost/to-far/x?a=1');
like $ex, qr{^try_files: "\$uri" "/far/page\.html"\n  "\$uri" is \S+/www/to-far/x: does not exist -> next\n  none is there -> internal redirect to "/far/page\.html" query a=1 \(the location is chosen again\)\nlocation: "/far/" at \S+luxd\.lua:\d+}m,
  '--explain follows the redirect into the location it lands in' or diag $ex;

$s->stop;

# --- luxd -t: what is refused, at file:line ---------------------------------------
my @bad = (
    [ 'try_files = { "$uri" }', qr/needs at least two entries/ ],
    [ 'try_files = "$uri"', qr/must be a list like/ ],
    [ 'try_files = { "$uri", "$foo" }', qr/unknown variable "\$foo"/ ],
    [ 'try_files = { "$uri", "=200" }', qr/must be "=" and a status 400\.\.599/ ],
    [ 'try_files = { "$uri", "=4040" }', qr/must be "=" and a status/ ],
    [ 'try_files = { "=404", "/i.html" }', qr/must be a path starting with "\/" or "\$uri"/ ],
    [ 'try_files = { "x.html", "/i.html" }', qr/must be a path starting with/ ],
    [ 'try_files = { "/a/../b", "/i.html" }', qr/must not have "\." or "\.\." segments/ ],
    [ 'try_files = { "$uri", "/../i.html" }', qr/must not have "\." or "\.\." segments/ ],
    [ 'try_files = { "$uri?x=1", "/i.html" }', qr/only the last entry may have a query/ ],
    [ 'try_files = { "$uri", "/i.html?u=$uri" }', qr/the query knows \$args only/ ],
    [ 'try_files = { "$uri", "/i.html$args" }', qr/unknown variable "\$args"/ ],
    [ 'try_files = { "$uri", "" }', qr/must not be empty/ ],
    [ 'try_files = { "$uri", 404 }', qr/must be a string/ ],
);
for my $b (@bad) {
    my ($set, $re) = @$b;
    my ($rc, $out) = Luxd::check_config(qq{server { listen = "127.0.0.1:\$PORT" }\nvhost "a" {\n  root = "\$DIR",\n  $set,\n}\n});
    is $rc, 1, "-t refuses $set";
    like $out, qr/luxd\.lua:4: .*try_files.*$re/, '... at the line of the key, saying why' or diag $out;
}
# The limit: 16 entries, and one past.
for my $n (16, 17) {
    my $list = join ', ', ('"$uri"') x ($n - 1), '"=404"';
    my ($rc, $out) = Luxd::check_config(qq{server { listen = "127.0.0.1:\$PORT" }\nvhost "a" {\n  root = "\$DIR",\n  try_files = { $list },\n}\n});
    if ($n == 16) { is $rc, 0, '16 entries: accepted' or diag $out }
    else { is $rc, 1, '17 entries: refused'; like $out, qr/luxd\.lua:4: .*has 17 entries; at most 16/, '... saying the limit' }
}
# Accepted forms, and -T shows them.
my ($rc, $out) = Luxd::check_config(qq{server { listen = "127.0.0.1:\$PORT" }\nvhost "a" {\n  root = "\$DIR",\n  try_files = { "\$uri", "\$uri/index.htm", "/index.php?\$args" },\n  location "/x/" { try_files = false },\n}\n});
is $rc, 0, '"/index.php?$args" and "$uri/index.htm" are accepted' or diag $out;
(my $tfile = $out) =~ s/.*configuration (\S+) is ok.*/$1/s;
my (undef, $dump) = Luxd::run_luxd('-T', '-c', $tfile);
like $dump, qr{^vhost a  \(.*\n(?:  .*\n)*?  try_files \$uri \$uri/index\.htm /index\.php\?\$args$}m, '-T shows the vhost\'s list' or diag $dump;
like $dump, qr{^  location /x/ .*\n(?:    (?!try_files).*\n)*+(?!    )}m, '... and none under the location that turns it off';

done_testing;
