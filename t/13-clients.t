# Real clients: curl, ab (with and without keep-alive), wrk; two workers.
use strict;
use warnings;
use Test::More;
use Digest::MD5 qw(md5_hex);
use lib 't/lib';
use Luxd;

srand(7);
my $large = pack 'N*', map { int rand 4294967296 } 1 .. 786432;    # 3 MiB
my $kib = join '', map { chr(65 + $_ % 26) } 0 .. 1023;            # 1 KiB
my $s = Luxd->new(
    files => { 'www/index.html' => "<h1>home</h1>\n", 'www/1k.html' => $kib, 'www/large.bin' => $large },
    workers => 2,
    server => { keepalive_requests => 100000 },
);

sub run {
    my (@cmd) = @_;
    open my $fh, '-|', @cmd or die "$cmd[0]: $!";
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

subtest 'curl' => sub {
    my ($body, $rc) = $s->curl($s->url('/large.bin'));
    is($rc, 0, 'curl exit 0');
    is(md5_hex($body), md5_hex($large), 'large file byte-exact');
    ($body) = $s->curl('--http1.0', $s->url('/1k.html'));
    is($body, $kib, 'HTTP/1.0');
    my ($hdr) = $s->curl('-I', $s->url('/1k.html'));
    like($hdr, qr{^HTTP/1\.1 200 }, 'curl -I: 200');
    like($hdr, qr{^Content-Length: 1024\r$}mi, 'curl -I: Content-Length');
    ($body) = $s->curl('-r', '100-199', $s->url('/large.bin'));
    is(md5_hex($body), md5_hex(substr($large, 100, 100)), 'curl -r range');
    my ($w) = $s->curl('-o', '/dev/null', '-o', '/dev/null', '-o', '/dev/null', '-w', '%{http_code} %{num_connects}\n', $s->url('/1k.html'), $s->url('/1k.html'), $s->url('/nope'));
    is($w, "200 1\n200 0\n404 0\n", 'three URLs on one connection (keep-alive reuse)');
};

subtest 'ab without keep-alive' => sub {
    my ($rc, $out) = run('ab', '-q', '-n', '500', '-c', '20', $s->url('/1k.html'));
    is($rc, 0, 'ab exit 0') or diag($out);
    like($out, qr/^Complete requests:\s+500$/m, '500 complete');
    like($out, qr/^Failed requests:\s+0$/m, '0 failed') or diag($out);
    unlike($out, qr/^Non-2xx responses:/m, 'no non-2xx');
    like($out, qr/^Document Length:\s+1024 bytes$/m, 'document length 1024');
};

subtest 'ab with keep-alive' => sub {
    my ($rc, $out) = run('ab', '-q', '-k', '-n', '2000', '-c', '20', $s->url('/1k.html'));
    is($rc, 0, 'ab exit 0') or diag($out);
    like($out, qr/^Complete requests:\s+2000$/m, '2000 complete');
    like($out, qr/^Failed requests:\s+0$/m, '0 failed') or diag($out);
    like($out, qr/^Keep-Alive requests:\s+2000$/m, 'all 2000 on kept-alive connections') or diag($out);
    unlike($out, qr/^Non-2xx responses:/m, 'no non-2xx');
};

subtest 'wrk' => sub {
    my ($rc, $out) = run('wrk', '-t', '2', '-c', '20', '-d', '2s', '--timeout', '10s', $s->url('/1k.html'));
    is($rc, 0, 'wrk exit 0') or diag($out);
    unlike($out, qr/Socket errors/, 'no socket errors') or diag($out);
    unlike($out, qr/Non-2xx or 3xx responses/, 'no non-2xx responses') or diag($out);
    # No speed floor: on a loaded CI machine any rate is possible. Speed
    # is bench/'s business; here wrk must complete requests without error.
    my ($n) = $out =~ /^\s*(\d+) requests in /m;
    # More than one per connection: connections are reused, and a server
    # that answers once per connection and then stalls fails here.
    ok(defined $n && $n > 20, 'wrk completed more requests than its 20 connections') or diag($out);
    note("wrk: " . ($out =~ /^Requests\/sec:\s+([\d.]+)/m ? $1 : '?') . " requests/s");
};

subtest 'wrk without keep-alive' => sub {
    my ($rc, $out) = run('wrk', '-t', '2', '-c', '20', '-d', '2s', '--timeout', '10s', '-H', 'Connection: close', $s->url('/1k.html'));
    is($rc, 0, 'wrk exit 0') or diag($out);
    unlike($out, qr/Socket errors: connect \d+, read \d+, write \d+, timeout [1-9]/, 'no timeouts') or diag($out);
    unlike($out, qr/Socket errors: connect [1-9]/, 'no connect errors') or diag($out);
    unlike($out, qr/Non-2xx or 3xx responses/, 'no non-2xx responses') or diag($out);
    my ($n) = $out =~ /^\s*(\d+) requests in /m;
    ok(defined $n && $n > 20, 'wrk completed more requests than its 20 connections') or diag($out);
};

subtest 'still healthy' => sub {
    check_response($s->get('/1k.html'), { status => 200, body => $kib }, 'GET /1k.html');
};

$s->stop;
done_testing;
