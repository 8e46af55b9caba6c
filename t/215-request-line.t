# The request line's method and version (issue 17 #4, #5).
#
# Methods (RFC 9110 9.1, RFC 9112 3): a method that is a token but one luxd
# does not implement gets 501, on any location; a method that is no token
# ("GE T", control bytes, an empty one) stays 400. llhttp 8 stops at the
# first byte that no method it knows continues with, so luxd reads the rest
# of the line itself to tell the two apart; the connection closes after
# either (llhttp's state is gone).
#
# Versions (RFC 9112 2.3): HTTP/1.2 .. 1.9 are processed and answered as
# HTTP/1.1; every other major version with the syntax HTTP/D.D gets 505; a
# request line without a version (HTTP/0.9) gets 400 at once, not after
# header_timeout (RFC 9112 3: it is no request-line); malformed versions
# stay 400.
#
# Every case is sent whole and cut in two at every byte (all cuts of one
# case in parallel, each on its own connection), with a pipelined follow-up
# behind it: a case that closes must not let the follow-up run, one that
# stays open must answer it on the same connection.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MAX = 1024;
my $s = Luxd->new(
    files  => { 'www/index.html' => "<h1>home</h1>\n", 'www/a.txt' => "aaa\n" },
    # A long header_timeout: an answer that comes within the read timeout
    # (5 s) did not wait for it.
    server => { header_timeout => 60, max_header_bytes => $MAX, access_log_buffer => 0 },
);

