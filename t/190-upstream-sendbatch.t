# Batched upstream sends (src/upstream/sendbatch.c): a loop turn's small
# writes to backends go out in one io_uring submission, not one write(2)
# each; where io_uring is refused (here: LUXD_IO_URING=0) each is written
# at once, as before. Asserted, both ways: what a write(2) count shows
# (luxd's syscw in /proc/PID/io counts write(2) and writev(2), not
# io_uring's sends: about one per proxied request with batching, the
# client's answer; about two without), that the fallback says so in the
# error log, a 2 MB chunked upload in 1,000-byte chunks to a backend that
# reads slowly (the head waits in the batch, the body's pieces follow it
# once it is out, by write(2) and uv_write as the socket fills) arriving
# byte for byte, 40
# connections at once each with requests pipelined, and clients that
# reset the connection right after their request (the request's send is
# taken out of the batch unsent) without harm to the next requests.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_LINGER);
use Digest::SHA qw(sha1_hex);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body proxy_front);

sub syscw {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/io" or return undef;
    local $/;
    my $t = <$f>;
    return $t =~ /^syscw:\s*(\d+)/m ? $1 : undef;
}

# Writes per proxied request over one keep-alive connection, through a
# front whose backend is a luxd serving a small file: its answer comes in
# one write, so the front's answer to the client is one writev (the test
# backend writes head and body apart, and the front may relay them apart).
sub writes_per_request {
    my ($s, $n) = @_;
    my $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\nHost: l\r\n\r\n");
    $c->response;    # the upstream connection is made and pooled
    my $w0 = syscw($s->pid);
    for (1 .. $n) {
        $c->send("GET /a.txt HTTP/1.1\r\nHost: l\r\n\r\n");
        my $r = $c->response;
        return undef unless $r && ($r->{status} // 0) == 200 && $r->{body} eq "aaa\n";
    }
    my $w1 = syscw($s->pid);
    $c->close;
    return defined $w0 && defined $w1 ? ($w1 - $w0) / $n : undef;
}

my %per;    # write(2)s a request, by mode
for my $mode ('io_uring', 'write(2)') {
    subtest "sends by $mode" => sub {
        my $be = Luxd::Backend->start;
        my $s = do {
            local %ENV = %ENV;
            if ($mode eq 'io_uring') { delete $ENV{LUXD_IO_URING} } else { $ENV{LUXD_IO_URING} = '0' }
            proxy_front($be, 'keepalive = 64', server => { max_body_bytes => 8 * 1048576 });
        };
        my $unbatched = qr/upstream sends: one write\(2\) each, not batched through io_uring \(LUXD_IO_URING=0\)/;
        if ($mode eq 'io_uring') {
            unlike($s->error_log, qr/not batched through io_uring/, 'no fallback line: io_uring is there');
        } else {
            like($s->error_log, $unbatched, 'the fallback is logged, with why');
        }

        my $bl = Luxd->new(files => { 'www/a.txt' => "aaa\n" });    # the backend for the count
        my $ws = do {
            local %ENV = %ENV;
            if ($mode eq 'io_uring') { delete $ENV{LUXD_IO_URING} } else { $ENV{LUXD_IO_URING} = '0' }
            proxy_front('127.0.0.1:' . $bl->port, 'keepalive = 4');
        };
        my $w = writes_per_request($ws, 200);
        $per{$mode} = $w;
        $ws->stop;
        $bl->stop;
        ok(defined $w, '200 proxied requests answered, and /proc/PID/io read') or diag($s->error_log);
        if ($mode eq 'io_uring') {
            cmp_ok($w, '<', 1.5, sprintf('%.2f write(2)s a request: the client\'s answer only', $w // -1));
        } else {
            cmp_ok($w, '>', 1.5, sprintf('%.2f write(2)s a request: the backend\'s and the client\'s', $w // -1));
        }

        # A chunked upload in small chunks to a backend that reads slowly,
        # on a unix socket (its small buffers fill at once; a TCP socket on
        # loopback takes megabytes first).
        my $ube = Luxd::Backend->start(unix => 1);
        my $us = do {
            local %ENV = %ENV;
            if ($mode eq 'io_uring') { delete $ENV{LUXD_IO_URING} } else { $ENV{LUXD_IO_URING} = '0' }
            proxy_front($ube, 'keepalive = 4', server => { max_body_bytes => 8 * 1048576 });
        };
        my $total = 2_000_000;
        my $data = join '', map { chr(97 + $_ % 26) x 1000 } 0 .. $total / 1000 - 1;
        my $c = $us->connect;
        $c->send("POST /slow-upload/16384/5 HTTP/1.1\r\nHost: l\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (my $at = 0; $at < $total; $at += 1000) {
            $c->send(sprintf("%x\r\n%s\r\n", 1000, substr($data, $at, 1000)));
        }
        $c->send("0\r\n\r\n");
        my $r = $c->response(timeout => 60);
        is($r && $r->{status}, 200, 'the upload is answered') or diag($r ? "$r->{status} $r->{body}" : 'no response');
        is($r && $r->{body}, "got $total\n", 'the backend read every byte');
        my ($up) = grep { $_->{path} =~ m{^/slow-upload/} } $ube->requests;
        is($up && sha1_hex($up->{body}), sha1_hex($data), 'byte for byte, in order');
        $c->close;
        $us->stop;
        $ube->stop;

        # 40 connections at once, 5 requests pipelined on each.
        my @c = map { $s->connect } 1 .. 40;
        for my $i (0 .. $#c) {
            $c[$i]->send(join '', map { "GET /ok/" . (100 + $i * 5 + $_) . " HTTP/1.1\r\nHost: l\r\n\r\n" } 0 .. 4);
        }
        my $good = 0;
        for my $i (0 .. $#c) {
            for my $k (0 .. 4) {
                my $n = 100 + $i * 5 + $k;
                my $r = $c[$i]->response(timeout => 10);
                $good++ if $r && ($r->{status} // 0) == 200 && $r->{body} eq body($n);
            }
            $c[$i]->close;
        }
        is($good, 200, 'all 200 answers, each the right one');

        # Clients that reset right after sending their request.
        for (1 .. 50) {
            my $k = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port, Proto => 'tcp')
              or next;
            syswrite($k, "GET /sleep/50 HTTP/1.1\r\nHost: l\r\n\r\n");
            setsockopt($k, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
            close $k;
        }
        sleep 0.3;
        ok($s->alive, 'alive after 50 resets');
        my $after = $s->get('/ok/7');
        is($after && $after->{body}, body(7), 'and the next request is answered');
        $s->stop;
        $be->stop;
    };
}

# The batch takes exactly the head's write(2) off each request.
cmp_ok(($per{'write(2)'} // 0) - ($per{io_uring} // 9), '>', 0.8,
       sprintf('one write(2) less a request with the batch (%.2f against %.2f)', $per{io_uring} // -1,
               $per{'write(2)'} // -1));
done_testing;
