# Review of the batched upstream sends: what luxd does when io_uring_enter
# fails, faults injected with strace(1) into a running luxd (strace is in
# deps/packages-test.txt; without it this fails rather than skips).
#
#   error=EBUSY  submit() closes the ring and marks the batch broken; the
#                queued sends go by uv_write, once each (holds).
#   error=EINTR  submit_and_wait is called again (holds).
#   retval=1     io_uring_enter says it consumed 1 of the N SQEs, as the
#                kernel does when it stops early (io_submit_sqes: no request
#                could be allocated, or an SQE failed io_init_req without
#                IORING_SETUP_SUBMIT_ALL). submit() only handles r < 0: it
#                then waits for N completions with io_uring_wait_cqe(),
#                which submits nothing, so the SQEs left in the ring are
#                never sent and the wait never ends: the worker's loop
#                hung in io_uring_enter for good. Fixed: what the kernel
#                took is waited for (10 ms at most), what it did not take
#                goes by uv_write, and the ring is closed.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body proxy_front);

delete $ENV{LUXD_IO_URING};
my $strace = (grep { -x "$_/strace" } split /:/, $ENV{PATH})[0];
die "strace is needed (deps/packages-test.txt)\n" unless $strace;

sub burst {
    my ($inject) = @_;
    my $be = Luxd::Backend->start;
    my $s = proxy_front($be, 'keepalive = 64');
    my @c = map { $s->connect } 1 .. 20;
    for my $c (@c) { $c->send("GET /ok/1 HTTP/1.1\r\nHost: l\r\n\r\n"); $c->response }
    # strace reports on stderr "Process N attached [with M threads]" once it
    # has seized (and interrupted) every thread; from then on each syscall
    # of the worker is traced, so the injection cannot miss the burst.
    my $err = $s->dir . '/strace.err';
    my $sp = fork // die "fork: $!";
    if ($sp == 0) {
        open STDERR, '>', $err;
        no warnings 'exec';
        exec "$strace/strace", '-f', '-p', $s->pid, '-o', '/dev/null', '-e', 'trace=io_uring_enter',
          '-e', "inject=io_uring_enter:$inject:when=1";
        POSIX::_exit(127);
    }
    my $deadline = time + 10;
    my $attached = sub {
        return 0 unless (Luxd::_slurp($err) // '') =~ /attached/;
        my @tasks = glob('/proc/' . $s->pid . '/task/*');
        return @tasks && !grep { (Luxd::_slurp("$_/status") // '') !~ /^TracerPid:\s*[1-9]/m } @tasks;
    };
    sleep 0.02 until $attached->() || time > $deadline;
    ok($attached->(), 'strace attached to every thread') or diag(Luxd::_slurp($err) // '');
    # The 20 requests in one write each, at once: most in one batch.
    $_->send("GET /ok/" . (100 + $_->sock->fileno) . " HTTP/1.1\r\nHost: l\r\n\r\n") for @c;
    my $good = 0;
    my $wait = 10;
    for my $c (@c) {
        my $r = $c->response(timeout => $wait);
        $wait = 0.1 unless $r;    # one missing is enough to know
        $good++ if $r && ($r->{status} // 0) == 200 && $r->{body} eq body(100 + $c->sock->fileno);
    }
    # Where the worker threads are: syscall 426 is io_uring_enter (x86_64).
    my @in = map { my $t = Luxd::_slurp("$_/syscall") // ''; $t =~ /^(\d+)/ ? $1 : () } glob('/proc/' . $s->pid . '/task/*');
    diag('threads in syscall: ' . join(' ', @in)) if $good != 20;
    my $after = $good == 20 ? $s->get('/ok/7') : undef;
    kill 'INT', $sp;
    waitpid $sp, 0;
    my %n;
    my $twice = grep { $n{"$_->{conn}/$_->{req}"}++ } $be->requests;
    my $log = $s->error_log;
    $_->close for @c;
    $s->stop if $good == 20;
    if ($good != 20) { kill 'KILL', $s->pid; $s->{stopped} = 1; waitpid $s->pid, 0 }
    $be->stop;
    return ($good, $after, $twice, $log);
}

subtest 'io_uring_enter fails (EBUSY): the batch is broken, each send goes once by uv_write' => sub {
    my ($good, $after, $twice, $log) = burst('error=EBUSY');
    is($good, 20, '20 answered, each the right one');
    is($twice, 0, 'none reached the backend twice');
    like($log, qr/io_uring_enter failed \(Device or resource busy\); one write\(2\) each/, 'logged');
    is($after && $after->{body}, body(7), 'the next request, by write(2)');
};

subtest 'io_uring_enter interrupted (EINTR): submitted again' => sub {
    my ($good, $after, $twice) = burst('error=EINTR');
    is($good, 20, '20 answered');
    is($twice, 0, 'none twice');
};

subtest 'io_uring_enter consumes fewer SQEs than it was given' => sub {
    my ($good) = burst('retval=1');
    is($good, 20, 'the 20 requests are answered (or the batch given up), not a hung loop');
};

done_testing;
