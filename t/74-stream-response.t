# issue 9: a streamed response of unknown length. The test handler
# (build/luxd-test) answers GET /t/stream?bytes=N&piece=P with N bytes of
# a..z made in pieces of P, each only once the connection has drained. To an
# HTTP/1.1 client it goes out chunked (no Content-Length). Asserted here: the
# chunked framing byte for byte (hex sizes, CRLFs, the last chunk and its
# empty line), every body byte, that 100 MB to a client reading slowly never
# sit in the server (its RSS stays flat: the body is made as fast as the
# client takes it, not buffered), keep-alive after a streamed response, and
# HEAD. The HTTP/1.0 (close-delimited) framing is t/75.
# All new with issue 9: fails on a luxd without the test build.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Select;
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(pattern rss_kb read_chunked test_server);

# Under ASan every freed piece would sit in the quarantine (256 MB by
# default) and the RSS would grow for a server that does keep it flat. A
# small quarantine keeps the RSS check meaningful there; a normal build
# ignores the variable.
$ENV{ASAN_OPTIONS} = join ':', grep { length } ($ENV{ASAN_OPTIONS} // ''), 'quarantine_size_mb=4'
  unless ($ENV{ASAN_OPTIONS} // '') =~ /quarantine_size/;

my $BIG = 100_000_000;
my $RATE = 8 * 1024 * 1024;      # bytes a second the slow client reads: about 12 s
my $RSS_LIMIT_KB = 16 * 1024;    # growth allowed during the download
my $H = "Host: localhost\r\n";

my $s = test_server(
    server => { send_timeout => 30, keepalive_timeout => 30 },
);

# Checks a streamed 200's head: chunked, no length, text/plain.
sub chunked_head_ok {
    my ($r, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    check_response($r, { status => 200, headers => {
        'Content-Type' => qr{^text/plain\b}, 'Transfer-Encoding' => 'chunked', 'Content-Length' => undef } }, $name);
}

# GET on connection $c, the head, then the body through the strict decoder.
sub stream_get {
    my ($c, $query, %o) = @_;
    $c->send("GET /t/stream?$query HTTP/1.1\r\n$H" . ($o{close} ? "Connection: close\r\n" : '') . "\r\n");
    my $r = $c->response(head => 1, timeout => 10);
    return ($r, undef) unless $r && ($r->{status} // 0) == 200;
    return ($r, read_chunked($c, $o{timeout} // 10, keep => 1, check => 1));
}

sub body_ok {
    my ($d, $n, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    ok($d && $d->{done} && !$d->{error}, "$name: valid chunked framing to the last chunk")
      or diag($d ? ($d->{error} // ($d->{timed_out} ? 'timed out' : $d->{eof} ? 'EOF before the last chunk' : '?'))
                 : 'no body read');
    return unless $d;
    is($d->{total}, $n, "$name: $n body bytes");
    ok(!defined $d->{bad_at}, "$name: every byte is the pattern's") or diag("first wrong byte at $d->{bad_at}");
}

subtest 'small streams: framing and bytes exact' => sub {
    for my $t ([0, undef], [1, undef], [26, 5], [16383, undef], [16384, undef], [16385, undef],
               [100_000, 1000], [300_000, 65536], [1000, 1]) {
        my ($n, $piece) = @$t;
        my $q = "bytes=$n" . (defined $piece ? "&piece=$piece" : '');
        my $c = $s->connect;
        my ($r, $d) = stream_get($c, $q, close => 1);
        chunked_head_ok($r, $q);
        body_ok($d, $n, $q);
        # The body is all, and each chunk at most a piece: the handler's
        # pieces are not gathered into one buffer first.
        cmp_ok($d->{max_chunk}, '<=', $piece // 16384, "$q: no chunk larger than a piece") if $d && $n;
        is($d->{chunks}, 0, "$q: no empty data chunk before the last one") if $d && !$n;
        ok($c->wait_closed(5), "$q: closed after it (Connection: close)");
        is($c->buffered, '', "$q: nothing after the last chunk");
        $c->close;
    }
};

subtest 'keep-alive after a chunked streamed response' => sub {
    my $c = $s->connect;
    my ($r, $d) = stream_get($c, 'bytes=200000&piece=3000');
    chunked_head_ok($r, 'first');
    body_ok($d, 200_000, 'first');
    isnt(lc($r->{headers}{connection} // ''), 'close', 'the first says nothing of a close') if $r;
    ($r, $d) = stream_get($c, 'bytes=77');
    chunked_head_ok($r, 'second on the same connection');
    body_ok($d, 77, 'second');
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    check_response($c->response, { status => 200, body => "aaa\n" }, 'a static file after them');

    # Pipelined: both requests at once, the answers in order, each complete.
    $c->send("GET /t/stream?bytes=40000&piece=999 HTTP/1.1\r\n$H\r\nGET /t/stream?bytes=3 HTTP/1.1\r\n$H\r\n"
           . "GET /a.txt HTTP/1.1\r\n$H\r\n");
    $r = $c->response(head => 1, timeout => 10);
    chunked_head_ok($r, 'pipelined first');
    body_ok(read_chunked($c, 10, check => 1), 40_000, 'pipelined first');
    $r = $c->response(head => 1, timeout => 10);
    chunked_head_ok($r, 'pipelined second');
    body_ok(read_chunked($c, 10, check => 1), 3, 'pipelined second');
    check_response($c->response, { status => 200, body => "aaa\n" }, 'pipelined static third');
    ok(!$c->eof, 'the connection is still open');
    $c->close;
};

subtest 'HEAD: the head only, no body and no chunk bytes' => sub {
    my $c = $s->connect;
    $c->send("HEAD /t/stream?bytes=100000 HTTP/1.1\r\n$H\r\nGET /t/stream?bytes=30 HTTP/1.1\r\n$H\r\n");
    my $r = $c->response(head => 1, timeout => 10);
    check_response($r, { status => 200, headers => { 'Content-Type' => qr{^text/plain\b}, 'Content-Length' => undef } },
                   'HEAD');
    # The next bytes are the GET's status line: not a chunk size, not "0\r\n\r\n".
    my $deadline = time + 10;
    $c->fill(0.5) while length($c->buffered) < 5 && !$c->eof && time < $deadline;
    like($c->buffered, qr{^HTTP/1\.1 200 }, 'what follows the HEAD head is the next response')
      or diag(Luxd::_short(substr($c->buffered, 0, 100)));
    $r = $c->response(head => 1, timeout => 10);
    chunked_head_ok($r, 'the GET after HEAD');
    body_ok(read_chunked($c, 10, check => 1), 30, 'the GET after HEAD');
    $c->close;

    $c = $s->connect;
    $c->send("HEAD /t/stream?bytes=5000000 HTTP/1.1\r\n${H}Connection: close\r\n\r\n");
    $r = $c->response(head => 1, timeout => 10);
    is($r && $r->{status}, 200, 'HEAD of a 5 MB stream: 200');
    ok($c->wait_closed(10), 'closed (Connection: close)');
    is($c->buffered, '', 'not one byte after the head');
    $c->close;
};

subtest '100 MB to a slow reader: all of it, and the server does not buffer it' => sub {
    my $pid = $s->pid;
    # Warm up: the first stream allocates what any stream needs.
    {
        my $c = $s->connect;
        my ($r, $d) = stream_get($c, 'bytes=4000000', close => 1, timeout => 30);
        body_ok($d, 4_000_000, 'warm-up');
        $c->close;
    }
    my $rss0 = rss_kb($pid);
    ok(defined $rss0, "the server's VmRSS can be read ($rss0 kB)") or return;
    my $c = $s->connect(rcvbuf => 65536);
    $c->send("GET /t/stream?bytes=$BIG HTTP/1.1\r\n$H\r\n");
    my $r = $c->response(head => 1, timeout => 10);
    chunked_head_ok($r, '100 MB');
    return unless $r && ($r->{status} // 0) == 200;

    my $d = Luxd::Stream::Chunked->new(check => 1);
    $d->feed($c->{buf});
    $c->{buf} = '';
    my $sock = $c->sock;
    my $sel = IO::Select->new($sock);
    my $t0 = time;
    my $limit = $t0 + 60;
    my ($max, $samples, $next_sample, $wire, $stalled) = ($rss0, 0, 0, 0, 0);
    while (!$d->{done} && !$d->{error} && time < $limit) {
        if (time >= $next_sample) {
            my $k = rss_kb($pid);
            $max = $k if defined $k && $k > $max;
            $samples++;
            $next_sample = time + 0.2;
        }
        unless ($sel->can_read(10)) { $stalled = 1; last }
        my $n = sysread($sock, my $chunk, 65536);
        last unless $n;
        $wire += $n;
        $d->feed($chunk);
        # Keep to the rate: wait until the bytes so far are due.
        my $wait = $t0 + $wire / $RATE - time;
        sleep $wait if $wait > 0;
    }
    my $took = time - $t0;
    ok(!$stalled, 'the stream never stalled for 10 s');
    body_ok($d, $BIG, sprintf('100 MB in %.1f s', $took));
    cmp_ok($samples, '>=', 10, "the RSS was sampled during the download ($samples times)");
    cmp_ok($max - $rss0, '<', $RSS_LIMIT_KB,
           "the server's RSS stayed flat: grew by " . ($max - $rss0) . " kB (from $rss0 kB, at most $max kB)");

    # The connection goes on after 100 MB.
    my $d2;
    ($r, $d2) = stream_get($c, 'bytes=1000');
    chunked_head_ok($r, 'the next request on that connection');
    body_ok($d2, 1000, 'the next request on that connection');
    $c->close;
};

ok($s->alive, 'the server is alive');
# Lines are buffered up to a second; a stop writes out every one.
ok($s->stop, 'stopped cleanly');
like($s->access_log, qr{"GET /t/stream\?bytes=100000000 HTTP/1\.1" 200 }, 'the access log has the 100 MB download');
done_testing;
