# issue 17 #13: `luxd -T` shows every key. This walks every key of every
# block of lua/luxd/schema.lua (S.KEYS, read through luajit as t/61 does)
# and, for each, compiles a config that sets it to a value other than the
# default and one that leaves it out: the value must appear in what -T
# prints for the first (in the location's own lines for a location key)
# and not for the second. A key that takes true and false needs no entry
# below: it passes when -T prints its name and the two dumps differ. Any
# other key without an entry in %SET fails, so a key added to the schema
# must be shown by -T (src/config/gen.c) and given a value here.
use strict;
use warnings;
use Test::More;
use Cwd qw(abs_path);
use File::Temp qw(tempdir);
use Luxd;
use TLSTest;

my $lua = q{
  package.path = os.getenv("LUXD_ROOT") .. "/lua/?.lua;" .. package.path
  rawset(_G, "LUXD_TEST_HANDLERS", true)
  local S = require("luxd.schema")
  local ctx = { st = { prefix = "/" } }
  local out = {}
  for block, keys in pairs(S.KEYS) do
    for k, chk in pairs(keys) do
      local t = pcall(chk, ctx, k, true, k)
      local f = pcall(chk, ctx, k, false, k)
      out[#out + 1] = block .. "." .. k .. ((t and f) and " bool" or "")
    end
  end
  table.sort(out)
  print(table.concat(out, "\n"))
};
local $ENV{LUXD_ROOT} = $Luxd::ROOT;
open my $fh, '-|', 'luajit', '-e', $lua or die "luajit: $!";
my %bool;
my @keys = map { chomp; my ($k, $b) = split / /; $bool{$k} = 1 if $b; $k } <$fh>;
close $fh;
ok @keys > 80, scalar(@keys) . ' keys read from the schema';

# The Lua value each key is set to, and what -T must print for it. A
# location key uses the vhost key's entry unless it has its own.
# TLS: a certificate made for this run.
my ($TLS) = TLSTest::certs('v', 'w');
my ($C, $K) = @{ $TLS->{v} }{qw(cert key)};
my ($C2, $K2) = @{ $TLS->{w} }{qw(cert key)};    # what tls.cert and tls.key are set to
my %SET = (
    'vhost.tls'                => [qq{{ cert = "$C", key = "$K" }}, qr{^  tls cert \Q$C\E key \Q$K\E }m],
    'tls.cert'                 => [qq{"$C2"}, qr{^  tls cert \Q$C2\E key }m],
    'tls.key'                  => [qq{"$K2"}, qr{^  tls cert \S+ key \Q$K2\E }m],
    'tls.client_ca'            => [qq{"$C2"}, qr{^  tls client certificates required, signed by \Q$C2\E$}m],
    'tls.client_verify'        => ['"optional"', qr{^  tls client certificates optional, signed by }m],
    'server.access_log'        => ['"$DIR/x.log"', qr{^  access_log \S+/x\.log }m],
    'server.tls'               => ['{ handshake_timeout = 7 }', qr/^  tls protocols .*, handshake_timeout 7000ms$/m],
    'server_tls.handshake_timeout' => [7, qr/, handshake_timeout 7000ms$/m],
    'server_tls.protocols'     => ['"TLSv1.3"', qr/^  tls protocols TLSv1\.3-TLSv1\.3,/m],
    'server_tls.ciphers'       => ['"ECDHE-ECDSA-AES128-GCM-SHA256"', qr/, ciphers ECDHE-ECDSA-AES128-GCM-SHA256,/],
    'server_tls.ticket_key_file' => ['"$DIR/ticket.key"', qr{^  tls ticket keys from \S+/ticket\.key$}m],
    'server.access_log_buffer' => [32768, qr/^  access_log_buffer 32768$/m],
    'server.backlog'           => [77, qr/\bbacklog 77$/m],
    'server.body_timeout'      => [7, qr/\bbody_timeout 7000ms/],
    'server.drain_timeout'     => [7, qr/^  drain_timeout 7000ms$/m],
    'server.error_log'         => ['"$DIR/err.log"', qr{^  error_log \S+/err\.log,}m],
    'server.error_log_level'   => ['"warn"', qr/\berror_log_level warn$/m],
    'server.header_timeout'    => [7, qr/\bheader_timeout 7000ms/],
    'server.keepalive_requests' => [77, qr/\bkeepalive_requests 77$/m],
    'server.keepalive_timeout' => [7, qr/^  keepalive_timeout 7000ms/m],
    'server.listen'            => ['{ "127.0.0.1:1", "127.0.0.2:7" }', qr/^  listen 127\.0\.0\.2:7$/m],
    'server.max_body_bytes'    => [7777, qr/\bmax_body_bytes 7777,/],
    'server.max_connections'   => [777, qr/\bmax_connections 777$/m],
    'server.max_header_bytes'  => [7777, qr/^  max_header_bytes 7777,/m],
    'server.mime_types'        => ['"$DIR/mime.types"', qr{^  mime_types \S+/mime\.types \(1 extension}m],
    'server.pid_file'          => ['"$DIR/x.pid"', qr{^  pid_file \S+/x\.pid$}m],
    'server.policy_budget'     => [7777, qr/\bpolicy_budget 7777 /],
    'server.policy_memory'     => [2097152, qr/\bpolicy_memory 2097152 /],
    'server.real_ip'           => ['{ from = "192.0.2.0/24", header = "X-Real-IP" }',
                                   qr{^  real_ip from 192\.0\.2\.0/24, header x-real-ip }m],
    'server.request_id_header' => ['"X-Proof-Id"', qr/^  request_id_header X-Proof-Id$/m],
    'server.send_timeout'      => [7, qr/\bbody_timeout \d+ms, send_timeout 7000ms/],
    'server.user'              => ['"nobody"', qr/^  user nobody$/m],
    'server.vhost_dir'         => ['"$DIR/sites"', qr{^vhost_dir \S+/sites:}m],
    'server.workers'           => [3, qr/^  workers 3$/m],
    'listen.proxy_protocol'    => ['true', qr/^  listen 127\.0\.0\.1:1 proxy_protocol$/m],
    'listen.http2'             => ['true', qr/^  listen 127\.0\.0\.1:1 http2$/m],
    'real_ip.from'             => ['"192.0.2.0/24"', qr{real_ip from 192\.0\.2\.0/24}],
    'real_ip.header'           => ['"X-Proof"', qr/real_ip from .*, header x-proof /],
    'access_log.path'          => ['"$DIR/b.log"', qr{^  access_log \S+/b\.log }m],
    'access_log.format'        => ['"json"', qr/^  access_log \S+ \(json/m],
    'access_log.escape'        => ['"json"', qr/; JSON escaping/],
    'upstream.connect_timeout' => [7, qr/\bconnect_timeout 7000ms/],
    'upstream.tls'             => ['true', qr/^    tls: certificate checked for 127\.0\.0\.1 against the system's CAs/m],
    'upstream_tls.verify'      => ['false', qr/^    tls: certificate not checked/m],
    'upstream_tls.ca'          => [qq{"$C"}, qr/^    tls: .* against \Q$C\E/m],
    'upstream_tls.name'        => ['"be.test"', qr/^    tls: certificate checked for be\.test /m],
    'upstream.fail_timeout'    => [7, qr/\bfail_timeout 7000ms/],
    'upstream.keepalive'       => [7, qr/^  keepalive 7,/m],
    'upstream.keepalive_timeout' => [7, qr/^  keepalive 32, keepalive_timeout 7000ms$/m],
    'upstream.max_fails'       => [7, qr/\bmax_fails 7,/],
    'upstream.max_header_bytes' => [7777, qr/, max_header_bytes 7777$/m],
    'upstream.read_timeout'    => [7, qr/\bread_timeout 7000ms/],
    'upstream.send_timeout'    => [7, qr/, read_timeout \d+ms, send_timeout 7000ms$/m],
    'upstream_server.weight'   => [7, qr/^  server 127\.0\.0\.1:1 weight 7 /m],
    'redirect.status'          => [308, qr{redirect regex=\^/a\$ -> /b status=308}],
    'rule.prefix'              => ['"/proof/"', qr{deny prefix=/proof/ status}],
    'rule.suffix'              => ['".prf"', qr{deny suffix=\.prf status}],
    'rule.regex'               => ['"^/prf"', qr{deny regex=\^/prf status}],
    'rule.method'              => ['"DELETE"', qr{deny method=DELETE }],
    'rule.from'                => ['{ "192.0.2.0/24", "2001:db8::1" }', qr{deny from=192\.0\.2\.0/24,2001:db8::1 }],
    'rule.all'                 => ['true', qr{deny all status=403}],
    'rule.status'              => [410, qr{deny prefix=/base/ status=410}],
    'vhost.access'             => ['{ deny { prefix = "/proof/" } }', qr{^ +1\. deny prefix=/proof/ }m],
    'vhost.access_log'         => ['"$DIR/v.log"', qr{^  access_log \S+/v\.log }m],
    'vhost.aliases'            => ['"proof.example"', qr/^  proof\.example -> v$/m],
    'vhost.cache_control'      => ['"max-age=77"', qr/^ +Cache-Control: max-age=77$/m],
    'vhost.error_pages'        => ['{ [404] = "/proof.html" }', qr{^ +error_page 404 -> /proof\.html$}m],
    'vhost.fallback'           => ['"u"', qr/^ +fallback u$/m],
    'vhost.headers'            => ['{ ["X-Proof"] = "yes" }', qr/^ +headers:\n +X-Proof: yes$/m],
    'vhost.index'              => ['"proof.html"', qr/^ +index proof\.html$/m],
    'vhost.policy'             => ['function(r) end', qr/^ +policy \(\S+:\d+\)$/m],
    'vhost.proxy'              => ['"u"', qr/^ +proxy u$/m],
    'vhost.proxy_headers'      => ['{ ["X-Proof"] = "yes" }', qr/^ +proxy_headers:\n +X-Proof: yes$/m],
    'vhost.proxy_host'         => ['"proof.example"', qr/^ +proxy_host proof\.example,/m],
    'vhost.real_ip'            => ['{ from = "192.0.2.0/24", header = "X-Real-IP" }',
                                   qr{^  real_ip from 192\.0\.2\.0/24, header x-real-ip }m],
    'vhost.redirect'           => ['{ { "^/a$", "/b" } }', qr{^ +1\. redirect regex=\^/a\$ -> /b }m],
    'vhost.rewrite'            => ['{ { "^/a$", "/b" } }', qr{^ +1\. rewrite regex=\^/a\$ -> /b }m],
    'vhost.root'               => ['"$DIR/other"', qr{^ +root \S+/other$}m],
    'vhost.try_files'          => ['{ "$uri", "=404" }', qr/^ +try_files \$uri =404$/m],
);

# Where a key of each block is written; KEY is replaced by "key = value".
# Each block's own required keys are given here, so a set key replaces one.
my $UP = qq{upstream "u" { "127.0.0.1:1" }\n};
my %PLACE = (
    server   => sub { server($_[0]) . vhost('') },
    vhost    => sub { server() . $UP . vhost($_[0]) },
    location => sub { server() . $UP . vhost(qq{location "/l/" { $_[0] }}) },
    upstream => sub { server() . qq{upstream "u" { "127.0.0.1:1", $_[0] }\n} . vhost('proxy = "u"') },
    upstream_tls => sub {
        my $kv = $_[0] eq '' ? 'verify = true' : $_[0];
        server() . qq{upstream "u" { "127.0.0.1:1", tls = { $kv } }\n} . vhost('proxy = "u"');
    },
    upstream_server => sub {
        server() . qq{upstream "u" { { "127.0.0.1:1", $_[0] } }\n} . vhost('proxy = "u"');
    },
    listen   => sub {
        server(qq{listen = { { "127.0.0.1:1", $_[0] } }, real_ip = { from = "127.0.0.1" }}) .
          vhost(qq{tls = { cert = "$C", key = "$K" }});
    },
    tls      => sub {
        my $kv = $_[0];
        # The other of the pair, matching: a key must belong to its cert.
        my $w = $kv =~ /\Q$C2\E|\Q$K2\E/;
        $kv .= ', cert = "' . ($w ? $C2 : $C) . '"' unless $kv =~ /^cert =/;
        $kv .= ', key = "' . ($w ? $K2 : $K) . '"' unless $kv =~ /^key =/;
        $kv .= qq{, client_ca = "$C"} if $kv =~ /^client_verify =/;
        $kv =~ s/^, //;
        server() . vhost(qq{tls = { $kv }});
    },
    server_tls => sub {
        my $kv = $_[0] eq '' ? 'handshake_timeout = 10' : $_[0];
        server(qq{tls = { $kv }}) . vhost('');
    },
    real_ip  => sub {
        my $kv = $_[0];
        $kv = qq{from = "127.0.0.1", $kv} unless $kv =~ /^from =/;
        server(qq{real_ip = { $kv }}) . vhost('');
    },
    access_log => sub {
        my $kv = $_[0];
        $kv = qq{path = "\$DIR/a.log", $kv} unless $kv =~ /^path =/;
        server(qq{access_log = { $kv }}) . vhost('');
    },
    rule     => sub {
        my $kv = $_[0];
        $kv = qq{prefix = "/base/", $kv} if $kv =~ /^status =/;
        $kv = 'prefix = "/base/"' if $kv eq '';
        server() . vhost(qq{access = { deny { $kv } }});
    },
    redirect => sub { server() . vhost(qq{redirect = { { "^/a\$", "/b", $_[0] } }}) },
);
sub server {
    my ($kv) = @_;
    my %s = (listen => '"127.0.0.1:1"', workers => 1);
    my $text = join ', ', map { "$_ = $s{$_}" } grep { !defined $kv || $kv !~ /^$_ =/ } sort keys %s;
    $text .= ", $kv" if defined $kv && $kv ne '';
    return "server { $text }\n";
}
sub vhost { my ($kv) = @_; qq{vhost "v" { root = "\$DIR/www", $kv }\n} }

# -T of a config text, with the temporary directory as DIR.
my $test_bin = Luxd::bin() . '-test';    # test_handler is a key of luxd-test only
sub dump_of {
    my ($text) = @_;
    my $dir = abs_path(tempdir('luxd-XXXXXX', TMPDIR => 1, CLEANUP => 1));
    mkdir "$dir/$_" for qw(www other sites);
    open my $m, '>', "$dir/mime.types" or die; print $m "text/x-proof prf\n"; close $m;
    open my $k, '>', "$dir/ticket.key" or die; print $k 'k' x 80; close $k;
    (my $t = $text) =~ s/\$DIR\b/$dir/g;
    open my $f, '>', "$dir/luxd.lua" or die "$dir: $!";
    print $f $t;
    close $f;
    my $out = `$test_bin -T -c $dir/luxd.lua 2>&1`;
    my $rc = $? >> 8;
    $out =~ s/\Q$dir\E/DIR/g;
    $out =~ s/^luxd: configuration .* is ok .*\n?//m;
    $out =~ s/ fingerprint [0-9a-f]+//;
    return $rc == 0 ? $out : "-T failed: $out";
}

# A location key is looked for in the location's own lines.
sub section {
    my ($block, $out) = @_;
    return $out unless $block eq 'location';
    return $out =~ /^  location \/l\/ .*\n((?:    .*\n?)*)/m ? $1 : '';
}

for my $key (@keys) {
    my ($block, $name) = split /\./, $key;
    my $place = $PLACE{$block};
    unless ($place) { fail("$key: a block this test does not know how to write"); next }
    my $set = $SET{$key} // ($block eq 'location' ? $SET{"vhost.$name"} : undef);
    my $without = dump_of($place->(''));
    if ($set) {
        my ($value, $want) = @$set;
        my $with = dump_of($place->("$name = $value"));
        my $ok = like(section($block, $with), $want, "$key = $value: -T shows it");
        $ok &&= unlike(section($block, $without), $want, "$key: and not without it");
        diag("with:\n$with\nwithout:\n$without") unless $ok;
    } elsif ($bool{$key}) {
        my $t = dump_of($place->("$name = true"));
        my $f = dump_of($place->("$name = false"));
        my $shown = section($block, $t) . section($block, $f);
        ok($t ne $f && $t !~ /^-T failed/ && $f !~ /^-T failed/ && $shown =~ /\b\Q$name\E\b/,
           "$key = true | false: -T shows which") or diag("true:\n$t\nfalse:\n$f");
    } else {
        fail("$key: no value in %SET of t/228 to prove that -T shows it (add one, and "
             . "print the key in src/config/gen.c)");
    }
}
done_testing;
