# Review of issue 17 #2 (the names of every Connection line are hop-by-hop):
# what the wider reading of Connection must not break.
#
# - A WebSocket upgrade whose "upgrade" option is on one Connection line and
#   "keep-alive" on another, in either order, both ways (client and
#   backend): the tunnel opens and carries bytes. Only the last line was
#   read before, so "Connection: Upgrade" then "Connection: keep-alive"
#   did not go upstream as an upgrade at all.
# - Connection lines that name the fields framing depends on (Host,
#   Content-Length, Transfer-Encoding, Expect): RFC 9110 7.6.1 makes them
#   hop-by-hop, but a proxy must still frame both messages right. The
#   request keeps its Host, its body and its length; the response keeps
#   its body and the connection stays in step for the next request (both
#   the client's and the pooled upstream one).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend kill_backend);

$SIG{PIPE} = 'IGNORE';

my $be = raw_backend(sub {
    my ($c, $n) = @_;
    my $buf = '';
    while (1) {
        while ($buf !~ /\r\n\r\n/) { sysread($c, $buf, 65536, length $buf) or return }
        $buf =~ s/\A(.*?\r\n)\r\n//s;
        my $h = $1;
        my ($m, $p) = $h =~ /\A(\S+) (\S+)/;
        my $body = '';
        if ($h =~ /^content-length:\s*(\d+)/mi) {
            my $cl = $1;
            while (length $buf < $cl) { sysread($c, $buf, 65536, length $buf) or return }
            $body = substr($buf, 0, $cl, '');
        } elsif ($h =~ /^transfer-encoding:\s*chunked/mi) {
            while ($buf !~ /(?:\A|\r\n)0\r\n\r\n/) { sysread($c, $buf, 65536, length $buf) or return }
            $buf =~ s/\A(.*?0\r\n\r\n)//s;
            $body = "chunked[$1]";
        }
        if ($p =~ m{\A/ws/(up-first|ka-first)\z}) {
            my @l = ("Connection: Upgrade\r\n", "Connection: keep-alive\r\n");
            @l = reverse @l if $1 eq 'ka-first';
            syswrite $c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n@l\r\n" =~ s/\r\n /\r\n/gr;
            while (sysread($c, my $x, 4096)) { syswrite $c, "echo:$x" }
            return;
        }
        if ($p eq '/resp/cl') {
            syswrite $c, "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nConnection: content-length, host\r\n"
              . "Content-Length: 5\r\nX-Conn: $n\r\n\r\nhello";
            next;
        }
        if ($p eq '/resp/te') {
            syswrite $c, "HTTP/1.1 200 OK\r\nConnection: transfer-encoding\r\nConnection: keep-alive\r\n"
              . "Transfer-Encoding: chunked\r\nX-Conn: $n\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
            next;
        }
        my $echo = "conn $n\n$h\nbody=$body\n";
        syswrite $c, "HTTP/1.1 200 OK\r\nX-Conn: $n\r\nContent-Length: " . length($echo) . "\r\n\r\n$echo";
    }
});

my $s = Luxd->new(config => qq{upstream "u" { "$be->[1]", keepalive = 4 }\n}
    . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n});

for my $order (['Upgrade', 'keep-alive'], ['keep-alive', 'Upgrade'], ['keep-alive, Upgrade', 'x-other']) {
    for my $be_order ('up-first', 'ka-first') {
        my $label = "client Connection lines (@$order), backend $be_order";
        subtest "WebSocket: $label" => sub {
            my $c = $s->connect;
            $c->send("GET /ws/$be_order HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                . join('', map { "Connection: $_\r\n" } @$order) . "X-Other: 1\r\n\r\n");
            my $r = $c->response(head => 1, timeout => 5);
            is $r && $r->{status}, 101, 'the upgrade went through: 101'
              or diag($r ? Luxd::_short($r->{raw}) : 'no answer');
            SKIP: {
                skip 'no tunnel', 1 unless $r && $r->{status} == 101;
                $c->send('ping');
                my $got = '';
                for (1 .. 50) { $c->fill(0.1); $got = $c->buffered; last if length $got >= 9 }
                is $got, 'echo:ping', 'bytes cross the tunnel both ways';
            }
            $c->close;
        };
    }
}

subtest 'a backend Connection line naming Content-Length or Transfer-Encoding: framing holds' => sub {
    my $c = $s->connect;
    $c->send(join '', map { Luxd::request(path => $_) } '/resp/cl', '/resp/te', '/after');
    my @r = $c->responses(3, timeout => 5);
    is scalar(@r), 3, 'three answers on the client connection';
    is $r[0] && $r[0]{body}, 'hello', 'Content-Length named: its body, whole';
    is $r[1] && $r[1]{body}, 'hello', 'Transfer-Encoding named: its body, whole';
    like $r[2] && $r[2]{body}, qr{\Aconn \d+\nGET /after HTTP/1\.1\r\n}, 'the next answer is its own';
    is $r[2] && $r[2]{headers}{'x-conn'}, $r[0] && $r[0]{headers}{'x-conn'}, 'on the same pooled upstream connection';
    is $c->buffered, '', 'nothing more';
    $c->close;
};

subtest 'a client Connection line naming Host, Content-Length, Transfer-Encoding, Expect: framing holds' => sub {
    my $c = $s->connect;
    $c->send("POST /cl HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n"
        . "Connection: host, content-length, transfer-encoding, expect\r\nContent-Length: 5\r\n\r\nhello"
        . "POST /te HTTP/1.1\r\nHost: localhost\r\nConnection: transfer-encoding\r\n"
        . "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        . Luxd::request(path => '/after'));
    my @r = $c->responses(3, timeout => 5);
    is scalar(@r), 3, 'three answers';
    like $r[0] && $r[0]{body}, qr{^Host: localhost\r$}m, 'Content-Length named: the backend still has the Host';
    like $r[0] && $r[0]{body}, qr{^Content-Length: 5\r$}m, '... and the length';
    like $r[0] && $r[0]{body}, qr{^body=hello$}m, '... and the body';
    like $r[1] && $r[1]{body}, qr{^body=chunked\[3\r\nabc\r\n0\r\n\r\n\]$}m, 'Transfer-Encoding named: the chunked body';
    like $r[2] && $r[2]{body}, qr{\Aconn \d+\nGET /after HTTP/1\.1\r\n.*^body=$}ms, 'the next answer is its own';
    $c->close;
};

$s->stop;
kill_backend($be);
done_testing;
