# make install (issue 11): the layout under DESTDIR, an edited config kept,
# the installed default config passing luxd -t and agreeing with the unit on
# its pid file and logs, systemd-analyze verify clean on the installed units
# (systemd 252 here: the old Type=notify-reload unit is refused, as a check
# that verify does look), and the README's `luxd -s reload -c conf/luxd.lua`
# against the demo config, run as `make run` runs it (only the port changed).
use strict;
use warnings;
use Test::More;
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use IO::Socket::INET;
use IO::Socket::IP;
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(sleep time);
use lib 't/lib';
use Luxd;

my $root = $Luxd::ROOT;
my $bin  = Luxd::bin();

sub slurp { my ($p) = @_; open my $fh, '<', $p or return undef; local $/; <$fh> }
sub spew  { my ($p, $t) = @_; open my $fh, '>', $p or die "$p: $!"; print $fh $t; close $fh }

# Runs a command (a list), returns (exit code, stdout and stderr together).
sub run {
    my (@cmd) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        exec @cmd or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

sub make_install {
    my (@vars) = @_;
    return run('make', '-s', '-C', $root, '--no-print-directory', 'install', @vars);
}

my $tmp = tempdir('luxd-install-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});

subtest 'make install DESTDIR= lays out the files' => sub {
    my $d = "$tmp/destdir";
    my ($rc, $out) = make_install("DESTDIR=$d");
    is $rc, 0, 'make install DESTDIR=... exits 0' or diag $out;
    unlike $out, qr/(^|\/)sh: |not found/m, 'with no shell error on the way' or diag $out;
    ok -x "$d/usr/local/sbin/luxd", 'the binary in PREFIX/sbin (PREFIX=/usr/local)';
    ok -f "$d/usr/local/share/man/man8/luxd.8", 'luxd(8)';
    ok -f "$d/usr/local/share/man/man5/luxd.lua.5", 'luxd.lua(5)';
    ok -f "$d/etc/luxd/luxd.lua", '/etc/luxd/luxd.lua';
    ok -d "$d/etc/luxd/conf.d", '/etc/luxd/conf.d/';
    ok -d "$d/var/log/luxd", '/var/log/luxd/';
    ok -f "$d/var/www/html/index.luxd-debian.html", 'the welcome page in /var/www/html';
    my $lr = slurp("$d/etc/logrotate.d/luxd") // '';
    like $lr, qr{^/var/log/luxd/\*\.log \{}m, 'logrotate: /var/log/luxd/*.log';
    like $lr, qr{postrotate\n.*/usr/local/sbin/luxd -s reopen -p /run/luxd/luxd\.pid}, 'logrotate: postrotate luxd -s reopen -p PIDFILE';
    my $svc = slurp("$d/usr/local/lib/systemd/system/luxd.service") // '';
    like $svc, qr{^ExecStart=/usr/local/sbin/luxd -c /etc/luxd/luxd\.lua$}m, 'luxd.service: ExecStart with the installed paths';
    like $svc, qr{^ExecReload=/usr/local/sbin/luxd -s reload -c /etc/luxd/luxd\.lua$}m, 'luxd.service: ExecReload waits (luxd -s reload)';
    like $svc, qr{^Type=notify$}m, 'luxd.service: Type=notify';
    ok -f "$d/usr/local/lib/systemd/system/luxd.socket", 'luxd.socket';
    like slurp("$d/usr/local/share/luxd/luxd-notify-reload.conf") // '', qr{^Type=notify-reload$}m,
      'the notify-reload drop-in, apart';

    # The pid file and the logs the config names are where the unit makes
    # directories for its user.
    my $conf = slurp("$d/etc/luxd/luxd.lua") // '';
    my ($rt)   = $svc =~ /^RuntimeDirectory=(\S+)$/m;
    my ($logs) = $svc =~ m{^ExecStartPre=\+.*install -d -o www-data -g adm -m 2750 /var/log/(\S+?)'?$}m;
    unlike $svc, qr/^LogsDirectory=/m,
      'no LogsDirectory= (systemd would chown the logs to www-data:www-data at each start)';
    is((stat "$d/var/log/luxd")[2] & 07777, 02750, 'make install: /var/log/luxd is mode 2750')
      if $> == 0;
    my ($pidf) = $conf =~ /^\s*pid_file\s*=\s*"([^"]+)"/m;
    is $pidf, "/run/$rt/luxd.pid", "pid_file is in the unit's RuntimeDirectory";
    like $conf, qr{^\s*error_log\s*=\s*"/var/log/$logs/error\.log"}m, "error_log is in the directory the unit makes";
    like $conf, qr{^\s*access_log\s*=\s*"/var/log/$logs/access\.log"}m, "access_log is in the directory the unit makes";
    my $site = slurp("$d/etc/luxd/conf.d/default.lua") // '';
    like $site, qr{^\s*root\s*=\s*"/var/www/html"}m, 'the default vhost (conf.d/default.lua) serves /var/www/html';
    like $site, qr{^\s*default\s*=\s*true}m, 'and answers any Host';
    like $conf, qr{^include "conf\.d/\*\.lua"}m, 'and includes conf.d/*.lua';

    # luxd -t on the installed config: it includes the installed conf.d/
    # (relative to the file), where default.lua is: no warning at all.
    ($rc, $out) = run($bin, '-t', '-c', "$d/etc/luxd/luxd.lua");
    is $rc, 0, 'the installed default config passes luxd -t' or diag $out;
    like $out, qr/is ok \(1 vhost/, 'it has the one default vhost' or diag $out;
    unlike $out, qr/warning/, 'and no warning' or diag $out;
    rename "$d/etc/luxd/conf.d/default.lua", "$d/default.lua.away" or die;
    ($rc, $out) = run($bin, '-t', '-c', "$d/etc/luxd/luxd.lua");
    like $out, qr/include "conf\.d\/\*\.lua" matches no file \(\Q$d\E\/etc\/luxd\/conf\.d\/\*\.lua\)/,
      'an empty conf.d/ is a warning naming the directory';
    rename "$d/default.lua.away", "$d/etc/luxd/conf.d/default.lua" or die;
    spew("$d/etc/luxd/conf.d/a.lua", qq{vhost "a.example" { root = "/var/www/a" }\n});
    ($rc, $out) = run($bin, '-t', '-c', "$d/etc/luxd/luxd.lua");
    like $out, qr/is ok \(2 vhosts/, 'a file in conf.d/ is read (2 vhosts)';
    spew("$d/etc/luxd/conf.d/b.lua", qq{vhost "b.example" { root = "/var/www/b", no_such_key = 1 }\n});
    ($rc, $out) = run($bin, '-t', '-c', "$d/etc/luxd/luxd.lua");
    is $rc, 1, 'a bad file in conf.d/ fails luxd -t';
    like $out, qr{\Q$d\E/etc/luxd/conf\.d/b\.lua:1: vhost "b\.example": unknown key "no_such_key"}, 'with its file:line';
    unlink "$d/etc/luxd/conf.d/b.lua";

    # An edited config survives a second install; the welcome page too.
    spew("$d/etc/luxd/luxd.lua", "-- edited\n$conf");
    spew("$d/var/www/html/index.luxd-debian.html", "mine\n");
    ($rc, $out) = make_install("DESTDIR=$d");
    is $rc, 0, 'a second make install exits 0' or diag $out;
    like $out, qr{keeping the existing \Q$d\E/etc/luxd/luxd\.lua}, 'and says it keeps the config';
    like slurp("$d/etc/luxd/luxd.lua") // '', qr/^-- edited\n/, 'the edited config is kept';
    is slurp("$d/var/www/html/index.luxd-debian.html"), "mine\n", 'the welcome page is kept';
    unlink "$d/etc/luxd/luxd.lua";
    ($rc, $out) = make_install("DESTDIR=$d");
    is slurp("$d/etc/luxd/luxd.lua"), $conf, 'a missing config is installed again';
};

subtest 'systemd-analyze verify on the installed units' => sub {
    my ($sa) = grep { -x } map { "$_/systemd-analyze" } split /:/, $ENV{PATH};
    ok $sa, 'systemd-analyze is installed (deps/packages-test.txt: systemd)' or return;
    # A PREFIX install, not DESTDIR: verify looks for ExecStart's binary and
    # (Documentation=) the man pages at the paths the unit names.
    my $p = "$tmp/prefix";
    my ($rc, $out) = make_install("PREFIX=$p/usr", "SYSCONFDIR=$p/etc", "LOGDIR=$p/log",
                                  "STATEDIR=$p/lib", "WWWDIR=$p/www");
    is $rc, 0, 'make install PREFIX=... exits 0' or diag $out;
    my $units = "$p/usr/lib/systemd/system";
    like slurp("$units/luxd.service") // '', qr{^ExecStart=\Q$p\E/usr/sbin/luxd -c \Q$p\E/etc/luxd/luxd\.lua$}m,
      'the unit names the installed binary and config';
    local $ENV{MANPATH} = "$p/usr/share/man";
    ($rc, $out) = run($sa, 'verify', "$units/luxd.service", "$units/luxd.socket");
    is $rc, 0, 'systemd-analyze verify luxd.service luxd.socket exits 0';
    is $out, '', 'and says nothing' or diag $out;

    # The same unit as Type=notify-reload (what conf/ shipped before): a
    # systemd older than 253 refuses it, so verify is seen to look.
    my ($ver) = (run($sa, '--version'))[1] =~ /^systemd (\d+)/m;
    my $old = slurp("$units/luxd.service");
    $old =~ s/^Type=notify$/Type=notify-reload\nReloadSignal=SIGHUP/m;
    make_path("$tmp/old");
    spew("$tmp/old/luxd.service", $old);
    ($rc, $out) = run($sa, 'verify', "$tmp/old/luxd.service");
    if ($ver < 253) {
        like $out, qr/notify-reload|ReloadSignal/, "systemd $ver: verify complains about Type=notify-reload";
    } else {
        is $out, '', "systemd $ver: the notify-reload variant verifies too" or diag $out;
    }
};

# luxd.socket's ListenStream and the installed config's listen name the same
# socket: luxd started with that socket passed (as systemd would) serves on it
# instead of binding. The port is a free one, the paths under $tmp.
subtest 'luxd.socket matches the installed config' => sub {
    my ($sa) = grep { -x } map { "$_/systemd-socket-activate" } split /:/, $ENV{PATH};
    ok $sa, 'systemd-socket-activate is installed (systemd)' or return;
    my $d = "$tmp/destdir";
    my $sock = slurp("$d/usr/local/lib/systemd/system/luxd.socket") // '';
    my @ls = $sock =~ /^ListenStream=(\S+)$/mg;
    is_deeply \@ls, ['80'], 'luxd.socket: ListenStream=80 (every address)';
    my $conf = slurp("$d/etc/luxd/luxd.lua") // '';
    like $conf, qr/^\s*listen\s*=\s*\{ ":80" \}/m, 'the config: listen = { ":80" }';

    my $try = sub {
        my ($listen_arg, $port) = @_;
        (my $c = $conf) =~ s/":80"/":$port"/;
        my $site = slurp("$d/etc/luxd/conf.d/default.lua") // '';
        $c =~ s{^include .*$}{$site}m; # the default site, in place of conf.d/
        $c =~ s{"/run/luxd/}{"$tmp/sa-}g;
        $c =~ s{"/var/log/luxd/}{"$tmp/sa-}g;
        $c =~ s{"/var/www/html"}{"$tmp/sa-www"};
        make_path("$tmp/sa-www");
        spew("$tmp/sa-www/index.html", "socket\n");
        spew("$tmp/sa.lua", $c);
        unlink "$tmp/sa-error.log";
        my $pid = fork // die "fork: $!";
        if ($pid == 0) {
            open STDIN, '<', '/dev/null';
            open STDOUT, '>', "$tmp/sa.out";
            open STDERR, '>&', \*STDOUT;
            exec $sa, '-l', $listen_arg, $bin, '-c', "$tmp/sa.lua" or POSIX::_exit(127);
        }
        my ($v4, $v6, $exited) = ('', '');
        my $deadline = time + 20;    # not 100 x 0.05 s: a loaded machine is slower
        while (time < $deadline) {
            if (waitpid($pid, WNOHANG) == $pid) { $exited = $?; last }
            my $c4 = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 1);
            if ($c4 && -s "$tmp/sa-luxd.pid") {
                print $c4 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
                local $/; $v4 = <$c4> // '';
                my $c6 = IO::Socket::IP->new(PeerAddr => '::1', PeerPort => $port, Timeout => 1);
                if ($c6) { print $c6 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; $v6 = <$c6> // '' }
                last;
            }
            sleep 0.05;
        }
        unless (defined $exited) {
            kill 'TERM', $pid;
            waitpid($pid, 0);
        }
        my $log = (slurp("$tmp/sa.out") // '') . (slurp("$tmp/sa-error.log") // '');
        return ($v4, $v6, $exited, $log);
    };
    my $port = Luxd::free_port();
    my ($v4, $v6, $exited, $log) = $try->($port, $port);
    ok !defined $exited, 'luxd starts on the passed socket' or diag $log;
    like $v4, qr{^HTTP/1\.1 200 .*\r\n\r\nsocket\n$}s, 'and serves on it over IPv4';
    like $v6, qr{^HTTP/1\.1 200 }, 'and IPv6 (one dual-stack socket, as ":80")';
    unlike $log, qr/left alone|matches no listen/i, 'the socket matched a listen address' or diag $log;
    # One past: a socket on another address than the config's; luxd must
    # bind ":PORT" itself, which the passed socket holds.
    $port = Luxd::free_port();
    ($v4, $v6, $exited, $log) = $try->("127.0.0.1:$port", $port);
    ok defined $exited && $exited != 0, 'a socket on 127.0.0.1 only does not stand for ":PORT": luxd refuses to start'
      or diag $log;
    like $log, qr/listen :$port: Address already in use/, 'saying the address is in use' or diag $log;
};

# The demo config as `make run` serves it: cwd is the tree that holds conf/,
# www/ and logs/; only the port differs.
subtest 'luxd -s reload -c conf/luxd.lua, as the README writes it' => sub {
    my $readme = slurp("$root/README") // '';
    like $readme, qr/^\s+luxd -s reload -c conf\/luxd\.lua\b/m, 'the README gives this command';
    my $site = "$tmp/site";
    make_path("$site/conf", "$site/logs");
    system('cp', '-R', "$root/www", "$site/www") == 0 or die "cp www";
    my $demo = slurp("$root/conf/luxd.lua");
    my $port = Luxd::free_port();
    my $n = ($demo =~ s/"127\.0\.0\.1:8080"/"127.0.0.1:$port"/g);
    is $n, 1, 'the demo config listens on 127.0.0.1:8080 (changed to a free port)';
    like $demo, qr/^\s*pid_file\s*=\s*"logs\/luxd\.pid"/m, 'the demo config sets pid_file = "logs/luxd.pid"';
    spew("$site/conf/luxd.lua", $demo);

    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        chdir $site or POSIX::_exit(126);
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$site/stderr.log";
        open STDERR, '>&', \*STDOUT;
        exec $bin, '-c', 'conf/luxd.lua' or POSIX::_exit(127);
    }
    my $up;
    for (1 .. 200) {
        last if waitpid($pid, WNOHANG) == $pid;
        $up = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 1) and last;
        sleep 0.05;
    }
    ok $up, 'the demo server serves' or diag slurp("$site/stderr.log");
    my $get = sub {
        my $c = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port", Timeout => 5) or return '';
        print $c "GET $_[0] HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
        local $/;
        return <$c> // '';
    };
    like $get->('/'), qr{^HTTP/1\.1 200 .*<title>luxd is running</title>}s, 'GET / is the demo page';
    like slurp("$site/logs/luxd.pid") // '', qr/^$pid\n?$/, 'logs/luxd.pid holds its pid';

    my $in_site = sub { my @c = @_; run('sh', '-c', 'cd "$0" && exec "$@"', $site, @c) };
    my ($rc, $out) = $in_site->($bin, '-s', 'reload', '-c', 'conf/luxd.lua');
    is $rc, 0, 'luxd -s reload -c conf/luxd.lua exits 0' or diag $out;
    like $out, qr/^luxd: reload ok generation 2\b/m, 'and reports generation 2';

    # A reload that fails: exit 1 with file:line, and the server goes on.
    (my $bad = $demo) =~ s/keepalive_timeout = 30,/keepalive_timeout = 30, no_such_key = 1,/ or die 'edit';
    spew("$site/conf/luxd.lua", $bad);
    ($rc, $out) = $in_site->($bin, '-s', 'reload', '-c', 'conf/luxd.lua');
    is $rc, 1, 'a bad config: luxd -s reload exits 1';
    # The server judged it (issue 17 #10): its verdict, as it logged it.
    like $out, qr{^luxd: reload failed conf/luxd\.lua:\d+: server: unknown key "no_such_key"}m, 'with file:line' or diag $out;
    like $get->('/'), qr{^HTTP/1\.1 200 }, 'still serving';
    spew("$site/conf/luxd.lua", $demo);

    # A reload the server refuses (its listen address taken), not luxd -s:
    # the outcome is the server's, read back from logs/luxd.pid.reload.
    my $busy = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1) or die "listen: $!";
    my $bport = $busy->sockport;
    (my $taken = $demo) =~ s/"127\.0\.0\.1:$port"/"127.0.0.1:$port", "127.0.0.1:$bport"/ or die 'edit';
    spew("$site/conf/luxd.lua", $taken);
    ($rc, $out) = $in_site->($bin, '-s', 'reload', '-c', 'conf/luxd.lua');
    is $rc, 1, 'a reload the server cannot do: luxd -s reload exits 1';
    like $out, qr/^luxd: reload failed\b.*127\.0\.0\.1:$bport/m, "with the server's reason" or diag $out;
    spew("$site/conf/luxd.lua", $demo);
    close $busy;

    ($rc, $out) = $in_site->($bin, '-s', 'stop', '-c', 'conf/luxd.lua');
    is $rc, 0, 'luxd -s stop -c conf/luxd.lua' or diag $out;
    my $t = time + 10;
    my $gone;
    while (time < $t) { if (waitpid($pid, WNOHANG) == $pid) { $gone = $?; last } sleep 0.05 }
    is $gone, 0, 'the server stops and exits 0';
    kill 'KILL', $pid unless defined $gone;
    ok !-e "$site/logs/luxd.pid", 'and removes its pid file';
    unlike slurp("$site/stderr.log") // '', qr/\[(alert|emerg)\]|Sanitizer|runtime error:/, 'no alert in its log';
};

done_testing;
