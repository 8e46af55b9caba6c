# A policy cannot desync the connection (issue 8 #12). The headers that frame
# a message belong to the server: r:set_header refuses Content-Length,
# Transfer-Encoding, Connection, Keep-Alive, Proxy-Connection, Upgrade,
# Trailer and TE (any case), and names or values that are no HTTP token /
# field value (CR, LF, NUL, DEL, separators). r:respond refuses a body on a
# 204 or 304 (an empty body is the same as none); HEAD gets no body; 1xx is
# no status a policy can answer with. Each refusal is a policy fault: a 500
# and "policy of vhost ... failed for PATH: FILE:LINE: message" in the log.
# Every case is sent with a second request pipelined behind it on the same
# connection, and the bytes that come back must parse as exactly two
# well-framed responses, the second being the static file.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

# Each case's line is tagged "-- @name" so its line number can be checked.
my $CONFIG = <<'LUA';
vhost "localhost" {
  default = true, root = "$DIR/www",
  policy = function(r) -- @policy
    local c = r.query
    if r.path ~= "/p" then return nil end
    if c == "r204body" then r:respond(204, "body after 204") return end -- @r204body
    if c == "r304body" then r:respond(304, "body after 304") return end -- @r304body
    if c == "r204tail" then return r:respond(204, "body after 204") end
    if c == "r204empty" then return r:respond(204, "") end
    if c == "r204" then return r:respond(204) end
    if c == "r304" then return r:respond(304) end
    if c == "r100" then r:respond(100) return end -- @r100
    if c == "r101" then r:respond(101, "x") return end -- @r101
    if c == "rbody" then return r:respond(200, "hello") end
    if c == "ret204" then return 204 end
    if c == "ret304" then return 304 end
    if c == "ret101" then return 101 end
    if c == "ret100" then return 100 end
    if c == "cl" then r:set_header("Content-Length", "0") return r:respond(200, "hello") end -- @cl
    if c == "cl-lower" then r:set_header("content-length", "100") return nil end -- @cl-lower
    if c == "te" then r:set_header("Transfer-Encoding", "chunked") return r:respond(200, "hello") end -- @te
    if c == "te-mixed" then r:set_header("TRANSFER-encoding", "chunked") return nil end -- @te-mixed
    if c == "conn" then r:set_header("Connection", "keep-alive") return nil end -- @conn
    if c == "keepalive" then r:set_header("Keep-Alive", "timeout=5") return nil end -- @keepalive
    if c == "pconn" then r:set_header("Proxy-Connection", "keep-alive") return nil end -- @pconn
    if c == "upgrade" then r:set_header("Upgrade", "h2c") return nil end -- @upgrade
    if c == "trailer" then r:set_header("Trailer", "X-T") return nil end -- @trailer
    if c == "te2" then r:set_header("TE", "trailers") return nil end -- @te2
    if c == "v-crlf" then r:set_header("X-A", "a\r\nContent-Length: 0") return nil end -- @v-crlf
    if c == "v-lf" then r:set_header("X-A", "a\nX-B: b") return nil end -- @v-lf
    if c == "v-cr" then r:set_header("X-A", "a\rX-B: b") return nil end -- @v-cr
    if c == "v-nul" then r:set_header("X-A", "a\0b") return nil end -- @v-nul
    if c == "v-del" then r:set_header("X-A", "a\127b") return nil end -- @v-del
    if c == "n-colon" then r:set_header("X-A: b\r\nX-C", "d") return nil end -- @n-colon
    if c == "n-space" then r:set_header("X A", "b") return nil end -- @n-space
    if c == "n-nul" then r:set_header("X-A\0", "b") return nil end -- @n-nul
    if c == "n-crlf" then r:set_header("X-A\r\n", "b") return nil end -- @n-crlf
    if c == "n-empty" then r:set_header("", "b") return nil end -- @n-empty
    if c == "redir-crlf" then r:redirect("/x\r\nContent-Length: 0") return end -- @redir-crlf
    if c == "ok-header" then r:set_header("X-Fine", "a\tb c") return nil end
    return nil
  end,
}
LUA

