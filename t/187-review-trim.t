# Review of upconn.c trim() (9ce1357): the least recently used idle
# connections beyond keepalive go once idle a second. Found: when the one
# whose timer trim() cut (the tail) is closed by the backend, nothing cuts
# the next one: the rest beyond keepalive stay keepalive_timeout (subtest
# 1; subtest 2 is the same load without the backend's close, which holds).
# Two upstreams on one address: one request through the one with the
# smaller keepalive trims the other's kept connections (subtest 3).
use strict;
use warnings;
use lib 't/lib';
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use IO::Select;
use POSIX ();
use Luxd;
use Luxd::Backend qw(proxy_front upstream_idle);

# A backend whose connections can close themselves a while after an
# answer (Luxd::Backend's /close-after waits 50 ms only, too short to
# order the pool's puts around it on a loaded machine).
#   /linger/MS  200 at once; closes if no next request within MS ms
#   /slow/MS    200 after MS ms
#   anything    200 at once
# Keep-alive otherwise; logs "eof N" when the peer (luxd) closes conn N.
sub mini_backend {
    my $log = "/tmp/rev7-be-$$-" . int(rand 1e9) . '.log';
    my $port = Luxd::free_port();
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 64, ReuseAddr => 1)
      or die "listen: $!";
    my $ppid = $$;
    my $pid = fork // die;
    if ($pid == 0) {
        POSIX::setpgid(0, 0);
        $SIG{CHLD} = 'IGNORE';
        my $n = 0;
        my $sel = IO::Select->new($l);
        while (1) {
            POSIX::_exit(0) if getppid() != $ppid;
            next unless $sel->can_read(0.2);
            my $c = $l->accept or next;
            $n++;
            my $k = fork;
            if (defined $k && $k == 0) { serve($c, $n, $log, $ppid); POSIX::_exit(0) }
            close $c;
        }
    }
    close $l;
    return { pid => $pid, port => $port, addr => "127.0.0.1:$port", log => $log };
}

sub serve {
    my ($c, $n, $log, $ppid) = @_;
    my $buf = '';
    my $sel = IO::Select->new($c);
    my $linger;
    while (1) {
        POSIX::_exit(0) if getppid() == 1;
        if ($buf !~ /\r\n\r\n/) {
            my $wait = defined $linger ? $linger - time : 0.5;
            if (defined $linger && $wait <= 0) { close $c; return }
            next unless $sel->can_read($wait > 0.5 ? 0.5 : $wait);
            my $r = sysread($c, my $chunk, 65536);
            if (!$r) {
                open my $fh, '>>', $log; print $fh "eof $n\n"; close $fh;
                return;
            }
            $buf .= $chunk;
            next;
        }
        $buf =~ s/^(.*?)\r\n\r\n//s;
        my ($path) = $1 =~ m{^\S+ (\S+)};
        undef $linger;
        if ($path =~ m{/slow/(\d+)}) { sleep $1 / 1000 }
        $linger = time + $1 / 1000 if $path =~ m{/linger/(\d+)};
        syswrite $c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-Conn: $n\r\n\r\nok\n";
    }
}

sub be_stop { my ($be) = @_; kill 'KILL', -$be->{pid}; waitpid $be->{pid}, 0; unlink $be->{log} }
sub luxd_closes {
    my ($be) = @_;
    open my $fh, '<', $be->{log} or return 0;
    scalar grep { /^eof/ } <$fh>;
}

# Two slow requests on fresh connections, and meanwhile a quick one on a
# third ($quick): that one is given back first, so it is the tail that the
# slow ones' puts cut to a second. Then three idle, keepalive = 1.
sub three_idle {
    my ($s, $quick) = @_;
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => '/slow/400', close => 1)); $c } 1 .. 2;
    sleep 0.15;
    my $q = $s->connect;
    $q->send(Luxd::request(path => $quick, close => 1));
    my $r = $q->response(timeout => 5);
    my $ok = $r && $r->{status} == 200 ? 1 : 0;
    $ok += grep { my $r = $_->response(timeout => 5); $r && $r->{status} == 200 } @c;
    $_->close for @c, $q;
    $ok;
}

