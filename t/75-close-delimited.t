# issue 9: a streamed response of unknown length to an HTTP/1.0 client. It
# cannot be chunked (RFC 9112 7.1: chunked is HTTP/1.1), so the body is
# close-delimited: no Transfer-Encoding, no Content-Length,
# "Connection: close", and exactly the body's bytes, then EOF (a FIN, not a
# reset, which could drop the last bytes). Sizes around the default piece
# (16384) and pieces down to one byte. All new with issue 9: fails on a luxd
# without the test build.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(pattern test_server);

my $s = test_server();

sub get10 {
    my ($query, @headers) = @_;
    my $c = $s->connect;
    $c->send("GET /t/stream?$query HTTP/1.0\r\nHost: localhost\r\n" . join('', map { "$_\r\n" } @headers) . "\r\n");
    my $r = $c->response(head => 1, timeout => 10);
    my $body = $r ? $c->read_all(20) : undef;
    my %info = (eof => $c->eof, reset => $c->{reset});
    $c->close;
    return ($r, $body, \%info);
}

for my $t ([0], [1], [16383], [16384], [16385], [1_000_000],
           [0, 1], [100, 1], [16385, 7], [16384, 4096], [16385, 16384], [1_000_000, 1000], [1_000_000, 65536]) {
    my ($n, $piece) = @$t;
    my $q = "bytes=$n" . (defined $piece ? "&piece=$piece" : '');
    subtest "HTTP/1.0 $q" => sub {
        my ($r, $body, $info) = get10($q);
        check_response($r, { status => 200, headers => {
            'Content-Type' => qr{^text/plain\b}, 'Transfer-Encoding' => undef, 'Content-Length' => undef,
            'Connection' => qr/^close$/i } }, $q);
        ok($info->{eof}, 'the server closes after the body');
        ok(!$info->{reset}, '... with a FIN, not a reset');
        is(length($body // ''), $n, "$n bytes until EOF");
        ok(defined $body && $body eq pattern($n), 'the bytes are the pattern, no chunk framing')
          or diag('first bytes: ' . Luxd::_short(substr($body // '', 0, 60)));
    };
}

# Keep-alive asked for, but a body without a length can only end with the
# close: the server says so and closes.
subtest 'HTTP/1.0 with Connection: keep-alive still gets a close-delimited body' => sub {
    my ($r, $body, $info) = get10('bytes=20000', 'Connection: keep-alive');
    check_response($r, { status => 200, headers => {
        'Transfer-Encoding' => undef, 'Content-Length' => undef, 'Connection' => qr/^close$/i } }, 'keep-alive asked');
    ok($info->{eof} && !$info->{reset}, 'closed with a FIN');
    ok(defined $body && $body eq pattern(20000), 'all 20000 bytes');
};

# A HEAD in HTTP/1.0: the head, no body bytes.
subtest 'HTTP/1.0 HEAD' => sub {
    my $c = $s->connect;
    $c->send("HEAD /t/stream?bytes=50000 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    my $r = $c->response(head => 1, timeout => 10);
    check_response($r, { status => 200, headers => { 'Transfer-Encoding' => undef, 'Content-Length' => undef } }, 'HEAD');
    ok($c->wait_closed(10), 'closed');
    is($c->buffered, '', 'no body bytes');
    $c->close;
};

# The server is well after all those closes.
check_response($s->get('/a.txt'), { status => 200, body => "aaa\n" }, 'a static file afterwards');
$s->stop;
done_testing;
