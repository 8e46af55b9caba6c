# issue 11 review of the status endpoint: every series a scrape shows is
# one name's, once. Names come from the config (upstream names, upstream
# server addresses, vhost names): two different names must never come out
# as the same series (a Prometheus parser refuses a scrape with a series
# twice, and a JSON object with a key twice loses one of them), and what
# comes out must be valid UTF-8 (both formats are UTF-8 text).
#
# Each case is tested at its limit and one past it:
#  - upstream names: 593 bytes come out whole, 594 are cut (handlers/status.c
#    esc(), a 600-byte buffer) and two names that differ only past the cut
#    became one series;
#  - upstream server addresses (a unix socket path may hold any byte but
#    NUL): "\t" and "\r" both came out as "?" (one series for two servers),
#    and a byte that is no UTF-8 came out raw (JSON::PP refuses the JSON);
#  - the vhost slot registry (stats.c, 16384 slots): the last slot is the
#    overflow "_other", and "_other" is also a valid vhost name: once the
#    registry is full the two are one series twice;
#  - Accept: media types are case-insensitive (RFC 9110 8.3.1), so
#    "Application/JSON" asks for JSON as "application/json" does.
use strict;
use warnings;
use Test::More;
use JSON::PP;
use Encode ();
use Luxd;

my $NAME  = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
my $LABEL = qr/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"/;

# The samples of a Prometheus text scrape: { "name{labels}" => count of lines }.
sub series {
    my ($text) = @_;
    my %n;
    for my $l (split /\n/, $text) {
        next if $l =~ /^#/;
        $n{$1 . ($2 // "")}++ if $l =~ /^($NAME)(\{$LABEL(?:,$LABEL)*\})? \d+$/;
    }
    return \%n;
}
sub twice { my ($n) = @_; return grep { $n->{$_} > 1 } sort keys %$n }

sub fetch {
    my ($s, $path, @h) = @_;
    my $data = $s->raw(Luxd::request(path => $path, headers => [@h], close => 1), timeout => 20);
    my ($r) = Luxd::parse_responses($data);
    return $r || { status => undef, headers => {}, body => '' };
}

# --- names from upstreams ------------------------------------------------------

my $A = 'a' x 592;    # + 1 byte: 593, the longest name that comes out whole
my $B = 'b' x 593;    # + 1 byte: 594, one past
my $s = Luxd->new(
    workers => 2,
    config  => <<"EOF",
upstream "${A}1" { "127.0.0.1:1" }
upstream "${A}2" { "127.0.0.1:1" }
upstream "${B}1" { "127.0.0.1:1" }
upstream "${B}2" { "127.0.0.1:1" }
upstream "tab" { "unix:/nonexistent/t\\tx.sock" }
upstream "cr" { "unix:/nonexistent/t\\rx.sock" }
upstream "latin1" { "unix:/nonexistent/caf\\xe9.sock" }
vhost "localhost" {
  default = true, root = "\$DIR/www",
  location "/status" { status = true },
}
EOF
);

my $r = fetch($s, '/status');
is $r->{status}, 200, 'Prometheus scrape: 200';
my $n = series($r->{body});
my @dup = twice($n);
ok !@dup, 'no series comes out twice' or diag join "\n", map { length > 200 ? substr($_, 0, 60) . '...' . substr($_, -40) : $_ } @dup;
for my $u ("${A}1", "${A}2") {
    is $n->{qq{luxd_upstream_requests_total{upstream="$u"}}}, 1, 'a 593-byte upstream name: its own series';
}
for my $u ("${B}1", "${B}2") {
    is $n->{qq{luxd_upstream_requests_total{upstream="$u"}}}, 1, 'a 594-byte upstream name: its own series, the name whole';
}
my @tabcr = grep { /^luxd_upstream_connects_total\{server="unix:\/nonexistent\/t.*x\.sock"\}$/ } keys %$n;
is scalar(@tabcr), 2, 'servers "t\tx.sock" and "t\rx.sock": two series, not one' or diag explain \@tabcr;
my $copy = $r->{body};
ok eval { Encode::decode('UTF-8', $copy, Encode::FB_CROAK); 1 },
  'the Prometheus scrape is valid UTF-8 (a server path with byte 0xE9)' or diag $@;

$r = fetch($s, '/status?format=json');
is $r->{status}, 200, 'JSON scrape: 200';
my $j = eval { decode_json($r->{body}) };
ok $j, 'the JSON scrape parses (a server path with byte 0xE9)' or diag $@;
if ($j) {
    is scalar(grep { /^b{593}/ } keys %{ $j->{upstreams} }), 2, 'JSON: both 594-byte upstream names are keys';
    is scalar(grep { /\/t.x\.sock$/ } keys %{ $j->{upstream_servers} }), 2, 'JSON: both servers with control bytes are keys';
}

$r = fetch($s, '/status', Accept => 'Application/JSON');
like $r->{headers}{'content-type'} // '', qr{^application/json}, 'Accept: Application/JSON gives JSON (media types ignore case)';
$r = fetch($s, '/status', Accept => 'application/json');
like $r->{headers}{'content-type'} // '', qr{^application/json}, 'Accept: application/json gives JSON';
$s->stop;

# --- the vhost slot registry at its end ----------------------------------------

# Slot 0 is "-", then localhost, "_other", v1..vK: 16383 slots with K =
# 16381, and slot 16383 (the last) is where the overflow goes, under the
# name "_other". K = 16380 fills the registry to one below that.
sub vhosts_config {
    my ($k) = @_;
    return qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/status" { status = true } }\n}
      . qq{vhost "_other" { root = "\$DIR/www" }\n}
      . join('', map { qq{vhost "v$_.test" { root = "\$DIR/www" }\n} } 1 .. $k);
}
$s = Luxd->new(workers => 2, config => vhosts_config(16380), files => { 'www/index.html' => "i\n" },
               start_timeout => 60);
is $s->get('/', Host => '_other')->{status}, 200, 'the vhost "_other" answers';
is $s->get('/', Host => 'v16380.test')->{status}, 200, 'v16380.test answers';
$r = fetch($s, '/status');
$n = series($r->{body});
is $n->{'luxd_requests_total{vhost="_other",class="2xx"}'}, 1, '16382 vhost names (the registry full but for its last slot): "_other" once';
@dup = twice($n);
ok !@dup, '... and no series twice' or diag join "\n", @dup[0 .. ($#dup < 5 ? $#dup : 5)];

my $text = vhosts_config(16381);
$text =~ s/\$DIR/$s->dir/ge;
$s->write_config($s->{config_text} =~ s/^vhost.*\z//msr . $text);
like $s->reload(timeout => 60) // '', qr/^ok/, 'reload with one vhost more (v16381.test)';
is $s->get('/', Host => 'v16381.test')->{status}, 200, 'v16381.test answers (counted in the overflow slot)';
$r = fetch($s, '/status');
$n = series($r->{body});
@dup = twice($n);
ok !@dup, 'one name past the registry: no series twice (the vhost "_other" and the overflow)'
  or diag join "\n", @dup[0 .. ($#dup < 5 ? $#dup : 5)];
$r = fetch($s, '/status?format=json');
my @keys = $r->{body} =~ /^ "(_other)":/mg;
is scalar(@keys), 1, 'JSON: "_other" is one key of "vhosts"';

$s->stop;
done_testing;
