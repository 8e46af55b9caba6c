# Limits: 414, 431, 413 (Content-Length and chunked), bodies within the limit,
# header_timeout as a deadline, body_timeout, send_timeout.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $bigsize = 16 * 1024 * 1024;
my %files = (
    'www/index.html' => "<h1>home</h1>\n",
    'www/a.txt'      => "aaa\n",
    'www/huge.bin'   => 'x' x $bigsize,
);

my $s = Luxd->new(files => \%files, server => {
    max_header_bytes => 4096, max_body_bytes => 1000,
    header_timeout => 1, body_timeout => 1, send_timeout => 1,
    # Far beyond the bounds below: a close seen within them is the timer
    # under test, not the idle deadline.
    keepalive_timeout => 30,
    access_log_buffer => 0,       # the send_timeout case waits for its line
    defer_accept => \'false',    # the timers below are the server's, not the kernel's
});

my $get_a = "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

sub chunked { my (@parts) = @_; join('', map { sprintf("%x\r\n%s\r\n", length $_, $_) } @parts) . "0\r\n\r\n" }

$s->run_cases(
    {   name    => 'request line within the limit (3000-byte path)',
        request => "GET /" . ('a' x 3000) . " HTTP/1.1\r\nHost: localhost\r\n\r\n",
        status  => 404,
    },
    {   name    => 'request line over the limit: 414',
        request => "GET /" . ('a' x 20000) . " HTTP/1.1\r\nHost: localhost\r\n\r\n",
        status  => 414, closed => 1,
    },
    {   name    => 'headers within max_header_bytes',
        request => "GET /a.txt HTTP/1.1\r\nHost: localhost\r\n" . join('', map { "X-H$_: " . ('v' x 200) . "\r\n" } 1 .. 12) . "\r\n",
        status  => 200, body => "aaa\n",
    },
    {   name    => 'many headers over max_header_bytes: 431',
        request => "GET /a.txt HTTP/1.1\r\nHost: localhost\r\n" . join('', map { "X-H$_: " . ('v' x 300) . "\r\n" } 1 .. 20) . "\r\n",
        status  => 431, closed => 1,
    },
    {   name    => 'one header over max_header_bytes: 431',
        request => "GET /a.txt HTTP/1.1\r\nHost: localhost\r\nX-Big: " . ('v' x 5000) . "\r\n\r\n",
        status  => 431, closed => 1,
    },
    {   name    => 'Content-Length over max_body_bytes: 413 at once, without waiting for the body',
        request => "POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2000\r\n\r\n",
        status  => 413, closed => 1,
    },
    {   name    => 'Content-Length over max_body_bytes with the body sent: 413',
        request => "POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1500\r\n\r\n" . ('b' x 1500),
        status  => 413, closed => 1,
    },
    {   name    => 'huge Content-Length: 413',
        request => "POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999999\r\n\r\n",
        status  => 413, closed => 1,
    },
    {   name    => 'chunked body over max_body_bytes: 413',
        request => "POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                   . chunked(('c' x 400) x 5),
        status  => 413, closed => 1,
    },
    {   name    => 'one chunk larger than max_body_bytes, announced only: 413',
        request => "POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n" . ('c' x 100),
        status  => 413, closed => 1,
    },
);

subtest 'bodies within the limit are read, then the next pipelined request is answered' => sub {
    my $c = $s->connect;
    $c->send("POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n" . ('p' x 1000) . $get_a);
    my @r = $c->responses(2);
    is($r[0]{status}, 405, 'POST with a 1000-byte body (= the limit): 405 from the static handler');
    check_response($r[1], { status => 200, body => "aaa\n" }, 'pipelined GET after it');
    $c->close;

    $c = $s->connect;
    $c->send("POST /a.txt HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
             . "64;ext=1\r\n" . ('q' x 100) . "\r\n"
             . "12c\r\n" . ('r' x 300) . "\r\n"
             . "12C\r\n" . ('s' x 300) . "\r\n"
             . "0\r\nX-Trailer: t\r\n\r\n"
             . $get_a);
    @r = $c->responses(2);
    is($r[0]{status}, 405, 'chunked POST (700 bytes, a chunk extension and a trailer): 405');
    check_response($r[1], { status => 200, body => "aaa\n" }, 'pipelined GET after the chunked body');
    $c->close;

    # A GET with a body: the body is skipped, never parsed as a request.
    my $smuggled = "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n";
    $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: " . length($smuggled) . "\r\n\r\n$smuggled$get_a");
    @r = $c->responses(3);
    is(scalar(@r), 2, 'two responses, not three');
    is($r[0]{status}, 200, 'GET with a body: 200');
    check_response($r[1], { status => 200, body => "aaa\n" }, 'next request, the body was not taken as one');
    $c->close;
};

