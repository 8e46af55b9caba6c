# HTTP/2 connections over time (issue 20), on two loops: an idle one says GOAWAY at
# keepalive_timeout and closes; one whose client opens no window is cut at
# send_timeout; reloads every 0.5 s under h2load lose no request (streams
# take the new generation between them); a graceful stop lets a download in
# flight finish after its GOAWAY.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $PY = '/usr/bin/python3';
my $big = 'x' x (2 * 1024 * 1024);
# keepalive_requests is raised: h2load opens no new connection after the
# GOAWAY that ends a connection at its 1000th stream (the default).
my $s = Luxd->new(
    workers => 2,
    server => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }', keepalive_timeout => 1,
                keepalive_requests => 10000000,
                send_timeout => 2 },
    files => { 'www/index.html' => "hello\n", 'www/big.bin' => $big },
);
my $port = $s->port;
sub probe { my $out = `timeout 60 $PY t/lib/h2probe.py $port @_ 2>&1`; chomp $out; $out }

my $out = probe('idle');
like($out, qr/^goaway=0 closed_after=(\S+)$/, 'idle: GOAWAY NO_ERROR, then the close');
my ($after) = $out =~ /closed_after=(\S+)/;
ok(defined $after && $after >= 0.9 && $after < 8, "  at keepalive_timeout (1 s): after $after s");

$out = probe('window0', '/big.bin');
like($out, qr/^closed=(yes|reset) after=(\S+)$/, 'a client that opens no window is cut off');
($after) = $out =~ /after=(\S+)/;
ok(defined $after && $after >= 1.9 && $after < 15, "  at send_timeout (2 s): after $after s");

# Reloads under load.
my $h2load_out = "$s->{dir}/h2load.out";
my $pid = fork // die;
if ($pid == 0) {
    exec "h2load -D 4 -c 4 -m 10 http://127.0.0.1:$port/index.html > $h2load_out 2>&1";
    exit 127;
}
for my $i (1 .. 6) {
    sleep 0.5;
    $s->reload;
}
waitpid $pid, 0;
my $h2load = Luxd::_slurp($h2load_out) // '';
like($h2load, qr/requests: (\d+) total, \d+ started, \1 done, \1 succeeded, 0 failed, 0 errored/,
     'h2load across 6 reloads, one every 0.5 s: no request failed')
  or diag($h2load);
like($s->error_log, qr/reload: generation 7\b/, '  the reloads happened');

# A graceful stop: the download in flight finishes, over the GOAWAY.
my $dl = "$s->{dir}/dl.bin";
my $cpid = fork // die;
if ($cpid == 0) {
    exec 'curl', '-s', '--max-time', '30', '--http2-prior-knowledge', '--limit-rate', '1M',
      '-o', $dl, "http://127.0.0.1:$port/big.bin";
    exit 127;
}
ok(Luxd::wait_for(sub { -s $dl }), 'a 2 MiB download at 1 MB/s has begun');
$s->signal('TERM');
waitpid $cpid, 0;
is($? >> 8, 0, 'curl ends well');
is(-s $dl, length($big), 'with the whole file, after the stop began');
ok(defined $s->wait_exit(30), 'luxd then stops');

done_testing;
