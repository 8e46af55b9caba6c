# Review of try_files (issue 11): with dir_listing on, a "$uri/" entry that
# lands on a directory without an index hands the request to the listing
# handler, and the live server lists it (static.c static_serve sets
# r->decoded to the entry's "/dir/" path). --explain must tell the same
# answer; its explain_dir marks the directory unindexed but leaves
# r->decoded as the client's "/dir" (no trailing slash), so its listing
# step declines and it says 404 where the server answers 200.
# And a method other than GET or HEAD: static_serve answers 405 for a
# "$uri/" directory before looking at its index, explain_dir never checks
# the method (200 for a directory with an index, 404 for one without).
# Against a real luxd on loopback, and luxd -t --explain on the same file.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(
    files => {
        'www/index.html'    => "spa index\n",
        'www/dl/sub/a.txt'  => "a\n",
        'www/dl/idx/index.html' => "idx index\n",
    },
    config => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  try_files = { "$uri", "$uri/", "/index.html" },
  location "/dl/" { dir_listing = true },
}
EOF_CONF
);

sub explained {
    my ($m, $path) = @_;
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file, '--explain', "$m http://localhost$path");
    my ($said) = $out =~ /^answer: (\d+)/m;
    return ($said, $out);
}

# The live answers first: a listing for the directory reached through "$uri/".
my $r = $s->http(path => '/dl/sub');
is $r->{status}, 200, 'GET /dl/sub: "$uri/" finds the directory; dir_listing lists it';
like $r->{body}, qr{Index of /dl/sub/}, '... the listing of /dl/sub/';
like $r->{body}, qr{a\.txt}, '... with its file';
$r = $s->http(path => '/dl/sub/');
is $r->{status}, 200, 'GET /dl/sub/ also lists it';

# --explain must say what the server does, for each of these.
for my $case ([GET => '/dl/sub'], [GET => '/dl/sub/'], [HEAD => '/dl/sub'], [GET => '/dl/idx'],
              [GET => '/dl/nothing'], [POST => '/dl/sub'], [POST => '/dl/idx'], [POST => '/dl/idx/']) {
    my ($m, $p) = @$case;
    my $live = $s->http(method => $m, path => $p, ($m eq 'POST' ? (body => 'x') : ()))->{status};
    my ($said, $out) = explained($m, $p);
    is $said, $live, "--explain $m $p: answer $live, as the server answers" or diag $out;
}
my (undef, $out) = explained(GET => '/dl/sub');
like $out, qr{^listing: the directory is listed -> 200$}m,
  '--explain GET /dl/sub: the listing step lists the "$uri/" directory' or diag $out;

$s->stop;
done_testing;
