# location "/prefix/" { ... }: the longest matching prefix wins, and a
# location overrides the vhost's keys (root, index, cache_control, headers,
# etag, access, error_pages) for the paths under it; other paths keep the
# vhost's settings.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(
    files => {
        'www/index.html'           => "home\n",
        'www/page.html'            => "page\n",
        'www/x.secret'             => "WRONG: vhost secret\n",
        'www/404.html'             => "vhost 404 page\n",
        'www/403.html'             => "vhost 403 page\n",
        'www/static/a.css'         => "css\n",
        'www/static/imgx.png'      => "imgx\n",
        'www/static/x.secret'      => "WRONG: static secret\n",
        'www/static/img/a.png'     => "png\n",
        'www/static/img/index.html' => "img index\n",
        'www/other/home.html'      => "WRONG: other/home.html from the vhost root\n",
        'www/other/index.html'     => "WRONG: other/index.html from the vhost root\n",
        'www/other/f.txt'          => "WRONG: other/f.txt from the vhost root\n",
        'other/other/home.html'    => "other home\n",
        'other/other/index.html'   => "WRONG: the vhost's index file name\n",
        'other/other/f.txt'        => "other f\n",
        'www/open/x.secret'        => "open secret\n",
        'www/open/private/f'       => "WRONG: open private\n",
        'www/open/f'               => "open f\n",
        'www/err/404.html'         => "err 404 page\n",
        'www/err/f'                => "err f\n",
        'www/b/f'                  => "b f\n",
        'www/b/long/f'             => "b long f\n",
        'www/noetag/f'             => "noetag f\n",
    },
    config => <<'LUA',
vhost "localhost" {
  default = true, root = "$DIR/www", index = { "index.html" },
  cache_control = "vhost-cc",
  headers = { ["X-Site"] = "vhost" },
  etag = true,
  access = { deny { suffix = ".secret" } },
  error_pages = { [404] = "/404.html", [403] = "/403.html" },

  location "/static/"     { cache_control = "public, max-age=86400", headers = { ["X-Loc"] = "static" } },
  location "/static/img/" { cache_control = "img-cc", etag = false },
  location "/other/"      { root = "$DIR/other", index = { "home.html" } },
  location "/open/"       { access = { deny { prefix = "/open/private/" } } },
  location "/err/"        { error_pages = { [404] = "/err/404.html" } },
  -- declared longest first: order must not matter
  location "/b/long/"     { cache_control = "b-long" },
  location "/b/"          { cache_control = "b-short" },
  location "/noetag/"     { etag = false, headers = { ["X-Loc"] = "noetag" } },
}
LUA
);

sub get { my ($p, @h) = @_; return $s->get($p, @h) }

subtest 'paths outside every location keep the vhost settings' => sub {
    my $r = get('/page.html');
    check_response($r, { status => 200, body => "page\n",
        headers => { 'Cache-Control' => 'vhost-cc', 'X-Site' => 'vhost', 'X-Loc' => undef, ETag => qr/./ } }, '/page.html');
    check_response(get('/'), { status => 200, body => "home\n" }, 'the vhost index');
    check_response(get('/x.secret'), { status => 403 }, 'the vhost access rules');
    check_response(get('/staticx'), { status => 404, body => "vhost 404 page\n" }, '"/staticx" is not under "/static/"');
};

subtest 'the longest prefix wins' => sub {
    check_response(get('/static/a.css'), { status => 200, body => "css\n",
        headers => { 'Cache-Control' => 'public, max-age=86400', 'X-Loc' => 'static' } }, '/static/');
    check_response(get('/static/img/a.png'), { status => 200, body => "png\n",
        headers => { 'Cache-Control' => 'img-cc' } }, '/static/img/ over /static/');
    check_response(get('/static/img/'), { status => 200, body => "img index\n",
        headers => { 'Cache-Control' => 'img-cc' } }, 'the prefix itself');
    check_response(get('/static/imgx.png'), { status => 200, body => "imgx\n",
        headers => { 'Cache-Control' => 'public, max-age=86400' } }, '/static/imgx.png is not under /static/img/');
    check_response(get('/b/long/f'), { status => 200, body => "b long f\n",
        headers => { 'Cache-Control' => 'b-long' } }, 'longest wins when declared first');
    check_response(get('/b/f'), { status => 200, body => "b f\n",
        headers => { 'Cache-Control' => 'b-short' } }, 'the shorter one for the rest');
    check_response(get('/%73tatic/img/a.png'), { status => 200, body => "png\n",
        headers => { 'Cache-Control' => 'img-cc' } }, 'the decoded path selects the location');
    check_response(get('/x/../static/img/a.png'), { status => 200, body => "png\n",
        headers => { 'Cache-Control' => 'img-cc' } }, 'the normalised path selects the location');
};

