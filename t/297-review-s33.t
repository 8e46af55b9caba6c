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
#
# And from a second break review (helper-s33b) of "filecache: bodies evicted while
# responses still send them count against the bound": whether a load may
# read its file into memory (filecache.c lx_filecache_get, f->mem_ok) is
# decided when the load is queued, from the bytes the cache holds and
# pins then; loads still in flight count for nothing. Misses that arrive
# together (one HTTP/2 connection's 100 streams come in one read, and a
# few connections' in one turn of the loop) are all queued before any of
# them is done, so each reads its whole file into memory, however many
# there are: 500 zero-window streams of 500 different 256 KiB files sent
# at once made luxd's RSS grow by ~130 MiB (1000: ~260 MiB), as before the
# fix. The spaced case passes only because it waits 0.3 s between connections,
# long enough for the loads to be done and counted. The bound must hold
# for loads in flight too (e.g. reserve LX_SMALL_FILE for each load that
# may read into memory until load_done counts its real size).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my ($N, $SZ) = (500, 256 * 1024);
Luxd::heap_visible_env(64 * 1024);

my $PY = <<'PY';
import socket, sys, time
import h2.config, h2.connection, h2.settings
port, pid, n, burst = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "burst"
def rss():
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
r0, socks, datas, k = rss(), [], [], 0
while k < n:
    s = socket.create_connection(("127.0.0.1", port))
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    for j in range(min(100, n - k)):
        k += 1
        c.send_headers(c.get_next_available_stream_id(), [(":method", "GET"), (":scheme", "http"),
                       (":path", "/m%d.bin" % k), (":authority", "localhost")], end_stream=True)
    socks.append(s)
    if burst:
        datas.append(c.data_to_send())
    else:
        s.sendall(c.data_to_send())
        time.sleep(0.3)  # the loads of each connection done before the next one asks
for s, d in zip(socks, datas):  # all at once: no load is done before the last request
    s.sendall(d)
time.sleep(3)
print("streams=%d rss+%d" % (k, rss() - r0))
PY

# spaced: the connections one after the other; burst: all requests at once.
for my $mode ('spaced', 'burst') {
    my $s = Luxd->new(server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }' }, files => { 'www/x' => 'x' });
    my $www = $s->dir . '/www';
    for my $i (1 .. $N) {
        open my $f, '>', "$www/m$i.bin" or die $!;
        print $f chr(65 + $i % 26) x $SZ;
        close $f;
    }
    my $r = `timeout 60 /usr/bin/python3 -c '$PY' @{[$s->port]} @{[$s->pid]} $N $mode 2>&1`;
    my ($grew) = $r =~ /rss\+(-?\d+)/;
    ok(defined $grew && $grew < 80 * 1024,
       "$mode: $N zero-window streams of $N different 256 KiB files: RSS grew by less than 80 MiB (KiB: $r)");
    ok($s->alive, "$mode: luxd is up");
    $s->stop;
}
done_testing;
