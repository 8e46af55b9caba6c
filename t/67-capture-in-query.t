# issue 8 #5, found in review: a capture is data. In the query part of a
# target the path's decoded bytes "&", "+" and ";" would otherwise split or
# change the parameters: /d/x%26admin=1 redirected to "?q=$1" gave the next
# site "q=x&admin=1", a parameter the client made up. They are encoded
# there (as nginx encodes captures in arguments); in the path part of a
# target they stay as they are.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  redirect = {
    { "^/d/([^/]*)/(.*)$", "https://app.test/p/$1/?q=$2&r=1" },
    { "^/n/(.*)$", "/to/$1" },
  },
  rewrite = { { "^/w/(.*)$", "/index.html?q=$1&r=1" } },
  policy = function(r) if r.path == "/index.html" then r:set_header("X-Query", r.query) end end,
}
EOF_CONF
    files => { 'www/index.html' => "i\n" },
);

my $r = $s->get('/d/a%26b%2Bc%3Bd/x%26admin=1+y;z');
is $r->{status}, 302, 'redirect';
is $r->{headers}{location}, 'https://app.test/p/a&b+c;d/?q=x%26admin=1%2By%3Bz&r=1',
  'captures: as they are in the path part, & + ; encoded in the query part';
$r = $s->get('/d/p/v?keep=1&k=2');
is $r->{headers}{location}, 'https://app.test/p/p/?q=v&r=1&keep=1&k=2',
  "the target's own & and the client's query are kept";
$r = $s->get('/n/a%26b?c=1');
is $r->{headers}{location}, '/to/a&b?c=1', 'a target without ? leaves & in the path';

$r = $s->get('/w/x%26admin=1+y');
is $r->{status}, 200, 'rewrite';
is $r->{headers}{'x-query'}, 'q=x%26admin=1%2By&r=1', "a rewrite's query is encoded the same way";
$s->stop;
done_testing;
