# TLS session resumption outside generations (issue 19): the keys that seal
# tickets and the cache of TLS 1.2 session ids belong to the process, so a
# session made before a reload resumes after it (a reload makes new
# SSL_CTXs, whose own keys and cache would forget every session), and
# still never under another vhost. server { tls = { ticket_key_file } }
# shares ticket keys between servers (a fleet behind one balancer): a
# ticket one seals, another opens; a key listed after the first only
# opens. The key file is checked at -t with file:line, at its size limits.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $cdir) = TLSTest::certs('a.test', 'b.test');
my $CONF = <<"EOF";
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]} }
vhost "b.test" { root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'b.test'})]} }
EOF
my $REQ = "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
my $n = 0;

# A session from the server on $port under $name, with the s_client
# options given; returns the session file.
sub session {
    my ($port, $name, %o) = @_;
    my $f = "$cdir/sess" . $n++;
    my $t = TLSTest::s_client($port, servername => $name, input => $REQ, sess_out => $f, %o);
    is(TLSTest::resumed($t), 'New', "a new session from $name" . ($o{tls12} ? ' (TLS 1.2)' : ''));
    return $f;
}

sub resumes {
    my ($port, $name, $f, %o) = @_;
    return TLSTest::resumed(TLSTest::s_client($port, servername => $name, input => $REQ,
                                              sess_in => $f, %o));
}

sub keyfile {
    my ($name, @keys) = @_;
    my $f = "$cdir/$name";
    open my $fh, '>', $f or die "$f: $!";
    binmode $fh;
    print $fh @keys;
    close $fh;
    chmod 0600, $f;
    return $f;
}

