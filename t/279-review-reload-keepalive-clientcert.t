# A break review (issue 19): a reload that adds a client-certificate
# requirement (client_ca) to a vhost does not apply to keep-alive
# connections opened before it: their requests are routed in the new
# generation, where SNI and Host pick the same context, so misdirected()
# says no, and the protected content is served without any certificate.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $dir) = TLSTest::certs('a.test', 'ca.test');
my $open = qq{vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }\n};
my $closed = qq{vhost "a.test" { default = true, root = "\$DIR/www", tls = { cert = "$c->{'a.test'}{cert}", key = "$c->{'a.test'}{key}", client_ca = "$c->{'ca.test'}{cert}" } }\n};
my ($s, $tp) = TLSTest::server(config => $open, files => { 'www/index.html' => "secret\n" });

# The new config, as the harness would write it, with $DIR/$PORT filled in.
(my $text = $s->{config_text}) =~ s/\Q$open\E//;
my $new = $open; $new =~ s/\$DIR/$s->{dir}/g;
my $newc = $closed; $newc =~ s/\$DIR/$s->{dir}/g;
my $cfg = $s->{config_text};
$cfg =~ s/\Q$new\E/$newc/ or die "config not found";
open my $fh, '>', "$s->{dir}/next.lua" or die; print $fh $cfg; close $fh;

my $py = <<'PY';
import socket, ssl, sys, os, signal, time
port, pid, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="a.test"); s.settimeout(5)
def get():
    s.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(4096)
        if not c: return "closed"
        buf += c
    h, body = buf.split(b"\r\n\r\n", 1)
    import re as _re
    m = _re.search(rb"(?i)content-length: *(\d+)", h); n = int(m.group(1)) if m else 0
    while len(body) < n:
        c = s.recv(4096)
        if not c: break
        body += c
    return h.split(b"\r\n")[0].decode() + " " + ("secret" if b"secret" in body else "-")
print("before:", get())
st = d + "/luxd.pid.reload"
def seq():
    try: return int(open(st).read().split()[0])
    except Exception: return 0
b = seq()
os.rename(d + "/next.lua", d + "/luxd.lua"); os.kill(pid, signal.SIGHUP)
for _ in range(500):
    if seq() > b: break
    time.sleep(0.01)
print("reload:", open(st).read().strip())
try: print("after:", get())
except Exception as e: print("after: error", e)
# a new connection after the reload, no certificate
try:
    s2 = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="a.test")
    s2.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"); print("new:", s2.recv(100)[:20])
except Exception as e: print("new: refused", type(e).__name__)
PY
open my $p, '>', "$s->{dir}/ka.py" or die; print $p $py; close $p;
my $out = `timeout 30 python3 $s->{dir}/ka.py $tp $s->{pid} $s->{dir} 2>&1`;
note $out;
like($out, qr/^reload: \d+ ok/m, 'the reload that requires client certificates took');
like($out, qr/^new: refused/m, 'a new connection without a certificate is refused');
unlike($out, qr/^after: HTTP\/1.1 200 OK secret/m,
       'the keep-alive connection opened before the reload is not served the content without a certificate');
like($out, qr/^after: HTTP\/1.1 421 /m, 'it gets 421: the client opens a new connection and meets the policy');
$s->stop;
done_testing;
