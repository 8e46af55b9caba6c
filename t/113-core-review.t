# Review of the request-core performance work of issue 9 (branch h-ka):
# field names matched by length and first letter and compared eight bytes
# at a time, a request without a body parsed to its end in one llhttp run,
# a connection that goes idle giving its session (and its parser, not
# llhttp_init-ed again) to the next connection, Content-Length formatted two
# digits at a time, the output ring indexed without division and whole
# pieces dropped at once, 16 KiB file pieces by uv_write when the socket is
# full. Each part is held to what a client sees: the right answer, the
# right framing, the connection kept or closed as it must be.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use File::Temp qw(tempdir);
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Stream qw(pattern read_chunked);
use Luxd::Backend qw(body);

my $H = "Host: localhost\r\n";

# Sizes whose decimal form has one digit more than the size before (the
# formatter writes two digits a step, then one or two).
my @SIZES = (0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10000, 10001, 65535, 65536,
             99999, 100000, 100001);
my %files = (
    'www/a.txt'      => "aaa\n",
    'www/g.txt'      => "plain\n",
    'www/g.txt.gz'   => "gzipped\n",
    'owww/a.txt'     => "other\n",
    'www/big.bin'    => Luxd::Stream::body_bytes(1 << 20, 7),
    'www/mid.bin'    => Luxd::Stream::body_bytes(100_000, 8),
    'www/p8.txt'     => pattern(8 << 20),
    map { ("www/s$_.bin" => 'x' x $_) } @SIZES,
);

# Sparse files too large for the disk, on tmpfs (its largest file is
# 2^63 - 1 bytes, the largest Content-Length luxd can say): only HEAD and
# one-byte ranges are asked of them.
my $huge = tempdir('luxd-huge-XXXXXX', DIR => '/dev/shm', CLEANUP => 1);
my @HUGE = ('4294967295', '4294967296', '4294967297', '999999999999999999', '1000000000000000000',
            '9223372036854775806', '9223372036854775807');
for my $n (@HUGE) {
    system('truncate', '-s', $n, "$huge/h$n.bin") == 0 or die "truncate $n";
}

# A backend for proxied bodies: pieces arrive from it while a write to the
# client is in flight, so the output ring never empties and its head goes
# round (a static or test-handler response empties it between writes).
my $be = Luxd::Backend->start;
my $be_addr = $be->addr;

my $s = Luxd->new(
    test_handlers => 1,
    files         => \%files,
    # keepalive_timeout 30: a slow client on a loaded machine can take
    # seconds to drain what luxd has long finished writing (the 4 KiB
    # receive buffers below), then send its next request; the idle case
    # with a short keepalive_timeout has a server of its own.
    server        => { access_log_buffer => 0, keepalive_timeout => 30, header_timeout => 10,
                       send_timeout => 20 },
    config        => <<"LUA",
vhost "localhost" {
  default = true,
  root = "\$DIR/www",
  gzip_static = true,
  location "/t/" { test_handler = true },
}
vhost "other.test" { root = "\$DIR/owww" }
vhost "huge.test" { root = "$huge" }
upstream "b" { "$be_addr", read_timeout = 30 }
vhost "px.test" { location "/" { proxy = "b" } }
LUA
);
# A fixed Last-Modified for the If-Modified-Since cases.
my $mtime = 1704164645;    # Tue, 02 Jan 2024 03:04:05 GMT
utime $mtime, $mtime, $s->dir . '/www/a.txt' or die "utime: $!";

sub follow_up { my ($tag) = @_; "GET /a.txt?f=$tag HTTP/1.1\r\n$H\r\n" }

# ---- field names ------------------------------------------------------------

