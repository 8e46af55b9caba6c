# Hot reload (issue 4): after 200 reloads the number of open fds is unchanged
# and RSS is flat. Each reload compiles a config of 200 vhosts with rewrites,
# redirects and access rules, adds or drops a second listen address, and a
# keep-alive connection plus fresh connections make requests in between, so
# the old generations are in use when they are replaced. Broken configs are
# mixed in (they must not leak either).
use strict;
use warnings;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $RELOADS = 200;
my $RSS_SLACK_KB = 8 * 1024;

my $s = Luxd->new(config => "server { }\n", files => { 'www/index.html' => "home\n", 'www/a.txt' => "aaa\n" }, no_start => 1);
my $dir = $s->dir;
my ($p1, $p2) = ($s->port, Luxd::free_port());

sub config_for {
    my ($i) = @_;
    my $listen = $i % 2 ? qq{"127.0.0.1:$p1"} : qq{"127.0.0.1:$p1", "127.0.0.1:$p2"};
    return <<"EOF";
server {
  listen = { $listen },
  workers = 2,
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
  keepalive_timeout = 60,
}
-- config $i
vhost "localhost" {
  default = true, root = "$dir/www", index = { "index.html" },
  headers = { ["X-Config"] = "$i" },
  access = { deny { prefix = "/private-$i/" }, deny { regex = [[\\.(bak|swp)\$]] } },
  rewrite = { { [[^/old/(.*)\$]], "/\$1" } },
  location "/luxd-status" { status = true },
}
for n = 1, 200 do
  vhost("site" .. n .. ".example") {
    aliases = { "www.site" .. n .. ".example", "*.site" .. n .. ".example" },
    root = "$dir/www",
    headers = { ["X-Site"] = tostring(n), ["X-Config"] = "$i" },
    access = { deny { prefix = "/admin-" .. n .. "/" }, deny { suffix = { "~", ".inc" } } },
    rewrite = { { "^/r" .. n .. "/(.*)\$", "/\$1" } },
    redirect = { { "^/go" .. n .. "\$", "/", status = 301 } },
    location "/static/" { cache_control = "public, max-age=" .. n },
  }
end
EOF
}

sub fds { my @f = glob('/proc/' . $s->pid . '/fd/*'); scalar @f }
sub fd_list {
    my %kinds;
    for my $f (glob('/proc/' . $s->pid . '/fd/*')) {
        my $t = readlink($f) // '?';
        $t =~ s/\[\d+\]/[]/;
        $kinds{$t}++;
    }
    return join ', ', map { "$kinds{$_} $_" } sort keys %kinds;
}
# Anonymous resident memory (RssAnon): the heap the generations live in.
# VmRSS also counts file-backed pages (binary, libraries, Lua), which
# page-cache reclaim (DAMON on the CI machine) evicts and faults bring back.
sub rss_kb {
    open my $fh, '<', '/proc/' . $s->pid . '/status' or return 0;
    while (<$fh>) { return $1 if /^RssAnon:\s+(\d+) kB/ }
    return 0;
}

# Whether every loop serves generation $gen with none draining, by the
# status page.
sub adopted {
    my ($gen) = @_;
    my $r = $s->get('/luxd-status?format=json');
    return 0 unless $r->{status} == 200;
    my ($w) = $r->{body} =~ /"workers":\[(.*?)\]/s or return 0;
    my @g = $w =~ /\{"generation":(\d+),"generations_draining":(\d+)[,}]/g;
    return 0 unless @g == 4;    # workers = 2
    return $g[0] == $gen && $g[2] == $gen && $g[1] == 0 && $g[3] == 0
        && $r->{body} =~ /"generations_draining":0,/;
}

# Waits (up to 10 s) until every loop has adopted generation $gen and let
# the older ones go (a slow loop adopts late, and only then closes or opens
# its listen sockets), serves a few requests, then measures once the fd
# count has settled.
sub settle {
    my ($gen) = @_;
    my $deadline = time + 10;
    sleep 0.05 until adopted($gen) || time > $deadline;
    ok(adopted($gen), "every loop serves generation $gen, none draining");
    $s->get('/index.html') for 1 .. 4;
    my $prev = -1;
    $deadline = time + 10;
    while (time < $deadline) {
        my $n = fds();
        return ($n, rss_kb()) if $n == $prev;
        $prev = $n;
        sleep 0.1;
    }
    return (fds(), rss_kb());
}

