# 405 and Allow, and methods through the proxy (issue 17 #4).
#
# RFC 9110 15.5.6: a 405 MUST carry Allow with the target's methods. luxd's
# own 405s list what is allowed where the request was routed: the methods
# the location's handlers serve (static files, listings and the status
# page GET and HEAD; a proxied location every method llhttp parses but
# CONNECT) less those its access rules deny at that path. A backend's 405
# is relayed with the backend's own Allow, never a second one of luxd's.
# CONNECT names no resource of luxd's: an empty Allow (RFC 9110 10.2.1).
#
# Methods llhttp knows (WebDAV's among them) reach a proxied backend as
# sent, with their bodies; an unknown token gets 501 on every location,
# proxied or not (llhttp cannot frame it, t/215).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(hdr raw_backend kill_backend);

my $be = Luxd::Backend->start;
# Answers every request with a 405 that has its own Allow.
my $raw = raw_backend(sub {
    my ($sock) = @_;
    my $buf = '';
    while (sysread($sock, $buf, 4096, length $buf)) {
        last if $buf =~ /\r\n\r\n/;
    }
    syswrite($sock, "HTTP/1.1 405 Method Not Allowed\r\nAllow: PROPFIND, GET\r\nContent-Length: 3\r\n\r\nno\n");
    sleep 1 while sysread($sock, $buf, 4096);
});
my $A = $be->addr;
my $R = $raw->[1];

my $s = Luxd->new(
    files => {
        'www/a.txt'      => "aaa\n",
        'www/dir/b.txt'  => "bbb\n",
        'www/ro/c.txt'   => "ccc\n",
        'www/err/405.html' => "the 405 page\n",
    },
    config => <<LUA,
upstream "app" { "$A" }
upstream "raw" { "$R" }
vhost "localhost" {
  default = true, root = "\$DIR/www",
  location "/app/" { proxy = "app" },
  location "/dav/" {
    proxy = "app",
    access = { deny { method = { "DELETE", "MKCOL" }, status = 405 } },
  },
  location "/fb/" { fallback = "app" },
  location "/raw/" { proxy = "raw" },
  location "/status" { status = true },
  location "/ro/" {
    access = { deny { method = { "HEAD" }, status = 405 } },
  },
  location "/shut/" {
    proxy = "app",
    access = { deny { prefix = "/shut/", status = 405 } },
  },
}
vhost "pages.test" {
  root = "\$DIR/www",
  error_pages = { [405] = "/err/405.html" },
}
LUA
);

my $H = "Host: localhost\r\n";

# Every method llhttp parses in an HTTP request, in its order, but CONNECT.
my @ALL = qw(DELETE GET HEAD POST PUT OPTIONS TRACE COPY LOCK MKCOL MOVE PROPFIND PROPPATCH SEARCH
             UNLOCK BIND REBIND UNBIND ACL REPORT MKACTIVITY CHECKOUT MERGE M-SEARCH NOTIFY SUBSCRIBE
             UNSUBSCRIBE PATCH PURGE MKCALENDAR LINK UNLINK SOURCE);
sub listed { my (@m) = @_; my %g = map { $_ => 1 } qw(GET HEAD); join(', ', grep({ $g{$_} } qw(GET HEAD)), grep { !$g{$_} } @m) }

