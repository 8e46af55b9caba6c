# Review of the batched upstream sends (src/upstream/sendbatch.c): the
# cases where a batched send is followed by more bytes on the same
# connection, where callbacks of a flush queue more sends than its 16
# rounds, tunnels, Expect, the idle-close retry, several workers; every
# byte must arrive once and in order. Runs against LUXD_BIN (also the ASan
# build).
use strict;
use warnings;
use Test::More;
use Digest::SHA qw(sha1_hex);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr proxy_front);

delete $ENV{LUXD_IO_URING};
my $srv = { max_body_bytes => 16 * 1048576 };

sub echo_ok {
    my ($r, $data, $name) = @_;
    ok($r && ($r->{status} // 0) == 200 && defined $r->{body} && $r->{body} eq $data, $name)
      or diag($r ? "status $r->{status}, " . length($r->{body} // '') . " bytes, want " . length $data : 'no response');
}

for my $unix (0, 1) {
    subtest($unix ? 'unix-socket upstream' : 'TCP upstream' => sub {
        my $be = Luxd::Backend->start(unix => $unix);
        my $s = proxy_front($be, 'keepalive = 8', server => { %$srv, workers => 2 });
        unlike($s->error_log, qr/not batched/, 'batched');

        # A head (batched), then body pieces of every size around the
        # 4 KiB line, as the client's reads cut them.
        srand(7);
        my $data = join '', map { body_piece_r($_) } 1 .. 400;
        my $c = $s->connect;
        $c->send("POST /echo HTTP/1.1\r\nHost: l\r\nContent-Length: " . length($data) . "\r\n\r\n");
        for (my $at = 0; $at < length $data;) {
            my $k = 1 + int(rand(9000));
            $c->send(substr($data, $at, $k));
            $at += $k;
            sleep 0.0005 if rand() < 0.2;
        }
        echo_ok($c->response(timeout => 30), $data, 'Content-Length body, mixed piece sizes, echoed exactly');

        # Chunked, small and big chunks mixed.
        my $raw = '';
        my $plain = '';
        for (1 .. 300) {
            my $n = int(rand(3)) == 0 ? 4096 + int(rand(3000)) : 1 + int(rand(4200));
            my $p = substr($data, $_ * 13 % 1000, $n);
            $plain .= $p;
            $raw .= sprintf("%x\r\n%s\r\n", length $p, $p);
        }
        $c->send("POST /echo HTTP/1.1\r\nHost: l\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (my $at = 0; $at < length $raw; $at += 3000) { $c->send(substr($raw, $at, 3000)) }
        $c->send("0\r\n\r\n");
        echo_ok($c->response(timeout => 30), $plain, 'chunked body, mixed chunk sizes, echoed exactly');

        # 3000 one-byte chunks in one write: each is a piece, each piece a
        # send, each send a round of the flush (16 a turn, then the idle
        # handle keeps the loop going).
        my $tiny = join '', map { chr(65 + $_ % 26) } 0 .. 2999;
        my $t0 = time;
        $c->send("POST /echo HTTP/1.1\r\nHost: l\r\nTransfer-Encoding: chunked\r\n\r\n"
                 . join('', map { "1\r\n$_\r\n" } split //, $tiny) . "0\r\n\r\n");
        echo_ok($c->response(timeout => 30), $tiny, '3000 one-byte chunks in one write');
        cmp_ok(time - $t0, '<', 15, 'in reasonable time');

        # Expect: 100-continue.
        $c->send("POST /expect HTTP/1.1\r\nHost: l\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
        my $t = time;
        while (time - $t < 3 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.2) }
        like($c->{buf}, qr{\AHTTP/1\.1 100 Continue\r\n\r\n}, '100 Continue relayed');
        $c->{buf} =~ s{\AHTTP/1\.1 100 Continue\r\n\r\n}{};
        $c->send('e' x 5000);
        my $r = $c->response(timeout => 5);
        is($r && $r->{body}, "expect=1 sent_100=1 body=5000\n", 'Expect: the body after the 100, once');
        $c->close;

        # WebSocket tunnel: many small pieces, both directions.
        my $w = $s->connect;
        $w->send("GET /ws HTTP/1.1\r\nHost: l\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        $t = time;
        while (time - $t < 3 && $w->{buf} !~ /\r\n\r\n/) { $w->_fill(0.2) }
        like($w->{buf}, qr{\AHTTP/1\.1 101 }, 'the tunnel opens (101)');
        $w->{buf} =~ s/\A.*?\r\n\r\n//s;
        my $sent = '';
        for my $i (1 .. 600) {
            my $p = substr($data, $i * 7 % 5000, 1 + ($i * 37) % 6000);
            $w->send($p);
            $sent .= $p;
            $w->_fill(0) if $i % 10 == 0;
        }
        $t = time;
        while (time - $t < 10 && length($w->{buf}) < length $sent) { $w->_fill(0.2) }
        ok(length($w->{buf}) == length($sent) && $w->{buf} eq $sent,
           'tunnel: ' . length($sent) . ' bytes in 600 pieces echoed exactly')
          or diag(length($w->{buf}) . ' of ' . length $sent);
        $w->close;

        # 60 connections, 4 GETs pipelined each, on two workers.
        my @c = map { $s->connect } 1 .. 60;
        $c[$_]->send(join '', map { "GET /ok/" . (10 + $_ * 4 + $_) . " HTTP/1.1\r\nHost: l\r\n\r\n" } 0 .. 3) for 0 .. $#c;
        # One deadline for all 240 (each answer's 10 s ran out once under
        # load: the backend forks a Perl process per connection).
        my $good = 0;
        my $deadline = time + 60;
        for my $i (0 .. $#c) {
            for my $k (0 .. 3) {
                my $left = $deadline - time;
                my $x = $c[$i]->response(timeout => $left > 1 ? $left : 1);
                $good++ if $x && ($x->{status} // 0) == 200 && $x->{body} eq body(10 + $k * 4 + $k);
            }
            $c[$i]->close;
        }
        is($good, 240, '240 pipelined answers, each the right one');
        my %seen;
        my $dups = grep { $seen{"$_->{conn}/$_->{req}"}++ } $be->requests;
        is($dups, 0, 'no request reached the backend twice');
        $s->stop;
        $be->stop;
    });
}

subtest 'idle-close race: an idempotent request is still retried' => sub {
    for my $how (1, 'reset') {
        my $be = Luxd::Backend->start(drop_reused => $how);
        my $s = proxy_front($be, 'keepalive = 8');
        my $a = $s->get('/ok/5');
        is($a->{status}, 200, "first ($how)");
        my $b = $s->get('/ok/6');
        is($b->{status}, 200, "second, on the pooled connection the backend drops ($how): retried");
        is($b->{body}, body(6), 'with the right answer');
        my $p = $s->http(method => 'POST', path => '/echo', body => 'x');
        is($p->{status}, 502, "a POST is not retried ($how)");
        $s->stop;
        $be->stop;
    }
};

sub body_piece_r { my $n = 1 + int(rand(8000)); join '', map { chr(33 + int(rand(90))) } 1 .. $n }

done_testing;
