# Mass virtual hosting (server.vhost_dir, Tux's virtual_server): Host
# "a.example" is served from vhost_dir/a.example/; named vhosts win; a Host
# that is not a plain host name never reaches a file outside vhost_dir.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SECRET = 'TOP-SECRET-OUTSIDE-VHOST-DIR';

# The layout: $DIR/sites is vhost_dir. Everything around it holds the secret,
# so any Host that climbs out of it shows up in a body.
my %files = (
    'sites/a.example/index.html'   => "mass a\n",
    'sites/a.example/page.txt'     => "page of a\n",
    'sites/b.example/index.html'   => "mass b\n",
    'sites/b-2_x.example/index.html' => "mass b-2_x\n",
    'sites/1.2.3.4/index.html'     => "mass ip\n",
    'sites/named.example/index.html' => "WRONG: vhost_dir copy of a named vhost\n",
    'sites/a..b/index.html'        => "WRONG: a host with an empty label\n",
    'sites/index.html'             => "WRONG: vhost_dir itself\n",
    'sites/a/b/index.html'         => "WRONG: a host with a slash\n",
    'sites/%2e%2e/index.html'      => "WRONG: a percent-encoded host\n",
    'named/index.html'             => "named\n",
    'index.html'                   => "$SECRET index\n",
    'secret.txt'                   => "$SECRET file\n",
    'etc/index.html'               => "$SECRET etc\n",
    'etc/passwd'                   => "$SECRET passwd\n",
    'sites-x/index.html'           => "$SECRET sibling\n",
);

my @HOSTILE = (
    '..', '.', '...', 'a..b', '../etc', '..%2fetc', 'a/b', 'a.example/..', 'a.example/../..',
    '../sites-x', '..\\etc', 'a\\..\\..', '%2e%2e', '%2e%2e%2fetc', '', '.a.example', 'a.example..',
    '..:80', ' ..', "..\t", '.%2e', '*', '~', 'a.example%00', '..;', '..?', '..#',
);

# Sends one request with a Host header written byte for byte.
sub with_host {
    my ($s, $host, $path) = @_;
    $path //= '/';
    my ($r) = parse_responses(scalar $s->raw("GET $path HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n\r\n"));
    return $r // { status => undef, body => '' };
}

sub no_secret {
    my ($r, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $body = $r->{body} // '';
    ok($body !~ /\Q$SECRET\E/ && $body !~ /WRONG/, "$name: nothing outside vhost_dir, no non-plain host dir")
      or diag("status " . ($r->{status} // 'none') . ": $body");
}

for my $with_default (1, 0) {
    my $label = $with_default ? 'with a default vhost' : 'without a default vhost';
    my $config = qq{vhost "named.example" { root = "\$DIR/named" }\n};
    $config .= qq{vhost "default.test" { root = "\$DIR/default-site", default = true }\n} if $with_default;
    my $s = Luxd->new(
        config => $config,
        server => { vhost_dir => '$DIR/sites' },
        files  => { %files, 'default-site/index.html' => "default\n" },
    );
    my $port = $s->port;

    subtest "$label: hosts served from vhost_dir" => sub {
        check_response($s->get('/', Host => 'a.example'), { status => 200, body => "mass a\n" }, 'a.example');
        check_response($s->get('/page.txt', Host => 'a.example'), { status => 200, body => "page of a\n" }, 'a file in it');
        check_response($s->get('/', Host => 'b.example'), { status => 200, body => "mass b\n" }, 'b.example');
        check_response($s->get('/', Host => 'b-2_x.example'), { status => 200, body => "mass b-2_x\n" },
                       'hyphen, digit and underscore');
        check_response($s->get('/', Host => 'A.Example'), { status => 200, body => "mass a\n" }, 'case-insensitive');
        check_response($s->get('/', Host => "a.example:$port"), { status => 200, body => "mass a\n" }, 'port ignored');
        check_response($s->get('/page.txt', Host => 'b.example'), { status => 404 }, 'each host has its own dir');
        check_response($s->get('/', Host => '1.2.3.4'), { status => 200, body => "mass ip\n" }, 'an IPv4 address');
        # As for named vhosts, "a.example." is the same host as "a.example".
        check_response($s->get('/page.txt', Host => 'a.example.'), { status => 200, body => "page of a\n" }, 'trailing dot');
    };

    subtest "$label: named vhosts win over vhost_dir" => sub {
        check_response($s->get('/', Host => 'named.example'), { status => 200, body => "named\n" }, 'named.example');
        check_response($s->get('/', Host => 'NAMED.example:80'), { status => 200, body => "named\n" }, 'case and port');
    };

    subtest "$label: a Host whose dir does not exist" => sub {
        my $r = $s->get('/', Host => 'nosuch.example');
        check_response($r, { status => 404 }, 'nosuch.example -> 404');
        no_secret($r, 'nosuch.example');
        $r = $s->get('/page.txt', Host => 'nosuch.example');
        check_response($r, { status => 404 }, 'a file under it -> 404');
    } unless $with_default;

    subtest "$label: hostile Host values never leave vhost_dir" => sub {
        for my $h (@HOSTILE) {
            for my $path ('/', '/index.html', '/secret.txt', '/passwd', '/etc/passwd', '/../secret.txt', '/%2e%2e/secret.txt') {
                my $r = with_host($s, $h, $path);
                ok(defined $r->{status}, "Host: '$h' $path: an answer") or next;
                no_secret($r, "Host: '$h' $path");
                if ($r->{status} == 200) {
                    ok($with_default && $r->{body} eq "default\n", "Host: '$h' $path: a 200 comes only from the default vhost")
                      or diag("got $r->{body}");
                } else {
                    ok(grep({ $_ == $r->{status} } 400, 404), "Host: '$h' $path: 400 or 404")
                      or diag("got $r->{status}");
                }
            }
        }
    };

    subtest "$label: hostile Host values in an absolute-form target" => sub {
        for my $h ('..', '../etc', 'a..b', '%2e%2e', '.') {
            my ($r) = parse_responses(scalar $s->raw("GET http://$h/secret.txt HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n"));
            $r //= { body => '' };
            no_secret($r, "http://$h/secret.txt");
        }
    };

    subtest "$label: the path cannot climb out of a vhost_dir site" => sub {
        for my $path ('/../secret.txt', '/../../secret.txt', '/%2e%2e/secret.txt', '/..%2fsecret.txt', '/../index.html',
                      '/../etc/passwd', '/.%2e/.%2e/etc/passwd') {
            my $r = with_host($s, 'a.example', $path);
            no_secret($r, "a.example $path");
        }
    };

    $s->stop;
}

done_testing;
