# Review of the proxy's spare request states (099e954): a spare keeps its
# buffers only up to LX_SPARE_ROOM (16 KiB; 8 KiB when this was written) "bigger ones are freed with the
# request". The check looks at the head buffer and the parser's hbuf, not at
# the parser's marks (16 bytes a field) and headers (32 bytes a field): a
# response of many short fields ("x:" lines: one byte of hbuf each) leaves
# hbuf under 8 KiB and marks + headers at some 320 KiB, kept by each of the
# 32 spares of a loop for as long as the server runs.
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use POSIX ();
use Luxd;
use Luxd::Stream qw(rss_kb);

# glibc serves allocations at or above the mmap threshold with mmap and gives
# them back to the kernel on free; a fixed threshold (no dynamic raise) makes
# freed parser buffers show in VmRSS at once.
$ENV{GLIBC_TUNABLES} = 'glibc.malloc.mmap_threshold=32768';
# Under AddressSanitizer (make asan, which keeps no spares) freed memory
# sits in a quarantine that would look like spares holding it: off, as in
# t/33. A build without ASan ignores the variable.
$ENV{ASAN_OPTIONS} = join ':', grep { length } $ENV{ASAN_OPTIONS} // '', 'quarantine_size_mb=0',
  'thread_local_quarantine_size_kb=0';

my $NFIELDS = 6000;    # "x:\r\n" each: 24 KB of head, under the 32 KiB default
my $CONC = 32;         # the spares a loop keeps


# A backend that answers every request, after 300 ms (so that the requests
# of a batch are in luxd at the same time), with $NFIELDS empty fields.
sub many_fields_backend {
    my $port = Luxd::free_port();
    my $ls = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
        Listen => 128, ReuseAddr => 1) or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $SIG{CHLD} = 'IGNORE';
        my $parent = getppid;
        while (1) {
            my $c = $ls->accept or next;
            my $k = fork;
            if (defined $k && $k == 0) {
                close $ls;
                my $buf = '';
                while (1) {
                    while ($buf !~ /\r\n\r\n/) {
                        my $n = sysread($c, $buf, 65536, length $buf);
                        POSIX::_exit(0) unless $n;
                    }
                    $buf =~ s/^.*?\r\n\r\n//s;
                    select(undef, undef, undef, 0.3);
                    my $resp = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
                        . ("x:\r\n" x $NFIELDS) . "\r\nok\n";
                    my $off = 0;
                    while ($off < length $resp) {
                        my $n = syswrite($c, $resp, length($resp) - $off, $off);
                        POSIX::_exit(0) unless $n;
                        $off += $n;
                    }
                }
            }
            close $c;
            POSIX::_exit(0) if getppid != $parent;
        }
    }
    close $ls;
    return ($pid, "127.0.0.1:$port");
}

my ($bpid, $baddr) = many_fields_backend();
END { kill 'KILL', $bpid if $bpid }

my $s = Luxd->new(config => qq{upstream "b" { "$baddr", keepalive = 64 }\n}
      . qq{vhost "l" { default = true, location "/" { proxy = "b" } }\n});

sub batch {
    my @c = map { $s->connect } 1 .. $CONC;
    $_->send("GET /f HTTP/1.1\r\nHost: l\r\n\r\n") for @c;
    my $ok = 0;
    for (@c) {
        my $r = $_->response(timeout => 10);
        $ok++ if $r && $r->{status} == 200 && $r->{body} eq "ok\n";
    }
    $_->close for @c;
    return $ok;
}

# 32 requests in flight hold 32 x 320 KiB of parser buffers either way; what
# stays after they end is what the spares keep. Before 099e954 (every state
# freed): some 1.6 MiB more than before the batch; with it: some 11 MiB.
my $pid = $s->pid;
my $before = rss_kb($pid);
ok defined $before, "luxd's VmRSS can be read ($before kB)" or BAIL_OUT('no /proc');
is batch(), $CONC, "$CONC concurrent responses of $NFIELDS fields each are relayed";
sleep 0.5;
my $after = rss_kb($pid);
my $grew = $after - $before;
note "VmRSS $before kB -> $after kB";
cmp_ok $grew, '<', 4096,
    "after the requests end, luxd holds less than 4 MiB more ($grew kB): spares keep at most "
    . "8 KiB of buffers each";
is batch(), $CONC, 'a second batch is relayed';
sleep 0.5;
my $again = rss_kb($pid);
cmp_ok $again - $before, '<', 4096, sprintf('and still (%d kB)', $again - $before);

$s->stop;
done_testing;
