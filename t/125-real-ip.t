# issue 11, behind a balancer: real_ip = { from = ..., header = ... }. The
# client's address is taken from the header only when the connection comes
# from a trusted proxy (127.0.0.1 here; 127.0.0.2 is an untrusted client:
# loopback has all of 127/8), X-Forwarded-For is walked from the right
# (nginx's real_ip_recursive on), and the address reaches everything that
# uses it: $remote_addr in the log (the peer stays in $realip_remote_addr),
# access rules' `from`, a policy's r.remote_addr.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Luxd;

my $FMT = '$remote_addr|$realip_remote_addr|$status|$host$request_uri';
my $s = Luxd->new(
    server => {
        real_ip => \'{ from = { "127.0.0.1", "10.0.0.0/8", "2001:db8::/32" }, header = "X-Forwarded-For" }',
        access_log        => { path => '$DIR/access.log', format => $FMT },
        access_log_buffer => 0,
    },
    config => <<'EOF',
local who = function(r)
  if r.path == "/who" then return r:respond(200, r.remote_addr) end
end
vhost "localhost" {
  default = true, root = "$DIR/www", policy = who,
  access = {
    deny { prefix = "/secret", from = "192.0.2.0/24" },
    allow { prefix = "/admin", from = "198.51.100.7" },
    deny { prefix = "/admin", status = 404 },
  },
}
-- X-Real-IP, one address, trusted from 127.0.0.1 only.
vhost "xri.test" {
  root = "$DIR/www", policy = who,
  real_ip = { from = "127.0.0.1", header = "X-Real-IP" },
}
-- No real_ip for this vhost: the server's does not apply.
vhost "off.test" { root = "$DIR/www", policy = who, real_ip = false }
EOF
    files => {
        'www/index.html'        => "home\n",
        'www/secret/index.html' => "secret\n",
        'www/admin/index.html'  => "admin\n",
    },
);

# One request from local address $from (127.0.0.1 or 127.0.0.2) with the
# given header lines; returns (status, body).
sub ask {
    my ($from, $path, %o) = @_;
    my $sock = IO::Socket::INET->new(
        PeerAddr => '127.0.0.1', PeerPort => $s->port, LocalAddr => $from, Proto => 'tcp', Timeout => 5,
    ) or die "connect from $from: $!";
    my $c = Luxd::Conn->new($sock);
    $c->send(Luxd::request(path => $path, host => $o{host} // 'localhost',
                           headers => $o{headers} || [], close => 1));
    my $r = $c->response(timeout => 5);
    $c->close;
    return ($r ? $r->{status} : 'none', $r ? $r->{body} : '');
}
sub who { my ($from, %o) = @_; my ($st, $b) = ask($from, '/who', %o); $st == 200 ? $b : "status $st" }

# The access log's last line, split: (remote_addr, realip_remote_addr, status, host+uri).
sub last_log {
    my $want = shift;
    my $t = time + 10;
    my @l;
    while (time < $t) {
        @l = split /\n/, $s->access_log;
        last if @l >= $want;
        sleep 0.02;
    }
    return split /\|/, $l[-1] // '';
}
my $n = 0;

subtest 'X-Forwarded-For from a trusted and an untrusted peer' => sub {
    is who('127.0.0.1', headers => ['X-Forwarded-For' => '203.0.113.9']), '203.0.113.9',
        'trusted peer: the header names the client';
    my @f = last_log(++$n);
    is_deeply [@f[0, 1]], ['203.0.113.9', '127.0.0.1'], '$remote_addr is the client, $realip_remote_addr the peer';
    is who('127.0.0.2', headers => ['X-Forwarded-For' => '203.0.113.9']), '127.0.0.2',
        'untrusted peer: the header is ignored';
    @f = last_log(++$n);
    is_deeply [@f[0, 1]], ['127.0.0.2', '127.0.0.2'], 'and the log shows the peer twice';
    is who('127.0.0.1'), '127.0.0.1', 'trusted peer without the header: the peer';
    $n++;
};

