# issue 17 #10: `luxd -s reload` failures reach the server. -s used to check
# the config itself and send nothing when it failed: the running server
# never logged that reload and luxd_reloads_total{result="failed"} never
# counted it (only a `kill -HUP` did). Now -s sends SIGHUP, the server runs,
# judges, logs and counts the reload, and -s prints the verdict it writes
# to PIDFILE.reload: `luxd: reload failed ...` and exit 1, or
# `luxd: reload ok ...` and exit 0.
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(config => <<'EOF', files => { 'www/index.html' => "hi\n" });
vhost "localhost" {
  default = true, root = "$DIR/www",
  location "/status" { status = true },
}
EOF
my $cf   = $s->config_file;
my $good = Luxd::_slurp($cf);

# The reload counters from the status page, read to EOF (counted by then).
sub reloads {
    my $data = $s->raw(Luxd::request(path => '/status?format=prometheus', close => 1), timeout => 5);
    my ($r) = parse_responses($data);
    my %n = ($r->{body} // '') =~ /^luxd_reloads_total\{result="(ok|failed)"\} (\d+)$/mg;
    return \%n;
}

is_deeply reloads(), { ok => 0, failed => 0 }, 'no reload yet';

$s->write_config($good . qq{vhost "broken.test" { root = "\$DIR/www", no_such_key = 1 }\n});
my $line = 1 + ($good =~ tr/\n//);    # the broken vhost's line
my ($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reload');
is $rc, 1, 'luxd -s reload of a broken config exits 1';
like $out, qr/^luxd: reload failed \Q$cf\E:$line: vhost "broken\.test": unknown key "no_such_key"$/m,
  'and prints the server\'s verdict, with file:line' or diag $out;
like $s->error_log, qr/\[error\] reload failed, still serving generation 1: \Q$cf\E:$line: .*no_such_key/,
  'the server logged the failed reload';
is_deeply reloads(), { ok => 0, failed => 1 }, 'and counted it (luxd_reloads_total{result="failed"} 1)';
is $s->get('/')->{status}, 200, 'still serving';

$s->write_config($good);
($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reload');
is $rc, 0, 'luxd -s reload of the fixed config exits 0' or diag $out;
like $out, qr/^luxd: reload ok generation 2 in [\d.]+ ms$/m, 'and prints the server\'s verdict';
is_deeply reloads(), { ok => 1, failed => 1 }, 'counted as a reload that worked';

# The server counts a reload before it writes the verdict that lets -s (or
# reload()) return, so a scrape right after the verdict sees the new count
# (the count used to come after the status file was written: a scrape that
# came in between saw the old one). Many reloads, each scraped the moment
# its verdict is there, to give that window a chance to show.
my ($ok, $failed, @wrong) = (1, 1);
for my $i (1 .. 40) {
    my $bad = $i % 2;
    $s->write_config($bad ? $good . qq{vhost "broken.test" { no_such_key = 1 }\n} : $good);
    my $v = $s->reload(poll => 0.001) // 'timeout';
    $bad ? $failed++ : $ok++;
    push @wrong, "reload $i: verdict $v" unless $v =~ ($bad ? qr/^failed / : qr/^ok /);
    my $n = reloads();
    push @wrong, "reload $i: scraped ok $n->{ok}, failed $n->{failed}; want $ok, $failed"
      unless ($n->{ok} // -1) == $ok && ($n->{failed} // -1) == $failed;
}
ok !@wrong, 'each of 40 reloads is counted by the time its verdict is written' or diag join "\n", @wrong;
$s->write_config($good);

$s->stop;
done_testing;