my %files = ('www/index.html' => "home\n", 'www/p' => "p file\n");

my $s = Luxd->new(files => \%files, config => $CONFIG, workers => 1);
my $file = $s->config_file;

sub line_of {
    my ($tag) = @_;
    my @l = split /\n/, $s->{config_text};
    for my $i (0 .. $#l) { return $i + 1 if $l[$i] =~ /-- \@\Q$tag\E$/ }
    die "no line tagged $tag";
}

# Sends the case and a pipelined GET /index.html (Connection: close) in one
# write; returns the parsed responses and whether the bytes framed cleanly.
sub pipelined {
    my ($case, %o) = @_;
    my $method = $o{method} // 'GET';
    my $c = $s->connect;
    $c->send(Luxd::request(method => $method, path => "/p?$case")
             . Luxd::request(path => '/index.html', close => 1));
    my $raw = $c->read_all(5);
    $c->close;
    my @r = Luxd::parse_responses($raw, head => [ $method eq 'HEAD' ? 1 : 0, 0 ]);
    return ($raw, @r);
}

# The checks every case shares: two responses, nothing between or after
# them, the second one the static file.
sub framed {
    my ($case, $raw, @r) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    is(scalar @r, 2, "$case: exactly two responses on the connection")
      or diag(Luxd::_short($raw));
    ok(!grep({ $_->{error} } @r), "$case: both well framed")
      or diag(join("\n", map { $_->{error} // '' } @r) . "\n" . Luxd::_short($raw));
    my $last = $r[1] // {};
    is($last->{status}, 200, "$case: the pipelined request is answered 200");
    is($last->{body}, "home\n", "$case: with its own file");
}

subtest 'refused: 500, file:line in the log, the next request intact' => sub {
    my %msg = (
        r204body => qr/a 204 response has no body/, r304body => qr/a 304 response has no body/,
        r100 => qr/r:respond: the status must be 200\.\.599, not 100/,
        r101 => qr/r:respond: the status must be 200\.\.599, not 101/,
        cl => qr/Content-Length is set by the server/, 'cl-lower' => qr/content-length is set by the server/,
        te => qr/Transfer-Encoding is set by the server/, 'te-mixed' => qr/TRANSFER-encoding is set by the server/,
        conn => qr/Connection is set by the server/, keepalive => qr/Keep-Alive is set by the server/,
        pconn => qr/Proxy-Connection is set by the server/, upgrade => qr/Upgrade is set by the server/,
        trailer => qr/Trailer is set by the server/, te2 => qr/TE is set by the server/,
        (map { ($_ => qr/r:set_header: X-A: a value cannot hold control characters/) } qw(v-crlf v-lf v-cr v-nul v-del)),
        (map { ($_ => qr/r:set_header: the name is not an HTTP token/) } qw(n-colon n-space n-nul n-crlf n-empty)),
        'redir-crlf' => qr/r:redirect: not a usable Location/,
    );
    for my $case (sort keys %msg) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 500, "$case: 500");
        ok(!defined($r[0] && $r[0]{headers}{'transfer-encoding'}), "$case: no Transfer-Encoding");
        my $cl = $r[0] ? $r[0]{hlist}{'content-length'} // [] : [];
        ok(@$cl <= 1, "$case: at most one Content-Length");
        framed($case, $raw, @r);
        my $line = line_of($case);
        ok($s->wait_log(qr/\[error\] policy of vhost "localhost" failed for \/p: \Q$file\E:$line: .*$msg{$case}/, 3, poll => 0.02),
           "$case: logged with $file:$line") or diag($s->error_log);
    }
    # `return r:respond(...)` is a tail call: the policy's frame is gone, so
    # the log names the line where the policy is defined instead.
    my ($raw, @r) = pipelined('r204tail');
    is($r[0] && $r[0]{status}, 500, 'return r:respond(204, body): 500');
    framed('r204tail', $raw, @r);
    my $line = line_of('policy');
    ok($s->wait_log(qr/\[error\] policy of vhost "localhost" failed for \/p: r:respond: a 204 response has no body \(in the policy at \Q$file\E:$line\)/, 3, poll => 0.02),
       "r204tail: logged with the policy's own $file:$line") or diag($s->error_log);
};

subtest 'a returned 1xx is no answer: 500, the next request intact' => sub {
    for my $case (qw(ret100 ret101)) {
        my ($raw, @r) = pipelined($case);
        is($r[0] && $r[0]{status}, 500, "$case: 500");
        framed($case, $raw, @r);
        (my $st = $case) =~ s/ret//;
        ok($s->wait_log(qr/\[error\] policy of vhost "localhost" returned $st, not a status; failing closed/, 3, poll => 0.02),
           "$case: logged") or diag($s->error_log);
    }
};

subtest 'answers without a body: 204, 304, HEAD' => sub {
    for my $case (qw(r204 r204empty r304 ret204 ret304)) {
        my ($raw, @r) = pipelined($case);
        my $want = $case =~ /304/ ? 304 : 204;
        is($r[0] && $r[0]{status}, $want, "$case: $want");
        ok($r[0] && !defined $r[0]{headers}{'content-length'}, "$case: no Content-Length");
        ok($r[0] && !defined $r[0]{headers}{'transfer-encoding'}, "$case: no Transfer-Encoding");
        framed($case, $raw, @r);
    }
    my ($raw, @r) = pipelined('rbody', method => 'HEAD');
    is($r[0] && $r[0]{status}, 200, 'HEAD of r:respond(200, "hello"): 200');
    is($r[0] && $r[0]{headers}{'content-length'}, 5, 'HEAD: the Content-Length of the body');
    framed('HEAD rbody', $raw, @r);
    ($raw, @r) = pipelined('rbody');
    is($r[0] && $r[0]{body}, 'hello', 'GET of the same: the body');
    framed('GET rbody', $raw, @r);
};

subtest 'an ordinary header still works' => sub {
    my ($raw, @r) = pipelined('ok-header');
    is($r[0] && $r[0]{status}, 200, 'ok-header: 200');
    is($r[0] && $r[0]{body}, "p file\n", 'the file');
    is($r[0] && $r[0]{headers}{'x-fine'}, "a\tb c", 'tab and space in a value are fine');
    framed('ok-header', $raw, @r);
};

$s->stop;

# The same headers in a config's headers = { ... } would reframe every
# response of the vhost: luxd -t refuses them with file:line.
subtest 'headers = { ... } in the config cannot set framing headers' => sub {
    for my $name ('Content-Length', 'transfer-encoding', 'Connection', 'Keep-Alive', 'Proxy-Connection',
                  'Upgrade', 'Trailer', 'TE') {
        for my $where ('vhost', 'location') {
            my $h = qq{headers = { ["X-Ok"] = "1", ["$name"] = "0" }};
            my $text = "server { listen = { \"127.0.0.1:\$PORT\" } }\n"
              . "vhost \"localhost\" {\n  default = true, root = \"\$DIR\",\n"
              . ($where eq 'vhost' ? "  $h,\n" : "  location \"/l/\" { $h },\n") . "}\n";
            my ($rc, $out, $file) = Luxd::check_config($text);
            is($rc, 1, "$where $name: luxd -t refuses it") or diag($out);
            like($out, qr/\A\Q$file\E:[34]: .*"\Q$name\E" is set by the server/, "$where $name: FILE:LINE and why")
              or diag($out);
        }
    }
    my ($rc, $out) = Luxd::check_config(qq{server { listen = { "127.0.0.1:\$PORT" } }\n}
        . qq{vhost "localhost" { default = true, root = "\$DIR", headers = { ["X-Content-Length-Note"] = "1" } }\n});
    is($rc, 0, 'a name that merely contains one is fine') or diag($out);
};

done_testing;
