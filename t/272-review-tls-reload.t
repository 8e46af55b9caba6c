# A break review of ec3cc7c (issue 19, TLS resumption and handshake
# bounds): the defects it found, each a test that fails on ec3cc7c.
#
# 1. A handshake that spans a reload seals its ticket with the freed
#    generation's ticket_key_file keys (heap-use-after-free under ASan; in
#    the normal build the ticket is sealed with the wiped key: an all-zero
#    AES key, so anyone who records the TLS 1.2 handshake reads the
#    session's master secret from the ticket).
# 2. handshake_timeout below 1 ms (accepted: "above 0") becomes 0 ms,
#    which set_deadline takes for "no deadline": stalled handshakes stay.
# 3. A ticket_key_file that is a FIFO hangs -t (and a reload, for good).
# 4. protocols = "TLSv1.2" with ciphers that suit no vhost's key (RSA
#    ciphers, ECDSA certificates) passes -t; every handshake then fails.
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test');
my $CONF = <<"EOF";
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }
EOF
my @FILES = (files => { 'www/index.html' => "hello\n" });

my $key = "$cdir/ticket.key";
{
    open my $fh, '>', $key or die "$key: $!";
    binmode $fh;
    print $fh join '', map { chr int rand 256 } 1 .. 80;
    close $fh;
    chmod 0600, $key;
}
my $name = do { open my $fh, '<', $key or die; binmode $fh; local $/; unpack 'H32', <$fh> };

# A TLS 1.2 client (MemoryBIO) that sends its ClientHello, reads the
# server's flight, then (after a reload when asked) its Finished; prints
# the key name of the NewSessionTicket (in clear in TLS 1.2) and whether
# an all-zero AES-256 key opens the ticket into an SSL_SESSION.
my $PY = <<'PY';
import socket, ssl, sys, time, os, signal, struct, subprocess
port, pid, reload, status = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
def seq():
    try: return int(open(status).read().split()[0])
    except Exception: return 0
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.maximum_version = ssl.TLSVersion.TLSv1_2
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
o = ctx.wrap_bio(inc, out, server_side=False, server_hostname="a.test")
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(3)
while True:
    try: o.do_handshake()
    except ssl.SSLWantReadError: pass
    d = out.read()
    if d and b"\x14\x03\x03\x00\x01\x01" in d:
        held = d; break
    if d: s.sendall(d)
    r = s.recv(65536)
    if not r: print("closed"); sys.exit(0)
    inc.write(r)
if reload:
    # The reload is awaited through its status file: then the generation
    # the handshake began under is gone.
    before = seq()
    os.kill(pid, signal.SIGHUP)
    deadline = time.time() + 10
    while seq() == before and time.time() < deadline: time.sleep(0.01)
s.sendall(held)
raw = b""
try:
    while len(raw) < 9 or len(raw) < 5 + struct.unpack(">H", raw[3:5])[0]:
        r = s.recv(65536)
        if not r: break
        raw += r
except Exception as e:
    pass
if len(raw) < 9 or raw[0] != 0x16 or raw[5] != 4:
    print("no ticket"); sys.exit(0)
body = raw[9:5 + struct.unpack(">H", raw[3:5])[0]]
tick = body[6:6 + struct.unpack(">H", body[4:6])[0]]
p = subprocess.run(["openssl", "enc", "-d", "-aes-256-cbc", "-K", "00" * 32, "-iv", tick[16:32].hex()],
                   input=tick[32:-32], capture_output=True)
print("name", tick[:16].hex(), "zero-key", "opens" if p.returncode == 0 and p.stdout[:1] == b"\x30" else "no")
PY
my $py = "$cdir/midhs.py";
{ open my $fh, '>', $py or die; print $fh $PY; close $fh }

{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES,
                                   server => { tls => \qq{{ ticket_key_file = "$key" }} });
    my $st = $s->reload_status_file;
    my $before = `timeout 20 python3 $py $tp $s->{pid} 0 $st`;
    like($before, qr/^name $name zero-key no$/m, 'without a reload: sealed with the file\'s first key');
    my $after = `timeout 20 python3 $py $tp $s->{pid} 1 $st`;
    like($after, qr/^name $name zero-key no$/m,
         'a handshake that spans a reload: its ticket is sealed with the file\'s first key too')
      or diag "got: $after";
    unlike($after, qr/zero-key opens/, 'and never with a wiped (all-zero) key');
    ok($s->alive, 'luxd is still running');
    unlike($s->stderr_log, qr/AddressSanitizer/, 'no ASan report') or diag $s->stderr_log;
    $s->stop;
}

# --- handshake_timeout below a millisecond ---------------------------------
{
    my ($s, $tp) = TLSTest::server(config => $CONF, @FILES,
                                   server => { tls => \q{{ handshake_timeout = 0.0004 }}, header_timeout => 2 });
    my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $tp, Timeout => 2) or die;
    my $t0 = time;
    my $rin = '';
    vec($rin, fileno($sock), 1) = 1;
    my $n = select(my $rout = $rin, undef, undef, 5);
    ok($n > 0, sprintf('handshake_timeout = 0.0004: a silent handshake is closed (waited %.1f s)', time - $t0));
    $s->stop;
}

# --- a FIFO as ticket_key_file -------------------------------------------------
{
    my $fifo = "$cdir/fifo.key";
    system('mkfifo', $fifo) == 0 or die 'mkfifo';
    my $conf = qq{server {\n listen = { { "127.0.0.1:\$PORT", tls = true } },\n tls = { ticket_key_file = "$fifo" } }\n$CONF};
    (my $text = $conf) =~ s/\$PORT/1/g;
    $text =~ s/\$DIR/$cdir/g;
    open my $fh, '>', "$cdir/fifo.lua" or die;
    print $fh $text;
    close $fh;
    my $t0 = time;
    my $out = `timeout 5 @{[Luxd::bin()]} -t -c $cdir/fifo.lua 2>&1`;
    my $rc = $? >> 8;
    isnt($rc, 124, sprintf('-t with a FIFO as ticket_key_file ends (took %.1f s)', time - $t0));
    like($out, qr/fifo\.key/, 'and names the file') or diag $out;
}

# --- ciphers that no certificate can use ---------------------------------------
{
    my $conf = <<"EOF2" . $CONF;
server {
  listen = { "127.0.0.1:\$PORT", { "127.0.0.1:1", tls = true } },
  tls = { protocols = "TLSv1.2", ciphers = "ECDHE-RSA-AES128-GCM-SHA256" },
}
EOF2
    my ($rc, $out) = Luxd::check_config($conf);
    isnt($rc, 0, '-t refuses TLS 1.2 only with RSA ciphers and only ECDSA certificates (no handshake can succeed)')
      or diag $out;
}

done_testing;
