# Hot reload (issue 4): a large download in flight across several reloads
# arrives byte-exact. The file (50 MB) is read slowly through a small receive
# window so it is still in flight when each reload lands; the reloads change
# the response header, the root, and even deny the file: the response that
# started keeps its generation, and the connection's next request uses the
# new one.
use strict;
use warnings;
use Test::More;
use Digest::MD5;
use IO::Select;
use IO::Socket::INET;
use Socket qw(SOL_SOCKET SO_RCVBUF);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $MB = 1024 * 1024;
my $SIZE = 50 * $MB;
my $RATE = 8 * $MB;    # bytes per second the client reads: about 6 s for the file

my $s = Luxd->new(config => "server { }\n", files => { 'www2/small.txt' => "small\n", 'www/small.txt' => "small\n" }, no_start => 1);
my $dir = $s->dir;
my $port = $s->port;

# The big file: every 4-byte word is its own offset, so a lost, doubled or
# misplaced chunk changes the MD5.
my $md5 = Digest::MD5->new;
{
    open my $fh, '>:raw', "$dir/www/big.bin" or die "big.bin: $!";
    for my $k (0 .. $SIZE / $MB - 1) {
        my $block = pack('N*', map { $k * ($MB / 4) + $_ } 0 .. $MB / 4 - 1);
        print $fh $block;
        $md5->add($block);
    }
    close $fh or die;
}
my $want = $md5->hexdigest;

sub config_for {
    my ($i) = @_;
    my $g = $i % 2 ? 'b' : 'a';
    # Every other config denies the big file, every third moves the root.
    my $deny = $i % 2 ? 'access = { deny { prefix = "/big.bin" } },' : '';
    my $root = $i % 3 == 2 ? "$dir/www2" : "$dir/www";
    return <<"EOF";
server {
  listen = { "127.0.0.1:$port" },
  workers = 2,
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
  keepalive_timeout = 60,
  send_timeout = 60,
}
vhost "localhost" {
  default = true,
  root = "$root",
  headers = { ["X-Gen"] = "$g$i" },
  $deny
}
EOF
}

sub connect_small {
    my $sock = IO::Socket::INET->new(Proto => 'tcp') or die "socket: $!";
    setsockopt($sock, SOL_SOCKET, SO_RCVBUF, pack('i', 16384)) or die "SO_RCVBUF: $!";
    connect($sock, Socket::pack_sockaddr_in($port, Socket::inet_aton('127.0.0.1'))) or die "connect: $!";
    return $sock;
}

$s->write_config(config_for(0));
$s->start;

# Two downloads at once on keep-alive connections, one per worker if the
# kernel spreads them so.
my @dl = map {
    my $sock = connect_small();
    syswrite($sock, Luxd::request(path => '/big.bin')) or die;
    $sock->blocking(0);
    { sock => $sock, buf => '', head => undef, got => 0, md5 => Digest::MD5->new, done => 0, eof => 0 }
} 1 .. 2;

my $sel = IO::Select->new(map { $_->{sock} } @dl);
my $t0 = time;
my ($reloads, $ok_reloads, @in_flight_at_reload) = (0, 0);
my $next_reload = $t0 + 0.5;
my $deadline = $t0 + 300;    # a stuck download fails; a slow machine does not
while (grep { !$_->{done} } @dl) {
    last if time > $deadline;
    for my $d (grep { !$_->{done} } @dl) {
        # Read at most what the rate allows so far, and until the 8th
        # reload has returned no more than (reloads done + 1) tenths of
        # the file: however slow the reloads on a loaded machine, both
        # downloads are still in flight at each of them.
        # After it, the rest is read as fast as it comes: on a loaded
        # machine a 16 KiB window refilled per wake-up is slow enough.
        my $allowed = $SIZE;
        if ($reloads < 8) {
            my $cap = $SIZE * ($reloads + 1) / 10;
            $allowed = ($d->{head} ? 0 : 4096) + $RATE * (time - $t0);
            $allowed = $cap if $allowed > $cap;
        }
        $allowed -= $d->{got};
        next if $allowed < 4096 && $allowed < $SIZE - $d->{got};    # the last bytes may be fewer
        my $n = sysread($d->{sock}, my $chunk, $allowed > 65536 ? 65536 : $allowed);
        if (!defined $n) { next if $!{EAGAIN} || $!{EINTR}; $d->{error} = "read: $!"; $d->{done} = 1; next }
        if ($n == 0) { $d->{eof} = 1; $d->{done} = 1; next }
        if (!$d->{head}) {
            $d->{buf} .= $chunk;
            my $end = index($d->{buf}, "\r\n\r\n");
            next if $end < 0;
            $d->{head} = substr($d->{buf}, 0, $end);
            $chunk = substr($d->{buf}, $end + 4);
            $d->{buf} = '';
        }
        $d->{got} += length $chunk;
        $d->{md5}->add($chunk);
        $d->{done} = 1 if $d->{got} >= $SIZE;
    }
    if (time >= $next_reload && $reloads < 8) {
        $reloads++;
        $s->write_config(config_for($reloads));
        my $msg = $s->reload(timeout => 5, poll => 0.005);
        $ok_reloads++ if defined $msg && $msg =~ /^ok /;
        push @in_flight_at_reload, join '/', map { $_->{got} } @dl;
        $next_reload = time + 0.5;
    }
    if ($reloads < 8) { sleep 0.002 } else { $sel->can_read(1) }
}
my $elapsed = time - $t0;
diag(sprintf '2 downloads of %d MB in %.1f s across %d reloads; bytes received per download at each reload: %s',
     $SIZE / $MB, $elapsed, $reloads, join(' ', @in_flight_at_reload));

is($reloads, 8, '8 reloads during the downloads');
is($ok_reloads, 8, 'all 8 succeeded');
my ($last_a, $last_b) = split m{/}, $in_flight_at_reload[-1] // '0/0';
ok($last_a < $SIZE && $last_b < $SIZE, 'both downloads were still in flight at the last reload');
for my $i (0 .. $#dl) {
    my $d = $dl[$i];
    my $name = 'download ' . ($i + 1);
    like($d->{head} // '', qr{^HTTP/1\.1 200 }, "$name: 200");
    like($d->{head} // '', qr{\r\nX-Gen: a0(\r|$)}i, "$name: headers of the generation it started in");
    ok(!$d->{error} && !$d->{eof}, "$name: no error, not closed") or diag($d->{error} // 'EOF');
    is($d->{got}, $SIZE, "$name: all $SIZE bytes");
    is($d->{md5}->hexdigest, $want, "$name: byte-exact (MD5)");
}

# The connection stays open and its next request uses the newest generation
# (config 8: X-Gen a8, big.bin allowed, root www2 which has no big.bin).
my $sock = $dl[0]{sock};
$sock->blocking(1);
my $c = Luxd::Conn->new($sock);
ok($c->send(Luxd::request(path => '/small.txt')), 'next request on the first download\'s connection');
my $r = $c->response(timeout => 5);
is($r && $r->{status}, 200, 'answered');
is($r && $r->{headers}{'x-gen'}, 'a8', 'by the newest generation');
$c->send(Luxd::request(path => '/big.bin'));
$r = $c->response(timeout => 5, head => 0);
is($r && $r->{status}, 404, 'big.bin is not in the newest root (www2): 404');
close $_->{sock} for @dl;

ok($s->stop, 'stopped cleanly');
done_testing;
