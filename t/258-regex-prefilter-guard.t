# issue 18: the regex prefilter's compile never holds up a start, whatever
# the patterns. Patterns that are costly to compile for the engine
# ([a-z]{3000}q1: 0.1 s each, 200 of them 19 s, 1,000 past five minutes)
# stay on the plain path by a syntactic check (lx_multire_eligible), and the
# rest compile on a thread of their own: with that thread held (the FIFO of
# LUXD_TEST_PREFILTER_HOLD) luxd still starts and answers, by the plain
# path, and once let go it compiles only the light patterns.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(mkfifo);
use lib 't/lib';
use Luxd;

my $engine = `${\ Luxd::bin()} -V` =~ /^regex prefilter: Hyperscan/m;
my $heavy = join '', map { sprintf qq(    { [[[a-z]{3000}q%dz]], "/heavy/%d" },\n), $_, $_ } 1 .. 200;
my $light = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/light/%d/\$2" },\n), $_, $_ } 1 .. 20;
my $config = <<"EOF_CONF";
vhost "localhost" { default = true, root = "\$DIR/www",
  redirect = {
$heavy$light  },
}
EOF_CONF

my $fifo = tempdir(CLEANUP => 1) . '/hold';
mkfifo($fifo, 0600) or die "mkfifo: $!";
local $ENV{LUXD_TEST_PREFILTER_HOLD} = $fifo;
# test_handlers: only luxd-test heeds LUXD_TEST_PREFILTER_HOLD.
my $s = Luxd->new(config => $config, files => { 'www/plain.txt' => "plain\n" }, test_handlers => 1);
sub loc { my $r = $s->get($_[0]); ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') }

# -T says where the rules went (and compiles no prefilter itself).
my $dump = `${\ Luxd::bin()} -T -c ${\ $s->config_file} 2>&1`;
like($dump, $engine ? qr/redirect \(220 rules; indexed: 0 by prefix, 0 by suffix; 200 always tested; 20 regexes for the prefilter, compiled when served\)/
                    : qr/redirect \(220 rules; indexed: 0 by prefix, 0 by suffix; 220 always tested\)/,
     '-T: the heavy patterns always tested' . ($engine ? ', the light ones for the prefilter' : ''));

sub answers {
    my ($when) = @_;
    is(loc('/b00012345'), '302 /light/12/345', "$when: a light rule answers");
    is(loc('/' . ('x' x 3000) . 'q17z'), '302 /heavy/17', "$when: a heavy rule answers");
    is(loc('/plain.txt'), '200 -', "$when: a path no rule matches is served");
}
my $done = qr/generation 1: regex prefilter of 1 rule set compiled in [\d.]+ ms \((\d+) regexes held, (\d+) tested each; 0 sets as before\)/;
if ($engine) {
    ok(1, 'luxd started and answers while the prefilter compile is held');
    unlike($s->error_log, $done, 'no prefilter yet');
    answers('while it compiles');
    open(my $w, '>', $fifo) or die "open $fifo: $!";
    print $w "x";
    close $w;
    ok($s->wait_log($done, 30), 'the prefilter compiled') or diag($s->error_log);
    my ($held, $each) = $s->error_log =~ $done;
    is($held, 20, 'it holds the 20 light patterns');
    # The heavy ones were never given to it (not "tested each" either: they
    # stayed on the always-tested list before the compile).
    is($each, 0, 'and none the engine refused');
}
answers('after');
ok($s->stop, 'stopped cleanly');
done_testing;
