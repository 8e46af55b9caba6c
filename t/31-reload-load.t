# Hot reload under load (issue 4): several keep-alive client loops for more
# than 10 s while SIGHUP arrives every half second, alternating two configs
# (a and b) that differ in a response header, an access rule and the document
# root, with one bad config among them. Every response must come wholly from
# one generation, no connection may be refused, reset or cut short, and no
# status may be unexpected.
#
#   config a: X-Gen: a, root wa/, deny /only-b.txt (403), serves /only-a.txt
#   config b: X-Gen: b, root wb/, deny /only-a.txt (403), serves /only-b.txt
#   wa/gen.txt = "gen a\n", wb/gen.txt = "gen b\n"; both roots hold both
#   only-*.txt files with the root's letter in them, so only the rule decides
#   the status and only the root decides the body.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use POSIX qw(:sys_wait_h _exit);
use Socket qw(IPPROTO_TCP TCP_NODELAY);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $CLIENTS  = $ENV{LOAD_CLIENTS}  || 8;
my $DURATION = $ENV{LOAD_SECONDS}  || 11;    # reloads run this long; clients a little longer
my $INTERVAL = 0.5;
my $BAD_AT   = 7;                            # the 7th reload gets a broken config

my %files;
for my $g ('a', 'b') {
    $files{"w$g/gen.txt"} = "gen $g\n";
    $files{"w$g/only-$_.txt"} = "only-$_ from root $g\n" for 'a', 'b';
}

my $s = Luxd->new(config => "server { }\n", files => \%files, no_start => 1);
my $dir = $s->dir;
my $port = $s->port;

sub config_for {
    my ($g) = @_;
    my $other = $g eq 'a' ? 'b' : 'a';
    return <<"EOF";
server {
  listen = { "127.0.0.1:$port" },
  workers = 2,
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
  keepalive_timeout = 60,
  keepalive_requests = 100000,
}
-- generation $g
vhost "localhost" {
  default = true,
  root = "$dir/w$g",
  headers = { ["X-Gen"] = "$g" },
  access = { deny { prefix = "/only-$other.txt" } },
}
EOF
}

# A broken config: unknown key (passes Lua, fails validation).
my $BAD = config_for('b') =~ s/root = /rooot = /r;

$s->write_config(config_for('a'));
$s->start;

# ---- the client loop (runs in a forked child) ------------------------------

