# issue 17 #2: the names of every Connection line are hop-by-hop (RFC 9110
# 7.6.1), not those of one line only. With "Connection: x-hop" and a second
# "Connection: keep-alive" line, X-Hop went on to the backend (h1.c keeps
# the last line of a known field, and the proxy read that one); from a
# backend, the names of any line but the first reached the client. Both
# ways: names on several lines, several to a line, in any case, and more
# than the 8 names proxy_fields.c keeps (past them every field is compared
# with the lines themselves).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(hdr raw_backend kill_backend);

$SIG{PIPE} = 'IGNORE';

# What lists the names, and the fields it names.
my @cases = (
    ['the issue: x-hop, then keep-alive', ['Connection' => 'x-hop', 'Connection' => 'keep-alive'], ['X-Hop']],
    ['keep-alive, then x-hop', ['Connection' => 'keep-alive', 'Connection' => 'x-hop'], ['X-Hop']],
    ['three lines, lists, case variants',
     ['CONNECTION' => 'X-A, x-b', 'connection' => ' , X-c ,', 'Connection' => 'keep-alive'], ['x-a', 'X-B', 'X-C']],
    ['5 and 5 names on two lines (past the 8 kept)',
     ['Connection' => join(', ', map { "X-N$_" } 1 .. 5), 'connection' => join(',', map { "x-n$_" } 6 .. 10)],
     [map { "X-N$_" } 1 .. 10]],
);

subtest 'request: the names of every Connection line stay behind' => sub {
    my $be = Luxd::Backend->start(name => 'be');
    my $addr = $be->addr;
    my $s = Luxd->new(config => qq{upstream "u" { "$addr" }\n}
        . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n});
    for my $c (@cases) {
        my ($name, $conn, $listed) = @$c;
        my $r = $s->http(path => '/ok/1', close => 0,
            headers => [@$conn, (map { ($_ => 'hop') } @$listed), 'X-Kept' => 'kept']);
        is $r->{status}, 200, "$name: answered";
        my $q = ($be->requests)[-1];
        is_deeply [grep { defined hdr($q, $_) } @$listed], [], "$name: no listed field reached the backend";
        is hdr($q, 'Connection'), undef, "$name: nor a Connection line";
        is hdr($q, 'X-Kept'), 'kept', "$name: a field not listed did";
    }
    $s->stop;
    $be->stop;
};

subtest 'response: the names of every Connection line of the backend stay behind' => sub {
    my $i = 0;
    my $be = raw_backend(sub {
        my ($c) = @_;
        my $buf = '';
        for my $case (@cases) {
            while ($buf !~ /\r\n\r\n/) { sysread($c, $buf, 65536, length $buf) or return }
            $buf =~ s/\A.*?\r\n\r\n//s;
            my ($name, $conn, $listed) = @$case;
            my $h = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n";
            for (my $k = 0; $k < @$conn; $k += 2) { $h .= "$conn->[$k]: $conn->[$k + 1]\r\n" }
            $h .= "$_: hop\r\n" for @$listed;
            syswrite $c, "${h}X-Kept: kept\r\n\r\nok\n";
        }
    });
    my $s = Luxd->new(config => qq{upstream "u" { "$be->[1]" }\n}
        . qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/" { proxy = "u" } }\n});
    my $cl = $s->connect;
    for my $c (@cases) {
        my ($name, $conn, $listed) = @$c;
        $cl->send(Luxd::request(path => '/x'));
        my $r = $cl->response(timeout => 5);
        is $r && $r->{status}, 200, "$name: answered";
        is_deeply [grep { exists $r->{headers}{ lc $_ } } @$listed], [], "$name: no listed field reached the client";
        is $r && $r->{headers}{'x-kept'}, 'kept', "$name: a field not listed did";
        is $r && $r->{body}, "ok\n", "$name: the body";
    }
    $cl->close;
    $s->stop;
    kill_backend($be);
};

done_testing;