my $H = "Host: localhost\r\n";
sub line { my ($l, $host) = @_; "$l\r\n" . ($host // $H) . "\r\n" }

# name, request bytes, status, closed (1: the answer closes the connection
# and the follow-up never runs; 0: the follow-up is answered on it).
my @cases = (
    # --- a token luxd does not implement: 501
    ['unknown method', line('FOO /a.txt HTTP/1.1'), 501, 1],
    ['lower-case method (methods are case-sensitive)', line('get /a.txt HTTP/1.1'), 501, 1],
    ['a known method and more letters', line('GETX /a.txt HTTP/1.1'), 501, 1],
    ['a WebDAV method and more letters', line('PROPFINDS /a.txt HTTP/1.1'), 501, 1],
    ['an RTSP method in an HTTP request', line('DESCRIBE /a.txt HTTP/1.1'), 501, 1],
    ['every tchar', line("!#\$%&'*+-.^_`|~09AZaz /a.txt HTTP/1.1"), 501, 1],
    ['asterisk target', line('FOO * HTTP/1.1'), 501, 1],
    ['absolute-form target', line('FOO http://localhost/a.txt HTTP/1.1'), 501, 1],
    ['HTTP/1.0', line('FOO /a.txt HTTP/1.0', ''), 501, 1],
    ['HTTP/1.5', line('FOO /a.txt HTTP/1.5'), 501, 1],
    ['an empty line before it', "\r\n" . line('FOO /a.txt HTTP/1.1'), 501, 1],
    ['LF alone after the version', "FOO /a.txt HTTP/1.1\n$H\r\n", 501, 1],
    ['and another major version: 505', line('FOO /a.txt HTTP/2.0'), 505, 1],

    # --- no method at all: 400
    ['space inside the method', line('GE T /a.txt HTTP/1.1'), 400, 1],
    ['control byte in the method', line("G\x01T /a.txt HTTP/1.1"), 400, 1],
    ['NUL in the method', line("G\0ET /a.txt HTTP/1.1"), 400, 1],
    ['DEL in the method', line("FO\x7f /a.txt HTTP/1.1"), 400, 1],
    ['8-bit byte in the method', line("FO\xe9 /a.txt HTTP/1.1"), 400, 1],
    ['@ in the method', line('G@T /a.txt HTTP/1.1'), 400, 1],
    ['[ in the method', line('GE[T /a.txt HTTP/1.1'), 400, 1],
    ['/ right after the method', line('PUT/ HTTP/1.1'), 400, 1],
    ['empty method', line(' /a.txt HTTP/1.1'), 400, 1],
    ['tab after the method', line("FOO\t/a.txt HTTP/1.1"), 400, 1],
    ['two spaces after the method', line('FOO  /a.txt HTTP/1.1'), 400, 1],
    ['space inside the target', line('FOO /a b HTTP/1.1'), 400, 1],
    ['control byte in the target', line("FOO /a\x01b HTTP/1.1"), 400, 1],
    ['unknown method, no version', "FOO /a.txt\r\n\r\n", 400, 1],
    ['unknown method, HTTP/1.10', line('FOO /a.txt HTTP/1.10'), 400, 1],
    ['unknown method, lower-case protocol', line('FOO /a.txt http/1.1'), 400, 1],
    ['unknown method, RTSP/1.0', line('FOO /a.txt RTSP/1.0'), 400, 1],
    ['unknown method, space after the version', line('FOO /a.txt HTTP/1.1 '), 400, 1],
    ['unknown method, bare CR after the version', "FOO /a.txt HTTP/1.1\rX\r\n$H\r\n", 400, 1],
    ['method alone', line('FOO'), 400, 1],

    # --- HTTP/1.2 .. 1.9: HTTP/1.1
    (map { ["HTTP/1.$_", line("GET /a.txt HTTP/1.$_"), 200, 0] } 2 .. 9),
    ['HTTP/1.5 without Host (an HTTP/1.1 request)', line('GET /a.txt HTTP/1.5', ''), 400, 1],
    ['HTTP/1.5 asking to close', line('GET /a.txt HTTP/1.5', "${H}Connection: close\r\n"), 200, 1],

    # --- every other major version: 505
    (map { my $v = $_; ["HTTP/$v", line("GET /a.txt HTTP/$v"), 505, 1] }
       qw(0.0 0.9 2.0 2.1 3.0 3.1 4.0 5.5 7.0 9.9)),
    ['h2 preface', "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, 1],

    # --- malformed versions: 400
    ['HTTP/1.10', line('GET /a.txt HTTP/1.10'), 400, 1],
    ['HTTP/10.1', line('GET /a.txt HTTP/10.1'), 400, 1],
    ['HTTP/1', line('GET /a.txt HTTP/1'), 400, 1],
    ['HTTP/1.', line('GET /a.txt HTTP/1.'), 400, 1],
    ['HTTP/1.a', line('GET /a.txt HTTP/1.a'), 400, 1],
    ['http/1.1', line('GET /a.txt http/1.1'), 400, 1],
    ['HTTP/1.1x', line('GET /a.txt HTTP/1.1x'), 400, 1],
    ['HTTP/ 1.1', line('GET /a.txt HTTP/ 1.1'), 400, 1],
    ['RTSP/1.0', line('GET /a.txt RTSP/1.0'), 400, 1],
    ['ICE/1.0', line('SOURCE /a.txt ICE/1.0'), 400, 1],
    ['RTSP method, RTSP/1.0', line('DESCRIBE /a.txt RTSP/1.0'), [400, 501], 1],
    ['no version (HTTP/0.9)', "GET /a.txt\r\n", 400, 1],
    ['no version, LF alone (HTTP/0.9)', "GET /a.txt\n", 400, 1],
    ['no version, a space after the target', "GET /a.txt \r\n", 400, 1],

    # --- empty lines before the request line (RFC 9112 2.2): CRLF and LF
    # are skipped, a bare CR is invalid (HTTPWookiee's multiple CR prefix)
    ['CRLF CRLF before the line', "\r\n\r\n" . line('GET /a.txt HTTP/1.1'), 200, 0],
    ['LF LF before the line', "\n\n" . line('GET /a.txt HTTP/1.1'), 200, 0],
    ['bare CRs before the line', "\r\r\r\r\r" . line('GET /a.txt HTTP/1.1'), 400, 1],
    ['a bare CR after a CRLF', "\r\n\r" . line('GET /a.txt HTTP/1.1'), 400, 1],
    ['LF CR before the line', "\n\r" . line('GET /a.txt HTTP/1.1'), 400, 1],
    ['bare CR before an unknown method', "\r" . line('FOO /a.txt HTTP/1.1'), 400, 1],
);

sub follow_up { my ($tag) = @_; "GET /a.txt?f=$tag HTTP/1.1\r\nHost: localhost\r\n\r\n" }

my %follow;    # follow-up tag => 1 (must run) or 0 (must not)
my $tag_n = 0;

# What one connection got back for a case; true when all of it holds.
sub check_case {
    my ($c, $case, $label) = @_;
    my ($name, $req, $status, $closed) = @$case;
    my @allowed = ref $status ? @$status : ($status);
    my $r = $c->response(timeout => 5);
    my $st = $r ? $r->{status} : undef;
    my $ok = ok(defined $st && grep({ $_ == $st } @allowed), "$label: status " . join('|', @allowed))
      or diag('got ' . ($st // 'no response') . ': ' . Luxd::_short($r ? $r->{raw} : $c->buffered));
    return 0 unless defined $st;
    $ok &= is($r->{version}, 'HTTP/1.1', "$label: answered in HTTP/1.1");
    if ($closed) {
        $ok &= is(lc($r->{headers}{connection} // ''), 'close', "$label: Connection: close");
        $ok &= ok($c->wait_closed(5), "$label: closed");
        $ok &= is($c->buffered, '', "$label: nothing after the answer") or diag(Luxd::_short($c->buffered));
    } else {
        $ok &= is($r->{body}, "aaa\n", "$label: the file");
        $ok &= ok(!defined $r->{headers}{connection}, "$label: no Connection header (HTTP/1.1 keep-alive)");
        my $f = $c->response(timeout => 5);
        $ok &= ok($f && ($f->{status} // 0) == 200 && $f->{body} eq "aaa\n", "$label: the follow-up is answered on the same connection")
          or diag('got ' . Luxd::_short($f ? $f->{raw} : $c->buffered));
    }
    return $ok;
}

for my $case (@cases) {
    my ($name, $req, $status, $closed) = @$case;
    subtest $name => sub {
        my $tag = 'c' . ++$tag_n;
        # After "Connection: close" the follow-up is never read: it must not run.
        $follow{$tag} = $closed ? 0 : 1;
        my $c = $s->connect;
        $c->send($req . follow_up($tag));
        check_case($c, $case, 'whole');
        $c->close;

        # Every cut: part one on all connections, a pause so that luxd reads
        # it alone, then the rest with the follow-up.
        my @conns;
        for my $cut (1 .. length($req) - 1) {
            my $t = 'c' . ++$tag_n;
            $follow{$t} = $closed ? 0 : 1;
            my $k = $s->connect;
            $k->send(substr($req, 0, $cut));
            push @conns, [$k, $cut, $t];
        }
        sleep 0.05;
        $_->[0]->send(substr($req, $_->[1]) . follow_up($_->[2])) for @conns;
        my $bad = 0;
        for my $e (@conns) {
            my ($k, $cut, $t) = @$e;
            my $ok;
            subtest "cut at $cut" => sub { $ok = check_case($k, $case, "cut at $cut") };
            $bad++ unless $ok;
            $k->close;
        }
        is($bad, 0, 'every cut answered alike');
    };
}

# The client of HTTP/0.9 sends its line and waits: the 400 must come then,
# not at header_timeout (60 s here), whole or cut anywhere.
subtest 'HTTP/0.9: answered at once, with nothing after the line' => sub {
    for my $req ("GET /a.txt\r\n", "GET /a.txt\n", "GET /\r\n") {
        my @conns;
        for my $cut (0 .. length($req) - 1) {
            my $c = $s->connect;
            $c->send($cut ? substr($req, 0, $cut) : $req);
            push @conns, [$c, $cut];
        }
        sleep 0.05;
        $_->[0]->send(substr($req, $_->[1])) for grep { $_->[1] } @conns;
        my $bad = 0;
        for my $e (@conns) {
            my ($c, $cut) = @$e;
            my $t0 = time;
            my $r = $c->response(timeout => 10);
            my $ok = ($r && ($r->{status} // 0) == 400) && $c->wait_closed(5);
            $bad++ unless $ok;
            diag(Luxd::_short($req) . ', cut ' . $cut . ': ' . ($r ? Luxd::_short($r->{raw}) : 'no answer after ' . sprintf('%.1f s', time - $t0)))
              unless $ok;
            $c->close;
        }
        is($bad, 0, Luxd::_short($req) . ': 400 and closed, whole and at every cut');
    }
};

# The whole request line of an unknown method counts against
# max_header_bytes: exactly at the limit it is a 501, one byte past a 414.
subtest "an unknown method's request line at max_header_bytes ($MAX) and one past" => sub {
    my $pad = $MAX - length('FOO / HTTP/1.1');
    for my $n ($pad, $pad + 1) {
        my $l = 'FOO /' . ('a' x $n) . ' HTTP/1.1';
        my $want = length($l) <= $MAX ? 501 : 414;
        for my $pieces (1, 2) {
            my $c = $s->connect;
            my $req = line($l);
            if ($pieces == 1) {
                $c->send($req);
            } else {
                $c->send(substr($req, 0, 3));
                sleep 0.05;
                $c->send(substr($req, 3));
            }
            my $r = $c->response(timeout => 5);
            is($r && $r->{status}, $want, length($l) . "-byte line, in $pieces piece(s): $want");
            ok($c->wait_closed(5), '... closed');
            $c->close;
        }
    }
};

# The witness: each follow-up ran exactly when its case left the connection
# open. A last request, logged after all the others, says the log is whole.
subtest 'access log: no follow-up ran after a closing answer' => sub {
    my $c = $s->connect;
    $c->send("GET /a.txt?f=last HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    $c->response;
    $c->close;
    my $deadline = time + 5;
    sleep 0.05 while $s->access_log !~ /f=last / && time < $deadline;
    my $log = $s->access_log;
    my %ran;
    $ran{$1}++ while $log =~ /GET \/a\.txt\?f=(c\d+) /g;
    my @wrong = grep { ($ran{$_} // 0) != $follow{$_} } sort keys %follow;
    is(scalar @wrong, 0, scalar(keys %follow) . ' follow-ups, each ran only where it should')
      or diag(join "\n", map { "$_: ran " . ($ran{$_} // 0) . ", expected $follow{$_}" } @wrong[0 .. ($#wrong < 20 ? $#wrong : 19)]);
    like($log, qr/"FOO \/a\.txt HTTP\/1\.1" 501 /, 'a 501 is logged with its request line as sent');
};

$s->stop;
done_testing;
