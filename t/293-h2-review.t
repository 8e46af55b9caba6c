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
use Luxd::Backend;

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $s = Luxd->new(
    test_handlers => 1,
    server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }', send_timeout => 2,
                keepalive_requests => 100000 },
    config => <<"EOF2",
upstream "be" { "$addr" }
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
ok($s->alive, 'luxd is up at the end');

done_testing;
