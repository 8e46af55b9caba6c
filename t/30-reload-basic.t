# Hot reload (issue 4), the basics: a reload switches headers and rules on the
# next request of an open keep-alive connection; a bad config (caught by Lua
# and validation, or only by the running server: a taken port, a log file that
# cannot be opened) changes nothing and says file:line, and `luxd -s reload`
# exits 1 with that message; listeners are diffed (added opened, removed
# closed, unchanged never re-opened); workers and user need a restart;
# SIGUSR1 and `luxd -s reopen` reopen the logs; `luxd -s stop` stops cleanly.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

# ---- helpers (kept in this file: the harness is shared) -------------------
# (config writes, SIGHUP reloads and log waits: $s->write_config, $s->reload,
# $s->wait_log in t/lib/Luxd.pm)

# A whole config: server block with the harness's usual keys, then vhosts.
sub config_text {
    my ($s, %o) = @_;
    my $dir = $s->dir;
    my @listen = map { "\"127.0.0.1:$_\"" } @{ $o{ports} || [$s->port] };
    my $extra = $o{server_extra} // '';
    my $workers = $o{workers} // 1;
    return <<"EOF" . ($o{body} // '');
server {
  listen = { @{[ join ', ', @listen ]} },
  workers = $workers,
  error_log = "$dir/error.log",
  access_log = "$dir/access.log",
  error_log_level = "info",
  pid_file = "$dir/luxd.pid",
  keepalive_timeout = 60,
  $extra
}
EOF
}


# Inodes of the sockets listening on 127.0.0.1:PORT (from /proc/net/tcp).
sub listen_inodes {
    my ($port) = @_;
    my $hex = sprintf '0100007F:%04X', $port;
    open my $fh, '<', '/proc/net/tcp' or die "/proc/net/tcp: $!";
    my @ino;
    while (<$fh>) {
        my @f = split ' ';
        push @ino, $f[9] if @f > 9 && $f[1] eq $hex && $f[3] eq '0A';
    }
    return join ',', sort @ino;
}

my $VHOST_A = <<'EOF';
vhost "localhost" {
  default = true, root = "$DIR/www",
  headers = { ["X-Gen"] = "a" },
  access = { deny { prefix = "/secret-a/" } },
}
EOF
(my $VHOST_B = $VHOST_A) =~ s/"a"/"b"/;
$VHOST_B =~ s{/secret-a/}{/secret-b/};

my %files = (
    'www/index.html'          => "home\n",
    'www/secret-a/x.txt'      => "xa\n",
    'www/secret-b/x.txt'      => "xb\n",
);

# Starts luxd with config_text(%o) (the harness would add its own server block).
sub start_server {
    my (%o) = @_;
    my $s = Luxd->new(config => "server { }\n", files => $o{files}, no_start => 1);
    my $body = $o{body} // '';
    $body =~ s/\$DIR/$s->dir/ge;
    $s->write_config(config_text($s, %o, body => $body));
    $s->start;
    return $s;
}

sub vhost { my ($s, $text) = @_; $text =~ s/\$DIR/$s->dir/ge; $text }

# ---- keep-alive connection sees the new config on its next request --------

subtest 'reload switches a header and a rule on an open keep-alive connection' => sub {
    my $s = start_server(files => \%files, body => $VHOST_A);
    my $c = $s->connect;
    my @want_a = (['/index.html', 200, 'a'], ['/secret-a/x.txt', 403, 'a'], ['/secret-b/x.txt', 200, 'a']);
    my @want_b = (['/index.html', 200, 'b'], ['/secret-a/x.txt', 200, 'b'], ['/secret-b/x.txt', 403, 'b']);
    my $round = sub {
        my ($want, $name) = @_;
        for my $w (@$want) {
            my ($path, $st, $gen) = @$w;
            ok($c->send(Luxd::request(path => $path)), "$name: send $path");
            my $r = $c->response(timeout => 5);
            ok($r, "$name: $path answered on the same connection") or return;
            is($r->{status}, $st, "$name: $path status $st");
            is($r->{headers}{'x-gen'}, $gen, "$name: $path X-Gen: $gen");
        }
    };
    $round->(\@want_a, 'before');
    $s->write_config(config_text($s, body => vhost($s, $VHOST_B)));
    my $out = $s->reload;
    like($out // 'timeout', qr/^ok generation 2 in [\d.]+ ms/, 'reload reported ok in the status file');
    ok($s->wait_log(qr/\[info\] reload: generation 2 in [\d.]+ ms \(1 vhosts?\)/), 'reload logged with generation and time')
      or diag($s->error_log);
    $round->(\@want_b, 'after SIGHUP');
    ok(!$c->eof, 'the keep-alive connection is still open');

    # Back to a through `luxd -s reload`, still on the same connection.
    $s->write_config(config_text($s, body => vhost($s, $VHOST_A)));
    my ($rc, $text) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
    is($rc, 0, 'luxd -s reload exits 0 for a good config') or diag($text);
    like($text, qr/generation 3/, 'and says which generation');
    $round->(\@want_a, 'after -s reload');
    $c->close;
    ok($s->stop, 'stopped cleanly');
};

# ---- bad configs ----------------------------------------------------------

subtest 'a bad config keeps the old one serving and says file:line' => sub {
    my $s = start_server(files => \%files, body => $VHOST_A);
    my $file = $s->config_file;
    my $good = config_text($s, body => vhost($s, $VHOST_B));
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/index.html'));
    is($c->response->{headers}{'x-gen'}, 'a', 'serving a');

    my %bad = (
        'unknown key' => [ $good =~ s/root = /rooot = /r, qr/unknown key "rooot" \(did you mean "root"\?\)/ ],
        'Lua syntax error' => [ $good . "vhost \"x.example\" { root = \"/tmp\" \n", qr/expected.*near/ ],
        'bad rule' => [ $good =~ s/deny \{ prefix = "\/secret-b\/" \}/deny { regex = "(" }/r, qr/regex|pattern|parenthes/i ],
    );
    for my $name (sort keys %bad) {
        my ($text, $what) = @{ $bad{$name} };
        # The line the error must name: the first line that differs from the good config.
        my @g = split /\n/, $good; my @b = split /\n/, $text;
        my $line = 1; $line++ while $line <= @b && $line <= @g && $g[$line - 1] eq $b[$line - 1];
        $s->write_config($text);
        my $log_before = length $s->error_log;
        my $out = $s->reload;
        like($out // 'timeout', qr/^failed \Q$file\E:\d+: /, "$name: SIGHUP: status file says failed, with file:line");
        ok($s->wait_log(qr/\[error\] reload failed, still serving generation 1: \Q$file\E:\d+: /), "$name: logged at error level with file:line")
          or diag($s->error_log);
        my $new = substr($s->error_log, $log_before);
        my ($logged) = $new =~ /reload failed, still serving generation \d+: (.*)/;
        like($logged // '', qr/^\Q$file\E:(\d+): .*$what/, "$name: the message says what is wrong");
        my ($lno) = ($logged // '') =~ /^\Q$file\E:(\d+):/;
        if ($name ne 'Lua syntax error') {
            is($lno, $line, "$name: the line number is the offending line ($line)");
        } else {
            ok(defined $lno && $lno >= $line - 1, "$name: the line number points at or after the unclosed block (line $line)")
              or diag($logged);
        }
        my ($rc, $text_out) = Luxd::run_luxd('-s', 'reload', '-c', $file);
        is($rc, 1, "$name: luxd -s reload exits 1");
        like($text_out, qr/\Q$file\E:\d+: .*$what/, "$name: luxd -s reload prints file:line and the error") or diag($text_out);
        # Still the old config, on the old connection and on a new one.
        ok($c->send(Luxd::request(path => '/secret-a/x.txt')), "$name: old connection still writable");
        my $r = $c->response(timeout => 5);
        ok($r && $r->{status} == 403 && ($r->{headers}{'x-gen'} // '') eq 'a', "$name: old connection still served by a")
          or diag(explain($r && [$r->{status}, $r->{headers}]));
        $r = $s->get('/secret-b/x.txt');
        ok($r->{status} == 200 && ($r->{headers}{'x-gen'} // '') eq 'a', "$name: new connection served by a");
        ok($s->alive, "$name: server alive");
    }

    # Failures only the running server can see (`luxd -t` passes): a new
    # listen address that is taken, log files that cannot be opened. Each
    # must change nothing, be logged as file:line: what, and make
    # `luxd -s reload` wait for the outcome and exit 1 with it.
    my $blocker = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1, Proto => 'tcp', ReuseAddr => 0)
      or die "bind: $!";
    my $taken = $blocker->sockport;
    my $dir = $s->dir;
    my $published = 0;    # good reloads so far (each uses one generation number)
    my @server_side = (
        [ 'listen address in use', config_text($s, ports => [$s->port, $taken], body => vhost($s, $VHOST_B)),
          qr/listen 127\.0\.0\.1:$taken: Address already in use/, qr/^\s*listen = / ],
        [ 'access_log in a missing directory', $good =~ s{access_log = "[^"]*"}{access_log = "$dir/no-such-dir/access.log"}r,
          qr{access_log \Q$dir\E/no-such-dir/access\.log: No such file or directory}, qr/^\s*access_log = / ],
        [ 'error_log in a missing directory', $good =~ s{error_log = "[^"]*"}{error_log = "$dir/no-such-dir/error.log"}r,
          qr{error_log \Q$dir\E/no-such-dir/error\.log: No such file or directory}, qr/^\s*error_log = / ],
    );
    for my $case (@server_side) {
        my ($name, $text, $what, $key_re) = @$case;
        my @b = split /\n/, $text;
        my ($line) = grep { $b[$_ - 1] =~ $key_re } 1 .. @b;
        $s->write_config($text);
        my ($rc0) = Luxd::run_luxd('-t', '-c', $file);
        is($rc0, 0, "$name: luxd -t cannot see it (the running server must)");
        my $log_before = length $s->error_log;
        my ($rc, $text_out) = Luxd::run_luxd('-s', 'reload', '-c', $file);
        is($rc, 1, "$name: luxd -s reload exits 1");
        like($text_out, $what, "$name: and prints the server's error") or diag($text_out);
        my $new = substr($s->error_log, $log_before);
        like($new, qr/\[error\] reload failed, still serving generation \d+: .*$what/, "$name: logged at error level")
          or diag($new);
        like($new, qr/\[error\] reload failed, still serving generation \d+: \Q$file\E:$line: .*$what/,
             "$name: the error names the config line ($file:$line: ...)")
          or diag($new);
        my $r = $s->get('/secret-a/x.txt');
        my $kept = $r->{status} == 403 && ($r->{headers}{'x-gen'} // '') eq 'a';
        ok($kept, "$name: still serving a (deny /secret-a/, X-Gen: a)")
          or diag("got $r->{status}, X-Gen: " . ($r->{headers}{'x-gen'} // '') . "; the log says:\n$new");
        unless ($kept) {
            # It was published: go back to a so the next case starts alike.
            $published++;
            $s->write_config(config_text($s, body => vhost($s, $VHOST_A)));
            $published++ if ($s->reload // '') =~ /^ok /;
        }
    }
    close $blocker;

    # Then a good one goes through, and both commands agree on success.
    $s->write_config($good);
    my ($rc, $text_out) = Luxd::run_luxd('-s', 'reload', '-c', $file);
    is($rc, 0, 'good config: luxd -s reload exits 0') or diag($text_out);
    my $want_gen = 2 + $published;
    like($text_out, qr/reload ok generation $want_gen in [\d.]+ ms/, 'failed reloads did not use up generation numbers') or diag($text_out);
    $c->send(Luxd::request(path => '/secret-b/x.txt'));
    my $r = $c->response(timeout => 5);
    ok($r && $r->{status} == 403 && $r->{headers}{'x-gen'} eq 'b', 'the old connection now sees b');
    $c->close;
    ok($s->stop, 'stopped cleanly');
};

# ---- listeners ------------------------------------------------------------

# True when a connect to the port succeeds. A connect refused says no; one
# that fails otherwise (on a loaded machine: not done within refused()'s
# 2 s, which counted as refused) is tried again, for up to 10 s.
sub accepts {
    my ($port) = @_;
    my $deadline = time + 10;
    while (1) {
        my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 5);
        if ($c) { close $c; return 1 }
        my $why = "$!";
        if ($!{ECONNREFUSED} || time >= $deadline) { diag("connect to $port: $why"); return 0 }
        diag("connect to $port: $why; again");
        sleep 0.1;
    }
}

subtest 'listeners: added opened, removed closed, unchanged kept' => sub {
    my $s = Luxd->new(config => 'server { listen = "127.0.0.1:$PORT" }', files => \%files, no_start => 1);
    my $body = vhost($s, $VHOST_A);
    my ($p1, $p2) = ($s->port, Luxd::free_port());
    my $p3 = Luxd::free_port();
    $p3 = Luxd::free_port() while $p3 == $p2;
    $s->write_config(config_text($s, ports => [$p1, $p2], body => $body, workers => 2));
    $s->start;
    ok(accepts($p2), "second port $p2 accepts at start");
    ok(refused($p3), "port $p3 not yet open");
    my $ino1 = listen_inodes($p1);
    ok($ino1 ne '', "listening sockets on $p1 found in /proc/net/tcp ($ino1)");

    # A connection to the unchanged port that is open across the reload, and
    # one that sits in the accept queue-sized window: both must be served.
    my $keep = $s->connect;
    $keep->send(Luxd::request(path => '/index.html'));
    is($keep->response->{status}, 200, 'keep-alive connection on the unchanged port');
    my $on_removed = $s->connect(port => $p2);
    $on_removed->send(Luxd::request(path => '/index.html'));
    is($on_removed->response->{headers}{'x-gen'}, 'a', "keep-alive connection on port $p2, about to be removed");

    $s->write_config(config_text($s, ports => [$p1, $p3], body => $body, workers => 2));
    my $fresh = $s->connect;    # connected just before the reload, request sent after
    my $out = $s->reload;
    like($out // 'timeout', qr/^ok /, 'reload with a changed listener set');
    ok($s->wait_log(qr/\[info\] reload: now listening on 127\.0\.0\.1:$p3/), 'logs the new address');
    ok($s->wait_log(qr/\[info\] reload: no longer listening on 127\.0\.0\.1:$p2/), 'logs the removed address');
    # Each loop closes its socket of the removed port when it adopts the new
    # generation, after the reload's verdict: wait for that (10 s).
    ok(refused($p2, 10), "removed port $p2: connection refused");
    ok(accepts($p3), "added port $p3 accepts");
    my $r;
    my $c3 = $s->connect(port => $p3);
    $c3->send(Luxd::request(path => '/index.html', close => 1));
    $r = $c3->response;
    is($r && $r->{status}, 200, "added port $p3 serves");
    $c3->close;
    is(listen_inodes($p1), $ino1, "unchanged port $p1 keeps the very same sockets (not re-opened)");
    $fresh->send(Luxd::request(path => '/index.html'));
    $r = $fresh->response(timeout => 5);
    is($r && $r->{status}, 200, 'a connection made just before the reload is served');
    $keep->send(Luxd::request(path => '/index.html'));
    $r = $keep->response(timeout => 5);
    is($r && $r->{status}, 200, 'the keep-alive connection on the unchanged port still works');
    ok(!$keep->eof, 'and stays open');
    # Closing a listener stops new connections, not the ones it accepted.
    $on_removed->send(Luxd::request(path => '/secret-a/x.txt'));
    $r = $on_removed->response(timeout => 5);
    is($r && $r->{status}, 403, "an established connection on the removed port $p2 is still served");
    $on_removed->close;
    # Many new connections to the unchanged port during a series of reloads.
    my ($errors, $n) = (0, 0);
    for my $i (1 .. 10) {
        $s->write_config(config_text($s, ports => $i % 2 ? [$p1] : [$p1, $p2], body => $body, workers => 2));
        $s->signal('HUP');
        for (1 .. 10) {
            $n++;
            my $x = eval { $s->http(path => '/index.html') };
            $errors++ unless $x && $x->{status} && $x->{status} == 200;
        }
    }
    is($errors, 0, "$n requests on new connections to the unchanged port during 10 listener-changing reloads: no errors");
    is(listen_inodes($p1), $ino1, 'unchanged port still has the very same sockets');
    $keep->close;
    $fresh->close;
    ok($s->stop, 'stopped cleanly');
};

# ---- restart-only settings --------------------------------------------------

subtest 'workers and user changes are logged as needing a restart' => sub {
    my $s = start_server(files => \%files, body => $VHOST_A, workers => 1);
    $s->write_config(config_text($s, body => vhost($s, $VHOST_B), workers => 2));
    my $out = $s->reload;
    like($out // 'timeout', qr/^ok /, 'the rest of the reload applies');
    ok($s->wait_log(qr/\[warn\] .*workers.*needs a restart/), 'workers change: [warn] ... needs a restart')
      or diag($s->error_log);
    is($s->get('/index.html')->{headers}{'x-gen'}, 'b', 'the new header is served');
    # user: a process that has dropped privileges (or never had them) cannot
    # switch users; saying so is the job.
    $s->write_config(config_text($s, body => vhost($s, $VHOST_A), workers => 1, server_extra => 'user = "nobody",'));
    $out = $s->reload;
    like($out // 'timeout', qr/^ok /, 'a user change: the rest of the reload applies');
    ok($s->wait_log(qr/\[warn\] .*user.*needs a restart/), 'user change: [warn] ... needs a restart')
      or diag($s->error_log);
    is($s->get('/index.html')->{headers}{'x-gen'}, 'a', 'the new header is served');
    ok($s->stop, 'stopped cleanly');
};

# ---- logrotate ------------------------------------------------------------

subtest 'SIGUSR1 and luxd -s reopen reopen the access and error logs' => sub {
    my $s = start_server(files => \%files, body => $VHOST_A, server_extra => 'access_log_buffer = 0,');
    my $dir = $s->dir;
    for my $how ('SIGUSR1', 'luxd -s reopen') {
        my $tag = $how eq 'SIGUSR1' ? 'usr1' : 'cmd';
        $s->get("/index.html?$tag-before") for 1 .. 3;
        my $deadline = time + 10;
        sleep 0.05 until $s->access_log =~ /$tag-before/ || time > $deadline;
        like($s->access_log, qr{GET /index\.html\?$tag-before}, "$how: lines in access.log before the rotation");
        rename "$dir/access.log", "$dir/access.log.1" or die;
        rename "$dir/error.log", "$dir/error.log.1" or die;
        if ($how eq 'SIGUSR1') {
            $s->signal('USR1');
        } else {
            my ($rc, $text) = Luxd::run_luxd('-s', 'reopen', '-c', $s->config_file);
            is($rc, 0, 'luxd -s reopen exits 0') or diag($text);
        }
        $deadline = time + 10;
        # The new error log's "logs reopened" comes after the access log was
        # switched (the file appears a moment before the server writes to it).
        sleep 0.05 until $s->error_log =~ /logs reopened/ || time > $deadline;
        ok(-e "$dir/access.log", "$how: a new access.log appears");
        ok(-e "$dir/error.log", "$how: a new error.log appears");
        $s->get("/index.html?$tag-after-$_") for 1 .. 3;
        $deadline = time + 10;
        sleep 0.1 until $s->access_log =~ /$tag-after-3/ || time > $deadline;
        my $new = $s->access_log;
        like($new, qr{GET /index\.html\?$tag-after-1 .*\n.*$tag-after-2.*\n.*$tag-after-3}, "$how: new requests are logged in the new file");
        unlike($new, qr/$tag-before/, "$how: old lines are not in the new file");
        sleep 1.2;    # give a misdirected buffer time to be flushed
        my $old = do { local (@ARGV, $/) = "$dir/access.log.1"; <> };
        like($old, qr/$tag-before/, "$how: the renamed file keeps its lines");
        unlike($old, qr/$tag-after/, "$how: nothing new goes to the renamed file");
        ok($s->wait_log(qr/logs reopened/), "$how: the new error.log has the reopen line");
        unlink "$dir/access.log.1", "$dir/error.log.1";
    }
    ok($s->stop, 'stopped cleanly');
};

# ---- luxd -s stop ---------------------------------------------------------

subtest 'luxd -s stop stops with exit 0' => sub {
    my $s = Luxd->new(files => \%files, server => { pid_file => '$DIR/luxd.pid' });
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/index.html'));
    is($c->response->{status}, 200, 'a keep-alive connection');
    my ($rc, $text) = Luxd::run_luxd('-s', 'stop', '-c', $s->config_file);
    is($rc, 0, 'luxd -s stop exits 0') or diag($text);
    my $st = $s->wait_exit(10);
    is($st, 0, 'the server exits with status 0') or diag(defined $st ? "status $st" : 'still running');
    ok($c->wait_closed(2), 'the idle keep-alive connection was closed');
    ok(refused($s->port), 'the port is closed');
    ok(!-e $s->dir . '/luxd.pid', 'the pid file is removed');
    $c->close;
    ok($s->stop, 'stopped cleanly');
};

done_testing;