# name, request (head lines after the request line), expected status, body
# (or undef), connection kept (1) or closed (0), extra header checks.
my $GET = "GET /a.txt HTTP/1.1\r\n";
my $CH5 = "5\r\nhello\r\n0\r\n\r\n";
my @names = (
    # Host (4): capitals, mixed case, one letter off, a prefix and suffixes.
    ['HOST in capitals chooses the vhost', "${GET}HOST: other.test\r\n\r\n", 200, "other\n", 1],
    ['hOsT in mixed case chooses the vhost', "${GET}hOsT: other.test\r\n\r\n", 200, "other\n", 1],
    ['Hosu is no Host (HTTP/1.1: 400)', "${GET}Hosu: other.test\r\n\r\n", 400, undef, 0],
    ['Hosu is no Host (HTTP/1.0: the default vhost)', "GET /a.txt HTTP/1.0\r\nHosu: other.test\r\nConnection: keep-alive\r\n\r\n", 200, "aaa\n", 1],
    ['Hos is no Host', "${GET}Hos: other.test\r\n\r\n", 400, undef, 0],
    ['Hostx is no Host', "${GET}Hostx: other.test\r\n\r\n", 400, undef, 0],
    ['XHost is no Host', "${GET}XHost: other.test\r\n\r\n", 400, undef, 0],
    ['Host-Name is no Host', "${GET}Host-Name: other.test\r\n\r\n", 400, undef, 0],
    ['an 8-bit byte in a Host-long name', "${GET}Ho\xf3t: other.test\r\n$H\r\n", 400, undef, 0],
    ['HOST and Host are two Host fields', "${GET}HOST: other.test\r\n$H\r\n", 400, undef, 0],
    # Range (5) and If-Range (8).
    ['RANGE in capitals', "${GET}${H}RANGE: bytes=0-1\r\n\r\n", 206, 'aa', 1],
    ['Rangf is no Range', "${GET}${H}Rangf: bytes=0-1\r\n\r\n", 200, "aaa\n", 1],
    ['Rang is no Range', "${GET}${H}Rang: bytes=0-1\r\n\r\n", 200, "aaa\n", 1],
    ['Ranges is no Range', "${GET}${H}Ranges: bytes=0-1\r\n\r\n", 200, "aaa\n", 1],
    ['IF-RANGE that does not match: the whole file', "${GET}${H}Range: bytes=0-1\r\nIF-RANGE: \"nope\"\r\n\r\n", 200, "aaa\n", 1],
    ['If-Rangf is no If-Range: the range', "${GET}${H}Range: bytes=0-1\r\nIf-Rangf: \"nope\"\r\n\r\n", 206, 'aa', 1],
    # Expect (6).
    ['EXPECT in capitals: 417', "${GET}${H}EXPECT: tea\r\nContent-Length: 5\r\n\r\nhello", 417, undef, 0],
    ['Expecu is no Expect', "${GET}${H}Expecu: tea\r\nContent-Length: 5\r\n\r\nhello", 200, "aaa\n", 1],
    # Connection and User-Agent (10): the first letter picks the candidate.
    ['CONNECTION: close closes', "${GET}${H}CONNECTION: close\r\n\r\n", 200, "aaa\n", 0],
    ['cONNECTION: close closes', "${GET}${H}cONNECTION: close\r\n\r\n", 200, "aaa\n", 0],
    ['Connectioo is no Connection', "${GET}${H}Connectioo: close\r\n\r\n", 200, "aaa\n", 1],
    ['Xonnection (User-Agent\'s candidate) is no Connection', "${GET}${H}Xonnection: close\r\n\r\n", 200, "aaa\n", 1],
    ['Uonnection is neither', "${GET}${H}Uonnection: close\r\n\r\n", 200, "aaa\n", 1],
    # If-None-Match (13).
    ['IF-NONE-MATCH: * is a 304', "${GET}${H}IF-NONE-MATCH: *\r\n\r\n", 304, '', 1],
    ['If-None-Matcg is no If-None-Match', "${GET}${H}If-None-Matcg: *\r\n\r\n", 200, "aaa\n", 1],
    ['If_None-Match (_ is not -) is no If-None-Match', "${GET}${H}If_None-Match: *\r\n\r\n", 200, "aaa\n", 1],
    ['If-None+Match is no If-None-Match', "${GET}${H}If-None+Match: *\r\n\r\n", 200, "aaa\n", 1],
    # Accept-Encoding (15).
    ['ACCEPT-ENCODING: gzip gets the .gz', "GET /g.txt HTTP/1.1\r\n${H}ACCEPT-ENCODING: gzip\r\n\r\n", 200, "gzipped\n", 1, {'content-encoding' => 'gzip'}],
    ['Accept-Encodinh is no Accept-Encoding', "GET /g.txt HTTP/1.1\r\n${H}Accept-Encodinh: gzip\r\n\r\n", 200, "plain\n", 1, {'content-encoding' => undef}],
    # If-Modified-Since and Transfer-Encoding (17): the first letter again.
    ['IF-MODIFIED-SINCE, a later date: 304', "${GET}${H}IF-MODIFIED-SINCE: Wed, 03 Jan 2024 00:00:00 GMT\r\n\r\n", 304, '', 1],
    ['If-Modified-Sincf is no If-Modified-Since', "${GET}${H}If-Modified-Sincf: Wed, 03 Jan 2024 00:00:00 GMT\r\n\r\n", 200, "aaa\n", 1],
    ['Tf-Modified-Since (Transfer-Encoding\'s candidate) is neither', "${GET}${H}Tf-Modified-Since: Wed, 03 Jan 2024 00:00:00 GMT\r\n\r\n", 200, "aaa\n", 1],
    ['TRANSFER-ENCODING: chunked frames the body', "${GET}${H}TRANSFER-ENCODING: chunked\r\n\r\n$CH5", 200, "aaa\n", 1],
    ['tRANSFER-eNCODING: chunked frames the body', "${GET}${H}tRANSFER-eNCODING: chunked\r\n\r\n$CH5", 200, "aaa\n", 1],
    # Neither luxd nor llhttp takes these for Transfer-Encoding: no body,
    # the chunk lines are the next request, which is no request (400).
    ['Transfer-Encodinf is no Transfer-Encoding', "${GET}${H}Transfer-Encodinf: chunked\r\n\r\n", 200, "aaa\n", 1],
    ['Iransfer-Encoding is no Transfer-Encoding', "${GET}${H}Iransfer-Encoding: chunked\r\n\r\n", 200, "aaa\n", 1],
    # Referer (7) and User-Agent: the access log says what was taken.
    ['REFERER and USER-AGENT in capitals are logged', "${GET}${H}REFERER: http://ref.test/r1\r\nUSER-AGENT: ua-probe-1\r\n\r\n", 200, "aaa\n", 1],
    ['Refered and User-Agenu are not', "${GET}${H}Refered: http://ref.test/r2\r\nUser-Agenu: ua-probe-2\r\n\r\n", 200, "aaa\n", 1],
    # Names longer than any known one, of 16 and 24 bytes (the eight-byte
    # steps), and one that starts as a known one.
    ['Transfer-Encoding-X is no Transfer-Encoding', "${GET}${H}Transfer-Encoding-X: chunked\r\n\r\n", 200, "aaa\n", 1],
    ['If-Modified-Sinc (16) is nothing', "${GET}${H}If-Modified-Sinc: Wed, 03 Jan 2024 00:00:00 GMT\r\n\r\n", 200, "aaa\n", 1],
    ['X-Transfer-Encoding-Xy (22) is nothing', "${GET}${H}X-Transfer-Encoding-Xy: chunked\r\n\r\n", 200, "aaa\n", 1],
);

