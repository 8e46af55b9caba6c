# The proxy's tests again with LUXD_IO_URING=0: where io_uring is refused
# (an old kernel, io_uring_disabled, a container's seccomp filter) every
# upstream send is written at once, by the code path that the batched
# sends (t/190) fall back to; it must pass the same tests. Each file runs
# whole in a child; its TAP is kept and shown when it fails.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempfile);

local $ENV{LUXD_IO_URING} = '0';
for my $t (qw(t/94-proxy.t t/95-proxy-upstreams.t t/97-proxy-stream.t t/99-proxy-review.t t/189-review-final.t)) {
    my ($fh, $out) = tempfile(UNLINK => 1);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>&', $fh or die;
        open STDERR, '>&', $fh or die;
        exec $^X, '-It/lib', $t or die "exec: $!";
    }
    waitpid $pid, 0;
    my $st = $?;
    my $log = do { local $/; open my $f, '<', $out or die; <$f> };
    my @bad = $log =~ /^(\s*not ok .*)$/mg;
    ok($st == 0 && $log =~ /^1\.\.\d+$/m, "$t passes with LUXD_IO_URING=0")
      or diag("exit status $st\n" . join("\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)]) . "\n" . substr($log, -2000));
    like($log, qr/ok \d+/, "$t ran its tests");
}
done_testing;
