# The batch's limit on one send (src/upstream/sendbatch.c SB_MAX_SEND,
# 4096 bytes): a request head of exactly 4096 bytes to the backend waits in
# the batch (no write(2) of its own: one write(2) a request, the client's
# answer), one of 4097 goes at once (two). The head's size is found first:
# the backend answers with the length of the head it read, and a padding
# field is sized to make it exact. write(2)s counted by syscw in
# /proc/PID/io (io_uring's sends are not counted there).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend kill_backend);

delete $ENV{LUXD_IO_URING};

# Answers every request on a connection with the length of its head, in
# one write.
my $b = raw_backend(sub {
    my ($c) = @_;
    my $buf = '';
    while (1) {
        while ((my $i = index($buf, "\r\n\r\n")) >= 0) {
            my $len = $i + 4;
            substr($buf, 0, $len, '');
            syswrite $c, "HTTP/1.1 200 OK\r\nContent-Length: " . length($len) . "\r\n\r\n$len";
        }
        sysread($c, $buf, 65536, length $buf) or return;
    }
});
my $s = Luxd->new(config => qq{upstream "u" { "$b->[1]", keepalive = 4 }\n}
                 . qq{vhost "localhost" { default = true, location "/" { proxy = "u" } }\n});
unlike($s->error_log, qr/not batched through io_uring/, 'io_uring is there');

sub syscw {
    open my $f, '<', '/proc/' . $s->pid . '/io' or return undef;
    local $/;
    (<$f> // '') =~ /^syscw:\s*(\d+)/m ? $1 : undef;
}

my $c = $s->connect;
sub head_len {
    my ($pad) = @_;
    $c->send("GET /x HTTP/1.1\r\nHost: localhost\r\nX-Pad: " . ('p' x $pad) . "\r\n\r\n");
    my $r = $c->response;
    return $r && ($r->{status} // 0) == 200 ? $r->{body} : undef;
}
my $l100 = head_len(100);
my $l200 = head_len(200);
ok(defined $l100 && $l200 - $l100 == 100, "the head grows with the padding ($l100, $l200)") or diag($s->error_log);
my $base = $l100 - 100;

for my $t ([4096, 1], [4097, 2]) {
    my ($want, $writes) = @$t;
    my $pad = $want - $base;
    is(head_len($pad), $want, "a head of $want bytes to the backend");
    my $w0 = syscw();
    my $n = 50;
    my $good = 0;
    for (1 .. $n) { $good++ if (head_len($pad) // 0) == $want }
    my $per = (syscw() - $w0) / $n;
    is($good, $n, "$n requests with a head of $want bytes answered");
    cmp_ok(abs($per - $writes), '<', 0.25,
           sprintf('%d bytes: %.2f write(2)s a request (%s)', $want, $per,
                   $writes == 1 ? 'in the batch' : 'past the limit: at once'));
}
$c->close;
$s->stop;
kill_backend($b);
done_testing;
