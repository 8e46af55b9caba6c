# --explain against the live server: for each request, the answer
# --explain predicts (status, and a redirect's Location) is what a running
# luxd with the same config file answers on loopback. Each vhost has files
# the others lack, so a wrong vhost shows as a wrong status.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(
    files => {
        'ex/index.html'     => "ex\n",
        'ex/only-ex.html'   => "ex\n",
        'ex/files/f.txt'    => "f\n",
        'ex/dir/a'          => "a\n",
        'ex/dir/loc/a'      => "loc\n",
        'ex/empty/'         => '',
        'wild/only-wild'    => "w\n",
        'def/only-def'      => "d\n",
        'def/list/x'        => "x\n",
    },
    config => <<'LUA',
vhost "example.com" {
  root = "$DIR/ex",
  redirect = { { "^/old/(.*)$", "/new/$1", status = 308 } },
  rewrite = { { "^/r/([a-z]+)/(.*)$", "/files/$2?k=$1" } },
  access = {
    deny { prefix = "/lan/", from = "127.0.0.0/8", status = 451 },
    deny { regex = [[\.bak$]], status = 404 },
  },
  location "/loc/" { root = "$DIR/ex/dir" },
}
vhost "wild" { aliases = { "*.wild.test" }, root = "$DIR/wild" }
vhost "default" { root = "$DIR/def", default = true, dir_listing = true }
LUA
);

my @cases = (
    [ 'example.com', '/only-ex.html' ],
    [ 'example.com', '/only-wild' ],
    [ 'a.wild.test', '/only-wild' ],
    [ 'a.wild.test', '/only-ex.html' ],
    [ 'nope.test',   '/only-def' ],
    [ 'nope.test',   '/only-ex.html' ],
    [ 'example.com', '/old/a/b?x=1' ],
    [ 'example.com', '/r/ab/f.txt' ],
    [ 'example.com', '/r/AB/f.txt' ],
    [ 'example.com', '/lan/x' ],
    [ 'example.com', '/a.bak' ],
    [ 'example.com', '/a.bak.txt' ],
    [ 'example.com', '/loc/a' ],
    [ 'example.com', '/loc/b' ],
    [ 'example.com', '/' ],
    [ 'example.com', '/dir' ],
    [ 'example.com', '/empty/' ],
    [ 'nope.test',   '/list/' ],
    [ 'example.com', '/%2e%2e/x' ],
    [ 'example.com', '/files/../only-ex.html' ],
    [ 'EXAMPLE.com:80', '/only-ex.html' ],
    [ 'bad host',    '/' ],
);
for my $c (@cases) {
    my ($host, $path) = @$c;
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', "GET $path", '-H', "Host: $host");
    is $rc, 0, "explains $host $path" or diag $out;
    my ($want) = $out =~ /^answer: (\d+)/m;
    my $r = $s->get($path, Host => $host);
    is $r->{status}, $want, "$host $path: the server answers $want as --explain said"
      or diag $out;
    if (my ($loc) = $out =~ /^  -> \d+ Location: (.*)$/m) {
        is $r->{headers}{location}, $loc, "$host $path: Location as --explain said";
    }
}

$s->stop;
done_testing;