sub client {
    my ($id, $until) = @_;
    srand($$ ^ time);
    my %st = (requests => 0, errors => 0, bad => 0, switches => 0, a => 0, b => 0, conns => 0);
    my @samples;
    my $note = sub {
        my ($kind, $msg) = @_;
        $st{$kind}++;
        push @samples, sprintf('%.3f %s: %s', time, $kind, $msg) if @samples < 8;
    };
    my @paths = ('/gen.txt', '/only-a.txt', '/only-b.txt');
    my ($c, $left, $last_gen);
    while (time < $until) {
        if (!$c) {
            my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp', Timeout => 5);
            if (!$sock) { $note->('errors', "connect: $!"); sleep 0.01; next }
            setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1);
            $c = Luxd::Conn->new($sock);
            $left = 1 + int(rand(40));    # requests on this connection
            $st{conns}++;
        }
        my $path = $paths[int rand @paths];
        my $last = --$left <= 0;
        if (!$c->send(Luxd::request(path => $path, close => $last))) {
            $note->('errors', "send $path: " . ($c->{write_error} // '?'));
            $c->close; undef $c; next;
        }
        my $r = $c->response(timeout => 5);
        $st{requests}++;
        if (!$r) {
            $note->('errors', "$path: " . ($c->{eof} ? ($c->{reset} ? 'connection reset' : 'closed') . ' before a whole response'
                                                     : 'no response within 5 s')
                              . ' (' . length($c->buffered) . ' bytes buffered' . ($c->{read_error} ? ", $c->{read_error}" : '') . ')');
            $c->close; undef $c; next;
        }
        my $g = $r->{headers}{'x-gen'} // '';
        my $ok;
        if ($r->{error}) {
            $ok = 0;
        } elsif ($g ne 'a' && $g ne 'b') {
            $ok = 0;
        } elsif ($path eq '/gen.txt') {
            $ok = $r->{status} == 200 && $r->{body} eq "gen $g\n";
        } elsif ($path eq "/only-$g.txt") {
            $ok = $r->{status} == 200 && $r->{body} eq "only-$g from root $g\n";
        } else {
            $ok = $r->{status} == 403;
        }
        if (!$ok) {
            (my $b = substr($r->{body} // '', 0, 60)) =~ s/\n/\\n/g;
            $note->('bad', "$path -> " . ($r->{status} // 'no status') . " X-Gen=$g body=\"$b\"" . ($r->{error} ? " ($r->{error})" : ''));
        } else {
            $st{$g}++;
            $st{switches}++ if defined $last_gen && $last_gen ne $g;
            $last_gen = $g;
        }
        my $conn_hdr = lc($r->{headers}{connection} // '');
        if ($last) {
            $note->('errors', "$path: no Connection: close on the last request") unless $conn_hdr eq 'close';
            $note->('errors', "$path: not closed after Connection: close") unless $c->wait_closed(5);
            $c->close; undef $c;
        } elsif ($conn_hdr eq 'close') {
            $note->('errors', "$path: server closed a keep-alive connection unasked (Connection: close)");
            $c->close; undef $c;
        }
    }
    $c->close if $c;
    open my $out, '>', "$dir/client-$id.txt" or _exit(2);
    print $out "$_ $st{$_}\n" for sort keys %st;
    print $out "sample $_\n" for @samples;
    close $out;
}

# ---- run -------------------------------------------------------------------

my $t0 = time;
my $until = $t0 + $DURATION + 1;
my @kids;
for my $i (1 .. $CLIENTS) {
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        my $ok = eval { client($i, $until); 1 };
        print STDERR "client $i: $@" unless $ok;
        _exit($ok ? 0 : 1);
    }
    push @kids, $pid;
}

my (@outcomes, $good, $failed);
my $next = 'b';
my $n = 0;
my $late = 0;
($good, $failed) = (0, 0);
while (time < $t0 + $DURATION) {
    my $tick = $t0 + $INTERVAL * ($n + 1);
    sleep($tick - time) if $tick > time;
    $n++;
    my $bad = $n == $BAD_AT;
    $s->write_config($bad ? $BAD : config_for($next));
    my $msg = $s->reload(timeout => 5, poll => 0.005);
    if (!defined $msg) { push @outcomes, "reload $n: no outcome within 5 s"; $late++; next }
    if ($bad) {
        $msg =~ /^failed / ? $failed++ : push @outcomes, "reload $n (bad config): $msg";
    } else {
        $msg =~ /^ok / ? $good++ : push @outcomes, "reload $n ($next): $msg";
        $next = $next eq 'a' ? 'b' : 'a';
    }
}
my $reload_span = time - $t0;

my %tot;
my @samples;
for my $i (0 .. $#kids) {
    my $pid = $kids[$i];
    my $deadline = time + 30;
    my $r;
    sleep 0.05 while ($r = waitpid($pid, WNOHANG)) == 0 && time < $deadline;
    if ($r == 0) { kill 'KILL', $pid; waitpid($pid, 0); push @samples, "client " . ($i + 1) . " hung; killed"; $tot{errors}++; next }
    push @samples, "client " . ($i + 1) . " exited with status $?" if $?;
    open my $fh, '<', "$dir/client-" . ($i + 1) . ".txt" or do { push @samples, "client " . ($i + 1) . ": no summary"; $tot{errors}++; next };
    my %one;
    while (<$fh>) {
        chomp;
        if (/^sample (.*)/) { push @samples, 'client ' . ($i + 1) . ": $1"; next }
        my ($k, $v) = split / /;
        $one{$k} = $v;
        $tot{$k} += $v;
    }
    cmp_ok($one{switches} // 0, '>=', 5, 'client ' . ($i + 1) . ' saw the generation change at least 5 times')
      or diag("switches: " . ($one{switches} // 0));
}

diag(sprintf '%d clients, %.1f s of reloads (%d SIGHUPs: %d ok, %d failed as meant), %d requests on %d connections, %d from a, %d from b, %d generation switches seen',
     $CLIENTS, $reload_span, $n, $good, $failed, $tot{requests} // 0, $tot{conns} // 0, $tot{a} // 0, $tot{b} // 0, $tot{switches} // 0);
ok($reload_span >= 10, 'reloads ran for at least 10 s');
cmp_ok($n, '>=', 20, 'at least 20 SIGHUPs, one every 0.5 s');
is($failed, 1, 'the bad config was rejected');
is($good, $n - 1, 'every good config was applied') or diag(join "\n", @outcomes);
is($late, 0, 'every reload answered within 5 s');
cmp_ok($tot{requests} // 0, '>', 1000, 'the clients made a load');
is($tot{errors} // 0, 0, '0 socket errors (refused, reset, cut short, timed out)');
is($tot{bad} // 0, 0, '0 unexpected statuses or mixed-generation responses');
diag(join "\n", @samples) if @samples;

ok($s->alive, 'the server is still running');
like($s->error_log, qr/\[error\] reload failed, still serving generation \d+: \Q@{[$s->config_file]}\E:\d+: vhost "localhost": unknown key "rooot"/,
     'the bad config was logged with file:line');
my @gens = $s->error_log =~ /\[info\] reload: generation (\d+) in [\d.]+ ms/g;
is(scalar @gens, $good, 'one "reload: generation N" line per good reload');
is_deeply(\@gens, [2 .. $good + 1], 'generation numbers count up by one') if @gens;

ok($s->stop, 'stopped cleanly');
my @lines = split /\n/, $s->access_log;
is(scalar @lines, $tot{requests} // 0, 'the access log has one line per request');

done_testing;
