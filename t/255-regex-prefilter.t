# issue 18: regex rules with no literal to index go through one prefilter
# (Hyperscan, where built in) and PCRE2 confirms the candidates in rule
# order. Through a real luxd with two loops: the rule that answers is the
# first written that matches, with its captures; a deny /(admin|manage)/
# among literal-free rules stops long paths of every length (Debian's
# vectorscan let /eeee.../admin/qqq through); the prefilter compiles off the
# loops, so requests served before it is there (the compile held on a FIFO,
# LUXD_TEST_PREFILTER_HOLD) get the same answers; a reload to a larger set
# compiles again, each loop growing its scratch to fit.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(mkfifo);
use lib 't/lib';
use Luxd;

my $engine = `${\ Luxd::bin()} -V` =~ /^regex prefilter: Hyperscan/m;
diag($engine ? 'built with Hyperscan: the prefilter is used' : 'built without libhs: plain path only');

sub conf {
    my ($n, $to) = @_;
    my $rules = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/$to/%d/\$2" },\n), $_, $_ } 1 .. $n;
    # 20 literal-free deny rules, the 8th the one that must not be missed.
    my @deny = map { sprintf qq(deny { regex = [[(c|d)%04d\\d+]] }), $_ } 1 .. 20;
    $deny[7] = 'deny { regex = "/(admin|manage)/" }';
    # The engine only approximates a back-reference (it may report /xyz9):
    # PCRE2's confirmation must turn that candidate down.
    $deny[3] = 'deny { regex = [[/([xy])\\1z9]] }';
    my $deny = join ",\n    ", @deny;
    return <<"EOF_CONF";
vhost "localhost" { default = true, root = "\$DIR/www",
  access = {
    $deny,
  },
  redirect = {
$rules  },
}
EOF_CONF
}

my $fifo = tempdir(CLEANUP => 1) . '/hold';
mkfifo($fifo, 0600) or die "mkfifo: $!";
local $ENV{LUXD_TEST_PREFILTER_HOLD} = $fifo;
# test_handlers: only luxd-test heeds LUXD_TEST_PREFILTER_HOLD.
my $s = Luxd->new(config => conf(300, 'to'), files => { 'www/plain.txt' => "plain\n" }, workers => 2,
                  test_handlers => 1);
sub loc { my $r = $s->get($_[0]); ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') }

# Lets the compile thread of the next generation go on.
sub release {
    open(my $w, '>', $fifo) or die "open $fifo: $!";
    print $w "x";
    close $w;
}

my @long = map { my $n = $_; '/' . ('e' x ($n - 11)) . '/admin/qqq' } (12 .. 80, 1000, 1001, 1023, 1024, 2047, 4000, 4001);
my @long_ok = map { '/' . ('e' x ($_ - 11)) . '/adminqqqq' } (12, 64, 1000, 4001);

sub answers {
    my ($when) = @_;
    for (1, 2) {    # connections land on both loops: each its own scratch
        is(loc('/b00123456'), '302 /to/123/456', "$when: the one rule that matches, with its capture");
        is(loc('/x/a00012a00011999'), '302 /to/11/999', "$when: two match: the one written first (11) answers");
        is(loc('/a00300'), '404 -', "$when: the letter and number but no digit after: no rule");
        is(loc('/plain.txt'), '200 -', "$when: a path no rule matches is served");
        is(loc('/x/d00199'), '403 -', "$when: a literal-free deny");
        is(loc('/p/xxz9'), '403 -', "$when: a back-reference deny");
        is(loc('/p/xyz9'), '404 -', "$when: what only the engine's approximation of it matches is not denied");
    }
    my @missed = grep { loc($_) ne '403 -' } @long;
    is(scalar(@missed), 0, "$when: /eee.../admin/qqq denied at " . scalar(@long) . " lengths")
      or diag("let through: " . join(', ', map { length } @missed));
    my @wrong = grep { loc($_) ne '404 -' } @long_ok;
    is(scalar(@wrong), 0, "$when: /eee.../adminqqqq is not denied");
    is(loc('/manage/'), '403 -', "$when: /manage/ denied");
}

my $done = qr/generation 1: regex prefilter of \d+ rule sets? compiled in [\d.]+ ms \((\d+) regexes held/;
if ($engine) {
    unlike($s->error_log, $done, 'held: generation 1 has no prefilter yet');
    answers('before the prefilter');
    release();
    ok($s->wait_log($done, 30), 'the prefilter of generation 1 compiled') or diag($s->error_log);
    my ($held) = $s->error_log =~ $done;
    is($held, 320, 'it holds all 300 redirects and 20 denies');
}
answers('generation 1');

# The file as the harness wrote it (its server block, port and dir), with
# the new rules in place of the old.
my $text = do { local $/; open my $fh, '<', $s->config_file or die; <$fh> };
(my $new = conf(600, 't2')) =~ s/\$DIR/$s->dir/ge;
$text =~ s/vhost "localhost".*\z/$new/s or die;
$s->write_config($text);
my $msg = $s->reload;
like($msg // ("timeout: " . ($s->reload_error // "")), qr/^ok generation 2 /, "reload to 600 rules") or diag($s->error_log);

sub answers2 {
    my ($when) = @_;
    for (1, 2) {
        is(loc('/a00550' . '77'), '302 /t2/550/77', "$when: a rule only the new set has");
        is(loc('/b00123456'), '302 /t2/123/456', "$when: an old rule, new target");
    }
    my @missed = grep { loc($_) ne '403 -' } @long;
    is(scalar(@missed), 0, "$when: /eee.../admin/qqq still denied at every length");
}
if ($engine) {
    answers2('generation 2 before its prefilter');
    release();
    (my $done2 = $done) =~ s/generation 1/generation 2/;
    ok($s->wait_log(qr/$done2/, 30), 'the prefilter of generation 2 compiled') or diag($s->error_log);
    my ($held) = $s->error_log =~ qr/$done2/;
    is($held, 620, 'it holds all 600 redirects and 20 denies');
}
answers2('generation 2');
ok($s->stop, 'stopped cleanly');
done_testing;
