# A producer that makes its body as fast as lx_stream_send takes it (the
# test handler's /t/stream, as any producer may: it sends until told
# -EAGAIN, then waits for proceed) must not keep the loop to itself while a
# fast client takes everything at once. Before 624ed1b every streamed piece
# went by uv_write, so the queue reached the high-water mark and proceed came
# from on_write, through the loop. Now a piece the socket takes at once
# (uv_try_write) leaves lx_stream_send with an empty queue, the producer
# goes on inside the same call, and conn_flush's proceed_again loop calls
# it again when it returns: the whole stream goes out in one callback of
# the loop, and every other connection of that loop waits for its end.
#
# Limit: one worker, a client reading a 1 TB stream as fast as it can; a
# second client asks for a small file meanwhile and must be answered within
# 15 s (at once, but a loaded machine stalls for tenths; the defect held it
# until the stream's end, hours away). One past: the same with a client
# reading 1 MB a second (the socket fills, uv_write waits): answered at
# once (this held).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Select;
use POSIX ();
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(test_server);

my $s = test_server(server => { send_timeout => 30, keepalive_timeout => 30, access_log_buffer => 0 },
                    files => { 'www/small.txt' => "small\n" });
my $H = "Host: localhost\r\n";

# A child reads the stream (fast or at $rate bytes a second) until killed.
sub reader {
    my ($rate) = @_;
    my $c = $s->connect;
    $c->send("GET /t/stream?bytes=1000000000000&piece=65536 HTTP/1.1\r\n${H}Connection: close\r\n\r\n");
    # The stream is under way once its first MB has come.
    my $deadline = time + 10;
    $c->fill($deadline - time) while length($c->{buf}) < (1 << 20) && !$c->eof && time < $deadline;
    ok(length($c->{buf}) >= (1 << 20), 'premise: the stream is under way (' . length($c->{buf}) . ' bytes)');
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my $t0 = time;
        my $got = 0;
        while (1) {
            my $n = sysread($c->{sock}, my $buf, 1 << 20);
            POSIX::_exit(0) unless $n;
            $got += $n;
            if ($rate) {
                my $ahead = $got / $rate - (time - $t0);
                sleep $ahead if $ahead > 0;
            }
        }
    }
    $c->close;
    return $pid;
}

for my $case ([fast => 0], [slow => 1024 * 1024]) {
    my ($name, $rate) = @$case;
    my $ncase = $case->[0] eq 'fast' ? 1 : 2;
    my $pid = reader($rate);
    my $t0 = time;
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/small.txt', close => 1));
    my $r = $c->response(timeout => 30);
    my $took = time - $t0;
    $c->close;
    kill 'KILL', $pid;
    waitpid $pid, 0;
    ok($r && $r->{status} == 200 && $r->{body} eq "small\n", "$name reader: the other client got its file");
    cmp_ok($took, '<', 15, sprintf('%s reader: answered in %.3f s while the stream ran', $name, $took));
    # The server sees the reader gone: it logs the stream then (10 s).
    my $streams = 0;
    for (my $end = time + 10; ; sleep 0.05) {
        $streams = () = $s->access_log =~ m{"GET /t/stream\?}g;
        last if $streams >= $ncase || time > $end;
    }
    is($streams, $ncase, "$name reader: the server let the stream go");
}

$s->stop;
done_testing;