sub rand_key { join '', map { chr int rand 256 } 1 .. $_[0] // 80 }

# --- the process's own keys: sessions outlive a reload ---------------------
{
    my ($s, $tp) = TLSTest::server(config => $CONF, files => { 'www/index.html' => "a\n" });
    my $t13 = session($tp, 'a.test');
    my $t12 = session($tp, 'a.test', tls12 => 1);
    my $id12 = session($tp, 'a.test', tls12 => 1, no_ticket => 1);
    is(resumes($tp, 'a.test', $t13), 'Reused', 'a TLS 1.3 ticket resumes');
    like($s->reload // $s->reload_error, qr/^ok/, 'a reload');
    is(resumes($tp, 'a.test', $t13), 'Reused', 'a TLS 1.3 ticket from before the reload resumes');
    is(resumes($tp, 'a.test', $t12, tls12 => 1), 'Reused',
       'a TLS 1.2 ticket from before the reload resumes');
    is(resumes($tp, 'a.test', $id12, tls12 => 1, no_ticket => 1), 'Reused',
       'a TLS 1.2 session id from before the reload resumes (the cache is the process\'s)');
    is(resumes($tp, 'b.test', $t13), 'New', 'after the reload too, a.test\'s ticket is not resumed under b.test');
    is(resumes($tp, 'b.test', $id12, tls12 => 1, no_ticket => 1), 'New',
       'nor a.test\'s session id');
    like($s->reload // $s->reload_error, qr/^ok/, 'a second reload');
    is(resumes($tp, 'a.test', $t13), 'Reused', 'two generations later, the ticket still resumes');
    $s->stop;

    # A restart forgets the process's keys: they were never written down.
    my ($s2, $tp2) = TLSTest::server(config => $CONF, files => { 'www/index.html' => "a\n" });
    is(resumes($tp2, 'a.test', $t13), 'New', 'another process does not open the first one\'s tickets');
    is(resumes($tp2, 'a.test', $id12, tls12 => 1, no_ticket => 1), 'New', 'nor know its session ids');
    $s2->stop;
}

# --- a key file shared by two servers ----------------------------------------
{
    my ($k1, $k2) = (rand_key(), rand_key());
    my $f1 = keyfile('one.key', $k1);
    my $f21 = keyfile('two-one.key', $k2, $k1);
    my $f2 = keyfile('two.key', $k2);
    my @o = (config => $CONF, files => { 'www/index.html' => "a\n" });
    my ($a, $ta) = TLSTest::server(@o, server => { tls => \qq{{ ticket_key_file = "$f1" }} });
    my ($b, $tb) = TLSTest::server(@o, server => { tls => \qq{{ ticket_key_file = "$f1" }} });
    my ($c2, $tc) = TLSTest::server(@o, server => { tls => \qq{{ ticket_key_file = "$f21" }} });
    my ($d, $td) = TLSTest::server(@o, server => { tls => \qq{{ ticket_key_file = "$f2" }} });
    my $t13 = session($ta, 'a.test');
    my $t12 = session($ta, 'a.test', tls12 => 1);
    is(resumes($tb, 'a.test', $t13), 'Reused', 'another server with the same key file opens the ticket');
    is(resumes($tb, 'a.test', $t12, tls12 => 1), 'Reused', 'a TLS 1.2 ticket too');
    is(resumes($tc, 'a.test', $t13), 'Reused', 'a server that lists the key second still opens it');
    is(resumes($td, 'a.test', $t13), 'New', 'a server without that key does not');
    is(resumes($tb, 'b.test', $t13), 'New', 'the shared key does not carry a session to another vhost');
    # The server that lists k1 second seals with k2: d opens that.
    my $tc13 = session($tc, 'a.test');
    is(resumes($td, 'a.test', $tc13), 'Reused', 'the first key of the file seals new tickets');
    is(resumes($ta, 'a.test', $tc13), 'New', 'a server that lacks it cannot open them');
    # A reload that changes the file: its keys change with the generation.
    system('cp', $f2, $f1) == 0 or die 'cp';
    like($a->reload // $a->reload_error, qr/^ok/, 'a reload after the key file changed');
    is(resumes($ta, 'a.test', $tc13), 'Reused', 'the reload read the new key');
    $_->stop for $a, $b, $c2, $d;
}

# --- -t: the key file -------------------------------------------------------
{
    sub conf_with {
        my ($file) = @_;
        return qq{server {\n listen = { { "127.0.0.1:\$PORT", tls = true } },\n tls = {\n  ticket_key_file = "$file" } }\n$CONF};
    }
    my $ok = keyfile('eight.key', map { rand_key() } 1 .. 8);
    my ($rc, $out) = Luxd::check_config(conf_with($ok));
    is($rc, 0, 'eight keys (the most a file may hold): -t accepts them') or diag $out;
    my @bad = (
        [ 'nine keys', keyfile('nine.key', map { rand_key() } 1 .. 9), qr/more than 640 bytes: a ticket key file holds 1 to 8 keys of 80 random bytes/ ],
        [ 'a key one byte short', keyfile('short.key', rand_key(79)), qr/79 bytes: a ticket key file holds 1 to 8 keys of 80 random bytes each/ ],
        [ 'a byte past one key', keyfile('long.key', rand_key(81)), qr/81 bytes: a ticket key file/ ],
        [ 'an empty file', keyfile('empty.key'), qr/0 bytes: a ticket key file .*openssl rand 80 > FILE/ ],
        [ 'a missing file', "$cdir/none.key", qr/No such file or directory/ ],
    );
    for my $b (@bad) {
        my ($what, $file, $re) = @$b;
        ($rc, $out) = Luxd::check_config(conf_with($file));
        isnt($rc, 0, "-t refuses $what");
        like($out, qr/luxd\.lua:4: server tls ticket_key_file "\Q$file\E": /, "$what: at the key's line");
        like($out, $re, "$what: says what is wrong");
    }
    chmod 0644, $ok;
    ($rc, $out) = Luxd::check_config(conf_with($ok));
    is($rc, 0, 'a key file everyone may read is accepted');
    like($out, qr/luxd\.lua:4: .*readable by everyone: whoever reads it can decrypt recorded sessions/,
         'with a warning that says why it matters');
}

done_testing;
