# issue 18: regex rules with no literal to index go through one prefilter
# (vectorscan, where built in) and PCRE2 confirms the candidates in rule
# order. Through a real luxd: the rule that answers is the first written
# that matches, with its captures; a reload to a larger set (each loop's
# scratch must grow to fit it) answers by the new rules.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

sub conf {
    my ($n, $to) = @_;
    my $rules = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/$to/%d/\$2" },\n), $_, $_ } 1 .. $n;
    return <<"EOF_CONF";
vhost "localhost" { default = true, root = "\$DIR/www",
  redirect = {
$rules  },
}
EOF_CONF
}

my $s = Luxd->new(config => conf(300, 'to'), files => { 'www/plain.txt' => "plain\n" }, workers => 2);
sub loc { my $r = $s->get($_[0]); ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') }

for (1, 2) {    # two workers: each loop's own scratch
    is(loc('/b00123456'), '302 /to/123/456', 'the one rule that matches, with its capture');
    is(loc('/x/a00012a00011999'), '302 /to/11/999', 'two match: the one written first (11) answers');
    is(loc('/a00300'), '404 -', 'the letter and number but no digit after: no rule');
    is(loc('/plain.txt'), '200 -', 'a path no rule matches is served');
    is(loc('/c00123456'), '404 -', 'c is not a or b');
}
# The file as the harness wrote it (its server block, port and dir), with
# the new rules in place of the old.
my $text = do { local $/; open my $fh, '<', $s->config_file or die; <$fh> };
(my $new = conf(600, 't2')) =~ s/\$DIR/$s->dir/ge;
$text =~ s/vhost "localhost".*\z/$new/s or die;
$s->write_config($text);
my $msg = $s->reload;
like($msg // ("timeout: " . ($s->reload_error // "")), qr/^ok generation 2 /, "reload to 600 rules") or diag($s->error_log);
for (1, 2) {
    is(loc('/a00550' . '77'), '302 /t2/550/77', 'a rule only the new set has');
    is(loc('/b00123456'), '302 /t2/123/456', 'an old rule, new target');
}
ok($s->stop, 'stopped cleanly');
done_testing;