sub req {
    my ($m, $path, %o) = @_;
    my $host = $o{host} // 'localhost';
    my $body = $o{body};
    "$m $path HTTP/1.1\r\nHost: $host\r\n" . (defined $body ? "Content-Length: " . length($body) . "\r\n" : '')
      . "\r\n" . ($body // '');
}

# One request on its own connection; the response.
sub one {
    my ($bytes, %o) = @_;
    my $c = $s->connect;
    $c->send($bytes);
    my $r = $c->response(timeout => 5, head => $o{head});
    $c->close;
    return $r || { status => 0, headers => {}, raw => $c->buffered };
}

subtest '405 with Allow: what is allowed where the request was routed' => sub {
    my @cases = (
        # name, request, Allow
        ['static file, PUT', req('PUT', '/a.txt', body => 'x'), 'GET, HEAD'],
        ['static file, OPTIONS', req('OPTIONS', '/a.txt'), 'GET, HEAD'],
        ['static file, PROPFIND', req('PROPFIND', '/a.txt'), 'GET, HEAD'],
        ['missing static file, DELETE', req('DELETE', '/nope'), 'GET, HEAD'],
        ['status page, POST', req('POST', '/status', body => 'x'), 'GET, HEAD'],
        ['access rule denying HEAD there', req('HEAD', '/ro/c.txt'), 'GET'],
        ['proxied location denying DELETE and MKCOL: DELETE', req('DELETE', '/dav/x'),
         listed(grep { $_ ne 'DELETE' && $_ ne 'MKCOL' } @ALL)],
        ['... MKCOL', req('MKCOL', '/dav/x'), listed(grep { $_ ne 'DELETE' && $_ ne 'MKCOL' } @ALL)],
        ['proxied location denying every method', req('GET', '/shut/x'), ''],
        ['CONNECT (no resource of luxd\'s)', "CONNECT localhost:80 HTTP/1.1\r\n$H\r\n", ''],
        ['an error page keeps the Allow of where the 405 was earned',
         req('PUT', '/a.txt', host => 'pages.test', body => 'x'), 'GET, HEAD'],
    );
    for my $c (@cases) {
        my ($name, $bytes, $allow) = @$c;
        my $r = one($bytes, head => scalar($bytes =~ /^HEAD /));
        is($r->{status}, 405, "$name: 405") or diag(Luxd::_short($r->{raw}));
        is_deeply($r->{hlist}{allow}, [$allow], "$name: one Allow: '$allow'") or diag(Luxd::_short($r->{raw}));
    }
    my $r = one(req('PUT', '/a.txt', host => 'pages.test', body => 'x'));
    is($r->{body}, "the 405 page\n", 'the error page was served');
    $r = one(req('GET', '/ro/c.txt'));
    is($r->{status}, 200, 'GET where HEAD is denied: 200');
    ok(!exists $r->{headers}{allow}, '... and no Allow');
};

subtest "a backend's 405 goes out with the backend's Allow alone" => sub {
    my $r = one(req('PUT', '/raw/x', body => 'x'));
    is($r->{status}, 405, '405 from the backend');
    is_deeply($r->{hlist}{allow}, ['PROPFIND, GET'], "its Allow, and not luxd's") or diag(Luxd::_short($r->{raw}));
};

subtest 'methods llhttp knows reach a proxied backend as sent' => sub {
    my $xml = qq{<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>};
    my @cases = (
        ['PROPFIND', '/app/dir/', $xml, "Depth: 1\r\n"],
        ['PROPPATCH', '/app/f', $xml, ''],
        ['MKCOL', '/app/newdir/', undef, ''],
        ['COPY', '/app/f', undef, "Destination: http://localhost/app/g\r\n"],
        ['MOVE', '/app/f', undef, "Destination: http://localhost/app/g\r\nOverwrite: F\r\n"],
        ['LOCK', '/app/f', $xml, "Timeout: Second-60\r\n"],
        ['UNLOCK', '/app/f', undef, "Lock-Token: <urn:x>\r\n"],
        ['SEARCH', '/app/', $xml, ''],
        ['REPORT', '/app/', $xml, ''],
        ['MKCALENDAR', '/app/cal/', undef, ''],
        ['PATCH', '/app/f', 'delta', ''],
        ['PURGE', '/app/f', undef, ''],
        ['OPTIONS', '/app/f', undef, ''],
        ['DELETE', '/app/f', undef, ''],
        ['PROPFIND', '/fb/nope', $xml, "Depth: 0\r\n"],   # fallback: no file answers it
        ['MKCOL', '/fb/a.txt', undef, ''],                 # fallback: not GET or HEAD
    );
    my $n = 0;
    for my $c (@cases) {
        my ($m, $path, $body, $extra) = @$c;
        my $bytes = "$m $path?q=1 HTTP/1.1\r\n$H$extra"
          . (defined $body ? "Content-Type: application/xml\r\nContent-Length: " . length($body) . "\r\n" : '') . "\r\n"
          . ($body // '');
        my $r = one($bytes);
        is($r->{status}, 404, "$m $path: the backend's answer (404 for that path)") or diag(Luxd::_short($r->{raw}));
        ok(defined $r->{headers}{'x-conn'}, "$m $path: answered by the backend");
        $n++;
        my @got = $be->wait_requests($n);
        my $g = $got[-1];
        is($g && $g->{method}, $m, "$m $path: the backend got $m");
        is($g && $g->{target}, "$path?q=1", "$m $path: and the target as sent");
        is($g && $g->{body}, $body // '', "$m $path: and the body");
        if ($extra =~ /^([\w-]+): (.*)\r\n/) {
            is(scalar hdr($g, $1), $2, "$m $path: and $1");
        }
    }
};

subtest 'an unknown method: 501 on every location, the backend never asked' => sub {
    my $before = scalar $be->requests;
    for my $path ('/a.txt', '/app/x', '/dav/x', '/fb/x', '/status', '/ro/c.txt') {
        my $c = $s->connect;
        $c->send("FOO $path HTTP/1.1\r\n$H\r\n");
        my $r = $c->response(timeout => 5);
        is($r && $r->{status}, 501, "FOO $path: 501");
        ok($c->wait_closed(5), "FOO $path: closed");
        $c->close;
    }
    is(scalar $be->requests, $before, 'no request reached the backend');
};

$s->stop;
kill_backend($raw);
$be->stop;
done_testing;
