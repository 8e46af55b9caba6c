# From a break review (helper-s33) of "filecache: files up to 256 KiB in
# memory": a response of a file held in memory keeps a reference to the
# file's bytes until it is sent, also once the cache has evicted it. The
# commit says the cache's bound (filecache.c CACHE_BYTES, 64 MiB a loop)
# keeps the memory in check; it does not bound what stalled responses
# keep. HTTP/2 streams whose window never opens (issue 20: "a slow reader
# of many streams must not hold memory") each keep a whole file: 500 of
# them, each of a different 256 KiB file, made luxd's RSS grow by ~130 MiB
# (before the change, files past 64 KiB went by fd and read-ahead buffers
# bounded by H2_AHEAD_MAX: a few MiB). What a stalled stream holds must
# stay within the loop's bounds: here, under the cache's 64 MiB plus the
# read-ahead budget (16 MiB).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my ($N, $SZ) = (500, 256 * 1024);
Luxd::heap_visible_env(64 * 1024);
my $s = Luxd->new(server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }' }, files => { 'www/x' => 'x' });
my $www = $s->dir . '/www';
for my $i (1 .. $N) {
    open my $f, '>', "$www/m$i.bin" or die $!;
    print $f chr(65 + $i % 26) x $SZ;
    close $f;
}
my ($port, $pid) = ($s->port, $s->pid);

my $PY = <<'PY';
import socket, sys, time
import h2.config, h2.connection, h2.settings
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def rss():
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
r0, socks, k = rss(), [], 0
while k < n:
    s = socket.create_connection(("127.0.0.1", port))
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    for j in range(min(100, n - k)):
        k += 1
        c.send_headers(c.get_next_available_stream_id(), [(":method", "GET"), (":scheme", "http"),
                       (":path", "/m%d.bin" % k), (":authority", "localhost")], end_stream=True)
    s.sendall(c.data_to_send())
    socks.append(s)
    time.sleep(0.3)
time.sleep(2)
print("streams=%d rss+%d" % (k, rss() - r0))
PY
my $r = `timeout 60 /usr/bin/python3 -c '$PY' $port $pid $N 2>&1`;
my ($grew) = $r =~ /rss\+(-?\d+)/;
ok(defined $grew && $grew < 80 * 1024,
   "$N zero-window streams of $N different 256 KiB files: RSS grew by less than 80 MiB (KiB: $r)");
ok($s->alive, 'luxd is up');
$s->stop;
done_testing;
