# The proxy in front of real servers: nginx (Debian's) and a second luxd.
# Files, HEAD, ranges, conditional requests and keep-alive, as a user who
# puts luxd in front of an application server would see them.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX ();
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $dir = tempdir('luxd-nginx-XXXXXX', TMPDIR => 1, CLEANUP => 1);
chmod 0755, $dir; # nginx workers run as nobody when the test runs as root
mkdir "$dir/www";
my $big = join '', map { pack('N', $_ * 2654435761 % 4294967296) } 0 .. (5 * 1024 * 1024 / 4 - 1);
{ open my $f, '>', "$dir/www/big.bin" or die; binmode $f; print $f $big; close $f }
{ open my $f, '>', "$dir/www/small.txt" or die; print $f "small file\n"; close $f }
my $nport = Luxd::free_port();
open my $cf, '>', "$dir/nginx.conf" or die;
print $cf <<"EOF";
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
  log_format c '\$request \$connection \$connection_requests \$http_x_forwarded_for';
  access_log $dir/access.log c;
  keepalive_requests 1000;
  server { listen 127.0.0.1:$nport; root $dir/www; etag on; }
}
EOF
close $cf;
my $npid = fork // die;
if ($npid == 0) {
    open STDERR, '>', "$dir/stderr.log";
    exec 'nginx', '-p', $dir, '-c', "$dir/nginx.conf" or POSIX::_exit(127);
}
for (1 .. 50) { last if IO::Socket::IP->new(PeerHost => '127.0.0.1', PeerPort => $nport); sleep 0.1 }

my $inner = Luxd->new(files => { 'www/inner.txt' => "from the inner luxd\n", 'www/big.bin' => $big });
my $iport = $inner->port;
my $s = Luxd->new(config => <<"EOF");
upstream "nginx" { "127.0.0.1:$nport" }
upstream "luxd" { "127.0.0.1:$iport" }
vhost "l" { default = true, location "/" { proxy = "nginx" }, location "/inner/" { proxy = "luxd" } }
EOF

subtest 'nginx: files, HEAD, ranges, conditional, keep-alive' => sub {
    my $r = $s->get('/small.txt');
    is $r->{status}, 200, 'GET';
    is $r->{body}, "small file\n", 'body';
    my $etag = $r->{headers}{etag};
    ok $etag, 'nginx\'s ETag relayed';
    like $r->{headers}{'last-modified'} // '', qr/GMT$/, 'and Last-Modified';
    is $r->{hlist}{server}[0], 'luxd', 'one Server field, luxd\'s';
    $r = $s->head('/small.txt');
    is $r->{headers}{'content-length'}, 11, 'HEAD keeps the length';
    is $r->{body}, '', 'and has no body';
    $r = $s->get('/small.txt', 'If-None-Match' => $etag);
    is $r->{status}, 304, 'conditional: 304';
    is $r->{body}, '', 'without a body';
    $r = $s->get('/big.bin', Range => 'bytes=1000-1999');
    is $r->{status}, 206, 'range: 206';
    ok $r->{body} eq substr($big, 1000, 1000), 'the range';
    is $r->{headers}{'content-range'}, 'bytes 1000-1999/' . length($big), 'Content-Range';
    $r = $s->get('/big.bin');
    ok $r->{body} eq $big, '5 MB byte-exact';
    my @log = do { open my $f, '<', "$dir/access.log" or die; <$f> };
    my %conns = map { (split ' ', $_)[3] => 1 } @log;
    is scalar(keys %conns), 1, scalar(@log) . ' requests on one kept-alive connection to nginx';
    like $log[-1], qr/ 127\.0\.0\.1$/, 'X-Forwarded-For reached nginx';
};

subtest 'a second luxd behind the first' => sub {
    my $r = $s->get('/inner/../inner.txt');
    # /inner/../inner.txt normalises to /inner.txt: the vhost's location "/".
    is $r->{status}, 404, 'the path luxd routed on goes on (nginx has no inner.txt)';
    $inner->write_file('www/inner/x.txt', "inner x\n");
    $r = $s->get('/inner/x.txt');
    is $r->{status}, 200, 'through to the inner luxd';
    is $r->{body}, "inner x\n", 'its file';
    $r = $s->get('/inner/nothing');
    is $r->{status}, 404, 'its 404';
    like $r->{body}, qr/404 Not Found/, 'its page';
};

$s->stop;
$inner->stop;
kill 'QUIT', $npid;
waitpid $npid, 0;
done_testing;
