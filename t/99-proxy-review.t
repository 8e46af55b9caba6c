# The reverse proxy attacked (a review of issue 10): a hostile client, a
# hostile or broken backend, a stop or reload at the worst moment. Each
# case is one that failed before its fix; the commit that fixed it says why.
# Backends are Luxd::Backend, or a scripted one below (raw_backend) where a
# case needs bytes no well-formed server sends.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_LINGER MSG_PEEK);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr);

$SIG{PIPE} = 'IGNORE';

# A scripted backend: every accepted connection is handled by $code in a
# child process of its own ($code gets the socket and the connection's
# number). Returns [pid, addr]; kill_backend stops it.
sub raw_backend {
    my ($code) = @_;
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 128, ReuseAddr => 1)
      or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        $SIG{CHLD} = 'IGNORE';
        my $n = 0;
        while (my $c = $l->accept) {
            $n++;
            my $k = fork;
            if (defined $k && $k == 0) {
                close $l;
                $code->($c, $n);
                POSIX::_exit(0);
            }
            close $c;
        }
        POSIX::_exit(0);
    }
    my $addr = '127.0.0.1:' . $l->sockport;
    close $l;
    return [$pid, $addr];
}

sub kill_backend {
    my ($b) = @_;
    kill 'KILL', -$b->[0];
    kill 'KILL', $b->[0];
    waitpid $b->[0], 0;
}

# Reads a request head from a backend's socket.
sub read_head {
    my ($c) = @_;
    my $buf = '';
    while ($buf !~ /\r\n\r\n/) {
        my $n = sysread($c, $buf, 65536, length $buf);
        last unless $n;
    }
    return $buf;
}

sub proxy_config {
    my ($addr, $keys) = @_;
    $keys = $keys ? ", $keys" : '';
    return qq{upstream "u" { "$addr"$keys }\n}
      . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n};
}

sub rss_kb { my ($pid) = @_; my $v = `ps -o rss= -p $pid`; $v =~ s/\s+//g; return $v || 0 }

subtest 'a stop with upstream connections open: clean exit (TERM and QUIT)' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $a = $be->addr;
    for my $sig (qw(TERM QUIT)) {
        for my $what (qw(pooled in-flight)) {
            my $s = Luxd->new(config => proxy_config($a), server => { workers => 2, drain_timeout => 2 });
            my @c;
            if ($what eq 'pooled') {
                is $s->get('/ok/1')->{status}, 200, "$sig $what: a request leaves a pooled connection" for 1 .. 4;
            } else {
                for my $p ('/sleep/3000', '/slow/100000/100/1000') {
                    my $c = $s->connect;
                    $c->send(Luxd::request(path => $p));
                    push @c, $c;
                }
                sleep 0.3;
            }
            $s->signal($sig);
            my $st = $s->wait_exit(6);
            is $st, 0, "$sig with upstream connections $what: luxd exits 0";
            $s->stop(signal => 'KILL');
            $_->close for @c;
        }
    }
    $be->stop;
};

done_testing;
