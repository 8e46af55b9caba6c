# issue 17 #6 (the proxy's part of it): request fields whose name has an
# underscore. CGI and WSGI backends map "_" and "-" in a field name to the
# same variable, so a client's X_Forwarded_For, sent on beside luxd's own
# X-Forwarded-For, could set the address the backend believes, and a
# Transfer_Encoding the framing it believes. They stay behind by default
# (nginx's underscores_in_headers off), each one logged at info with the
# client's address; proxy_underscores = true (vhost or location, inherited
# as the other proxy_* keys) sends them.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(hdr);

my $be = Luxd::Backend->start(name => 'be');
my $addr = $be->addr;
my $long = 'X_' . ('L' x 100);
my $s = Luxd->new(config => qq{upstream "app" { "$addr" }\n} . <<'EOF');
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  location "/" { proxy = "app" },
  location "/allow/" { proxy = "app", proxy_underscores = true },
}
vhost "on.test" {
  root = "$DIR/www",
  proxy = "app",
  proxy_underscores = true,
  location "/inherit/" { },
  location "/off/" { proxy_underscores = false },
}
EOF

my @fields = ('X_Forwarded_For' => '6.6.6.6', 'transfer_encoding' => 'chunked', 'X_CUSTOM' => 'c',
              '_' => 'u', $long => 'l', 'X-Normal' => 'n', 'X-Forwarded-For' => '10.0.0.1');

sub ask {
    my (%o) = @_;
    my $r = $s->http(path => $o{path}, host => $o{host} // 'localhost', headers => [@fields]);
    my $q = ($be->requests)[-1];
    is $q && $q->{path}, $o{path}, "$o{path}: reached the backend";
    return $q;
}

subtest 'by default: dropped, and each drop logged at info' => sub {
    my $q = ask(path => '/ok/1');
    is hdr($q, $_), undef, "$_ not sent" for 'X_Forwarded_For', 'Transfer_Encoding', 'X_Custom', '_', $long;
    is hdr($q, 'X-Forwarded-For'), '10.0.0.1, 127.0.0.1', "luxd's X-Forwarded-For alone says where the client is";
    is hdr($q, 'X-Normal'), 'n', 'a name without "_" is sent';
    is $q->{body}, '', 'no body: the framing is the request\'s own';
    for my $n ('X_Forwarded_For', 'transfer_encoding', 'X_CUSTOM', '_') {
        ok $s->wait_log(qr/\[info\].*upstream app: request field "\Q$n\E" from 127\.0\.0\.1 not sent: its name has a "_"/),
          "the drop of $n is logged at info";
    }
    ok $s->wait_log(qr/request field "X_L{62}\.\.\." from 127\.0\.0\.1 not sent/), 'a long name: logged cut at 64 bytes';
};

subtest 'proxy_underscores = true on a location: sent' => sub {
    my $q = ask(path => '/allow/ok/1');
    is hdr($q, 'X_Forwarded_For'), '6.6.6.6', 'X_Forwarded_For sent as it came';
    is hdr($q, 'X_CUSTOM'), 'c', 'X_CUSTOM sent';
    is hdr($q, $long), 'l', 'the long name sent';
    is hdr($q, '_'), 'u', '"_" sent';
    is hdr($q, 'X-Forwarded-For'), '10.0.0.1, 127.0.0.1', "luxd's X-Forwarded-For beside it";
};

subtest 'set on a vhost: its locations inherit it unless they set it' => sub {
    my $q = ask(path => '/inherit/ok/1', host => 'on.test');
    is hdr($q, 'X_CUSTOM'), 'c', 'inherited: sent';
    $q = ask(path => '/off/ok/1', host => 'on.test');
    is hdr($q, 'X_CUSTOM'), undef, 'a location that sets it false: dropped';
    $q = ask(path => '/ok/1', host => 'on.test');
    is hdr($q, 'X_CUSTOM'), 'c', 'the vhost itself: sent';
};

subtest 'proxy_underscores must be a boolean: refused with file:line' => sub {
    my ($rc, $out, $file) = Luxd::check_config(qq{upstream "app" { "127.0.0.1:1" }\n}
        . qq{vhost "localhost" {\n  default = true,\n  proxy = "app",\n  proxy_underscores = "on",\n}\n});
    is $rc, 1, 'luxd -t exits 1';
    like $out, qr/^\Q$file\E:5: .*"proxy_underscores" must be true or false/m, 'names the line and what is wrong'
      or diag $out;
};

$s->stop;
$be->stop;
done_testing;
