# issue 17 #8: every name and string a config gives that luxd copies into a
# request, a response or a log line has a bound (luxd.lua(5), LIMITS), and
# `luxd -t` refuses one past it with file:line: at exactly the limit the
# config passes, one byte more fails. A request_id_header of about 65,500
# bytes was accepted, and made `MAX_POLICY_HEADERS - r->extra_len` in
# src/policy/policy.c wrap around for a policy's r:set_header. Then a
# server with every string at its limit serves, the long headers sent
# whole, a policy's header beside them.
use strict;
use warnings;
use Test::More;
use Luxd;

my $S = qq~server { listen = "127.0.0.1:\$PORT", workers = 1 }\n~;
my $UP = qq~upstream "u" { "127.0.0.1:1" }\n~;
sub vh { my ($kv) = @_; qq~vhost "v" {\n  root = "\$DIR",\n  $kv\n}\n~ }    # kv on line 3 of it
sub srv { my ($kv) = @_; qq~server { listen = "127.0.0.1:\$PORT",\n  $kv }\n~ . vh('') }    # kv on line 2

# name => [limit, sub(n) -> (config text, line of the key), what the error says]
my %B = (
    'server.request_id_header' => [256, sub { (srv('request_id_header = "' . ('X' x $_[0]) . '"'), 2) }, qr/"request_id_header" is \d+ bytes long/],
    'real_ip.header' => [256, sub { (srv('real_ip = { from = "127.0.0.1", header = "' . ('X' x $_[0]) . '" }'), 2) }, qr/"header" is \d+ bytes long/],
    'headers name'   => [256, sub { ($S . vh('headers = { ["' . ('X' x $_[0]) . '"] = "v" },'), 4) }, qr/the header name "X{16}"\.\.\. is \d+ bytes long/],
    'headers value'  => [4096, sub { ($S . vh('headers = { ["X-A"] = "' . ('v' x $_[0]) . '" },'), 4) }, qr/"headers"\["X-A"\] is \d+ bytes long/],
    'proxy_headers name' => [256, sub { ($S . $UP . vh('proxy = "u", proxy_headers = { ["' . ('X' x $_[0]) . '"] = "v" },'), 5) }, qr/the header name "X{16}"\.\.\. is \d+ bytes long/],
    'proxy_headers value' => [4096, sub { ($S . $UP . vh('proxy = "u", proxy_headers = { ["X-A"] = "' . ('v' x $_[0]) . '" },'), 5) }, qr/"proxy_headers"\["X-A"\] is \d+ bytes long/],
    'cache_control'  => [4096, sub { ($S . vh('cache_control = "' . ('m' x $_[0]) . '",'), 4) }, qr/"cache_control" is \d+ bytes long/],
    'error_pages'    => [4096, sub { ($S . vh('error_pages = { [404] = "/' . ('e' x ($_[0] - 1)) . '" },'), 4) }, qr/"error_pages"\[404\] is \d+ bytes long/],
    'try_files'      => [4096, sub { ($S . vh('try_files = { "/' . ('t' x ($_[0] - 1)) . '", "=404" },'), 4) }, qr/"try_files"\[1\] is \d+ bytes long/],
    'rewrite target' => [4096, sub { ($S . vh('rewrite = { { "^/a$", "/' . ('r' x ($_[0] - 1)) . '" } },'), 4) }, qr/rewrite 1: the target is \d+ bytes long/],
    'redirect target' => [4096, sub { ($S . vh('redirect = { { "^/a$", "/' . ('r' x ($_[0] - 1)) . '" } },'), 4) }, qr/redirect 1: the target is \d+ bytes long/],
    'access_log format' => [4096, sub { (srv('access_log = { path = "$DIR/a.log", format = "$status ' . ('f' x ($_[0] - 8)) . '" }'), 2) }, qr/"format" is \d+ bytes long/],
    'index'          => [255, sub { ($S . vh('index = "' . ('i' x $_[0]) . '",'), 4) }, qr/"index" is \d+ bytes long/],
    'proxy_host'     => [259, sub {
        # A 253-byte DNS name and a port: the longest Host there is.
        my $n = shift;
        my $host = join('.', ('a' x 63) x 3) . '.' . ('b' x 61);    # 253
        my $v = $n == 259 ? "$host:65535" : '[' . ('1' x ($n - 5)) . '::1]';
        ($S . $UP . vh(qq~proxy = "u", proxy_host = "$v",~), 5);
    }, qr/"proxy_host" is \d+ bytes long/],
    'mime type'      => [4096, sub { ($S . vh('') . qq~mime {\n  [".prf"] = "text/~ . ('m' x ($_[0] - 5)) . qq~",\n}\n~, 7) }, qr/type of "\.prf" is \d+ bytes long/],
);

