# The file cache (issue 8 #20): entries of two sites never share a key, and a
# load that straddles a reload neither puts the old generation's headers into
# the new generation's cache nor stays there.
use strict;
use warnings;
use Test::More;
use IO::Select;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

subtest 'a vhost with 1024 locations and the next vhost do not share cache entries' => sub {
    # Site ids used to be vhost index * 1024 + location index + 1, so the
    # 1024th location of the first vhost had the second vhost's id.
    my $s = Luxd->new(
        config => <<'EOF',
local a = { default = true, root = "$DIR/www", headers = { ["X-Site"] = "a" } }
for i = 1, 1024 do
  a[#a + 1] = location("/p" .. i .. "/") { headers = { ["X-Site"] = "a-loc" .. i } }
end
vhost "a.test" (a)
vhost "b.test" { root = "$DIR/www", headers = { ["X-Site"] = "b" } }
EOF
        files => { 'www/p1024/one.txt' => "one\n", 'www/p1024/two.txt' => "two\n", 'www/p1/x.txt' => "x\n" },
    );
    my $get = sub {
        my ($host, $path) = @_;
        my $r = $s->http(path => $path, host => $host);
        return ($r->{status} // 'none') . ' ' . ($r->{headers}{'x-site'} // 'none');
    };
    is($get->('a.test', '/p1024/one.txt'), '200 a-loc1024', 'a.test location 1024 first');
    is($get->('b.test', '/p1024/one.txt'), '200 b', 'then b.test, same file: its own headers');
    is($get->('b.test', '/p1024/two.txt'), '200 b', 'b.test first');
    is($get->('a.test', '/p1024/two.txt'), '200 a-loc1024', 'then a.test location 1024: its own headers');
    is($get->('a.test', '/p1/x.txt'), '200 a-loc1', 'location 1');
    is($get->('b.test', '/p1/x.txt'), '200 b', 'b.test on the same file');
    $s->stop;
};

# A config whose generation shows in a header of every file and in a
# redirect that needs no thread pool (so it answers while the pool is busy).
sub gen_config {
    my ($s, $gen) = @_;
    my $d = $s->dir;
    my $p = $s->port;
    return <<"EOF";
server {
  listen = { "127.0.0.1:$p" }, workers = 1, error_log = "$d/error.log",
  access_log = "$d/access.log", pid_file = "$d/luxd.pid", keepalive_timeout = 60,
}
vhost "localhost" {
  default = true, root = "$d/www", dir_listing = true,
  headers = { ["X-Gen"] = "$gen" },
  redirect = { { "^/probe\$", "/gen$gen" } },
}
EOF
}

subtest 'a cold load that straddles a reload does not enter the new generation' => sub {
    # One thread-pool thread, kept busy listing a large directory, holds a
    # cold file load in the queue while the reload is adopted.
    local $ENV{UV_THREADPOOL_SIZE} = 1;
    my $s = Luxd->new(no_start => 1);
    $s->write_config(gen_config($s, 1));
    my $many = $s->dir . '/www/many';
    mkdir $many or die "$many: $!";
    for my $i (1 .. 10000) { open my $fh, '>', "$many/f$i" or die; close $fh }
    $s->start;
    is($s->get('/many/')->{status}, 200, 'the listing works (and its lookups are cached)');

    my ($gen, $straddled) = (1, 0);
    for my $try (1 .. 4) {
        my $file = "/x$try.txt";
        $s->write_file("www$file", "file $try\n");
        my $hogs = 4 * 2**$try;
        my @l = map { $s->connect } 1 .. $hogs;
        $_->send(Luxd::request(path => '/many/', close => 1)) for @l;
        my $x = $s->connect;
        $x->send(Luxd::request(path => $file, close => 1));
        $gen++;
        $s->write_config(gen_config($s, $gen));
        like($s->reload // $s->reload_error, qr/^ok/, "reload to generation $gen");
        my $adopted = 0;
        my $deadline = time + 10;
        while (time < $deadline) {
            my $p = $s->get('/probe');
            if (($p->{headers}{location} // '') =~ m{/gen$gen$}) { $adopted = 1; last }
            sleep 0.01;
        }
        ok($adopted, "the worker adopted generation $gen");
        # Nothing from the file's connection yet: its load completes after
        # the reload was adopted.
        my $pending = !IO::Select->new($x->{sock})->can_read(0);
        my $xr = $x->response(timeout => 30);
        $_->read_all(30), $_->close for @l;
        $x->close;
        my $old = $gen - 1;
        if (!$pending || !$xr || ($xr->{headers}{'x-gen'} // '') ne $old) {
            diag("try $try with $hogs listings: the load did not straddle the reload; again");
            next;
        }
        $straddled = 1;
        is($xr->{status}, 200, 'the request that started before the reload: 200');
        is($xr->{headers}{'x-gen'}, $old, 'with the headers of its own generation');
        my $r = $s->get($file);
        is($r->{headers}{'x-gen'}, $gen, 'the next request for the file: the new generation\'s headers');
        is($r->{body}, "file $try\n", 'and the file');
        last;
    }
    ok($straddled, 'a load straddled a reload (the test exercised the case)');
    $s->stop;
};

done_testing;
