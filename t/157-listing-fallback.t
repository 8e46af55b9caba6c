# dir_listing beside fallback: what no file answers is the fallback's, a
# directory that is not there included. The listing handler lists only a
# directory the static handler found without an index file
# (lx_listing_takes); before, it took every path ending in "/" and answered
# a missing directory (or a file named with a "/" after it) 404 itself, so
# the fallback upstream never saw those requests.
#
# At the limit and one past: a directory there without an index (the
# listing) and one that is not there (the fallback); a file (served) and
# the same name with "/" after it (no directory: the fallback). Without
# fallback, a missing directory is still 404.
use strict;
use warnings;
use Test::More;
use Luxd;
use Luxd::Backend;

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $s = Luxd->new(
    files => {
        'www/d/x'            => "x\n",
        'www/i/index.html'   => "index\n",
        'www/nf/d/x'         => "x\n",
    },
    config => <<"EOF2",
upstream "be" { "$addr" }
vhost "localhost" {
  default = true, root = "\$DIR/www", dir_listing = true, fallback = "be",
  location "/nf/" { fallback = false },
}
EOF2
);

sub from_backend { my ($r) = @_; return ($r->{headers}{'x-backend'} // '') eq 'be' }

my $r = $s->get('/d/');
is $r->{status}, 200, 'a directory without an index: 200';
like $r->{body}, qr{Index of /d/}, '... the listing';
ok !from_backend($r), '... not the backend';

$r = $s->get('/nodir/');
ok from_backend($r), 'a directory that is not there: the fallback answers (not the listing\'s 404)';

$r = $s->get('/i/');
is $r->{status}, 200, 'a directory with an index: 200';
is $r->{body}, "index\n", '... the index file';

$r = $s->get('/d/x');
is $r->{body}, "x\n", 'a file: served';
ok !from_backend($r), '... not the backend';
$r = $s->get('/d/x/');
ok from_backend($r), 'the file with "/" after it (no directory): the fallback';

$r = $s->get('/nf/d/');
like $r->{body}, qr{Index of /nf/d/}, 'no fallback: a directory without an index is listed';
$r = $s->get('/nf/nodir/');
is $r->{status}, 404, 'no fallback: a directory that is not there is 404';
ok !from_backend($r), '... not the backend';

# --explain says the same.
for my $c (['/nodir/', qr/^answer: from the upstream$/m], ['/d/', qr/^answer: 200$/m],
           ['/nf/nodir/', qr/^answer: 404$/m]) {
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', "GET $c->[0] HTTP/1.1",
                                    '-H', 'Host: localhost');
    like $out, $c->[1], "--explain GET $c->[0]" or diag $out;
}

$s->stop;
$be->stop;
done_testing;
