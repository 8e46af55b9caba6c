# issue 17 #1: a response desync across clients. A HEAD whose error page
# is served by a proxied location went upstream as GET (the page made the
# method GET) but its answer was read as one to HEAD: the page's body stayed
# on the pooled connection and became the next request's answer, another
# client's. And, generally, a byte left on an upstream connection after a
# complete answer is poison: such a connection is closed, never lent, also
# when the bytes (a body after a 204, a 304 or a HEAD's answer) come in a
# later packet, and also when they came since luxd last polled (t/94 has
# the same-packet cases).
#
# The backend here is scripted (raw_backend): the page's body, to a GET, is
# held back until the next request arrives on the connection, so that a
# proxy that read the head as a HEAD's answer meets it in the next
# exchange, every run; and it is an HTTP message, so that the next client
# is handed it as its answer (a page that reflects what a client sent can
# be one). Late bodies are sent when the test says, through a pipe; the
# backend reports what it read and when luxd closed a connection on another.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend kill_backend);

$SIG{PIPE} = 'IGNORE';

my $SMUGGLED = "HTTP/1.1 200 OK\r\nX-Smuggled: yes\r\nContent-Length: 9\r\n\r\nsmuggled\n";

# A backend and the pipes to talk to it: returns [backend, ctl writer,
# event reader]. Events (lines): "req N METHOD PATH", "wrote N" (a late
# body went on connection N), "closed N" (luxd closed connection N).
sub start_backend {
    pipe(my $ctl_r, my $ctl_w) or die "pipe: $!";
    pipe(my $ev_r, my $ev_w) or die "pipe: $!";
    $ctl_w->autoflush(1);
    $ev_w->autoflush(1);
    my $be = raw_backend(sub {
        my ($c, $n) = @_;
        my $ev = sub { syswrite $ev_w, "$_[0]\n" };
        my $buf = '';
        while (1) {
            while ($buf !~ /\r\n\r\n/) {
                my $r = sysread($c, $buf, 65536, length $buf);
                if (!$r) { $ev->("closed $n"); return }
            }
            $buf =~ s/\A(.*?)\r\n\r\n//s;
            my $h = $1;
            my ($m, $p) = $h =~ /\A(\S+) (\S+)/;
            my $cl = $h =~ /^content-length:\s*(\d+)/mi ? $1 : 0;
            while (length $buf < $cl) { sysread($c, $buf, 65536, length $buf) or return }
            substr($buf, 0, $cl, '');
            $ev->("req $n $m $p");
            if ($p eq '/err/404') {
                syswrite $c, "HTTP/1.1 404 Not Found\r\nContent-Type: text/x-page\r\nX-Conn: $n\r\n"
                  . 'Content-Length: ' . length($SMUGGLED) . "\r\n\r\n";
                next if $m eq 'HEAD';
                # The body when the next request is in (or after 5 s).
                IO::Select->new($c)->can_read(5) if $buf eq '';
                syswrite $c, $SMUGGLED;
                next;
            }
            if ($p =~ m{\A/late/(204|304|head)\z}) {
                my $k = $1;
                syswrite $c, $k eq '204' ? "HTTP/1.1 204 No Content\r\nX-Conn: $n\r\n\r\n"
                  : $k eq '304'          ? "HTTP/1.1 304 Not Modified\r\nX-Conn: $n\r\nContent-Length: 9\r\n\r\n"
                  :                        "HTTP/1.1 200 OK\r\nX-Conn: $n\r\nContent-Length: 9\r\n\r\n";
                sysread($ctl_r, my $go, 1) or return;
                syswrite $c, $SMUGGLED;
                $ev->("wrote $n");
                next;
            }
            my $body = "own $m $p conn $n\n";
            syswrite $c, "HTTP/1.1 200 OK\r\nX-Conn: $n\r\nContent-Length: " . length($body) . "\r\n\r\n"
              . ($m eq 'HEAD' ? '' : $body);
        }
    });
    close $ctl_r;
    close $ev_w;
    return { be => $be, ctl => $ctl_w, ev => $ev_r, buf => '', seen => [] };
}

# Waits (5 s at most) for an event matching $re; returns it, or undef.
sub wait_event {
    my ($b, $re) = @_;
    my $deadline = time + 5;
    while (1) {
        while ($b->{buf} =~ s/\A([^\n]*)\n//) {
            my $e = $1;
            push @{ $b->{seen} }, $e;
            return $e if $e =~ $re;
        }
        my $left = $deadline - time;
        return undef if $left <= 0 || !IO::Select->new($b->{ev})->can_read($left);
        sysread($b->{ev}, $b->{buf}, 4096, length $b->{buf}) or return undef;
    }
}

sub start_luxd {
    my ($addr) = @_;
    return Luxd->new(
        config => qq{upstream "app" { "$addr", keepalive = 4 }\n} . <<'EOF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  error_pages = { [404] = "/err/404" },
  location "/err/" { proxy = "app" },
  location "/api/" { proxy = "app" },
  location "/late/" { proxy = "app" },
}
EOF
        files => { 'www/file.txt' => "static\n" },
    );
}

# Every thread of luxd stopped (SIGSTOP delivered), or undef after 5 s.
sub stopped {
    my ($pid) = @_;
    my $deadline = time + 5;
    while (time < $deadline) {
        my @st = map { my $f; open($f, '<', $_) ? scalar(<$f>) : '' } glob("/proc/$pid/task/*/stat");
        return 1 if @st && !grep { !/\) [Tt] / } @st;
        sleep 0.01;
    }
    return undef;
}