subtest 'DEFECT: the cut tail closed by the backend: the next beyond keepalive is not cut' => sub {
    my $be = mini_backend();
    my $s = proxy_front($be->{addr}, 'keepalive = 1, keepalive_timeout = 30', status => 1);
    my $t0 = time;
    is three_idle($s, '/linger/700'), 3, 'three answered; the quick one lingers 0.7 s at the backend';
    # Puts: quick at ~0.15 s, the slow two at ~0.4 s (the tail cut to ~1.15 s);
    # the backend closes the tail at ~0.85 s, two idle remain, keepalive 1.
    sleep $t0 + 3.0 - time;
    is upstream_idle($s), 1, 'at 3 s (2.6 s after the last use): keepalive = 1 idle';
    is luxd_closes($be), 1, 'luxd closed the one beyond keepalive';
    $s->stop;
    be_stop($be);
};

subtest 'held: the same load without the backend close' => sub {
    my $be = mini_backend();
    my $s = proxy_front($be->{addr}, 'keepalive = 1, keepalive_timeout = 30', status => 1);
    my $t0 = time;
    is three_idle($s, '/ok'), 3, 'three answered';
    sleep $t0 + 3.0 - time;
    is upstream_idle($s), 1, 'at 3 s: keepalive = 1 idle';
    is luxd_closes($be), 2, 'luxd closed the two beyond keepalive';
    $s->stop;
    be_stop($be);
};

subtest 'DEFECT (design): two upstreams on one address: a request through keepalive = 1 trims keepalive = 4' => sub {
    my $be = mini_backend();
    my $a = $be->{addr};
    my $s = Luxd->new(config => qq{upstream "a" { "$a", keepalive = 4 }\nupstream "b" { "$a", keepalive = 1 }\n}
          . qq{vhost "l" { default = true, location "/status" { status = true }, location "/a/" { proxy = "a" }, location "/" { proxy = "b" } }\n});
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => '/a/slow/200', close => 1)); $c } 1 .. 4;
    is scalar(grep { my $r = $_->response(timeout => 5); $r && $r->{status} == 200 } @c), 4, 'a burst of four through "a" (keepalive = 4)';
    $_->close for @c;
    sleep 0.2;
    is upstream_idle($s), 4, 'four idle, all kept by "a"';
    is $s->get('/b/ok')->{status}, 200, 'one request through "b" (keepalive = 1)';
    sleep 1.6;
    is upstream_idle($s), 4, '"a" still has its four idle 1.6 s later';
    is luxd_closes($be), 0, 'none closed';
    $s->stop;
    be_stop($be);
};

subtest 'held: reload to a larger keepalive while the surplus is cut' => sub {
    my $be = mini_backend();
    my $s = proxy_front($be->{addr}, 'keepalive = 1, keepalive_timeout = 30', status => 1);
    my @c = map { my $c = $s->connect; $c->send(Luxd::request(path => '/slow/100', close => 1)); $c } 1 .. 4;
    is scalar(grep { my $r = $_->response(timeout => 5); $r && $r->{status} == 200 } @c), 4, 'a burst of four';
    $_->close for @c;
    (my $t = $s->{config_text}) =~ s{keepalive = 1}{keepalive = 4};
    $s->write_config($t);
    like $s->reload // '', qr/^ok/, 'reloaded with keepalive = 4 at once';
    is $s->get('/ok')->{status}, 200, 'a request after the reload (a put with keepalive 4)';
    sleep 1.6;
    is upstream_idle($s), 4, 'all four kept';
    is luxd_closes($be), 0, 'none closed';
    $s->stop;
    be_stop($be);
};

done_testing;
