# SIGTERM and SIGINT: stop accepting, let in-flight requests finish, exit 0.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $size = 24 * 1024 * 1024;
my $big = join '', map { pack('N', $_ * 2654435761 % 4294967296) x 256 } 0 .. $size / 1024 - 1;
my %files = ('www/index.html' => "<h1>home</h1>\n", 'www/a.txt' => "aaa\n", 'www/big.bin' => $big);


for my $sig ('TERM', 'INT') {
    subtest "SIG$sig during a slow large download" => sub {
        my $s = Luxd->new(files => \%files, server => { send_timeout => 30 });
        my $c = $s->connect(rcvbuf => 16384);
        $c->send("GET /big.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        # Read a little, slowly, so the download is still in flight.
        my $got = 0;
        while ($got < 256 * 1024) { my $n = $c->fill(2); last unless $n; $got += $n }
        ok($got > 0, 'the download started');
        $s->signal($sig);
        sleep 0.3;
        ok($s->alive, 'still running while the download is in flight');
        ok(refused($s->port, 3), "new connections are refused after SIG$sig");
        # Slow reader for a while longer, then drain.
        for (1 .. 10) { $c->fill(0.05) }
        my $rest = $c->read_all(30);
        my ($r) = parse_responses($rest);
        is($r->{status}, 200, 'the in-flight response');
        ok(length($r->{body} // '') == $size && md5_hex($r->{body}) eq md5_hex($big), 'completes byte-exact')
          or diag('got ' . length($r->{body} // '') . " of $size bytes" . ($r->{error} ? ": $r->{error}" : ''));
        $c->close;
        my $st = $s->wait_exit(10);
        is($st, 0, "exit status 0 after SIG$sig") or diag(defined $st ? "status $st" : 'still running');
        $s->stop;
    };
}

subtest 'idle keep-alive connections do not hold up the exit' => sub {
    my $s = Luxd->new(files => \%files, server => { keepalive_timeout => 60 });
    my $c = $s->connect;
    $c->send(Luxd::request(path => '/a.txt'));
    is($c->response->{status}, 200, 'a keep-alive request');
    my $idle = $s->connect;    # connected, never sent anything
    my $t0 = time;
    $s->signal('TERM');
    my $st = $s->wait_exit(5);
    is($st, 0, 'exited 0');
    ok(time - $t0 < 5, 'within a few seconds (not keepalive_timeout)') or diag(time - $t0);
    ok($c->wait_closed(1), 'the idle keep-alive connection was closed');
    $c->close;
    $idle->close;
    $s->stop;
};

subtest 'a response in flight on a keep-alive connection completes, then the connection is closed' => sub {
    my $s = Luxd->new(files => \%files, server => { keepalive_timeout => 60, send_timeout => 30 });
    my $c = $s->connect(rcvbuf => 16384);
    $c->send(Luxd::request(path => '/big.bin'));
    my $got = 0;
    while ($got < 64 * 1024) { my $n = $c->fill(2); last unless $n; $got += $n }
    $s->signal('TERM');
    my $r = $c->response(timeout => 30);
    ok($r && $r->{status} == 200 && length($r->{body}) == $size, 'the response completes');
    ok($c->wait_closed(3), 'then the connection is closed');
    $c->close;
    is($s->wait_exit(10), 0, 'exit 0');
    $s->stop;
};

done_testing;