subtest 'headers and etag' => sub {
    my $r = get('/static/a.css');
    check_response($r, { status => 200, headers => { 'X-Loc' => 'static', 'X-Site' => undef, ETag => qr/./ } },
                   "a location's headers replace the vhost's");
    $r = get('/static/img/a.png');
    check_response($r, { status => 200, headers => { ETag => undef, 'X-Site' => 'vhost', 'X-Loc' => undef } },
                   'etag = false: no ETag; locations do not nest: the vhost headers');
    $r = get('/noetag/f');
    check_response($r, { status => 200, body => "noetag f\n", headers => { ETag => undef, 'X-Loc' => 'noetag' } },
                   'etag = false with headers');
    my $tag = get('/page.html')->{headers}{etag};
    ok(defined $tag, 'the vhost path has an ETag');
    $r = get('/noetag/f', 'If-None-Match' => $tag // '"x"');
    is($r->{status}, 200, 'etag = false: an entity-tag in If-None-Match never matches');
    # RFC 9110 13.1.2: "*" matches any current representation, tagged or
    # not (issue 17 #3 made luxd follow it; it was 200 before).
    $r = get('/noetag/f', 'If-None-Match' => '*');
    is($r->{status}, 304, 'etag = false: If-None-Match: * still matches the file');
};

subtest 'root and index' => sub {
    check_response(get('/other/f.txt'), { status => 200, body => "other f\n" }, "the location's root");
    check_response(get('/other/'), { status => 200, body => "other home\n" }, "the location's index");
    check_response(get('/'), { status => 200, body => "home\n" }, 'the vhost index outside it');
};

subtest "access: a location's list replaces the vhost's" => sub {
    check_response(get('/open/x.secret'), { status => 200, body => "open secret\n" },
                   "the vhost's suffix rule does not apply under /open/");
    check_response(get('/open/private/f'), { status => 403, body => "vhost 403 page\n" }, "the location's own rule");
    check_response(get('/open/f'), { status => 200, body => "open f\n" }, 'no rule matches');
    check_response(get('/static/x.secret'), { status => 403 }, 'a location without access keeps the vhost rules');
    check_response(get('/x.secret'), { status => 403, body => "vhost 403 page\n" }, 'outside: the vhost rules, its 403 page');
};

subtest 'error_pages' => sub {
    my $r = get('/missing');
    check_response($r, { status => 404, body => "vhost 404 page\n" }, 'the vhost 404 page, with status 404');
    $r = get('/err/missing');
    check_response($r, { status => 404, body => "err 404 page\n" }, "the location's 404 page overrides the vhost's");
    check_response(get('/err/f'), { status => 200, body => "err f\n" }, 'an existing file under it');
    # The page is an internal redirect (issue 9): the location is chosen
    # again for its path, so the headers are those of the location that
    # serves the page (the vhost's here), as nginx's add_header does.
    check_response(get('/static/missing.css'), { status => 404, body => "vhost 404 page\n",
        headers => { 'X-Loc' => undef, 'X-Site' => 'vhost' } }, 'a location without error_pages keeps the vhost page');
    $r = get('/404.html');
    check_response($r, { status => 200, body => "vhost 404 page\n" }, 'the page itself is a normal file');
    $r = $s->head('/missing');
    check_response($r, { status => 404, body => '' }, 'HEAD of a missing file: 404, no body');
};

$s->stop;

# A location may name every vhost key (the spec: "each may override the
# vhost's keys"). rewrite and redirect in a location must then act under its
# prefix; a config that cannot honour them must say so, not ignore them.
subtest "a location's rewrite and redirect act, or the config is refused" => sub {
    my $config = <<'LUA';
vhost "localhost" { default = true, root = "$DIR/www",
  location "/loc/" {
    redirect = { { "^/loc/old$", "/loc/new", status = 301 } },
    rewrite = { { "^/loc/rw$", "/loc/target" } },
  },
}
LUA
    my %files = ('www/loc/new' => "new\n", 'www/loc/target' => "target\n");
    my ($rc, $out, $file) = Luxd::check_config("server { listen = { \"127.0.0.1:\$PORT\" } }\n" . $config);
    if ($rc != 0) {
        like($out, qr/\A\Q$file\E:\d+: .*(rewrite|redirect)/, 'refused with FILE:LINE naming the key') or diag($out);
        return;
    }
    my $l = Luxd->new(config => $config, files => \%files);
    check_response($l->get('/loc/old'), { status => 301, headers => { Location => '/loc/new' } }, "the location's redirect");
    check_response($l->get('/loc/rw'), { status => 200, body => "target\n" }, "the location's rewrite");
    check_response($l->get('/loc/new'), { status => 200, body => "new\n" }, 'a plain file under it');
    $l->stop;
};

done_testing;
