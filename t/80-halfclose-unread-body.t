# A client that sends a whole request with a body, then closes its sending
# side (a legal half-close), is answered even when the handler has not asked
# for the body yet: the body's bytes are in the read buffer, so the request
# is complete. Found in review of issue 9: on_read closed the connection at
# EOF whenever the body was not parsed yet (LX_BODY_UNREAD), which drops an
# async handler's answer, and cuts a streamed response short.
use strict;
use warnings;
use Test::More;
use Socket qw(SHUT_WR);
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(test_server);

my $H = "Host: localhost\r\n";
my $s = test_server();

sub post { my ($path, $body) = @_; "POST $path HTTP/1.1\r\n${H}Content-Length: " . length($body) . "\r\n\r\n$body" }

subtest 'async handler, body unread, client half-closed' => sub {
    my $c = $s->connect;
    $c->send(post('/t/async?ms=200', 'hello'));
    shutdown($c->sock, SHUT_WR);
    my $r = $c->response(timeout => 5);
    check_response($r, { status => 200, body => "async entered=1 resumed=1\n" }, 'answered after the wait');
    ok($c->wait_closed(5), 'then closed');
    $c->close;
};

subtest 'streamed response, body unread, client half-closed' => sub {
    my $c = $s->connect(rcvbuf => 4096);
    my $n = 4 * 1024 * 1024;
    $c->send(post("/t/stream?bytes=$n", 'hello'));
    shutdown($c->sock, SHUT_WR);
    select(undef, undef, undef, 0.3); # the EOF is seen while the response is still going out
    my $data = $c->read_all(20);
    like($data, qr/^HTTP\/1\.1 200 /, 'a 200');
    like($data, qr/\r\n0\r\n\r\n\z/, 'the whole chunked body, with its last chunk');
    $c->close;
};

subtest 'pipelined request after it is answered too' => sub {
    my $c = $s->connect;
    $c->send(post('/t/async?ms=100', 'hello') . "GET /a.txt HTTP/1.1\r\n$H\r\n");
    shutdown($c->sock, SHUT_WR);
    my @r = $c->responses(2, timeout => 5);
    check_response($r[0], { status => 200, body => "async entered=1 resumed=1\n" }, 'the async one');
    check_response($r[1], { status => 200, body => "aaa\n" }, 'the pipelined one');
    $c->close;
};

ok($s->alive, 'server alive');
$s->stop;
done_testing;
