# Review of the batched upstream sends: t/99's "100 Continue and the
# answer in one piece", second half, both ways. A request with
# Expect: 100-continue whose chunked body the client sent at once, and
# broke (a malformed chunk, already in luxd's buffer); the backend answers
# 100 Continue and 200 in one write. Unbatched, the 100 starts the body,
# its first piece is written at once, the malformed chunk is parsed within
# the same callback and the request ends 400 before the parser reaches the
# backend's 200. Batched, the first piece is only queued (lx_upconn_write
# returns 0), the body pauses, on_resp_head returns 0 and the response
# parser goes on into the 200, which is relayed to the client: the same
# request gets a different answer depending on LUXD_IO_URING.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend);

for my $mode ('write(2)', 'io_uring') {
    subtest "sends by $mode" => sub {
        local $ENV{LUXD_IO_URING} = $mode eq 'io_uring' ? '1' : '0';
        my $b = raw_backend(sub {
            my ($c) = @_;
            sysread($c, my $buf, 100);
            if ($buf =~ m{^POST /y }) {    # the second case: answered on the head
                syswrite $c, "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nBACKEND-BYTES";
                1 while sysread($c, $buf, 1 << 20);
                return;
            }
            syswrite $c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nBACKEND-BYTES";
            sleep 1;
            1 while sysread($c, $buf, 1 << 20);
        });
        my $s = Luxd->new(config => qq{upstream "u" { "$b->[1]" }\n}
                         . qq{vhost "localhost" { default = true, location "/" { proxy = "u" } }\n});
        my $c = $s->connect;
        $c->send("POST /x HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
               . "5\r\nhello\r\nzz\r\n");
        # Everything until luxd closes (it does after a 400), up to 10 s: a
        # fixed 1.5 s also had to cover the backend's fork on a loaded machine.
        ok($c->wait_closed(10), 'luxd closes the connection');
        like($c->{buf}, qr/\AHTTP\/1\.1 400 /, 'a body that breaks when the 100 starts it: 400')
          or diag("the client got: $c->{buf}");
        unlike($c->{buf}, qr/BACKEND-BYTES/, 'the backend\'s answer to the broken request is not relayed');
        $c->close;

        # No Expect: 2000 good one-byte chunks, then a malformed one, all
        # in luxd's buffer at once; a backend that answers on the head.
        # Unbatched the whole buffer is parsed within the dispatch (each
        # piece written at once): 400. Batched, one piece a flush round,
        # 16 rounds a loop turn: the backend's 200 is read long before
        # the malformed chunk is.
        $c = $s->connect;
        $c->send("POST /y HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
               . ("1\r\na\r\n" x 2000) . "zz\r\n");
        ok($c->wait_closed(10), 'luxd closes the connection');
        like($c->{buf}, qr/\AHTTP\/1\.1 400 /, 'a body broken after 2000 chunks: 400')
          or diag("the client got: " . substr($c->{buf}, 0, 200));
        $c->close;
        $s->stop;
        kill 'KILL', -$b->[0];
        waitpid $b->[0], 0;
    };
}

done_testing;
