# issue 11, behind a balancer: what `luxd -t` says of real_ip and
# proxy_protocol mistakes (each with file:line), what -T shows, and a reload
# that turns proxy_protocol on and off for an address whose socket is kept.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use Luxd;

my @bad = (
    ['a bad CIDR', qq{server {\n  listen = "127.0.0.1:\$PORT",\n  real_ip = { from = { "10.0.0.0/8", "10.0.0.0/33" } },\n}\n},
     3, qr/real_ip: "from"\[2\] must be an IP address or a CIDR like "10\.0\.0\.0\/8", got "10\.0\.0\.0\/33"/],
    ['a host name in from', qq{server {\n  real_ip = {\n    from = "lb.example",\n  },\n}\n},
     3, qr/"from" must be an IP address or a CIDR/],
    ['proxy_protocol = "yes"', qq{server {\n  real_ip = { from = "10.0.0.0/8" },\n  listen = { { "127.0.0.1:\$PORT", proxy_protocol = "yes" } },\n}\n},
     3, qr/listen entry 1: "proxy_protocol" must be true or false, got string/],
    ['proxy_protocol beside the addresses', qq{server {\n  listen = { "127.0.0.1:\$PORT", proxy_protocol = true },\n}\n},
     2, qr/has key "proxy_protocol" \(a listen entry with keys is a table of its own: listen = \{ \{ "0\.0\.0\.0:80", proxy_protocol = true \} \}\)/],
    ['proxy_protocol without real_ip', qq{server {\n  workers = 1,\n  listen = { { "127.0.0.1:\$PORT", proxy_protocol = true } },\n}\n},
     3, qr/proxy_protocol = true needs real_ip = \{ from = \{ \.\.\. \} \} in server/],
    ['a table entry with two addresses', qq{server {\n  listen = { { "127.0.0.1:1", "127.0.0.1:2" } },\n}\n},
     2, qr/holds one address/],
    ['real_ip without from', qq{server {\n  real_ip = { header = "X-Forwarded-For" },\n}\n},
     2, qr/real_ip: "from" is missing/],
    ['a header that is no name', qq{server {\n  real_ip = { from = "10.0.0.0/8", header = "X Forwarded" },\n}\n},
     2, qr/"header" must be a header name/],
    ['a misspelt key', qq{server {\n  real_ip = { from = "10.0.0.0/8", heder = "X-Real-IP" },\n}\n},
     2, qr/unknown key "heder" \(did you mean "header"\?\)/],
    ['real_ip as a string', qq{server {\n  real_ip = "10.0.0.0/8",\n}\n},
     2, qr/"real_ip" must be \{ from = /],
    ['a vhost real_ip without header', qq{vhost "a" {\n  root = "/tmp",\n  real_ip = { from = "10.0.0.0/8" },\n}\n},
     3, qr/real_ip in a vhost needs header = /],
    ['real_ip in a location', qq{vhost "a" {\n  location "/x/" {\n    real_ip = { from = "10.0.0.0/8", header = "X-Real-IP" },\n  },\n}\n},
     3, qr/unknown key "real_ip" \(the client's address is decided once per request, before a location is chosen/],
);
for my $b (@bad) {
    my ($name, $cfg, $line, $re) = @$b;
    my ($rc, $out) = Luxd::check_config($cfg);
    is $rc, 1, "$name: refused";
    like $out, qr/luxd\.lua:$line: .*$re/, "$name: at luxd.lua:$line" or diag $out;
}

my ($rc, $out) = Luxd::check_config(qq{server {\n  listen = { { "127.0.0.1:\$PORT", proxy_protocol = true }, { "127.0.0.1:1", proxy_protocol = false } },\n  real_ip = { from = { "10.0.0.0/8", "::1" } },\n}\nvhost "a" { real_ip = { from = "127.0.0.1", header = "X-Real-IP" } }\nvhost "b" { real_ip = false }\n});
is $rc, 0, 'a good config passes -t' or diag $out;
my $dir = (Luxd::check_config('vhost "x" { }'))[3];
open my $fh, '>', "$dir/t.lua" or die;
print $fh qq{server {\n  listen = { { "127.0.0.1:1", proxy_protocol = true } },\n  real_ip = { from = { "10.0.0.0/8", "::1" } },\n}\nvhost "a" { real_ip = { from = "127.0.0.1", header = "X-Real-IP" } }\nvhost "b" { real_ip = false }\nvhost "c" { }\n};
close $fh;
($rc, $out) = Luxd::run_luxd('-T', '-c', "$dir/t.lua");
like $out, qr/^  listen 127\.0\.0\.1:1 proxy_protocol$/m, '-T: the listener takes the PROXY protocol';
like $out, qr/^  real_ip from ::1,10\.0\.0\.0\/8, header \(none: PROXY protocol only\)  \(.*t\.lua:3\)$/m, '-T: the server\'s real_ip';
like $out, qr/^vhost a .*\n(?:  .*\n)*?  real_ip from 127\.0\.0\.1, header x-real-ip /m, '-T: a vhost\'s own';
like $out, qr/^vhost b .*\n(?:  .*\n)*?  real_ip off$/m, '-T: real_ip = false';
unlike $out, qr/^vhost c .*\n(?:  (?!real_ip).*\n)*  real_ip/m, '-T: a vhost without one shows nothing (the server\'s)';

# A reload turns proxy_protocol on for the address it keeps, and off again.
my $s = Luxd->new(config => <<'EOF');
server {
  listen = { { "127.0.0.1:$PORT", proxy_protocol = false } },
  workers = 2, error_log = "$DIR/error.log", pid_file = "$DIR/luxd.pid", access_log = false,
  real_ip = { from = "127.0.0.1" },
}
vhost "localhost" {
  default = true, root = "$DIR/www",
  policy = function(r) return r:respond(200, r.remote_addr) end,
}
EOF
sub ask {
    my ($bytes) = @_;
    my $c = $s->connect;
    $c->send($bytes);
    my $r = $c->response(timeout => 3);
    my $closed = $c->wait_closed(2);
    $c->close;
    return $r ? $r->{body} : ($closed ? 'closed' : 'none');
}
my $REQ = "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
my $PP = "PROXY TCP4 203.0.113.4 127.0.0.1 1 80\r\n";
is ask($REQ), '127.0.0.1', 'proxy_protocol = false: plain HTTP';
my $on = $s->{config_text} =~ s/proxy_protocol = false/proxy_protocol = true/r;
$s->write_config($on);
like $s->reload // 'timeout', qr/^ok generation 2 /, 'reload: proxy_protocol on';
my @got = map { ask($PP . $REQ) } 1 .. 6;
is_deeply \@got, [('203.0.113.4') x 6], 'the kept socket takes the PROXY header now (both workers)';
is ask($REQ), 'closed', 'and a request without one is closed';
$s->write_config($on =~ s/proxy_protocol = true/proxy_protocol = false/r);
like $s->reload // 'timeout', qr/^ok generation 3 /, 'reload: off again';
@got = map { ask($REQ) } 1 .. 6;
is_deeply \@got, [('127.0.0.1') x 6], 'plain HTTP again';
$s->stop;
done_testing;
