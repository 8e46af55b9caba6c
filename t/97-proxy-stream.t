# Proxied bodies stream with flat memory both ways: a large response to a
# client that stops reading holds a bounded buffer in luxd and the backend
# is read only as fast as the client drains; a request body to a backend
# that reads slowly is held back at the client, not buffered.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body body_piece);

# luxd's anonymous resident memory (RssAnon) in kB, undef once it is gone:
# where its buffers live. VmRSS also counts file-backed pages (the binary,
# libraries), which page-cache reclaim (DAMON on the CI machine) evicts and
# a later fault brings back, so it moves by megabytes for no fault of luxd.
sub rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return undef;
    while (<$fh>) { return $1 if /^RssAnon:\s+(\d+)\s+kB/ }
    return undef;
}

my $be = Luxd::Backend->start(name => 's');
my $addr = $be->addr;
my $s = Luxd->new(server => { max_body_bytes => 16 * 1024 * 1024 }, config => qq{upstream "s" { "$addr", read_timeout = 30 }\nvhost "l" { default = true, location "/" { proxy = "s" } }\n});

subtest '1 GB to a client that stalls, then drains' => sub {
    my $n = 1024 * 1024 * 1024;
    my $rss0 = rss_kb($s->pid);
    my $c = $s->connect(rcvbuf => 65536);
    $c->send(Luxd::request(path => "/ok/$n", close => 1));
    my $t0 = time;
    while (time - $t0 < 10 && $c->{buf} !~ /\r\n\r\n/) { $c->_fill(0.5) }
    like $c->{buf}, qr/\AHTTP\/1\.1 200 OK\r\n.*^Content-Length: $n\r$/ms, 'head with the length';
    sleep 1.5; # the client reads nothing
    my $rss1 = rss_kb($s->pid);
    my $grew = $rss1 - $rss0;
    ok $grew < 4096, "luxd RssAnon grew $grew kB while the client stalled (bounded)";
    # Read it all, comparing as it comes.
    my ($head_end) = index($c->{buf}, "\r\n\r\n") + 4;
    my $pending = substr($c->{buf}, $head_end);
    $c->{buf} = '';
    my ($got, $bad) = (0, undef);
    my $check = sub {
        my $k = length($pending) - length($pending) % 65536;
        $k = length($pending) if $got + length($pending) >= $n;
        return if $k == 0;
        my $piece = substr($pending, 0, $k, '');
        $bad //= $got if $piece ne body_piece($got, $k);
        $got += $k;
    };
    $t0 = time;
    my $peak = $rss1;
    while ($got + length($pending) < $n && time - $t0 < 240) {
        $c->_fill(1);
        $pending .= $c->{buf};
        $c->{buf} = '';
        $check->();
        my $r = rss_kb($s->pid);
        $peak = $r if defined $r && $r > $peak;
        last if $c->{eof};
    }
    $check->();
    is $got, $n, 'all of it';
    ok !defined $bad, 'byte-exact' or diag "first difference near $bad";
    ok $peak - $rss0 < 8192, 'peak RssAnon growth ' . ($peak - $rss0) . ' kB while draining';
    $c->close;
};

subtest 'a request body to a backend that reads slowly' => sub {
    my $n = 8 * 1024 * 1024;
    my $data = body($n);
    my $rss0 = rss_kb($s->pid);
    my $c = $s->connect;
    $c->send("POST /slow-upload/65536/20 HTTP/1.1\r\nHost: l\r\nContent-Length: $n\r\nConnection: close\r\n\r\n");
    # Send as fast as the socket takes it, watching luxd's memory.
    my $sock = $c->{sock};
    $sock->blocking(0);
    my ($off, $peak) = (0, $rss0);
    my $t0 = time;
    while ($off < $n && time - $t0 < 30) {
        my $w = syswrite($sock, $data, 65536, $off);
        if (defined $w) { $off += $w } else { sleep 0.01 }
        my $r = rss_kb($s->pid);
        $peak = $r if defined $r && $r > $peak;
    }
    $sock->blocking(1);
    is $off, $n, 'the whole body was taken in the end';
    my $r = $c->response(timeout => 30);
    is $r && $r->{body}, "got $n\n", 'the backend got every byte';
    my $q = ($be->requests)[-1];
    ok $q->{body} eq $data, 'byte-exact';
    ok $peak - $rss0 < 4096, 'luxd RssAnon grew ' . ($peak - $rss0) . ' kB (the client was held back)';
    $c->close;
};

$s->stop;
$be->stop;
done_testing;
