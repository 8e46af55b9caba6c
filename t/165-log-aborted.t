# A request whose client goes before its response is over is logged all the
# same, as nginx logs it: with the status it was being answered with (a
# download cut halfway, a WebSocket tunnel the client hangs up), or 499
# when no answer had begun (a slow backend). Before, such requests never
# reached the access log: a WebSocket session closed by its client left no
# trace at all.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use Socket qw(SOL_SOCKET SO_LINGER);
use lib 't/lib';
use Luxd;
use Luxd::Backend;

my $be = Luxd::Backend->start(name => 'b');
my $addr = $be->addr;
my $s = Luxd->new(
    server => { access_log_buffer => 0 },
    config => qq{upstream "b" { "$addr", read_timeout = 30 }
vhost "l" { default = true, root = "\$DIR/www", location "/sleep/" { proxy = "b" }, location "/ws" { proxy = "b" } }
},
    files => { 'www/big.bin' => 'x' x (8 * 1024 * 1024), 'www/small.txt' => "ok\n" });

sub log_line {
    my ($re) = @_;
    my $t0 = time;
    while (time - $t0 < 10) {
        my ($l) = grep { /$re/ } split /\n/, $s->access_log;
        return $l if defined $l;
        sleep 0.05;
    }
    return undef;
}

subtest 'a download the client stops halfway' => sub {
    my $c = $s->connect(rcvbuf => 65536);
    $c->send("GET /big.bin?cut HTTP/1.1\r\nHost: l\r\n\r\n");
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr{\AHTTP/1\.1 200 }, 'the download began';
    $c->close;
    my $l = log_line(qr{"GET /big\.bin\?cut HTTP/1\.1"});
    ok $l, 'it is logged' or diag $s->access_log;
    like $l // '', qr{" 200 \d+ }, 'with the status it was answered with';
};

subtest 'a slow backend the client gives up on: 499' => sub {
    my $c = $s->connect;
    # 10 s: the client is surely gone before an answer could begin.
    $c->send("GET /sleep/10000 HTTP/1.1\r\nHost: l\r\n\r\n");
    my @q = $be->wait_requests(1, 10);
    ok @q >= 1, 'the backend has the request';
    # A reset, not a half-close: after a FIN the request, sent in full, is
    # still answered (RFC 9112 allows the half-close).
    setsockopt($c->{sock}, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) or die "SO_LINGER: $!";
    $c->close;
    my $l = log_line(qr{"GET /sleep/10000 HTTP/1\.1"});
    ok $l, 'it is logged' or diag $s->access_log;
    like $l // '', qr{" 499 0 }, 'as 499, nothing sent';
};

subtest 'a WebSocket tunnel its client hangs up' => sub {
    my $c = $s->connect;
    $c->send("GET /ws HTTP/1.1\r\nHost: l\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           . "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr{\AHTTP/1\.1 101 }, 'the tunnel is up';
    $c->send("hello");
    $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /hello/) { $c->_fill(0.5) }
    $c->close;
    my $l = log_line(qr{"GET /ws HTTP/1\.1"});
    ok $l, 'it is logged' or diag $s->access_log;
    like $l // '', qr{" 101 }, 'as 101';
};

subtest 'a finished request is logged once, not again at the close' => sub {
    my $c = $s->connect;
    $c->send("GET /small.txt?once HTTP/1.1\r\nHost: l\r\n\r\n");
    my $r = $c->response(timeout => 3);
    is $r && $r->{status}, 200, 'answered';
    $c->close;
    ok log_line(qr{"GET /small\.txt\?once HTTP/1\.1"}), 'logged';
    # A second line would come when luxd sees the close: a request on a new
    # connection after it (one loop: in turn), and its line awaited, bounds
    # that.
    my $c2 = $s->connect;
    $c2->send("GET /small.txt?after HTTP/1.1\r\nHost: l\r\nConnection: close\r\n\r\n");
    ok $c2->wait_closed(10), 'a request after it is answered';
    ok log_line(qr{"GET /small\.txt\?after HTTP/1\.1"}), '... and logged';
    my @l = grep { m{/small\.txt\?once} } split /\n/, $s->access_log;
    is scalar(@l), 1, 'one line';
};

$s->stop;
$be->stop;
done_testing;
