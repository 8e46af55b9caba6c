# systemd integration (issue 4): Type=notify-reload datagrams on NOTIFY_SOCKET
# (READY=1 at start, RELOADING=1 + MONOTONIC_USEC then READY=1 on SIGHUP,
# STOPPING=1 on stop) and socket activation (LISTEN_PID/LISTEN_FDS: a
# listening socket passed as fd 3 is used instead of binding).
use strict;
use warnings;
use Test::More;
use Fcntl qw(F_GETFD F_SETFD FD_CLOEXEC);
use IO::Socket::INET;
use IO::Socket::UNIX;
use IO::Select;
use POSIX ();
use Socket qw(SOCK_DGRAM);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

sub config_text {
    my ($s, %o) = @_;
    my $dir = $s->dir;
    my $port = $o{port} // $s->port;
    my $g = $o{gen} // 'a';
    return <<"EOF" . ($o{extra} // '');
server {
  listen = { "127.0.0.1:$port" },
  workers = @{[ $o{workers} // 1 ]},
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
}
vhost "localhost" { default = true, root = "$dir/www", headers = { ["X-Gen"] = "$g" } }
EOF
}

# Waits for the next datagram; returns it, or undef after $timeout seconds.
sub recv_dgram {
    my ($sock, $timeout) = @_;
    return undef unless IO::Select->new($sock)->can_read($timeout // 5);
    my $buf;
    defined(recv($sock, $buf, 4096, 0)) or return undef;
    return $buf;
}

subtest 'NOTIFY_SOCKET: READY, RELOADING + READY, STOPPING' => sub {
    my $s = Luxd->new(config => "server { }\n", files => { 'www/index.html' => "home\n" }, no_start => 1);
    my $path = $s->dir . '/notify.sock';
    my $ns = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $path) or die "bind $path: $!";
    $s->write_config(config_text($s));
    local $ENV{NOTIFY_SOCKET} = $path;
    $s->start;

    my $m = recv_dgram($ns, 5);
    ok(defined $m, 'a datagram at start');
    like($m // '', qr/(^|\n)READY=1(\n|$)/, 'READY=1');
    like($m // '', qr/(^|\n)MAINPID=@{[ $s->pid ]}(\n|$)/, 'MAINPID is the server pid') if ($m // '') =~ /MAINPID/;
    is($s->get('/index.html')->{status}, 200, 'serving after READY=1');

    # A good reload: RELOADING=1 with MONOTONIC_USEC (required by
    # Type=notify-reload), then READY=1.
    $s->write_config(config_text($s, gen => 'b'));
    $s->signal('HUP');
    $m = recv_dgram($ns, 5);
    like($m // '', qr/(^|\n)RELOADING=1(\n|$)/, 'SIGHUP: RELOADING=1 first');
    my ($usec) = ($m // '') =~ /(?:^|\n)MONOTONIC_USEC=(\d+)(?:\n|$)/;
    ok(defined $usec, 'with MONOTONIC_USEC') or diag($m);
    if (defined $usec) {
        # CLOCK_MONOTONIC is shared by all processes: compare with ours.
        my $now = clock_monotonic_usec();
        ok(!defined $now || abs($now - $usec) < 10_000_000, 'MONOTONIC_USEC is CLOCK_MONOTONIC now') or diag("got $usec, now $now");
    }
    $m = recv_dgram($ns, 5);
    like($m // '', qr/(^|\n)READY=1(\n|$)/, 'then READY=1');
    is($s->get('/index.html')->{headers}{'x-gen'}, 'b', 'the new generation serves');

    # A failed reload must still end with READY=1, or systemd waits for it.
    $s->write_config(config_text($s, gen => 'c') . "vhost \"x\" { rooot = 1 }\n");
    $s->signal('HUP');
    $m = recv_dgram($ns, 5);
    like($m // '', qr/(^|\n)RELOADING=1(\n|$)/, 'bad config: RELOADING=1');
    $m = recv_dgram($ns, 5);
    like($m // '', qr/(^|\n)READY=1(\n|$)/, 'bad config: READY=1 again (still serving)');
    is($s->get('/index.html')->{headers}{'x-gen'}, 'b', 'the old generation still serves');

    $s->signal('TERM');
    $m = recv_dgram($ns, 5);
    like($m // '', qr/(^|\n)STOPPING=1(\n|$)/, 'SIGTERM: STOPPING=1');
    is($s->wait_exit(10), 0, 'exit 0');
    ok(!defined recv_dgram($ns, 0.3), 'nothing more');
    ok($s->stop, 'stopped cleanly');
};

sub clock_monotonic_usec {
    my $t = eval { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) };
    return defined $t ? int($t * 1e6) : undef;
}

# Starts luxd the way systemd does with socket activation: the listening
# socket as fd 3, LISTEN_PID = the pid that execs luxd, LISTEN_FDS = 1.
# Fills in the harness object so stop() and the log checks work as usual.
sub start_activated {
    my ($s, $lsock, %env) = @_;
    my $log = $s->dir . '/stderr.log';
    my $bin = Luxd::bin();
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $log or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        chdir $Luxd::ROOT;
        my $fd = fileno($lsock);
        # dup2 clears close-on-exec; a socket that already is fd 3 needs it cleared.
        if ($fd == 3) { fcntl($lsock, F_SETFD, 0) or POSIX::_exit(124) }
        else { defined POSIX::dup2($fd, 3) or POSIX::_exit(125) }
        $ENV{LISTEN_PID} = $$;
        $ENV{LISTEN_FDS} = 1;
        $ENV{$_} = $env{$_} for keys %env;
        { no warnings 'exec'; exec { $bin } $bin, '-c', $s->config_file; }
        print STDERR "exec $bin: $!\n";
        POSIX::_exit(127);
    }
    $s->{pid} = $pid;
    delete $s->{status};
    delete $s->{stopped};
    return $pid;
}

for my $workers (1, 2) {
    subtest "LISTEN_FDS: luxd serves on the socket it was given ($workers worker" . ($workers > 1 ? 's' : '') . ')' => sub {
        my $lsock = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 128, Proto => 'tcp', ReuseAddr => 0)
          or die "listen: $!";
        my $port = $lsock->sockport;
        my $s = Luxd->new(config => "server { }\n", files => { 'www/index.html' => "activated\n" }, no_start => 1, port => $port);
        $s->write_config(config_text($s, port => $port, workers => $workers));
        my ($ino) = (readlink("/proc/$$/fd/" . fileno($lsock)) // '') =~ /socket:\[(\d+)\]/;
        my $pid = start_activated($s, $lsock);
        close $lsock;    # only luxd holds the socket now
        ok($s->wait_log(qr/started|listening on/, 10), 'luxd started') or diag($s->error_log . $s->stderr_log);
        ok($s->alive, 'and is running (no "address in use")') or diag($s->error_log . $s->stderr_log);
        unlike($s->error_log . $s->stderr_log, qr/in use|matches no listen address/i, 'no bind error, the fd was claimed');
        my $r = $s->get('/index.html');
        is($r->{status}, 200, 'a request on the passed socket is served');
        is($r->{body}, "activated\n", 'with the right body');
        my @held = grep { (readlink($_) // '') eq "socket:[$ino]" } glob("/proc/$pid/fd/*");
        ok(defined $ino && @held >= 1, "luxd holds the very socket it was given (inode $ino, " . scalar(@held) . ' fd(s))');
        # The passed socket survives a reload (an unchanged address).
        $s->write_config(config_text($s, port => $port, workers => $workers, gen => 'b'));
        my ($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
        is($rc, 0, 'reload ok') or diag($out);
        $r = $s->get('/index.html');
        is($r->{status}, 200, 'still served after a reload');
        is($r->{headers}{'x-gen'}, 'b', 'by the new generation');
        @held = grep { (readlink($_) // '') eq "socket:[$ino]" } glob("/proc/$pid/fd/*");
        ok(@held >= 1, 'still the passed socket after the reload');
        ok(!$ENV{LISTEN_FDS}, 'the test process has no LISTEN_FDS');
        ok($s->stop, 'stopped cleanly');
    };
}

subtest 'example systemd units in conf/' => sub {
    my $svc = do { local (@ARGV, $/) = "$Luxd::ROOT/conf/luxd.service"; <> } // '';
    my $sock = do { local (@ARGV, $/) = "$Luxd::ROOT/conf/luxd.socket"; <> } // '';
    my $nr = do { local (@ARGV, $/) = "$Luxd::ROOT/conf/luxd-notify-reload.conf"; <> } // '';
    # systemd 252 (Debian 12) has no Type=notify-reload: the unit is
    # Type=notify with an ExecReload that waits, notify-reload a drop-in.
    like($svc, qr/^Type=notify$/m, 'luxd.service: Type=notify');
    like($svc, qr/^ExecStart=\S*luxd .*-c \S+/m, 'luxd.service: ExecStart runs luxd -c FILE');
    like($svc, qr/^ExecReload=\S*luxd -s reload -c \S+/m, 'luxd.service: ExecReload is luxd -s reload');
    unlike($svc, qr/^(ReloadSignal=|Type=notify-reload)/m, 'luxd.service: nothing systemd 252 refuses');
    like($nr, qr/^Type=notify-reload$/m, 'luxd-notify-reload.conf: Type=notify-reload');
    like($nr, qr/^ReloadSignal=SIGHUP$/m, 'luxd-notify-reload.conf: reload is SIGHUP');
    like($nr, qr/^ExecReload=$/m, 'luxd-notify-reload.conf: clears ExecReload (no second reload)');
    like($sock, qr/^ListenStream=\S+/m, 'luxd.socket: ListenStream');
    like($sock, qr/^\[Install\]/m, 'luxd.socket: can be enabled');
};

done_testing;