subtest 'header_timeout is a deadline for the whole header, not reset by each byte' => sub {
    my $c = $s->connect;
    my $t0 = time;
    $c->send("GET /a.txt HTTP/1.1\r\n");
    my $slow = "X-Slow: " . ('a' x 40) . "\r\nHost: localhost\r\n\r\n";
    # One byte every 0.3 s: the whole header would take about 15 s.
    my $sent = 0;
    for my $byte (split //, $slow) {
        last unless $c->send($byte);
        $sent++;
        $c->fill(0.3);
        last if $c->eof;
    }
    ok($c->wait_closed(10), 'the server closed the connection');
    my $dt = time - $t0;
    ok($dt >= 0.7 && $dt <= 8, 'after about header_timeout = 1 s, not at the end of the header')
      or diag("closed after $dt s");
    cmp_ok($sent, '<', length $slow, 'before the slow header was complete');
    my $buf = $c->buffered;
    ok($buf eq '' || $buf =~ m{^HTTP/1\.1 408 }, 'with no answer or a 408') or diag("got: " . substr($buf, 0, 200));
    $c->close;
};

subtest 'a header that arrives in pieces within header_timeout is served' => sub {
    # On a server of its own with header_timeout 10: with 1 s, two sleeps
    # of 0.2 s could outlast the deadline on a loaded machine.
    my $p = Luxd->new(files => \%files, server => { header_timeout => 10 });
    my ($raw) = $p->raw(undef, pieces => ["GET /a.txt HT", "TP/1.1\r\nHost: local", "host\r\nConnection: close\r\n\r\n"],
                        delay => 0.2, timeout => 10);
    my ($r) = parse_responses($raw);
    check_response($r, { status => 200, body => "aaa\n" }, 'three pieces 0.2 s apart');
    $p->stop;
};

subtest 'body_timeout' => sub {
    my $c = $s->connect;
    my $t0 = time;
    $c->send("POST /a.txt HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n" . ('z' x 10));
    ok($c->wait_closed(10), 'a stalled body is cut off');
    my $dt = time - $t0;
    ok($dt >= 0.7 && $dt <= 8, 'after about body_timeout = 1 s') or diag("closed after $dt s");
    my $buf = $c->buffered;
    ok($buf eq '' || $buf =~ m{^HTTP/1\.1 408 }, 'with no answer or a 408') or diag("got: " . substr($buf, 0, 200));
    $c->close;
};

subtest 'send_timeout: a client that stops reading is dropped' => sub {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send("GET /huge.bin HTTP/1.1\r\nHost: localhost\r\n\r\n");
    # The server gives up once send_timeout passes without a write moving
    # on; it then logs the cut request (access_log_buffer = 0: at once).
    # Wait for that line, not a fixed time: read
    # before the cut, the client would let the download go on.
    my $logged;
    my $deadline = time + 10;
    until (($logged) = $s->access_log =~ m{("GET /huge\.bin HTTP/1\.1" \d+ \d+)}) {
        last if time > $deadline;
        sleep 0.05;
    }
    ok($logged, 'the server gave up on the download (its request is logged)');
    like($logged // '', qr/" 200 \d+$/, 'logged as a 200');
    my $t0 = time;
    my $data = $c->read_all(20);
    ok($c->eof, 'the server closed the connection') or diag('read ' . length($data) . ' bytes in ' . (time - $t0) . ' s');
    cmp_ok(length($data), '<', $bigsize, 'before sending the whole file');
    like($data, qr{^HTTP/1\.1 200 }, 'the response had started');
    $c->close;
};

subtest 'a connection that sends nothing is closed after header_timeout' => sub {
    my $c = $s->connect;
    my $t0 = time;
    ok($c->wait_closed(10), 'closed');
    my $dt = time - $t0;
    ok($dt <= 8, 'within about 1 s (keepalive_timeout is 30)') or diag("closed after $dt s");
    $c->close;
};

subtest 'with defer_accept on, a silent connection is still closed' => sub {
    my $d = Luxd->new(files => \%files, server => { header_timeout => 1, defer_accept => \'true' });
    my $c = $d->connect;
    my $t0 = time;
    ok($c->wait_closed(8), 'closed (the kernel hands it over late, then header_timeout runs)');
    my $dt = time - $t0;
    ok($dt <= 7, 'within a few seconds') or diag("closed after $dt s");
    $c->close;
    $d->stop;
};

# The server is still healthy after all that.
check_response($s->get('/a.txt'), { status => 200, body => "aaa\n" }, 'still serving');

$s->stop;
done_testing;
