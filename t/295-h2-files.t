# Files over HTTP/2 as luxd sends them without copies (DATA frames whose
# bytes nghttp2 never holds: read ahead into pooled buffers the output
# refers to, or, past the loop's read-ahead budget, read straight into the
# output; cached files referred to in place; cold ones read by the thread
# pool). Every body must arrive byte-exact however those paths interleave:
# 300 streams at once over 3 connections that read nothing for a while
# (more streams with read-ahead than the budget, 256 buffers, allows;
# output held across partial writes), in the clear and over TLS, and a
# file out of the page cache.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;
use TLSTest;

# Bytes that say where they are: a misplaced or repeated piece changes the
# digest.
sub counted { my ($n) = @_; substr(join('', map { pack 'N', $_ } 0 .. $n / 4), 0, $n) }
my %body = (
    'big.bin'  => counted(256 * 1024 + 7),      # several buffers, an odd tail
    'mid.bin'  => counted(40 * 1024),           # under one buffer
    'tiny.txt' => "tiny\n",                     # from the file cache's memory
    'cold.bin' => counted(4 * 1024 * 1024),
);
my %more = ('stall.bin' => 'x' x (16 * 1024 * 1024));
my ($c) = TLSTest::certs('a.test');
my $tport = Luxd::free_port();
my $s = Luxd->new(
    server => { listen => \qq{{ { "127.0.0.1:\$PORT", http2 = true }, { "127.0.0.1:$tport", tls = true, http2 = true } }} },
    config => <<"EOF2",
vhost "localhost" {
  default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]},
  location "/status" { status = true },
}
EOF2
    files => { map { ("www/$_" => $body{$_}) } keys %body },
);
my $port = $s->port;

sub want { my @p = @_; join '', map { "/$_ " . md5_hex($body{$_}) . ' ' . length($body{$_}) . "\n" } @p }
sub many { my $out = `timeout 150 /usr/bin/python3 t/lib/h2files.py @_ 2>&1`; $out }

is(many($port, 3, 100, 1, '/big.bin'), want('big.bin') . "streams=300 ended=300\n",
   '300 streams of a 256 KiB file over 3 stalled connections: every body byte-exact');
is(many("tls:$tport", 3, 100, 1, '/big.bin'), want('big.bin') . "streams=300 ended=300\n",
   '  the same over TLS');
my @p = ('big.bin', 'mid.bin', 'tiny.txt');
is(many($port, 2, 100, 0, map { "/$_" } @p), want(@p) . "streams=200 ended=200\n",
   '200 streams of three files (buffered, in memory, read ahead), read at once: byte-exact');

sub jobs {
    my $r = $s->get('/status?format=prometheus');
    $r->{body} =~ /^luxd_file_io_jobs_total (\d+)/m ? $1 : -1;
}
my $file = $s->dir . '/www/cold.bin';
for my $round (1, 2) {
    system('sync', $file) == 0 or die "sync: $?";
    system('dd', "if=$file", 'iflag=nocache', 'count=0', 'status=none') == 0 or die "dd: $?";
    my $before = jobs();
    is(many($port, 1, 4, 0, '/cold.bin'), want('cold.bin') . "streams=4 ended=4\n",
       "round $round: a file out of the page cache, 4 streams: byte-exact");
    cmp_ok(jobs(), '>', $before, "  its bytes were read by the thread pool");
}
# From a break review (helper-47): pooled buffers held past their use.
my $pid = $s->pid;
my $r = `timeout 60 /usr/bin/python3 t/lib/h2review.py $port small_window $pid 2>&1`;
my ($vsz) = $r =~ /vsz\+(-?\d+)/;
ok(defined $vsz && $vsz < 16 * 1024,
   "2000 streams whose windows open 600 bytes at a time: address space grew by less than 16 MiB ($r)");
ok($s->alive, 'luxd is up');
# RSS shows the buffers a luxd holds once they are mmap()ed and ASan keeps
# no quarantine (a freed buffer would look held): a second luxd for that.
Luxd::heap_visible_env(64 * 1024);
my $v = Luxd->new(server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }' },
                  files => { 'www/stall.bin' => $more{'stall.bin'} });
my ($vport, $vpid) = ($v->port, $v->pid);
$r = `timeout 60 /usr/bin/python3 t/lib/h2review.py $vport rst_hold $vpid /nope 2>&1`;
my ($rss) = $r =~ /rss\+(-?\d+)/;
ok(defined $rss && $rss < 8 * 1024, "3600 streams of a 404 reset beside stuck writes: RSS grew by less than 8 MiB ($r)");
ok($v->alive, '  that luxd is up');

done_testing;
