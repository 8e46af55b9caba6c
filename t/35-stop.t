# Stopping (issue 4): SIGQUIT stops at once, cutting a download in flight; a
# second SIGTERM during a graceful stop stops at once; drain_timeout bounds a
# graceful stop held up by a stuck client, and how long an old generation may
# live after a reload.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $SIZE = 24 * 1024 * 1024;
my $big = join '', map { pack('N', $_) x 256 } 0 .. $SIZE / 1024 - 1;
my %files = ('www/index.html' => "home\n", 'www/big.bin' => $big);


# Starts a download through a small receive window and reads its first bytes,
# so the rest is in flight (the server's send buffer is full).
sub start_download {
    my ($s) = @_;
    my $c = $s->connect(rcvbuf => 16384);
    $c->send("GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n");
    my $got = 0;
    while ($got < 128 * 1024) { my $n = $c->fill(10); last unless $n; $got += $n }
    return ($c, $got);
}

# Reads what is left (up to $timeout s); returns the body bytes received and
# whether the connection was closed.
sub drain_download {
    my ($c, $timeout) = @_;
    my $data = $c->read_all($timeout);
    my ($r) = parse_responses($data);
    return (length($r->{body} // ''), $c->eof);
}

# Waits up to $timeout s until luxd has read all that $c sent: the server's
# end of the connection (in /proc/net/tcp) has an empty receive queue.
sub wait_read {
    my ($s, $c, $timeout) = @_;
    my ($lport, $cport) = (sprintf('%04X', $s->port), sprintf('%04X', $c->sock->sockport));
    my $deadline = time + $timeout;
    while (time < $deadline) {
        open my $fh, '<', '/proc/net/tcp' or return 0;
        while (<$fh>) {
            my (undef, $local, $remote, undef, $queues) = split ' ';
            next unless $local =~ /:$lport$/ && $remote =~ /:$cport$/;
            return 1 if $queues =~ /:0+$/;
        }
        sleep 0.02;
    }
    return 0;
}

sub wait_dead {
    my ($s, $timeout) = @_;
    my $t0 = time;
    my $st = $s->wait_exit($timeout);
    return ($st, time - $t0);
}

subtest 'SIGQUIT stops at once, cutting a slow download' => sub {
    my $s = Luxd->new(files => \%files, server => { send_timeout => 60, drain_timeout => 30 });
    my ($c, $got) = start_download($s);
    ok($got > 0, "the download started ($got bytes)");
    $s->signal('QUIT');
    # A graceful stop would wait drain_timeout (30 s) for this download: 5 s
    # tells "at once" from that on a loaded machine.
    my ($st, $took) = wait_dead($s, 10);
    ok(defined $st, 'the server exited') or diag('still running 10 s after SIGQUIT');
    cmp_ok($took, '<', 5, 'within 5 s') if defined $st;
    is($st, 0, 'exit status 0');
    my ($body, $closed) = drain_download($c, 20);
    ok($closed, 'the download connection was closed');
    cmp_ok($body, '<', $SIZE, "the download was cut ($body of $SIZE bytes)");
    like($s->error_log, qr/SIGQUIT|immediate/i, 'logged as an immediate stop');
    ok(refused($s->port), 'port closed');
    ok($s->stop, 'stopped cleanly');
};

subtest 'a second SIGTERM during a graceful stop stops at once' => sub {
    my $s = Luxd->new(files => \%files, server => { send_timeout => 60, drain_timeout => 30 });
    my ($c, $got) = start_download($s);
    ok($got > 0, 'the download started');
    $s->signal('TERM');
    # The listener closes once the worker has taken the signal; wait for
    # that, then give a stop that does not wait a moment to show itself.
    ok(refused($s->port, 10), 'after the first SIGTERM it accepts no new connections');
    sleep 0.5;
    ok($s->alive, 'after the first SIGTERM the server waits for the download');
    $s->signal('TERM');
    my ($st, $took) = wait_dead($s, 10);
    ok(defined $st, 'the second SIGTERM stops it') or diag('still running 10 s after the second SIGTERM');
    cmp_ok($took, '<', 5, 'within 5 s (drain_timeout is 30)') if defined $st;
    is($st, 0, 'exit status 0');
    my ($body, $closed) = drain_download($c, 20);
    ok($closed, 'the download connection was closed');
    cmp_ok($body, '<', $SIZE, "the download was cut ($body of $SIZE bytes)");
    ok($s->stop, 'stopped cleanly');
};

subtest 'drain_timeout = 3 bounds a graceful stop held up by a stuck client' => sub {
    # 3 s: luxd checks the drain deadline on its 1 s tick (so it exits 3-4 s
    # after the signal), and t0 is taken before forking `luxd -s stop`.
    my $s = Luxd->new(files => \%files, server => { send_timeout => 60, drain_timeout => 3 });
    my ($c, $got) = start_download($s);    # and then never reads again
    ok($got > 0, 'the download started');
    my $idle = $s->connect;                 # an idle keep-alive client too
    $idle->send(Luxd::request(path => '/index.html'));
    is($idle->response->{status}, 200, 'idle keep-alive connection');
    my $t0 = time;
    my ($rc, $out) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    is($rc, 0, 'luxd -s stop exits 0') or diag($out);
    my $t1 = time;    # the signal has been sent
    ok($idle->wait_closed(10), 'the idle connection is closed');
    cmp_ok(time - $t1, '<', 2.5, '... at once, not at drain_timeout');
    ok($s->alive, 'the server waits for the stuck download');
    my $st = $s->wait_exit(10);
    my $took = time - $t0;
    ok(defined $st, 'then exits') or diag('still running 10 s after the stop');
    ok($took >= 2.9 && $took <= 9, sprintf('after about drain_timeout (3-9 s): %.2f s', $took));
    is($st, 0, 'exit status 0');
    my ($body, $closed) = drain_download($c, 20);
    ok($closed, 'the stuck connection was closed');
    cmp_ok($body, '<', $SIZE, 'and its download cut');
    like($s->error_log, qr/\[warn\] .*drain timeout/, 'the drain timeout is logged');
    ok($s->stop, 'stopped cleanly');
};

subtest 'without drain_timeout pressure a graceful stop lets the download finish' => sub {
    # The counterpart of the two above: the same download, read to the end.
    my $s = Luxd->new(files => \%files, server => { send_timeout => 60, drain_timeout => 30 });
    my ($c, $got) = start_download($s);
    $s->signal('TERM');
    my $r = $c->response(timeout => 30);
    ok($r && $r->{status} == 200 && length($r->{body}) == $SIZE && $r->{body} eq $big, 'the download completes byte-exact');
    my ($st) = wait_dead($s, 10);
    is($st, 0, 'then the server exits 0');
    ok($s->stop, 'stopped cleanly');
};

subtest 'drain_timeout bounds how long an old generation lives after a reload' => sub {
    # The issue: "a drain limit bounds how long an old generation may live";
    # spec: drain_timeout is what "a stopping or reloading server waits for
    # requests in flight". A static response releases its generation once it
    # is queued, so the holder here is a request whose body trickles in (the
    # body deadline restarts with every byte): it keeps generation 1 for as
    # long as the client likes unless the drain limit ends it.
    my $s = Luxd->new(files => \%files,
        config => qq{vhost "localhost" { default = true, root = "\$DIR/www", headers = { ["X-Gen"] = "1" } }\n},
        server => { drain_timeout => 1, body_timeout => 10, error_log_level => 'debug' });
    my $c = $s->connect;
    $c->send("POST /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n" . ('x' x 10));
    # The request must hold generation 1 when the reload lands: wait until
    # luxd has read it (a fixed 0.2 s could be too short on a loaded machine).
    ok(wait_read($s, $c, 10), 'luxd has read the start of the request');
    (my $cfg = $s->file('luxd.lua')) =~ s/\["X-Gen"\] = "1"/["X-Gen"] = "2"/ or die;
    $s->write_file('luxd.lua', $cfg);
    my ($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
    is($rc, 0, 'reload ok') or diag($out);
    is($s->get('/index.html')->{headers}{'x-gen'}, '2', 'new connections get generation 2');
    my $t0 = time;
    my ($closed, $drained, $sent) = (0, 0, 10);
    while (time - $t0 < 10) {
        $c->send('x') and $sent++;
        $c->fill(0.25);
        $closed = 1, last if $c->eof;
        $drained = 1, last if $s->error_log =~ /generation 1 drained/;
    }
    my $took = time - $t0;
    ok($closed || $drained, sprintf('generation 1 is released within 10 s of the reload (drain_timeout = 1): %s after %.1f s',
                                    $closed ? 'connection closed' : $drained ? 'generation drained' : 'neither', $took))
      or diag("the request of generation 1 is still reading its body ($sent of 1000 bytes) and holds generation 1");
    unless ($closed || $drained) {
        # Finish the body: the request completes as generation 1's, which
        # shows it held generation 1 all along.
        $c->send('x' x (1000 - $sent));
        my $r = $c->response(timeout => 5);
        diag('the trickled request, finished ' . sprintf('%.1f', time - $t0) . ' s after the reload, was answered with X-Gen: '
             . ($r ? $r->{headers}{'x-gen'} // 'none' : 'no response'));
    }
    ok($s->alive, 'the server keeps running');
    $c->close;
    ok($s->stop, 'stopped cleanly');
};

done_testing;
