# Review (h-rev3) attack on the batched upstream heads and the spares:
# a head split at every byte, pipelined; two vhosts with two upstreams on
# one client connection; reload with heads in flight; two workers; unix
# upstream; a slow client; clients reset in the turn their head is queued.
use strict;
use warnings;
use Test::More;
use Socket qw(SOL_SOCKET SO_LINGER);
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(body hdr);

delete $ENV{LUXD_IO_URING} unless ($ENV{LUXD_IO_URING} // "") eq "0";

for my $unix (0, 1) {
  subtest(($unix ? 'unix' : 'tcp') . ' upstreams' => sub {
    my $ba = Luxd::Backend->start(unix => $unix, name => 'A');
    my $bb = Luxd::Backend->start(unix => $unix, name => 'B');
    my $cfg = sub {
        my ($x, $y) = @_;
        sprintf(qq(upstream "ua" { "%s", keepalive = 4 }\n)
              . qq(upstream "ub" { "%s", keepalive = 4 }\n)
              . qq(vhost "a.test" { default = true, location "/" { proxy = "ua" } }\n)
              . qq(vhost "b.test" { location "/" { proxy = "ub" } }\n), $x->addr, $y->addr);
    };
    my $s = Luxd->new(config => $cfg->($ba, $bb), server => { workers => 2 });
    unlike($s->error_log, qr/not batched/, 'batched') unless ($ENV{LUXD_IO_URING} // '') eq '0';

    # 1. Two pipelined requests for different vhosts, split at every byte.
    my $req = "GET /ok/100?x=1 HTTP/1.1\r\nHost: a.test\r\nX-Id: one\r\n\r\n"
            . "GET /ok/200?x=2 HTTP/1.1\r\nHost: b.test\r\nX-Id: two\r\n\r\n";
    my $bad = 0;
    for my $cut (1 .. length($req) - 1) {
        my $c = $s->connect;
        $c->send(substr($req, 0, $cut));
        sleep 0.002;
        $c->send(substr($req, $cut));
        my @r = $c->responses(2, timeout => 10);
        my $ok = @r == 2
          && $r[0]{status} == 200 && $r[0]{body} eq body(100) && ($r[0]{headers}{'x-backend'} // '') eq 'A'
          && $r[1]{status} == 200 && $r[1]{body} eq body(200) && ($r[1]{headers}{'x-backend'} // '') eq 'B';
        unless ($ok) {
            $bad++;
            diag("cut $cut: " . join(' | ', map { "$_->{status} " . ($_->{headers}{'x-backend'} // '?') } @r)) if $bad < 5;
        }
        $c->close;
    }
    is($bad, 0, 'every byte split: both answers right, each from its vhost\'s upstream');
    my @ra = grep { ($_->{path} // '') =~ m{^/ok/} } $ba->requests;
    my @rb = grep { ($_->{path} // '') =~ m{^/ok/} } $bb->requests;
    is(scalar(grep { hdr($_, 'X-Id') ne 'one' } @ra), 0, 'backend A got only vhost a heads');
    is(scalar(grep { hdr($_, 'X-Id') ne 'two' } @rb), 0, 'backend B got only vhost b heads');

    # 2. 40 pipelined requests alternating vhosts in one write.
    my $c = $s->connect;
    my $pipe = join '', map {
        my $h = $_ % 2 ? 'b.test' : 'a.test';
        "GET /ok/" . (10 + $_) . " HTTP/1.1\r\nHost: $h\r\nX-N: $_\r\n\r\n"
    } 0 .. 39;
    $c->send($pipe);
    my @r = $c->responses(40, timeout => 10);
    is(scalar @r, 40, '40 pipelined answers');
    my $wrong = grep {
        my $i = $_;
        !($r[$i] && $r[$i]{status} == 200 && $r[$i]{body} eq body(10 + $i)
          && ($r[$i]{headers}{'x-backend'} // '') eq ($i % 2 ? 'B' : 'A'))
    } 0 .. $#r;
    is($wrong, 0, 'pipelined: each in order, from its vhost\'s backend');
    $c->close;

    # 3. Clients that reset right after their head (the head queued, the
    # connection gone in the same turn), mixed with ones that wait.
    my @good;
    for my $i (1 .. 60) {
        my $k = $s->connect;
        $k->send("GET /sleep/30 HTTP/1.1\r\nHost: " . ($i % 2 ? 'a.test' : 'b.test') . "\r\n\r\n");
        if ($i % 3) {
            setsockopt($k->sock, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
            $k->close;
        } else {
            push @good, $k;
        }
    }
    my $gok = grep { my $x = $_->response(timeout => 10); $x && $x->{status} == 200 } @good;
    is($gok, scalar @good, 'the clients that stayed got their answers');
    ok($s->alive, 'luxd alive');

    # 4. Reload with requests in flight; the reload swaps the upstreams.
    # The reload comes once backend A has all 30 heads (a head luxd had not
    # parsed yet would rightly go by the new generation, to B), while their
    # answers (2 s) are still to come.
    my @fl;
    for my $i (1 .. 30) {
        my $k = $s->connect;
        $k->send("GET /sleep/2000 HTTP/1.1\r\nHost: a.test\r\nX-R: $i\r\n\r\n");
        push @fl, $k;
    }
    my $at_a = sub { scalar grep { defined hdr($_, 'X-R') } $ba->requests };
    my $deadline = time + 10;
    sleep 0.02 while $at_a->() < 30 && time < $deadline;
    is($at_a->(), 30, 'backend A has the 30 heads');
    (my $srvblk = $s->{config_text}) =~ s/^(server \{.*?\n\}\n).*/$1/s;
    $s->write_config($srvblk . $cfg->($bb, $ba));
    like($s->reload // '', qr/^ok/, 'reload ok');
    my $fok = grep { my $x = $_->response(timeout => 10); $x && $x->{status} == 200 && ($x->{headers}{'x-backend'} // '') eq 'A' } @fl;
    is($fok, 30, 'requests in flight across the reload answered by the old upstream');
    # The same connections, now under the new generation: a.test -> B.
    $_->send("GET /ok/7 HTTP/1.1\r\nHost: a.test\r\n\r\n") for @fl;
    my $nok = grep { my $x = $_->response(timeout => 10); $x && $x->{status} == 200 && ($x->{headers}{'x-backend'} // '') eq 'B' } @fl;
    is($nok, 30, 'after the reload a.test goes to B (no head left on an old pooled A connection)');
    $_->close for @fl;

    # 5. A slow client: a 4 MB answer read in small sips.
    my $sc = $s->connect;
    $sc->send("GET /ok/4000000 HTTP/1.1\r\nHost: b.test\r\n\r\n");
    my $t0 = time;
    my $buf = '';
    while (time - $t0 < 30) {
        my $n = sysread($sc->sock, my $chunk, 65536);
        last unless $n;
        $buf .= $chunk;
        last if length($buf) >= 4000000 + 100 && $buf =~ /\r\n\r\n/ && length($buf) - index($buf, "\r\n\r\n") - 4 >= 4000000;
        sleep 0.002;
    }
    my $bi = index($buf, "\r\n\r\n");
    ok($bi > 0 && substr($buf, $bi + 4) eq body(4000000), 'slow client: the 4 MB body exact');
    $sc->close;

    ok($s->alive, 'luxd alive at the end');
    $s->stop;
    unlike($s->error_log, qr/AddressSanitizer|completions missing|took part/, 'no ring trouble');
    $ba->stop; $bb->stop;
  });
}
done_testing;
