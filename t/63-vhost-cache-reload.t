# issue 8 #2: a connection remembers which vhost its last Host chose, to
# skip the hash on keep-alive. It used to key that memory by the
# generation's address and hold no reference: a freed generation comes back
# at the same address, and the next request on the connection read a vhost
# from freed memory (a segfault in lx_ruleset_first; heap-use-after-free
# under ASan). Keyed by the generation's number now, which never repeats.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use Luxd;

# ASan's quarantine holds freed memory back from reuse for hundreds of MB;
# this defect needs reuse to show.
$ENV{ASAN_OPTIONS} = join ':', grep { length } $ENV{ASAN_OPTIONS} // '', 'quarantine_size_mb=0';

my $GENS = $ENV{GENS} // 600;
my %files;
for my $k (1 .. $GENS + 1) {
    $files{"www/g$k/index.html"} = "gen $k\n";
}
$files{'www/filler/index.html'} = "filler\n";

# Generation k: k % 5 filler vhosts before "localhost", so the vhost the
# connection last saw sits somewhere else in each generation's memory, and
# rules on localhost, so a stale vhost is also walked by lx_ruleset_first.
sub config_for {
    my ($s, $k) = @_;
    my $dir = $s->dir;
    my $text = $s->{server_block};
    for my $i (1 .. $k % 5) {
        $text .= qq{vhost "f$k-$i.test" { root = "$dir/www/filler",
  access = { deny { regex = "^/f$i/(.*)\$" } }, rewrite = { { "^/fr$i/(.*)\$", "/\$1" } } }\n};
    }
    $text .= qq{vhost "localhost" { default = true, root = "$dir/www/g$k",
  access = { deny { prefix = "/never-$k/" }, deny { regex = "^/x$k/(.*)\$" } },
  rewrite = { { "^/old$k/(.*)\$", "/\$1" } } }\n};
    return $text;
}

my $s = Luxd->new(workers => $ENV{WORKERS} // 1, files => \%files, no_start => 1,
                  server => { drain_timeout => 1 });
($s->{server_block} = $s->{config_text}) =~ s/\}\n.*/}\n/s;
$s->write_config(config_for($s, 1));
$s->start;

# Connections that skip different numbers of generations: connection $i
# asks again every $period[$i] reloads. A freed generation's memory comes
# back as a later one, under glibc two reloads later, under ASan (without
# its quarantine, below) after a less regular number of reloads; with one
# connection per distance up to 200, one of them meets its old generation's
# address. They cost little: about ln(200) requests per reload.
my @period = (2 .. $ENV{MAX_PERIOD} // 200);
my @conns = map { $s->connect } @period;

# Reads "/" on keep-alive connection $c until it answers for generation $k
# (the loop adopts a new generation as soon as it wakes; allow it a moment),
# or with anything that is no older generation's answer.
sub ask {
    my ($c, $k) = @_;
    my $deadline = time + 5;
    my $r;
    while (1) {
        $c->send(Luxd::request(path => '/'));
        $r = $c->response(timeout => 5) or return undef;
        my ($got) = ($r->{body} // '') =~ /^gen (\d+)$/;
        return $r unless defined $got && $got < $k && time < $deadline;
        sleep 0.02;
    }
}

for my $i (0 .. $#conns) {
    my $r = ask($conns[$i], 1);
    is $r && $r->{body}, "gen 1\n", "connection $i: generation 1 answers";
}
my ($failed, $asked) = (0, 0);
for my $k (2 .. $GENS + 1) {
    $s->write_config(config_for($s, $k));
    my $msg = $s->reload // 'timeout';
    if ($msg !~ /^ok generation $k\b/) { fail "reload $k: $msg"; $failed++; last }
    for my $i (0 .. $#conns) {
        next if ($k - 1) % $period[$i];
        $asked++;
        my $r = ask($conns[$i], $k);
        if (!$r) {
            fail "generation $k, connection $i: no answer (server alive: "
              . ($s->alive ? 'yes' : 'no') . ')';
            $failed++;
            last;
        }
        if ($r->{body} ne "gen $k\n") {
            is $r->{body}, "gen $k\n", "generation $k, connection $i: the new vhost answers";
            $failed++;
        }
    }
    last if $failed;
}
ok !$failed, "$asked keep-alive requests, each answered by its generation's vhost";
$_->close for @conns;
ok $s->alive, 'luxd is still running';
$s->stop;
done_testing;
