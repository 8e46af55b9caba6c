# error_log switched by reload from a file to "stderr" and back: the file's
# descriptor must not stay open. A leak of one fd per such reload would
# keep a deleted or rotated log's disk space and, reload after reload,
# exhaust the fd limit; and lines must go where the live config says.
use strict;
use warnings;
use Test::More;
use Luxd;

my $CONF = <<'EOF_CONF';
server {
  listen = "127.0.0.1:$PORT",
  workers = 1,
  error_log = "@LOG@",
  error_log_level = "info",
  access_log = false,
  pid_file = "$DIR/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
EOF_CONF

sub conf {
    my ($s, $log) = @_;
    (my $c = $CONF) =~ s/\@LOG\@/$log/;
    $c =~ s/\$PORT/$s->port/ge;
    $c =~ s/\$DIR/$s->dir/ge;
    return $c;
}

(my $first = $CONF) =~ s/\@LOG\@/\$DIR\/error.log/;
my $s = Luxd->new(config => $first, files => { 'www/index.html' => "hi\n" });
my $dir = $s->dir;

# The files the process holds open, by what they point at.
sub open_files {
    my %n;
    for (glob '/proc/' . $s->pid . '/fd/*') {
        my $t = readlink $_ // next;
        $n{$t}++;
    }
    return \%n;
}
sub nfds { my $n = 0; $n += $_ for values %{ open_files() }; $n }

is($s->get('/')->{status}, 200, 'serving, logging to a file');
my $fds0 = nfds();

for my $round (1 .. 4) {
    my $file = "$dir/error$round.log";
    $s->write_config(conf($s, $file));
    like($s->reload, qr/^ok/, "round $round: reload to $file") or diag $s->reload_error;
    ok(-s $file, "round $round: the new file has lines");
    $s->write_config(conf($s, 'stderr'));
    like($s->reload, qr/^ok/, "round $round: reload to stderr");
    my $held = grep { m{/error\d*\.log\z} } keys %{ open_files() };
    is($held, 0, "round $round: no error log file is held open after the switch to stderr")
      or diag explain open_files();
    my $stderr = Luxd::_slurp("$dir/stderr.log") // '';
    my $seen = () = $stderr =~ /reload: generation/g;
    cmp_ok($seen, '>=', $round, "round $round: stderr gets the lines ($seen reload lines there)");
}
cmp_ok(nfds(), '<=', $fds0, "fds after four file->stderr rounds: " . nfds() . " (were $fds0)");
is($s->get('/')->{status}, 200, 'still serving');
$s->stop;
done_testing;