for my $name (sort keys %B) {
    my ($limit, $make, $why) = @{ $B{$name} };
    my ($text) = $make->($limit);
    my ($rc, $out) = Luxd::check_config($text);
    is($rc, 0, "$name: $limit bytes, at the limit: luxd -t passes") or diag($out);
    my ($past, $line) = $make->($limit + 1);
    ($rc, $out) = Luxd::check_config($past);
    is($rc, 1, "$name: " . ($limit + 1) . " bytes, one past: luxd -t fails");
    like($out, qr/luxd\.lua:$line: .*$why/, '  with file:line and the bound')
      or diag($out);
    like($out, qr/is \Q${\($limit + 1)}\E bytes long; at most $limit are allowed/, '  naming the length and the limit');
}

# What would split a header line is refused whatever its length: a name
# that is no token, a CR, LF or NUL in a value (checked before this issue).
for my $c (
    ['a name with a space', 'headers = { ["X A"] = "v" },', qr/"X A" is not a header name/],
    ['a CR LF in a value', 'headers = { ["X-A"] = "a\r\nX-B: b" },', qr/must not contain a line break/],
    ['a NUL in a value', 'headers = { ["X-A"] = "a\0b" },', qr/must not contain a NUL byte/],
    ['a LF in cache_control', 'cache_control = "a\nb",', qr/must not contain a line break/],
    ['a LF in a proxy_headers value', 'proxy = "u", proxy_headers = { ["X-A"] = "a\nb" },', qr/must not contain a line break/],
) {
    my ($name, $kv, $why) = @$c;
    my ($rc, $out) = Luxd::check_config($S . $UP . vh($kv));
    is($rc, 1, "$name: luxd -t fails");
    like($out, qr/luxd\.lua:5: .*$why/, '  with file:line') or diag($out);
}
my ($rc0, $out0) = Luxd::check_config(srv('request_id_header = "X:Y"'));
like($out0, qr/luxd\.lua:2: .*"request_id_header" must be a header name/, 'a request_id_header that is no token: refused');

# Everything at its limit, served: the response carries the 256-byte id
# header and the 4096-byte value whole, and a policy's own header.
my $id = 'X-' . ('I' x 254);
my $hn = 'X-' . ('N' x 254);
my $hv = 'v' x 4096;
my $fmt = '$status ' . ('f' x 4088);
my $config = <<"EOF";
server {
  listen = "127.0.0.1:\$PORT", workers = 1, error_log = "\$DIR/error.log",
  pid_file = "\$DIR/luxd.pid", request_id_header = "$id", access_log_buffer = 0,
  access_log = { path = "\$DIR/access.log", format = "$fmt" },
}
vhost "v" { default = true, root = "\$DIR/www", headers = { ["$hn"] = "$hv" },
  policy = function(r) r:set_header("X-Policy", "yes") end }
EOF
my $s = Luxd->new(config => $config, files => { 'www/index.html' => "hi\n" });
my $r = $s->get('/');
is($r->{status}, 200, 'a server with each string at its limit serves');
like($r->{headers}{lc $id} // '', qr/^[0-9a-f]{32}$/, 'the 256-byte request_id_header, with the id');
is($r->{headers}{lc $hn}, $hv, 'the 256-byte header name with its 4096-byte value');
is($r->{headers}{'x-policy'}, 'yes', "and the policy's r:set_header beside them");
my $log = '';
for (1 .. 100) { $log = $s->access_log; last if length $log; select undef, undef, undef, 0.05 }
like($log, qr/^200 f{4088}$/m, 'the 4096-byte log template, written');
$s->stop;
done_testing;
