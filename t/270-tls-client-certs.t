# Client certificates per vhost (mTLS, issue 19): tls = { client_ca,
# client_verify = "require" | "optional" }. A required certificate that is
# missing or signed by another CA fails the handshake; an optional one may
# be missing but not wrong; a vhost without client_ca never asks. The
# verified subject and SHA-256 fingerprint reach policies (r.tls.client)
# and the access log. What lighttpd and nginx got wrong: a session made
# under a vhost that asks no certificate is never resumed under one that
# does, nor is Host allowed to move a request there (421); a session that
# resumes keeps its client's identity, and a reload that changes the CA
# file ends it. -t checks the CA file with file:line.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use TLSTest;

my ($c, $dir) = TLSTest::certs('a.test', 's.test', 'o.test');
sub run { system("@_ >/dev/null 2>&1") == 0 or die "failed: @_" }
# Two CAs, a client certificate of each.
for my $ca (qw(ca rogue)) {
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $dir/$ca.key -out $dir/$ca.pem -days 30 -subj /CN=$ca");
}
for my $u ([ 'alice', 'ca' ], [ 'mallory', 'rogue' ]) {
    my ($name, $ca) = @$u;
    run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $dir/$name.key -out $dir/$name.csr -subj /O=Staff/CN=$name");
    run("openssl x509 -req -in $dir/$name.csr -CA $dir/$ca.pem -CAkey $dir/$ca.key -CAcreateserial -days 30 -out $dir/$name.pem");
}
my $fp = `openssl x509 -in $dir/alice.pem -noout -fingerprint -sha256`;
$fp =~ s/^.*=//; $fp =~ s/[:\s]//g; $fp = lc $fp;
{
    open my $in, '<', "$dir/ca.pem" or die;
    open my $o, '>', "$dir/clients.pem" or die;
    print {$o} <$in>;
}

my $WHO = q{policy = function(r)
    local t = r.tls
    local who = t and t.client and (t.client.subject .. " " .. t.client.fingerprint) or "nobody"
    return r:respond(200, who .. (t and t.resumed and " resumed" or ""))
  end};
my $CONF = <<"EOF";
vhost "a.test" { default = true, root = "\$DIR/www", @{[TLSTest::tls_lua($c->{'a.test'})]}, $WHO }
vhost "s.test" { root = "\$DIR/www", $WHO,
  tls = { cert = "$c->{'s.test'}{cert}", key = "$c->{'s.test'}{key}", client_ca = "$dir/clients.pem" } }
vhost "o.test" { root = "\$DIR/www", $WHO,
  tls = { cert = "$c->{'o.test'}{cert}", key = "$c->{'o.test'}{key}", client_ca = "$dir/clients.pem",
          client_verify = "optional" } }
EOF
my ($s, $tp) = TLSTest::server(config => $CONF, files => { 'www/index.html' => "x\n" },
    server => { access_log => \'{ path = "$DIR/access.log", format = "$host $tls_client_subject $tls_client_fingerprint $tls_session_reused" }',
                access_log_buffer => 0 });

# The body of GET / on $name with the client certificate of $who (or none).
sub who {
    my ($name, $who, @more) = @_;
    my @cert = $who ? ('--cert', "$dir/$who.pem", '--key', "$dir/$who.key") : ();
    my ($out, $rc) = $s->curl('-k', '-s', @cert, @more, '--resolve', "$name:$tp:127.0.0.1", "https://$name:$tp/");
    return $rc == 0 ? $out : "refused ($rc)";
}

like(who('s.test', 'alice'), qr/^CN=alice,O=Staff $fp$/, 'require: a certificate of client_ca\'s CA: its subject and fingerprint reach the policy');
like(who('s.test'), qr/^refused/, 'require: no certificate, the handshake fails');
like(who('s.test', 'mallory'), qr/^refused/, 'require: a certificate of another CA fails');
is(who('o.test'), 'nobody', 'optional: no certificate, served without an identity');
like(who('o.test', 'alice'), qr/^CN=alice,O=Staff $fp$/, 'optional: a good one is read');
like(who('o.test', 'mallory'), qr/^refused/, 'optional: a bad one still fails');
is(who('a.test', 'alice'), 'nobody', 'a vhost without client_ca does not ask for one');

