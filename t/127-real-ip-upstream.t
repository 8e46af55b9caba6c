# issue 11, behind a balancer: the X-Forwarded-For a backend gets ends with
# the real client (as nginx's $proxy_add_x_forwarded_for with realip): the
# incoming list, then the address real_ip or the PROXY header named. A
# backend that trusts luxd alone reads the rightmost entry. A forged list
# from an untrusted peer is passed on with that peer appended, so the
# backend still sees who connected.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Luxd;
use Luxd::Backend qw(hdr);

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $pp_port = Luxd::free_port();
my $s = Luxd->new(
    server => {
        listen  => \qq[{ "127.0.0.1:\$PORT", { "127.0.0.1:$pp_port", proxy_protocol = true } }],
        real_ip => \'{ from = { "127.0.0.1", "10.0.0.0/8" }, header = "X-Forwarded-For" }',
        access_log => { path => '$DIR/access.log', format => '$remote_addr $realip_remote_addr $upstream_addr' },
        access_log_buffer => 0,
    },
    config => <<"EOF",
upstream "be" { "$addr" }
vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "be" } }
EOF
);

my $made = 0;    # requests sent through luxd
sub through {
    my ($from, $port, $prefix, @h) = @_;
    $made++;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $port, LocalAddr => $from, Proto => 'tcp', Timeout => 5,
    ) or die "connect: $!";
    my $c = Luxd::Conn->new($sock);
    $c->send($prefix . Luxd::request(path => '/ok/2', headers => \@h, close => 1));
    my $r = $c->response(timeout => 5);
    $c->close;
    my @got = $be->requests;
    return ($r ? $r->{status} : 'none', @got ? hdr($got[-1], 'X-Forwarded-For') : undef);
}

my ($st, $xff) = through('127.0.0.1', $s->port, '', 'X-Forwarded-For' => '203.0.113.5, 10.1.1.1');
is $st, 200, 'proxied';
is $xff, '203.0.113.5, 10.1.1.1, 203.0.113.5', 'header mode: the list, then the client real_ip found';

($st, $xff) = through('127.0.0.2', $s->port, '', 'X-Forwarded-For' => '203.0.113.5');
is $xff, '203.0.113.5, 127.0.0.2', 'an untrusted peer\'s list: passed on, with the peer appended';

($st, $xff) = through('127.0.0.1', $s->port, '');
is $xff, '127.0.0.1', 'no list: the peer';

($st, $xff) = through('127.0.0.1', $pp_port, "PROXY TCP4 198.51.100.9 127.0.0.1 40000 80\r\n");
is $st, 200, 'through the proxy_protocol listener';
is $xff, '198.51.100.9', 'PROXY v1: the backend gets the client the balancer named';

my $v2 = "\r\n\r\n\0\r\nQUIT\n" . pack('CCn', 0x21, 0x21, 36)
  . Socket::inet_pton(Socket::AF_INET6(), '2001:db8::99') . Socket::inet_pton(Socket::AF_INET6(), '::1') . pack('nn', 1, 80);
($st, $xff) = through('127.0.0.1', $pp_port, $v2, 'X-Forwarded-For' => '192.0.2.1');
is $xff, '192.0.2.1, 2001:db8::99', 'PROXY v2 IPv6, and the client\'s own list (an untrusted source\'s: not walked)';

($st, $xff) = through('127.0.0.2', $pp_port, "PROXY TCP4 198.51.100.9 127.0.0.1 40000 80\r\n");
is $xff, '127.0.0.2', 'a forged PROXY header from an untrusted peer: the peer';

# A trusted balancer's PROXY source that is itself a trusted proxy: its
# X-Forwarded-For is walked.
($st, $xff) = through('127.0.0.1', $pp_port, "PROXY TCP4 10.2.2.2 127.0.0.1 40000 80\r\n", 'X-Forwarded-For' => '203.0.113.77');
is $xff, '203.0.113.77, 203.0.113.77', 'PROXY source 10.2.2.2 is trusted: its X-Forwarded-For names the client';
# The client has the answer before luxd writes its log line: wait for
# the line of every request made (a read at once raced it, and saw the
# one before).
my @l;
for (1 .. 100) {
    @l = split /\n/, $s->access_log;
    last if @l >= $made;
    select(undef, undef, undef, 0.05);
}
like $l[-1], qr/^203\.0\.113\.77 127\.0\.0\.1 \Q$addr\E$/, 'the log: the client, the TCP peer, the upstream';

$s->stop;
$be->stop;
done_testing;