# Under AddressSanitizer (make asan) freed memory sits in a quarantine that
# would look like growth: turn it off so RSS means the same with both builds.
# A build without ASan ignores the variable.
local $ENV{ASAN_OPTIONS} = join ':', grep { length } $ENV{ASAN_OPTIONS} // '', 'quarantine_size_mb=0', 'thread_local_quarantine_size_kb=0';
$s->write_config(config_for(0));
$s->start;
my $keep = $s->connect;
$keep->send(Luxd::request(path => '/index.html'));
is($keep->response->{status}, 200, 'keep-alive connection');
my ($fd0, $rss0) = settle(1);
my $fdlist0 = fd_list();

my ($good, $bad, $errors) = (0, 0, 0);
my ($fd20, $rss20, $fdlist20);
my @errs;
for my $i (1 .. $RELOADS) {
    if ($i % 10 == 5) {
        # A broken config now and then: a Lua error in the middle of the loop.
        $s->write_config(config_for($i) =~ s/root = "\Q$dir\E\/www",\n    headers/root = nil .. 1,\n    headers/r);
        my $out = ($s->reload(poll => 0.002) // $s->reload_error);
        $out =~ /^failed / ? $bad++ : push @errs, "bad config $i: $out";
    }
    $s->write_config(config_for($i));
    my $out = ($s->reload(poll => 0.002) // $s->reload_error);
    $out =~ /^ok generation (\d+) / && $1 == $i + 1 ? $good++ : push @errs, "reload $i: $out";
    # The keep-alive connection's request is in use across the next reload,
    # and fresh connections use the new generation.
    if ($i % 5 == 0) {
        $keep->send(Luxd::request(path => '/a.txt'));
        my $r = $keep->response(timeout => 5);
        if (!$r || $r->{status} != 200 || ($r->{headers}{'x-config'} // '') ne $i) {
            $errors++;
            push @errs, "keep-alive request after reload $i: " . ($r ? "$r->{status} X-Config=" . ($r->{headers}{'x-config'} // '') : 'no response');
        }
    }
    my $r = $s->get('/a.txt', Host => 'www.site' . (1 + $i % 200) . '.example');
    if ($r->{status} != 200 || ($r->{headers}{'x-site'} // '') ne 1 + $i % 200) { $errors++; push @errs, "request after reload $i: $r->{status}" }
    ($fd20, $rss20) = settle(21), $fdlist20 = fd_list() if $i == 20;
}
my ($fd200, $rss200) = settle($RELOADS + 1);
my $fdlist200 = fd_list();

diag("open fds: $fd0 at start, $fd20 after 20 reloads, $fd200 after $RELOADS reloads");
diag("RssAnon: $rss0 kB at start, $rss20 kB after 20 reloads, $rss200 kB after $RELOADS reloads (growth "
     . ($rss200 - $rss20) . " kB over the last " . ($RELOADS - 20) . ")");
diag(join "\n", @errs[0 .. ($#errs > 9 ? 9 : $#errs)]) if @errs;

is($good, $RELOADS, "$RELOADS reloads succeeded, one generation each");
is($bad, int(($RELOADS + 5) / 10), 'the broken configs were rejected');
is($errors, 0, 'requests between reloads were served by the newest generation');
is($fd200, $fd20, 'open fd count unchanged between reload 20 and reload 200') or diag("after 20: $fdlist20\nafter $RELOADS: $fdlist200");
is($fd200, $fd0, 'open fd count unchanged since start (same listener set)') or diag("start: $fdlist0\nafter $RELOADS: $fdlist200");
cmp_ok($rss200, '<', $rss20 + $RSS_SLACK_KB, "RSS after $RELOADS reloads < RSS after 20 + " . ($RSS_SLACK_KB / 1024) . ' MB');

ok(!$keep->eof, 'the keep-alive connection stayed open through all reloads');
$keep->close;
my @gens = $s->error_log =~ /\[info\] reload: generation (\d+) in [\d.]+ ms \((\d+) vhosts\)/g;
is($gens[-2] // 0, $RELOADS + 1, "the last reload is generation " . ($RELOADS + 1));
is($gens[-1] // 0, 201, 'with 201 vhosts');
ok($s->stop, 'stopped cleanly');
done_testing;
