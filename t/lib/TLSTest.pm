package TLSTest;

# What the TLS tests share: certificates made with the openssl command for
# each run (nothing secret lives in the tree), `openssl s_client` runs, and
# a luxd with a plain listener (the harness's $PORT, which it waits on)
# beside a TLS one.
#
#   my $ca = TLSTest::certs($dir, 'a.test', 'b.test');   # {name => {cert, key}}
#   my ($s, $tport) = TLSTest::server(config => ..., certs => $ca);
#   my $out = TLSTest::s_client($tport, servername => 'a.test', input => "...");

use strict;
use warnings;
use File::Temp qw(tempdir);
use IPC::Open3 qw(open3);
use Symbol qw(gensym);
use Luxd;

# A self-signed certificate for $name (its subjectAltName too) in $dir:
# ECDSA P-256 unless type => 'rsa'; days => -1 makes one that expired a
# day ago. Returns {cert => path, key => path}.
sub cert {
    my ($dir, $name, %o) = @_;
    my $type = $o{type} // 'ec';
    my $base = "$dir/$name" . ($o{tag} // '') . ".$type";
    my @key = $type eq 'rsa' ? ('-newkey', 'rsa:2048') : ('-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256');
    if (defined $o{days} && $o{days} < 0) {
        # Expired: openssl req takes no negative days; x509 -req does.
        system("openssl req -new @key -nodes -keyout $base.key -out $base.csr -subj /CN=$name >/dev/null 2>&1") == 0
          && system("openssl x509 -req -in $base.csr -signkey $base.key -days $o{days} -out $base.pem >/dev/null 2>&1") == 0
          or die "openssl for an expired $name failed";
        return { cert => "$base.pem", key => "$base.key" };
    }
    my @cmd = ('openssl', 'req', '-x509', @key, '-nodes', '-keyout', "$base.key", '-out', "$base.pem",
               '-days', $o{days} // 30, '-subj', "/CN=$name", '-addext', "subjectAltName=DNS:$name");
    system("@cmd >/dev/null 2>&1") == 0 or die "openssl req for $name failed";
    return { cert => "$base.pem", key => "$base.key" };
}

# Certificates for each name in a fresh temp dir: {name => cert(...)}.
sub certs {
    my (@names) = @_;
    my $dir = tempdir('luxd-tls-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
    return { map { $_ => cert($dir, $_) } @names }, $dir;
}

# Lua for tls = { cert = ..., key = ... } of one pair.
sub tls_lua {
    my ($c) = @_;
    return qq{tls = { cert = "$c->{cert}", key = "$c->{key}" }};
}

# A luxd listening on $PORT (plain) and on a second, TLS, port; returns
# ($server, $tls_port). Options as Luxd->new's; $TLSPORT in the config is
# the TLS port.
sub server {
    my (%o) = @_;
    my $tport = Luxd::free_port();
    my $srv = $o{server} || {};
    my $listen = $o{listen} // qq{{ "127.0.0.1:\$PORT", { "127.0.0.1:$tport", tls = true } }};
    my $config = $o{config};
    s/\$TLSPORT\b/$tport/g for $listen, $config;
    my $s = Luxd->new(%o, config => $config, server => { %$srv, listen => \$listen });
    return ($s, $tport);
}

# Runs `openssl s_client` against 127.0.0.1:$port with input written to
# its stdin, and returns all it printed. Options: servername (none: -noservername), alpn, tls12,
# no_ticket, sess_out, sess_in, args (more arguments).
sub s_client {
    my ($port, %o) = @_;
    # With input (a request that closes), it reads until the server closes
    # (-ign_eof), which brings TLS 1.3's tickets too; without, it ends once
    # the handshake is done.
    my @a = ('timeout', '20', 'openssl', 's_client', '-connect', "127.0.0.1:$port");
    push @a, '-ign_eof' if defined $o{input};
    push @a, defined $o{servername} ? ('-servername', $o{servername}) : ('-noservername');
    push @a, '-alpn', $o{alpn} if $o{alpn};
    push @a, '-tls1_2' if $o{tls12};
    push @a, '-no_ticket' if $o{no_ticket};
    push @a, '-sess_out', $o{sess_out} if $o{sess_out};
    push @a, '-sess_in', $o{sess_in} if $o{sess_in};
    push @a, @{ $o{args} } if $o{args};
    my $pid = open3(my $in, my $out, undef, @a);
    binmode $in;
    binmode $out;
    print $in ($o{input} // '');
    close $in;
    local $/;
    my $text = <$out> // '';
    waitpid $pid, 0;
    return $text;
}

# The subject's CN a server name gets, from s_client's output.
sub subject {
    my ($text) = @_;
    return $text =~ /^subject=.*?CN\s*=\s*([^,\s\/]+)/m ? $1 : '';
}

# "New" or "Reused", as s_client reports the handshake.
sub resumed {
    my ($text) = @_;
    return $text =~ /^(New|Reused), /m ? $1 : '';
}

1;
