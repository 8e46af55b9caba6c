# issue 8 #5: a rewrite or redirect target may only name groups its own regex
# has, and a capture is only ever read from this request's own match. The
# per-loop PCRE2 match data keeps the offsets of earlier matches (another
# client's); "$3" of a one-group regex used to expand from them.
use strict;
use warnings;
use Test::More;
use Luxd;

my $leaky = <<'EOF_CONF';
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  access = { allow { regex = "^/(s3cr3t)/(.*)/(.*)$" } },
  redirect = { { "^/go/(.*)$", "/to/$1/$3" } },
}
EOF_CONF

# -t names the file, the line of the redirect and the group.
my ($rc, $out) = Luxd::check_config($leaky);
is $rc, 1, 'luxd -t refuses $3 of a regex with one group';
like $out, qr{luxd\.lua:5: .*redirect 1: target "/to/\$1/\$3" uses \$3, but the regex "\^/go/\(\.\*\)\$" has 1 capture group},
  'file:line, the target, the group and the regex are named';

# The same for a rewrite, in the path and in the query part of the target.
for my $t ('/x/$2', '/x?a=$1&b=$2') {
    my ($rc2, $out2) = Luxd::check_config(<<"EOF_CONF");
vhost "localhost" {
  default = true,
  root = "\$DIR/www",
  rewrite = {
    { "^/r/(.*)\$", "$t" },
  },
}
EOF_CONF
    is $rc2, 1, "rewrite target $t with one group is refused";
    # Line 5: the rule's own line (where its regex is written), not the key's.
    like $out2, qr{luxd\.lua:5: .*rewrite 1: target .* uses \$2, but the regex .* has 1 capture group}, '... at file:line';
}

# At the limit: $N equal to the group count, and $0 with no group, pass.
($rc, $out) = Luxd::check_config(<<'EOF_CONF');
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  rewrite = { { "^/a/(x)(y)(z)$", "/b/$3$2$1" }, { "^/whole$", "/w$0" } },
  redirect = { { "^/go/(.*)$", "/to/$1" } },
}
EOF_CONF
is $rc, 0, '$N at the group count and $0 are accepted' or diag $out;

# Captures that the match set, left unset, or bound from two clients in
# turn on one loop: each Location holds only this request's bytes.
my $s = Luxd->new(
    workers => 1,
    config  => <<'EOF_CONF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  access = { allow { regex = "^/(s3cr3t)/(.*)/(.*)/(.*)/(.*)/(.*)/(.*)/(.*)/(.*)$" } },
  redirect = {
    { "^/go/(a)?(b)?(.*)$", "/to/[$1][$2][$3]" },
  },
}
EOF_CONF
    files => { 'www/index.html' => "hi\n" },
);
for my $round (1 .. 20) {
    my $secret = "/s3cr3t/" . join('/', map { "SECRET$round-$_" . ('Z' x 40) } 1 .. 8);
    my $r1 = $s->get($secret);
    is $r1->{status}, 404, "round $round: the nine-group access regex matched a long path";
    my $c = $s->connect;
    $c->send(Luxd::request(path => "/go/$round"));
    my $r2 = $c->response;
    $c->close;
    is $r2->{status}, 302, "round $round: redirect";
    is $r2->{headers}{location}, "/to/[][][$round]",
      "round $round: unset groups are empty, no byte of the other request";
}
my $r = $s->get('/go/abtail');
is $r->{headers}{location}, '/to/[a][b][tail]', 'set groups expand';

# A reload to the leaky config fails as -t does and changes nothing. Should a
# binary take it, the leak itself is checked: the second client's Location
# must not hold the first client's path.
(my $text = $s->{config_text}) =~ s/vhost "localhost".*//s;
$text .= $leaky;
$text =~ s/\$DIR/$s->{dir}/g;
$s->write_config($text);
my $msg = $s->reload // 'timeout';
like $msg, qr{^failed .*luxd\.lua:\d+: .*uses \$3}, 'a reload to the leaky config fails';
for my $round (1 .. 20) {
    $s->get("/s3cr3t/first-client-path-$round/" . ('P' x 60) . "/end$round");
    my $r2 = $s->get("/go/$round");
    unlike $r2->{headers}{location} // '', qr/first-client|PPPP|end\d/,
      "round $round: no byte of the first client's path in the second's Location";
}
$s->stop;
done_testing;