subtest 'a HEAD whose error page is proxied: the next client gets its own answer' => sub {
    my $b = start_backend();
    my $s = start_luxd($b->{be}[1]);
    my $c1 = $s->connect;
    my $c2 = $s->connect;
    for my $round (1, 2) {
        $c1->send(Luxd::request(method => 'HEAD', path => '/missing'));
        my $r = $c1->response(head => 1, timeout => 5);
        is $r && $r->{status}, 404, "round $round: HEAD of a missing file: 404";
        is $r && $r->{headers}{'content-type'}, 'text/x-page', "round $round: with the page's fields";
        is $r && $r->{headers}{'content-length'}, length($SMUGGLED), "round $round: and its length";
        ok wait_event($b, qr{^req \d+ \S+ /err/404$}), "round $round: the page was asked for";
        is $b->{seen}[-1] =~ s/^req \d+ //r, 'HEAD /err/404', "round $round: as HEAD (what its answer is read as)";
        # Another client, on the pooled connection.
        my $m = $round == 1 ? 'GET' : 'POST';
        $c2->send(Luxd::request(method => $m, path => "/api/$round", $m eq 'POST' ? (body => 'x=1') : ()));
        my $r2 = $c2->response(timeout => 8);
        is $r2 && $r2->{status}, 200, "round $round: the other client's $m: 200";
        like $r2 && $r2->{body}, qr{^own $m /api/$round conn \d+$}, "round $round: its own answer"
          or diag explain $r2;
        is $r2 && $r2->{headers}{'x-smuggled'}, undef, "round $round: not the page's body";
        is $r2 && $r2->{headers}{'x-conn'}, 1, "round $round: on the pooled connection";
        is $c1->buffered, '', "round $round: no body after the HEAD's head";
    }
    # The HEAD's client goes on too.
    $c1->send(Luxd::request(path => '/api/3'));
    my $r = $c1->response(timeout => 5);
    like $r && $r->{body}, qr{^own GET /api/3 conn \d+$}, 'the HEAD client: its next answer is its own';
    wait_event($b, qr{^req \d+ GET /api/3$});
    is scalar(grep { m{ /api/} } @{ $b->{seen} }), 3, 'every /api/ request reached the backend once';
    $_->close for $c1, $c2;
    $s->stop;
    like $s->access_log, qr{"HEAD /missing HTTP/1\.1" 404 }, 'logged as the HEAD it was';
    kill_backend($b->{be});
};

# The kinds of answer that have no body: a body after one is poison.
my @late = (['204', 'GET', 204], ['304', 'GET', 304], ['head', 'HEAD', 200]);

for my $k (@late) {
    my ($kind, $method, $status) = @$k;
    subtest "a body after a $kind answer, in a packet of its own, while the connection is idle" => sub {
        my $b = start_backend();
        my $s = start_luxd($b->{be}[1]);
        my $r = $s->http(method => $method, path => "/late/$kind", close => 0, timeout => 5);
        is $r->{status}, $status, "$kind: answered $status";
        is $r->{body} // '', '', "$kind: no body";
        print { $b->{ctl} } 'x';
        ok wait_event($b, qr/^wrote 1$/), "$kind: the backend sent a body after it";
        ok wait_event($b, qr/^closed 1$/), "$kind: luxd closed that connection on it";
        my $r2 = $s->get('/api/next');
        like $r2->{body}, qr{^own GET /api/next conn 2$}, "$kind: the next request: its own answer, a new connection";
        $s->stop;
        kill_backend($b->{be});
    };

    # The bytes came after luxd last polled: the connection is lent in the
    # same turn of its loop that reads the next client's request. luxd is
    # stopped while the request and then the bytes arrive, so that it finds
    # both at once, the request first.
    subtest "a body after a $kind answer, there when the connection is lent" => sub {
        my $b = start_backend();
        my $s = start_luxd($b->{be}[1]);
        my $c2 = $s->connect;
        $c2->send(Luxd::request(path => '/file.txt'));
        my $r0 = $c2->response(timeout => 5);
        is $r0 && $r0->{body}, "static\n", "$kind: the second client is connected and served";
        my $r = $s->http(method => $method, path => "/late/$kind", close => 0, timeout => 5);
        is $r->{status}, $status, "$kind: answered $status";
        kill 'STOP', $s->pid;
        ok stopped($s->pid), "$kind: luxd stopped";
        $c2->send(Luxd::request(path => '/api/next'));
        print { $b->{ctl} } 'x';
        ok wait_event($b, qr/^wrote 1$/), "$kind: the backend sent a body after it";
        kill 'CONT', $s->pid;
        my $r2 = $c2->response(timeout => 5);
        is $r2 && $r2->{headers}{'x-smuggled'}, undef, "$kind: the next client is not given those bytes";
        like $r2 && $r2->{body}, qr{^own GET /api/next conn 2$}, "$kind: but its own answer, on a new connection"
          or diag explain $r2;
        ok wait_event($b, qr/^closed 1$/), "$kind: the poisoned connection was closed";
        $c2->close;
        $s->stop;
        kill_backend($b->{be});
    };
}

done_testing;
