# Review of issue 17 #1 on a unix-socket upstream: a pooled connection with
# bytes waiting that luxd has not read yet (they came after it last polled)
# is not lent to the next request; and the check that finds them does not
# take a quiet connection for a stale one (the pool is still used).
#
# t/200 does this over TCP; here the upstream is "unix:PATH", whose
# connections are pipes in libuv (another handle type for the same
# MSG_PEEK). luxd is stopped (SIGSTOP) while the next request and then the
# late bytes arrive, so that it finds both in one turn of its loop.
use strict;
use warnings;
use Test::More;
use IO::Select;
use IO::Socket::UNIX;
use File::Temp qw(tempdir);
use Socket qw(SOCK_STREAM);
use Time::HiRes qw(time sleep);
use POSIX ();
use lib 't/lib';
use Luxd;

$SIG{PIPE} = 'IGNORE';

my $SMUGGLED = "HTTP/1.1 200 OK\r\nX-Smuggled: yes\r\nContent-Length: 9\r\n\r\nsmuggled\n";

# A scripted backend on a unix socket: one process per connection; events
# on a pipe ("req N METHOD PATH", "wrote N", "closed N"); a late body after
# a /late/ answer goes when the test writes a byte to the control pipe.
sub start_backend {
    my $dir = tempdir('luxd-unix-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $path = "$dir/be.sock";
    my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $path, Listen => 64) or die "listen: $!";
    pipe(my $ctl_r, my $ctl_w) or die;
    pipe(my $ev_r, my $ev_w) or die;
    $ctl_w->autoflush(1);
    $ev_w->autoflush(1);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        $SIG{CHLD} = 'IGNORE';
        my $n = 0;
        while (1) {
            my $c = $l->accept or next;
            $n++;
            my $k = fork;
            if (defined $k && $k == 0) {
                close $l;
                eval { serve($c, $n, $ctl_r, $ev_w) };
                POSIX::_exit(0);
            }
            close $c;
        }
    }
    close $l;
    close $ctl_r;
    close $ev_w;
    return { pid => $pid, addr => "unix:$path", ctl => $ctl_w, ev => $ev_r, buf => '', seen => [] };
}

sub serve {
    my ($c, $n, $ctl_r, $ev_w) = @_;
    my $ev = sub { syswrite $ev_w, "$_[0]\n" };
    my $buf = '';
    while (1) {
        while ($buf !~ /\r\n\r\n/) {
            my $r = sysread($c, $buf, 65536, length $buf);
            if (!$r) { $ev->("closed $n"); return }
        }
        $buf =~ s/\A(.*?)\r\n\r\n//s;
        my ($m, $p) = $1 =~ /\A(\S+) (\S+)/;
        $ev->("req $n $m $p");
        if ($p =~ m{\A/late/(204|head)\z}) {
            syswrite $c, $1 eq '204' ? "HTTP/1.1 204 No Content\r\nX-Conn: $n\r\n\r\n"
              : "HTTP/1.1 200 OK\r\nX-Conn: $n\r\nContent-Length: 9\r\n\r\n";
            sysread($ctl_r, my $go, 1) or return;
            syswrite $c, $SMUGGLED;
            $ev->("wrote $n");
            next;
        }
        my $body = "own $m $p conn $n\n";
        syswrite $c, "HTTP/1.1 200 OK\r\nX-Conn: $n\r\nContent-Length: " . length($body) . "\r\n\r\n"
          . ($m eq 'HEAD' ? '' : $body);
    }
}

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

sub stop_backend { my ($b) = @_; kill 'KILL', -$b->{pid}; kill 'KILL', $b->{pid}; waitpid $b->{pid}, 0 }

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

sub start_luxd {
    my ($addr) = @_;
    Luxd->new(
        config => qq{upstream "app" { "$addr", keepalive = 4 }\n} . <<'EOF',
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  location "/api/" { proxy = "app" },
  location "/late/" { proxy = "app" },
}
EOF
        files => { 'www/file.txt' => "static\n" },
    );
}

subtest 'a quiet pooled unix-socket connection is lent again' => sub {
    my $b = start_backend();
    my $s = start_luxd($b->{addr});
    my $c = $s->connect;
    for my $i (1 .. 5) {
        $c->send(Luxd::request(path => "/api/$i"));
        my $r = $c->response(timeout => 5);
        like $r && $r->{body}, qr{^own GET /api/$i conn 1$}, "request $i: on the first connection";
    }
    $c->close;
    $s->stop;
    stop_backend($b);
};

for my $k (['204', 'GET', 204], ['head', 'HEAD', 200]) {
    my ($kind, $method, $status) = @$k;
    subtest "unix socket: a body after a $kind answer, there when the connection is lent" => sub {
        my $b = start_backend();
        my $s = start_luxd($b->{addr});
        my $c2 = $s->connect;
        $c2->send(Luxd::request(path => '/file.txt'));
        my $r0 = $c2->response(timeout => 5);
        is $r0 && $r0->{body}, "static\n", 'the second client is connected';
        my $r = $s->http(method => $method, path => "/late/$kind", close => 0, timeout => 5);
        is $r->{status}, $status, "answered $status";
        kill 'STOP', $s->pid;
        ok stopped($s->pid), 'luxd stopped';
        $c2->send(Luxd::request(path => '/api/next'));
        print { $b->{ctl} } 'x';
        ok wait_event($b, qr/^wrote 1$/), "the backend sent a body after it" or diag "@{ $b->{seen} }";
        kill 'CONT', $s->pid;
        my $r2 = $c2->response(timeout => 5);
        is $r2 && $r2->{headers}{'x-smuggled'}, undef, 'the next client is not given those bytes';
        like $r2 && $r2->{body}, qr{^own GET /api/next conn 2$}, 'but its own answer, on a new connection'
          or diag explain $r2;
        ok wait_event($b, qr/^closed 1$/), 'the poisoned connection was closed';
        $c2->close;
        $s->stop;
        stop_backend($b);
    };
}

done_testing;