# A connection made for a.test (no certificate asked) cannot reach s.test.
like(who('a.test', undef, '-H', 'Host: s.test', '-w', ' %{http_code}'), qr/ 421$/,
     'Host s.test over a connection made for a.test: 421');

# Sessions: one from a.test is not resumed under s.test; one from s.test
# resumes with its client.
my $sa = "$dir/sess-a";
my $REQ = "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n";
TLSTest::s_client($tp, servername => 'a.test', input => sprintf($REQ, 'a.test'), sess_out => $sa);
my $t = TLSTest::s_client($tp, servername => 's.test', input => sprintf($REQ, 's.test'), sess_in => $sa);
isnt(TLSTest::resumed($t), 'Reused', 'a.test\'s session is not resumed under s.test');
unlike($t, qr/\r\n\r\nCN=/, 'and s.test is not served without a certificate');
my $ss = "$dir/sess-s";
my @alice = (args => [ '-cert', "$dir/alice.pem", '-key', "$dir/alice.key" ]);
$t = TLSTest::s_client($tp, servername => 's.test', input => sprintf($REQ, 's.test'), sess_out => $ss, @alice);
is(TLSTest::resumed($t), 'New', 's.test with alice\'s certificate');
$t = TLSTest::s_client($tp, servername => 's.test', input => sprintf($REQ, 's.test'), sess_in => $ss);
is(TLSTest::resumed($t), 'Reused', 'her session resumes (no certificate sent again)');
# (s_client prints session tickets among the body: the log says it better.)
ok(Luxd::wait_for(sub { $s->access_log =~ /^s\.test CN=alice,O=Staff \Q$fp\E r$/m }, 10),
   'and keeps her identity (the access log: subject, fingerprint, resumed)') or diag $s->access_log;
like($s->access_log, qr/^s\.test CN=alice,O=Staff \Q$fp\E \.$/m, 'the first connection: her subject and fingerprint');
like($s->access_log, qr/^a\.test - - \.$/m, 'and - without a certificate');
# A reload that changes the CA file: the session no longer resumes.
{
    open my $in, '<', "$dir/rogue.pem" or die;
    open my $o, '>>', "$dir/clients.pem" or die;
    print {$o} <$in>;
}
like($s->reload // $s->reload_error, qr/^ok/, 'a reload with another client_ca file');
$t = TLSTest::s_client($tp, servername => 's.test', input => sprintf($REQ, 's.test'), sess_in => $ss);
isnt(TLSTest::resumed($t), 'Reused', 'a session verified under the old CAs is not resumed');
like(who('s.test', 'mallory'), qr/^CN=mallory,O=Staff /, 'and the new CA is trusted');
$s->stop;

# -t
for my $b (
    [ 'a missing client_ca', qq{client_ca = "$dir/none.pem"}, qr/luxd\.lua:3: vhost "s\.test": tls client_ca "[^"]+none\.pem": No such file/ ],
    [ 'a client_ca without a certificate', qq{client_ca = "$c->{'a.test'}{key}"}, qr/luxd\.lua:3: .*tls client_ca "[^"]+": no CA certificate in it/ ],
    [ 'client_verify without client_ca', q{client_verify = "optional"}, qr/luxd\.lua:3: .*client_verify needs client_ca/ ],
    [ 'client_verify misspelt', qq{client_ca = "$dir/ca.pem", client_verify = "required"}, qr/luxd\.lua:3: .*"client_verify" must be one of "require", "optional", got "required" \(did you mean "require"\?\)/ ],
) {
    my ($what, $kv, $re) = @$b;
    my ($rc, $out) = Luxd::check_config(qq{server { listen = { { "127.0.0.1:\$PORT", tls = true } } }\nvhost "s.test" { default = true, root = "/tmp",\n tls = { cert = "$c->{'s.test'}{cert}", key = "$c->{'s.test'}{key}", $kv } }\n});
    isnt($rc, 0, "-t refuses $what");
    like($out, $re, "$what: file:line and why") or diag $out;
}

done_testing;