subtest 'the recursive walk from the right' => sub {
    my %cases = (
        '198.51.100.1, 203.0.113.9'                 => '203.0.113.9',  # the rightmost, untrusted
        '198.51.100.1, 203.0.113.9, 10.1.2.3'       => '203.0.113.9',  # a trusted proxy skipped
        '198.51.100.1, 203.0.113.9, 10.1.2.3, 10.9.9.9' => '203.0.113.9',  # two
        '10.0.0.1, 10.0.0.2'                        => '10.0.0.1',     # all trusted: the leftmost
        '10.0.0.1'                                  => '10.0.0.1',
        '198.51.100.1,203.0.113.9,,10.1.2.3 , '     => '203.0.113.9',  # empty elements, spaces
        '2001:db8::5, 2001:db9::77'                 => '2001:db9::77', # IPv6: the first outside 2001:db8::/32
        '2001:db9::77, 2001:db8::5'                 => '2001:db9::77',
        '198.51.100.1, unknown, 10.1.2.3'           => '127.0.0.1',    # an invalid element: the peer
        '198.51.100.1, 203.0.113.9:8080'            => '127.0.0.1',    # a port is no address
        '198.51.100.1, [2001:db9::1]'               => '127.0.0.1',    # nor brackets
        '999.1.1.1'                                 => '127.0.0.1',
        ''                                          => '127.0.0.1',    # nothing in it
        'garbage, 203.0.113.9'                      => '203.0.113.9',  # invalid, but left of the client
    );
    for my $h (sort keys %cases) {
        is who('127.0.0.1', headers => ['X-Forwarded-For' => $h]), $cases{$h}, "X-Forwarded-For: $h";
        $n++;
    }
    # Several lines are one list, the last line its right end.
    is who('127.0.0.1', headers => ['X-Forwarded-For' => '203.0.113.1', 'X-Forwarded-For' => '10.0.0.5, 10.0.0.6']),
        '203.0.113.1', 'two lines: the walk goes on into the first';
    is who('127.0.0.1', headers => ['X-Forwarded-For' => '203.0.113.1', 'x-forwarded-for' => '203.0.113.2']),
        '203.0.113.2', 'two lines: the last line is the right end';
    $n += 2;
};

subtest 'another header: X-Real-IP, one address, a vhost of its own' => sub {
    is who('127.0.0.1', host => 'xri.test', headers => ['X-Real-IP' => '203.0.113.50']), '203.0.113.50',
        'X-Real-IP from the trusted peer';
    is who('127.0.0.1', host => 'xri.test', headers => ['X-Forwarded-For' => '203.0.113.51']), '127.0.0.1',
        'the vhost reads X-Real-IP, not the server\'s X-Forwarded-For';
    is who('127.0.0.1', host => 'xri.test', headers => ['X-Real-IP' => '203.0.113.50, 203.0.113.51']),
        '127.0.0.1', 'X-Real-IP holding a list is invalid: the peer';
    is who('127.0.0.1', host => 'xri.test', headers => ['X-Real-IP' => '2001:db8::abc']), '2001:db8::abc',
        'an IPv6 address';
    is who('127.0.0.2', host => 'xri.test', headers => ['X-Real-IP' => '203.0.113.50']), '127.0.0.2',
        'untrusted peer: ignored';
    is who('127.0.0.1', host => 'off.test', headers => ['X-Forwarded-For' => '203.0.113.9']), '127.0.0.1',
        'real_ip = false in a vhost: no header is believed';
    $n += 6;
};

subtest 'access rules see the real client' => sub {
    my ($st) = ask('127.0.0.1', '/secret/', headers => ['X-Forwarded-For' => '192.0.2.44']);
    is $st, 403, 'deny from 192.0.2.0/24: the client named by a trusted proxy is denied';
    my @f = last_log(++$n);
    is_deeply [@f[0, 1, 2]], ['192.0.2.44', '127.0.0.1', '403'], 'the log shows who was denied';
    ($st) = ask('127.0.0.2', '/secret/', headers => ['X-Forwarded-For' => '192.0.2.44']);
    is $st, 200, 'the same header from an untrusted peer changes nothing: 200';
    @f = last_log(++$n);
    is $f[0], '127.0.0.2', 'and the log shows the peer';
    ($st) = ask('127.0.0.1', '/admin/', headers => ['X-Forwarded-For' => '198.51.100.7']);
    is $st, 200, 'allow from 198.51.100.7, named by a trusted proxy';
    ($st) = ask('127.0.0.2', '/admin/', headers => ['X-Forwarded-For' => '198.51.100.7']);
    is $st, 404, 'a forged X-Forwarded-For from an untrusted peer does not get in';
    ($st) = ask('127.0.0.1', '/admin/', headers => ['X-Forwarded-For' => '198.51.100.7, 198.51.100.8']);
    is $st, 404, 'the client is the rightmost untrusted address, not one further left';
    $n += 3;
};

subtest 'a request refused while parsing logs the connection\'s address' => sub {
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port, LocalAddr => '127.0.0.1')
      or die "connect: $!";
    my $c = Luxd::Conn->new($sock);
    $c->send("GET / HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: 203.0.113.9\r\nBad Header\r\n\r\n");
    my $r = $c->response(timeout => 5);
    is $r && $r->{status}, 400, 'answered with 400';
    my @f = last_log(++$n);
    is $f[0], '127.0.0.1', 'a broken head has no header to believe';
};

$s->stop;
done_testing;
