# HTTP/2 defects a break review found (helper-43), each with its
# reproduction: a heap use-after-free when a client resets its TCP
# connection under a streamed proxied response; the connection's window
# leaked by cancelled uploads; no send_timeout per stream; late trailers on
# a stream luxd had reset taken for a connection error; MadeYouReset by
# WINDOW_UPDATE overflow. Under ASan (make asan) the first one crashed.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(raw_backend kill_backend);

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
# A backend that sends 12,000 103s of 16 KB each (190 MB), then its 200.
my $hb = raw_backend(sub {
    my ($c) = @_;
    my $buf = '';
    while ($buf !~ /\r\n\r\n/) { sysread($c, $buf, 65536, length $buf) or last }
    my $hint = "HTTP/1.1 103 Early Hints\r\nLink: <" . ('a' x 16000) . ">\r\n\r\n";
    for (1 .. 12000) { syswrite($c, $hint) or last }
    syswrite($c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
    sleep 20;
});
my $s = Luxd->new(
    test_handlers => 1,
    server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }', send_timeout => 2,
                header_timeout => 2, body_timeout => 2, keepalive_requests => 100000 },
    config => <<"EOF2",
upstream "be" { "$addr" }
upstream "hb" { "$hb->[1]" }
vhost "hints.test" { root = "\$DIR/www", location "/" { proxy = "hb" } }
vhost "localhost" { default = true, root = "\$DIR/www", location "/t/" { test_handler = true } }
vhost "be.test" { root = "\$DIR/www", location "/" { proxy = "be" } }
EOF2
    files => { 'www/index.html' => "hello\n" },
);
my $port = $s->port;
sub review { my $out = `timeout 120 /usr/bin/python3 t/lib/h2review.py $port @_ 2>&1`; chomp $out; $out }

is(review('uaf', 60), 'survived 60', 'a client that resets its TCP connection under a streamed response, 60 times');
ok($s->alive, '  luxd is up');
is(review('window_leak', 3), 'uploads=10', 'three cancelled uploads leave the window open: ten uploads after them');
my $out = review('stream_stall');
like($out, qr/^reset=50 ended=no /, '50 streams whose windows never open are reset, the connection lives');
my ($after) = $out =~ /after=(\S+)/;
ok(defined $after && $after < 10, "  at send_timeout (2 s): $out");
like(review('late_trailers', 300), qr/^after=H\d+:200\b(?!.*GOAWAY)/,
     'trailers for a stream luxd reset, 300 streams later: ignored, the next stream answered');
like(review('myr_window', 3000), qr/^goaway=11 /, 'MadeYouReset by WINDOW_UPDATE overflow: GOAWAY ENHANCE_YOUR_CALM');
# 1xx after 1xx to a client that reads nothing for 1 s (less than
# send_timeout): as over HTTP/1 (t/99),
# what cannot go out is dropped rather than queued.
my $before = Luxd::rss_anon_kb($s->pid);
my $hp = do { open my $fh, '-|', "timeout 60 /usr/bin/python3 " . "t/lib/h2review.py $port hints 1" or die; $fh };
my $max = 0;
for (1 .. 25) {
    select(undef, undef, undef, 0.1);
    my $now = Luxd::rss_anon_kb($s->pid) // 0;
    $max = $now if $now > $max;
}
my $hout = do { local $/; <$hp> } // '';
chomp $hout;
cmp_ok($max - $before, '<', 48 * 1024, 'a backend\'s 190 MB of 103s to a client that does not read: RSS grew by less than 48 MB ('
       . int(($max - $before) / 1024) . ' MB)');
is($hout, 'final=200 hints=some', '  the client gets some hints, then the final response');
kill_backend($hb);

# A second review (helper-46).
$out = review('slow_head');
like($out, qr/^answer=rst8 after=(\S+)/, 'a header block that never ends: the stream is reset (CANCEL)');
($after) = $out =~ /after=(\S+)/;
ok($after >= 1.5 && $after < 8, "  at header_timeout (2 s): $out");
$out = review('no_request');
like($out, qr/^closed=yes goaway=0 after=(\S+)/, 'a connection that sends no request: GOAWAY NO_ERROR, then the close');
($after) = $out =~ /after=(\S+)/;
ok($after >= 1.5 && $after < 8, "  at header_timeout (2 s), not keepalive_timeout (30 s): $out");
$out = review('slow_body');
like($out, qr/^answer=408 /, 'a body that never comes: 408');
($after) = $out =~ /after=(\S+)/;
ok($after >= 1.5 && $after < 8, "  at body_timeout (2 s): $out");
like(review('cut'), qr/^end=rst /, 'a backend that sends 50 of its 100 bytes: the stream is reset, never ended cleanly');
is(review('crumbs', 1100), '431=100', '1100 cookie crumbs a request (a few KiB of HPACK): 431, joined in linear memory');
is(review('crumbs', 99), '200=100', '99 crumbs (the fields allowed, with :path etc.): 200');
is(review('authority'), '200 200 400', 'Host beside :authority: the same host in another case or with the port is it; another is 400');
like(review('upload_beside'), qr/^answer=200 after=(0\.\d|1\.\d)/,
     "one stream's unread upload does not hold back another's (the connection's window is larger)");
ok($s->alive, 'luxd is up at the end');

my $pp = Luxd->new(server => { listen => \'{ { "127.0.0.1:$PORT", proxy_protocol = true, http2 = true } }',
                               real_ip => \'{ from = "127.0.0.1" }' },
                   files => { 'www/index.html' => "pp\n" });
is(`timeout 30 /usr/bin/python3 t/lib/h2review.py @{[$pp->port]} pp_h2c 2>&1`, "answer=200\n",
   'h2 by prior knowledge after a PROXY protocol header');

done_testing;
