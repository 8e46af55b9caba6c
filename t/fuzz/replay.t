# Replays every committed fuzz input (t/fuzz/corpus/<harness>/*: the seeds, what
# fuzzing added, and each reproduction of a defect found) through the
# harnesses that `make fuzz-build` builds with ASan and UBSan. A crash, a
# sanitizer report or a broken invariant in any input fails the harness's
# test and names the inputs that fail.
use strict;
use warnings;
use Test::More;
use File::Basename qw(dirname basename);
use Cwd qw(abs_path);

my $root = abs_path(dirname(__FILE__) . '/../..');
chdir $root or die "chdir $root: $!";
my @harnesses = map { basename($_) =~ s/^fuzz_//r =~ s/\.c$//r } sort glob('t/fuzz/fuzz_*.c');
ok(@harnesses >= 4, 'the fuzz harnesses are there: ' . join(', ', @harnesses));

# Runs the harness over the inputs; returns (exit status, output).
sub run {
    my ($bin, @inputs) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        $ENV{ASAN_OPTIONS} = 'detect_leaks=1:abort_on_error=0';
        exec $bin, '-timeout=20', @inputs;
        exit 127;
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($?, $out);
}

for my $h (@harnesses) {
    my $bin = "build/fuzz/fuzz/fuzz_$h";
    my @inputs = sort grep { -f } glob("t/fuzz/corpus/$h/*");
    if (!-x $bin) {
        ok(0, "$h: harness built") or diag("$bin is missing: run `make fuzz-build`");
        next;
    }
    ok(@inputs > 0, "$h: has a corpus");
    my ($st, $out) = run($bin, @inputs);
    if ($st == 0) {
        pass("$h: " . scalar(@inputs) . " inputs replay cleanly");
        next;
    }
    # Name every input that fails, each run on its own.
    my @bad;
    my $first = '';
    for my $in (@inputs) {
        my ($s1, $o1) = run($bin, $in);
        next if $s1 == 0;
        push @bad, $in;
        if ($first eq '') {
            my @l = grep { !/^(INFO|Running|Executed|\s+#\d+ )/ } split /\n/, $o1;
            $first = join("\n", @l[0 .. ($#l < 25 ? $#l : 25)]);
        }
    }
    fail("$h: " . scalar(@inputs) . " inputs replay cleanly")
      or diag("failing inputs:\n  " . join("\n  ", @bad) . "\nfirst report:\n$first");
}

done_testing();
