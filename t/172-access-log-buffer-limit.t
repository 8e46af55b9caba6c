# issue 11 review: access_log_buffer had no upper bound. The buffers are
# made on first use (one per log file and worker loop), so a size the loop
# cannot allocate passed -t, started, and then dropped every access-log
# line with an "out of memory" error per request: the log was silently
# empty. The key is now at most 16 MiB (16777216), refused past it by -t
# at the key's file:line. At the limit the log works, with a vhost's own
# log file (a second buffer of that size) as well.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my $LIMIT = 16 * 1024 * 1024;

sub lines_after_two_requests {
    my ($s, $file, $host) = @_;
    $s->http(path => '/', ($host ? (host => $host) : ())) for 1 .. 2;
    my $t = time + 10;    # flushed on the 1 s tick: on a loaded machine it may come late
    my $text = sub { open my $fh, '<', $file or return ''; local $/; <$fh> // '' };
    sleep 0.05 until $text->() =~ /(?:.*\n){2}/ || time > $t;
    return scalar(() = $text->() =~ /\n/g);
}

# At the limit: accepted by -t, and both the server's log and a vhost's
# own log (two buffers of 16 MiB in the loop) get their lines.
my $s = Luxd->new(no_start => 1, server => { access_log_buffer => $LIMIT },
                  config => qq{vhost "localhost" { root = "\$DIR/www", default = true }\n}
                          . qq{vhost "other" { root = "\$DIR/www", access_log = "\$DIR/other.log" }\n},
                  files => { 'www/index.html' => "hi\n" });
my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is $rc, 0, "-t: access_log_buffer = $LIMIT (16 MiB) is accepted" or diag $out;
$s->start;
is lines_after_two_requests($s, $s->dir . '/access.log'), 2, '... and both requests are logged';
is lines_after_two_requests($s, $s->dir . '/other.log', 'other'), 2, '... in a vhost\'s own log too';
unlike $s->error_log, qr/out of memory/, '... without an "out of memory"';
$s->stop;

# One past: refused by -t at the key's line.
$s = Luxd->new(no_start => 1, server => { access_log_buffer => $LIMIT + 1 });
($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
my $line = do {
    open my $fh, '<', $s->config_file or die; my $n = 0; my $l;
    while (<$fh>) { $n++; $l = $n, last if /access_log_buffer/ } $l };
is $rc, 1, '-t: access_log_buffer = 16 MiB + 1 is refused';
like $out, qr{luxd\.lua:$line: server: "access_log_buffer" must be between 0 and 16777216, got 16777217},
  '... at the key\'s file:line, with the bound' or diag $out;
# So is the 16 TiB that used to start with its log silently off.
$s = Luxd->new(no_start => 1, server => { access_log_buffer => 1 << 44 });
($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is $rc, 1, '-t: access_log_buffer = 16 TiB is refused' or diag $out;
done_testing;