sub check_name_case {
    my ($c, $case, $label, $tag) = @_;
    my ($name, $req, $status, $body, $kept, $hdrs) = @$case;
    my $r = $c->response(timeout => 5);
    my $ok = check_response($r, { status => $status, (defined $body ? (body => $body) : ()),
                                  headers => $hdrs || {} }, $label);
    return 0 unless $r && defined $r->{status};
    if ($kept) {
        my $f = $c->response(timeout => 5);
        $ok &= ok($f && ($f->{status} // 0) == 200 && $f->{body} eq "aaa\n", "$label: the follow-up is answered")
          or diag('got ' . Luxd::_short($f ? $f->{raw} : $c->buffered));
    } else {
        $ok &= ok($c->wait_closed(5), "$label: closed");
        $ok &= is($c->buffered, '', "$label: nothing after the answer");
    }
    return $ok;
}

my $tag = 0;
for my $case (@names) {
    subtest $case->[0] => sub {
        my $c = $s->connect;
        my $label = $case->[0];
        if ($label =~ /^(Transfer-Encodinf|Iransfer-Encoding)/) {
            # The chunk lines after it are the next request, and no request:
            # a 400 and a close.
            $c->send($case->[1] . $CH5);
            my $r = $c->response(timeout => 5);
            check_response($r, { status => 200, body => "aaa\n" }, $label);
            my $e = $c->response(timeout => 5);
            check_response($e, { status => 400 }, "$label: the chunk lines are no request");
            ok($c->wait_closed(5), "$label: closed");
        } else {
            $c->send($case->[1] . follow_up('n' . ++$tag));
            check_name_case($c, $case, $label);
        }
        $c->close;
    };
}

# Some of them again, each cut in two at every byte (all cuts at once, each
# on its own connection): the name may end a read, or its first letter
# start one.
my %SPLIT = map { $_ => 1 } ('HOST in capitals chooses the vhost', 'Hosu is no Host (HTTP/1.1: 400)',
    'RANGE in capitals', 'Rangf is no Range', 'cONNECTION: close closes',
    'Xonnection (User-Agent\'s candidate) is no Connection', 'IF-NONE-MATCH: * is a 304',
    'IF-MODIFIED-SINCE, a later date: 304', 'Tf-Modified-Since (Transfer-Encoding\'s candidate) is neither',
    'TRANSFER-ENCODING: chunked frames the body', 'Transfer-Encoding-X is no Transfer-Encoding');
for my $case (grep { $SPLIT{ $_->[0] } } @names) {
    my ($name, $req) = @$case;
    subtest "$name, cut at every byte" => sub {
        my @conns;
        for my $cut (1 .. length($req) - 1) {
            my $c = $s->connect;
            $c->send(substr($req, 0, $cut));
            push @conns, [$c, $cut];
        }
        sleep 0.05;
        $_->[0]->send(substr($req, $_->[1]) . follow_up('cut')) for @conns;
        my $bad = 0;
        for my $e (@conns) {
            my $ok;
            subtest "cut at $e->[1]" => sub { $ok = check_name_case($e->[0], $case, "cut at $e->[1]") };
            $bad++ unless $ok;
            $e->[0]->close;
        }
        is($bad, 0, 'every cut answered alike');
    };
}
is(scalar(grep { $SPLIT{ $_->[0] } } @names), scalar(keys %SPLIT), 'every split case is in the table');

subtest 'the access log took REFERER and USER-AGENT, and no name one letter off' => sub {
    my $deadline = time + 5;
    sleep 0.05 while $s->access_log !~ /ua-probe-1/ && time < $deadline;
    my $log = $s->access_log;
    like($log, qr{"http://ref\.test/r1" "ua-probe-1"}, 'capitals: logged');
    unlike($log, qr{ref\.test/r2|ua-probe-2}, 'Refered, User-Agenu: not logged');
};

# ---- Content-Length ---------------------------------------------------------

subtest 'Content-Length of every decimal width (GET)' => sub {
    my $c = $s->connect;
    for my $n (@SIZES) {
        $c->send("GET /s$n.bin HTTP/1.1\r\n$H\r\n");
        my $r = $c->response(timeout => 5);
        ok($r && ($r->{status} // 0) == 200 && (($r->{raw_headers} // '') . "\r\n") =~ /\r\nContent-Length: $n\r\n/
             && length($r->{body}) == $n && $r->{body} eq 'x' x $n, "$n bytes: Content-Length: $n and the body")
          or diag(Luxd::_short($r ? $r->{raw_headers} : $c->buffered));
    }
    $c->close;
};

subtest 'Content-Length past 2^32 and up to 2^63 - 1 (HEAD of sparse files)' => sub {
    my $c = $s->connect;
    for my $n (@HUGE) {
        $c->send("HEAD /h$n.bin HTTP/1.1\r\nHost: huge.test\r\n\r\n");
        my $r = $c->response(head => 1, timeout => 5);
        ok($r && ($r->{status} // 0) == 200 && (($r->{raw_headers} // '') . "\r\n") =~ /\r\nContent-Length: $n\r\n/,
           "$n bytes: Content-Length: $n")
          or diag(Luxd::_short($r ? $r->{raw_headers} : $c->buffered));
        # The last byte of it, and a length of 1 again on the same connection.
        $c->send("GET /h$n.bin HTTP/1.1\r\nHost: huge.test\r\nRange: bytes=-1\r\n\r\n");
        $r = $c->response(timeout => 5);
        my $last = Math::BigInt->new($n)->bsub(1);
        ok($r && ($r->{status} // 0) == 206 && $r->{body} eq "\0"
             && (($r->{raw_headers} // '') . "\r\n") =~ /\r\nContent-Length: 1\r\n/
             && ($r->{headers}{'content-range'} // '') eq "bytes $last-$last/$n", "$n bytes: its last byte")
          or diag(Luxd::_short($r ? $r->{raw_headers} : $c->buffered));
    }
    $c->close;
};
use Math::BigInt;

subtest 'Content-Length of the built-in pages and the test handler' => sub {
    for my $code (404, 405, 500, 503) {
        my $m = $code == 405 ? 'DELETE' : 'GET';
        my $p = $code == 404 ? '/nope' : $code == 405 ? '/a.txt' : "/t/status?code=$code";
        my $c = $s->connect;
        $c->send("$m $p HTTP/1.1\r\n$H\r\n");
        my $r = $c->response(timeout => 5);
        ok($r && ($r->{status} // 0) == $code && defined $r->{headers}{'content-length'}
             && $r->{headers}{'content-length'} == length($r->{body}), "$code: the length says the body")
          or diag(Luxd::_short($r ? $r->{raw} : $c->buffered));
        is($r && $r->{headers}{allow}, $code == 405 ? 'GET, HEAD' : undef, "$code: Allow only for 405");
        $c->close;
    }
};

# ---- bodies and the one-run parse -------------------------------------------

subtest 'a body read by a handler, none, an empty one, and the next request' => sub {
    my @cases = (
        ['no body',           "GET /t/body HTTP/1.1\r\n$H\r\n",                                  "bytes=0 fnv=cbf29ce484222325\n"],
        ['Content-Length: 0', "POST /t/body HTTP/1.1\r\n${H}Content-Length: 0\r\n\r\n",          "bytes=0 fnv=cbf29ce484222325\n"],
        ['empty chunked',     "POST /t/body HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "bytes=0 fnv=cbf29ce484222325\n"],
        ['5 bytes',           "POST /t/body HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello",     'bytes=5 fnv=' . Luxd::Stream::fnv1a64('hello') . "\n"],
        ['5 chunked bytes',   "POST /t/body HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n$CH5", 'bytes=5 fnv=' . Luxd::Stream::fnv1a64('hello') . "\n"],
        ['Expect with Content-Length: 0 gets no 100',
                              "POST /t/body HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 0\r\n\r\n", "bytes=0 fnv=cbf29ce484222325\n"],
    );
    for my $k (@cases) {
        my ($name, $req, $want) = @$k;
        # In one send with a follow-up, then the same cut at every byte.
        for my $cut (0 .. length($req) - 1) {
            my $c = $s->connect;
            if ($cut) { $c->send(substr($req, 0, $cut)); sleep 0.002; $c->send(substr($req, $cut) . follow_up('b')) }
            else      { $c->send($req . follow_up('b')) }
            my $r = $c->response(timeout => 5);
            my $f = $c->response(timeout => 5);
            my $ok = $r && ($r->{status} // 0) == 200 && $r->{body} eq $want
              && $f && ($f->{status} // 0) == 200 && $f->{body} eq "aaa\n";
            ok($ok, "$name, cut at $cut: answered, then the follow-up")
              or diag(Luxd::_short($r ? $r->{raw} . ($f ? $f->{raw} : '') : $c->buffered));
            $c->close;
            last unless $ok;
        }
    }
};

# ---- pipelining -------------------------------------------------------------

my $big = $files{'www/big.bin'};
my $mid = $files{'www/mid.bin'};
my $p8  = $files{'www/p8.txt'};

sub expect_seq {
    my ($c, $want, $name, %o) = @_;
    my $i = 0;
    for my $w (@$want) {
        $i++;
        my $r = $c->response(timeout => $o{timeout} // 10, head => $w->{head});
        my $ok = $r && ($r->{status} // 0) == $w->{status}
          && (!defined $w->{body} || md5_hex($r->{body}) eq md5_hex($w->{body}));
        ok($ok, "$name: response $i ($w->{status})")
          or diag(Luxd::_short($r ? $r->{raw_headers} . ' body ' . length($r->{body} // '') : $c->buffered));
        return 0 unless $ok;
    }
    return 1;
}

my @MIX = (
    ["GET /a.txt HTTP/1.1\r\n$H\r\n",                                        {status => 200, body => "aaa\n"}],
    ["HEAD /mid.bin HTTP/1.1\r\n$H\r\n",                                     {status => 200, head => 1, body => ''}],
    ["GET /mid.bin HTTP/1.1\r\n$H\r\n",                                      {status => 200, body => $mid}],
    ["GET /a.txt HTTP/1.1\r\n${H}Content-Length: 0\r\n\r\n",                 {status => 200, body => "aaa\n"}],
    ["GET /a.txt HTTP/1.1\r\n${H}Content-Length: 3\r\n\r\nxyz",              {status => 200, body => "aaa\n"}],
    ["GET /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {status => 200, body => "aaa\n"}],
    ["GET /nope HTTP/1.1\r\n$H\r\n",                                         {status => 404}],
    ["GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",                {status => 200, body => "aaa\n"}],
    ["GET /mid.bin HTTP/1.1\r\n${H}Range: bytes=10-19,50000-50009\r\n\r\n",  {status => 206}],
    ["POST /t/body HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello",          {status => 200, body => 'bytes=5 fnv=' . Luxd::Stream::fnv1a64('hello') . "\n"}],
    ["GET /big.bin HTTP/1.1\r\n$H\r\n",                                      {status => 200, body => $big}],
    ["GET /t/status?code=204 HTTP/1.1\r\n$H\r\n",                            {status => 204, body => ''}],
);

subtest 'pipelined: the mix in one send, read at once' => sub {
    my $c = $s->connect;
    $c->send(join '', map { $_->[0] } @MIX);
    expect_seq($c, [map { $_->[1] } @MIX], 'one send');
    $c->close;
};

subtest 'pipelined: the mix, twice, to a client with a 4 KiB receive buffer reading slowly' => sub {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send(join '', map { $_->[0] } @MIX, @MIX);
    sleep 0.5;    # the socket fills: the writer waits for it (uv_write, 16 KiB file pieces)
    expect_seq($c, [map { $_->[1] } @MIX, @MIX], 'slow client', timeout => 20);
    ok(!$c->eof, 'still open');
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    expect_seq($c, [{status => 200, body => "aaa\n"}], 'afterwards');
    $c->close;
};

subtest 'pipelined: every request cut across two sends at random places' => sub {
    srand(9);
    my $all = join '', map { $_->[0] } @MIX;
    for my $round (1 .. 8) {
        my $c = $s->connect(rcvbuf => ($round % 2 ? 4096 : 0));
        my $p = 0;
        while ($p < length $all) {
            my $n = 1 + int(rand(200));
            $c->send(substr($all, $p, $n));
            $p += $n;
            sleep 0.001 if rand() < 0.3;
        }
        expect_seq($c, [map { $_->[1] } @MIX], "round $round", timeout => 20) or last;
        $c->close;
    }
};

subtest 'the next request arrives while a long response is being written' => sub {
    my $c = $s->connect(rcvbuf => 4096);
    $c->send("GET /big.bin HTTP/1.1\r\n$H\r\n");
    sleep 0.2;
    my $next = "GET /mid.bin HTTP/1.1\r\n$H\r\n";
    $c->send(substr($next, 0, 10));    # half of it while the body goes out
    sleep 0.2;
    $c->send(substr($next, 10));
    expect_seq($c, [{status => 200, body => $big}, {status => 200, body => $mid}], 'big, then mid', timeout => 20);
    $c->close;
};

# ---- the session and its parser go to the next connection -------------------

# A request on connection A, which goes idle and gives back its session;
# connection B is accepted next and gets it (one worker, the pool is LIFO)
# with the parser as A left it. What A's request was must not show in B's.
my @FIRST = (
    ['HTTP/1.0 keep-alive', "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", {status => 200, body => "aaa\n"}],
    ['HEAD', "HEAD /a.txt HTTP/1.1\r\n$H\r\n", {status => 200, head => 1, body => ''}],
    ['a chunked body with extensions and trailers',
     "GET /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n5;a=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", {status => 200, body => "aaa\n"}],
    ['a Content-Length body', "GET /a.txt HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello", {status => 200, body => "aaa\n"}],
    ['Upgrade: websocket', "GET /a.txt HTTP/1.1\r\n${H}Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n", {status => 200, body => "aaa\n"}],
    ['100-continue, body sent', "GET /a.txt HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello", {status => 200, body => "aaa\n"}],
    ['a body read by a handler', "POST /t/body HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello", {status => 200}],
    ['an OPTIONS answered 405', "OPTIONS /a.txt HTTP/1.1\r\n$H\r\n", {status => 405}],
    ['a streamed response', "GET /t/stream?bytes=100000&piece=1000 HTTP/1.1\r\n$H\r\n", {status => 200, body => pattern(100000)}],
);
my @SECOND = (
    ['HTTP/1.0 without keep-alive closes', "GET /a.txt HTTP/1.0\r\n\r\n", {status => 200, body => "aaa\n"}, 'closed'],
    ['HTTP/1.1 without Host is 400', "GET /a.txt HTTP/1.1\r\n\r\n", {status => 400}, 'closed'],
    ['GET has its body', "GET /a.txt HTTP/1.1\r\n$H\r\n", {status => 200, body => "aaa\n"}, 'open'],
    ['a Content-Length body, then the next', "GET /a.txt HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\nhi", {status => 200, body => "aaa\n"}, 'open'],
    ['a chunked body, then the next', "GET /a.txt HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n$CH5", {status => 200, body => "aaa\n"}, 'open'],
    ['Connection: close closes', "GET /a.txt HTTP/1.1\r\n${H}Connection: close\r\n\r\n", {status => 200, body => "aaa\n"}, 'closed'],
    ['a bad request is 400', "GET /a.txt HTTP/1.1\r\n${H}Content-Length: 1\r\nContent-Length: 2\r\n\r\n", {status => 400}, 'closed'],
);

subtest 'a parser kept from the last connection' => sub {
    for my $f (@FIRST) {
        for my $t (@SECOND) {
            my $name = "after $f->[0]: $t->[0]";
            my $a = $s->connect;
            $a->send($f->[1]);
            my $ok = expect_seq($a, [$f->[2]], "$name (A)");
            sleep 0.02;    # A is idle: its session is back in the pool
            my $b = $s->connect;
            $b->send($t->[1] . ($t->[3] eq 'open' ? follow_up('p') : ''));
            $ok &&= expect_seq($b, [$t->[2]], "$name (B)");
            if ($t->[3] eq 'open') {
                $ok &&= expect_seq($b, [{status => 200, body => "aaa\n"}], "$name (B, follow-up)");
            } else {
                $ok &&= ok($b->wait_closed(5), "$name: B closed");
            }
            # A again, on whatever session it gets now.
            $a->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
            $ok &&= expect_seq($a, [{status => 200, body => "aaa\n"}], "$name (A again)");
            $a->close;
            $b->close;
        }
    }
};

subtest 'three connections taking turns, requests of every kind, cut at random' => sub {
    srand(4);
    my @c = map { $s->connect } 1 .. 3;
    my $bad = 0;
    for my $i (1 .. 150) {
        my $k = int(rand(3));
        $c[$k] = $s->connect if $c[$k]->eof;
        my $m = $MIX[int(rand(@MIX))];
        next if $m->[0] =~ /big\.bin/;
        my $req = $m->[0];
        my $cut = int(rand(length $req));
        if ($cut) { $c[$k]->send(substr($req, 0, $cut)); sleep 0.001; $c[$k]->send(substr($req, $cut)) }
        else      { $c[$k]->send($req) }
        my $r = $c[$k]->response(timeout => 5, head => $m->[1]{head});
        my $ok = $r && ($r->{status} // 0) == $m->[1]{status}
          && (!defined $m->[1]{body} || $r->{body} eq $m->[1]{body});
        unless ($ok) {
            $bad++;
            diag("turn $i, connection $k, cut $cut: " . Luxd::_short($r ? $r->{raw_headers} : $c[$k]->buffered));
            last if $bad > 3;
        }
        sleep 0.005 if rand() < 0.5;    # let it go idle (or not) before the next turn
    }
    is($bad, 0, 'every answer right');
    $_->close for @c;
};

# ---- keep-alive and idleness ------------------------------------------------

# The server's send buffer takes up to 4 MiB: 8 MiB to a client that reads
# nothing for longer than keepalive_timeout keep the writer waiting, under
# send_timeout and not the idle deadline; idleness starts once it is out.
subtest 'a stalled download longer than keepalive_timeout, then idle' => sub {
    # A server of its own with keepalive_timeout 5 s, stalled 6 s.
    my $KA = 5;
    my $k = Luxd->new(files => { 'www/p8.txt' => $p8, 'www/a.txt' => "aaa\n" },
                      server => { keepalive_timeout => $KA, send_timeout => 20 });
    my $c = $k->connect(rcvbuf => 4096);
    $c->send("GET /p8.txt HTTP/1.1\r\n$H\r\n");
    sleep $KA + 1;    # longer than keepalive_timeout: the writer waits
    # Then read as fast as it comes: luxd has finished writing (and its idle
    # deadline runs) while about 4 MiB are still in the socket buffers, which
    # a 4 KiB window takes seconds to drain on a loaded machine. A larger
    # buffer now widens the window (up to 64 KiB).
    setsockopt($c->sock, Socket::SOL_SOCKET(), Socket::SO_RCVBUF(), pack('i', 1 << 20)) or die "SO_RCVBUF: $!";
    my $r = $c->response(timeout => 30);
    ok($r && ($r->{status} // 0) == 200 && md5_hex($r->{body} // '') eq md5_hex($p8), 'the whole body')
      or diag(Luxd::_short($r ? $r->{raw_headers} : $c->buffered));
    ok(!$c->eof, 'open after the download');
    sleep 0.5;
    # The idle deadline starts after the answer to this request: t1 before
    # it, so idle >= keepalive_timeout.
    my $t1 = time;
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    expect_seq($c, [{status => 200, body => "aaa\n"}], '0.5 s after it');
    ok($c->wait_closed(15), 'idle: closed');
    my $idle = time - $t1;
    ok($idle > $KA - 0.1 && $idle < $KA + 7, sprintf('after about keepalive_timeout (%.2f s)', $idle));
    $c->close;
    ok($k->stop, 'stopped cleanly');
};

subtest 'idle, then a request cut in bytes a little apart' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    expect_seq($c, [{status => 200, body => "aaa\n"}], 'first');
    sleep 0.3;
    $c->send($_), sleep 0.01 for split //, "GET /mid.bin HTTP/1.1\r\n$H\r\n";
    expect_seq($c, [{status => 200, body => $mid}], 'second, byte by byte');
    $c->close;
};

subtest 'idle, then the client half-closes' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    expect_seq($c, [{status => 200, body => "aaa\n"}], 'first');
    sleep 0.05;
    shutdown($c->sock, 1);
    my $t = time;
    ok($c->wait_closed(10), 'closed');
    cmp_ok(time - $t, '<', 5, 'at once (keepalive_timeout is 30 s)');
};

subtest 'a request and a half-close in one send: answered, then closed' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\nGET /mid.bin HTTP/1.1\r\n$H\r\n");
    shutdown($c->sock, 1);
    expect_seq($c, [{status => 200, body => "aaa\n"}, {status => 200, body => $mid}], 'both');
    ok($c->wait_closed(10), 'closed');
};

# ---- the output ring and partial writes --------------------------------------

subtest 'streams to a client with a 4 KiB receive buffer: the ring wraps' => sub {
    my $c = $s->connect(rcvbuf => 4096);
    for my $q ('bytes=3000000&piece=1000', 'bytes=700001&piece=7', 'bytes=2000000&piece=65536') {
        $c->send("GET /t/stream?$q HTTP/1.1\r\n$H\r\n");
        my $r = $c->response(head => 1, timeout => 10);
        ok($r && ($r->{status} // 0) == 200, "$q: 200") or last;
        my $d = read_chunked($c, 30, check => 1);
        my ($n) = $q =~ /bytes=(\d+)/;
        ok($d->{done} && !$d->{error} && !defined $d->{bad_at} && $d->{total} == $n, "$q: every byte, framed")
          or diag(join ' ', map { "$_=" . ($d->{$_} // 'undef') } qw(done error bad_at total));
    }
    $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
    expect_seq($c, [{status => 200, body => "aaa\n"}], 'afterwards');
    $c->close;
};

subtest 'sixteen ranges (the most pieces a static response has), slowly' => sub {
    my @rg = map { my $a = $_ * 60000 + 7; "$a-" . ($a + 999) } 0 .. 15;
    my $c = $s->connect(rcvbuf => 4096);
    for my $round (1 .. 3) {
        $c->send("GET /big.bin HTTP/1.1\r\n${H}Range: bytes=" . join(',', @rg) . "\r\n\r\n");
        sleep 0.2;
        my $r = $c->response(timeout => 10);
        ok($r && ($r->{status} // 0) == 206, "round $round: 206") or last;
        my @parts = $r->{body} =~ /Content-Range: bytes (\d+)-(\d+)\/\d+\r\n\r\n/g;
        is(scalar(@parts), 32, "round $round: sixteen parts");
        my $okp = 1;
        while ($r->{body} =~ /Content-Range: bytes (\d+)-(\d+)\/\d+\r\n\r\n/g) {
            my ($a, $b) = ($1, $2);
            $okp = 0 unless substr($r->{body}, pos($r->{body}), $b - $a + 1) eq substr($big, $a, $b - $a + 1);
        }
        ok($okp, "round $round: every part's bytes");
        like($r->{body}, qr/--LUXD_BYTERANGES_7c1f3a9e5d2b--\r\n\z/, "round $round: closed by the last boundary");
    }
    $c->close;
};

# Each on its own connection: a response that fits the server's send
# buffer is over for luxd at once, and the client, reading it slowly, would
# come back after keepalive_timeout (a loaded machine can make that long).
subtest 'proxied bodies to a slow client: the ring goes round' => sub {
    for my $p ('/chunked/3000000/1000', '/chunked/2000000/70000', '/ok/6000000') {
        my $c = $s->connect(rcvbuf => 4096);
        $c->send("GET $p HTTP/1.1\r\nHost: px.test\r\n\r\n");
        my ($n) = $p =~ m{^/\w+/(\d+)};
        my $t0 = time;
        my $r;
        # Slowly at first (the socket stays full, pieces queue up behind
        # the write in flight), then as fast as it comes.
        while (time - $t0 < 60) {
            $c->fill(1);
            last if $r = Luxd::parse_one(\$c->{buf}, eof => $c->eof);
            last if $c->eof;
            sleep 0.002 if time - $t0 < 1;
        }
        ok($r && ($r->{status} // 0) == 200 && length($r->{body} // '') == $n
             && md5_hex($r->{body}) eq md5_hex(body($n)), "$p: every byte")
          or diag(Luxd::_short($r ? $r->{raw_headers} . ' body ' . length($r->{body} // '') : $c->buffered));
        if ($p =~ /^\/ok/) {
            # Longer than the send buffer: luxd wrote its last bytes just
            # before they came, and the connection is still open.
            $c->send("GET /a.txt HTTP/1.1\r\n$H\r\n");
            expect_seq($c, [{status => 200, body => "aaa\n"}], 'afterwards');
        }
        $c->close;
    }
};

$s->stop;
$be->stop;
done_testing;
