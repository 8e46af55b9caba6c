# issue 18: the regex prefilter compiles in a child process that a reload or
# a stop ends at once. A compile of a large set takes seconds in the engine
# and cannot be interrupted from inside: before, a stop waited for it and
# each reload in a row started a compile of its own that ran to the end
# (34 at once, 1.3 GB). Here each child is held before it compiles (the
# FIFO of LUXD_TEST_PREFILTER_CHILD_HOLD: a compile that never ends), and
# the server must still: answer by the plain path, kill an older
# generation's compile when it reloads to other rules, keep one compile at
# a time through reloads in a row, compile only the newest generation once
# let go, not compile again a set a reload left as it was (nor kill its
# compile in progress), stop cleanly, and leave no child behind when it is
# killed itself. Each generation below has a rule set of its own (41, 42,
# ... rules) unless it is meant to share one.
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(mkfifo);
use lib 't/lib';
use Luxd;

my $engine = `${\ Luxd::bin()} -V` =~ /^regex prefilter: Hyperscan/m;
diag($engine ? 'built with Hyperscan: the prefilter is used' : 'built without libhs: plain path only');

sub conf {
    my ($to, $n) = @_;
    my $rules = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/$to/%d/\$2" },\n), $_, $_ } 1 .. ($n // 40);
    return qq(vhost "localhost" { default = true, root = "\$DIR/www",\n  redirect = {\n$rules  },\n}\n);
}

my $fifo = tempdir(CLEANUP => 1) . '/hold';
mkfifo($fifo, 0600) or die "mkfifo: $!";
local $ENV{LUXD_TEST_PREFILTER_CHILD_HOLD} = $fifo;

# The compile children of pid (of generation gen, if given): (pid, state)
# pairs, zombies included.
sub compilers {
    my ($ppid, $gen) = @_;
    my @c;
    for my $d (glob '/proc/[0-9]*') {
        open(my $fh, '<', "$d/stat") or next;
        my $st = <$fh> // next;
        my ($pid, $state, $pp) = $st =~ /^(\d+) \(.*\) (\S) (\d+) / or next;
        next unless $pp == $ppid;
        open(my $cf, '<', "$d/cmdline") or next;
        my $cmd = do { local $/; <$cf> } // '';
        my @argv = split /\0/, $cmd;
        next unless @argv == 4 && $argv[1] eq '--prefilter-compiler' && $argv[2] == $ppid;
        push @c, [$pid, $state] if !defined $gen || $argv[3] == $gen;
    }
    return @c;
}
sub gone { my ($pid) = @_; !-e "/proc/$pid" || (`cat /proc/$pid/stat 2>/dev/null` =~ /^\d+ \(.*\) Z /) }
# Lets the child that is held go on.
sub release { open(my $w, '>', $fifo) or die "open $fifo: $!"; print $w "x"; close $w }

my $s = Luxd->new(config => conf('g1', 41), files => { 'www/plain.txt' => "plain\n" }, test_handlers => 1);
sub loc { my $r = $s->get($_[0]); ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') }
sub set_target {
    my ($to, $n) = @_;
    my $text = do { local $/; open my $fh, '<', $s->config_file or die; <$fh> };
    (my $new = conf($to, $n)) =~ s/\$DIR/$s->dir/ge;
    $text =~ s/vhost "localhost".*\z/$new/s or die;
    $s->write_config($text);
}

if (!$engine) {
    is(loc('/b00012345'), '302 /g1/12/345', 'without the engine: the plain path answers');
    is(scalar(compilers($s->pid)), 0, 'and no compile child is started');
    ok($s->stop, 'stopped cleanly');
    done_testing;
    exit;
}

my $c1 = Luxd::wait_for(sub { my @c = compilers($s->pid, 1); @c ? $c[0][0] : undef }, 30);
ok($c1, 'generation 1: a compile child started') or BAIL_OUT('no child: ' . $s->error_log);
is(loc('/b00012345'), '302 /g1/12/345', 'while it compiles, the plain path answers');

# A reload kills the older generation's compile and starts the newer one's.
set_target('g2', 42);
like($s->reload // '', qr/^ok generation 2 /, 'reload to generation 2');
ok(Luxd::wait_for(sub { gone($c1) }, 30), "generation 1's compile was killed");
my $c2 = Luxd::wait_for(sub { my @c = grep { $_->[1] ne 'Z' } compilers($s->pid, 2); @c ? $c[0][0] : undef }, 30);
ok($c2, 'generation 2 has a compile child of its own');
is(loc('/b00012345'), '302 /g2/12/345', 'generation 2 answers by the plain path');

# Reloads in a row: never more than one compile at a time.
my ($max, %seen) = (0);
for my $g (3 .. 8) {
    set_target("g$g", 40 + $g);
    like($s->reload // '', qr/^ok generation $g /, "reload to generation $g");
    my @c = compilers($s->pid);
    $seen{$_->[0]} = 1 for @c;
    $max = @c if @c > $max;
}
ok($max <= 1, "after each of six reloads in a row, at most one compile child ($max)");
my $last = Luxd::wait_for(sub { my @c = compilers($s->pid); @c == 1 && $c[0][1] ne 'Z' && compilers($s->pid, 8) ? $c[0][0] : undef }, 30);
ok($last, 'then exactly one, for generation 8 (its ps line says so)');
ok(gone($c2), "and generation 2's is gone");

# Let go, the child compiles generation 8, and only that one.
release();
ok($s->wait_log(qr/generation 8: regex prefilter of 1 rule set compiled in [\d.]+ ms \(48 regexes held, 0 tested each; 0 sets as before\)/, 30),
   'generation 8 compiled') or diag($s->error_log);
unlike($s->error_log, qr/generation [1-7]: regex prefilter/, 'no older generation was compiled');
ok(Luxd::wait_for(sub { gone($last) }, 30), 'its child exited once done');
is(loc('/b00012345'), '302 /g8/12/345', 'generation 8 answers through its prefilter');
is(loc('/a00048777'), '302 /g8/48/777', '... the last rule too');
is(loc('/c00048777'), '404 -', '... and a path none matches is not redirected');

# A reload that leaves the set as it was (new targets, the same regexes)
# takes the answer kept: no compile.
set_target('g9', 48);
like($s->reload // '', qr/^ok generation 9 /, 'reload to generation 9: new targets, the same regexes');
ok($s->wait_log(qr/generation 9: regex prefilter of 1 rule set compiled in [\d.]+ ms \(48 regexes held, 0 tested each; 1 set as before\)/, 30),
   'generation 9 takes the kept answer') or diag($s->error_log);
is(loc('/a00048777'), '302 /g9/48/777', 'generation 9 answers with its own targets');

# A reload during a compile of a set the new generation shares does not
# kill it: the compile of generation 10 (held) answers for generation 11.
# Were it killed, generation 11's own child would wait on the FIFO forever.
set_target('g10', 50);
like($s->reload // '', qr/^ok generation 10 /, 'reload to generation 10: a new set');
my $c10 = Luxd::wait_for(sub { my @c = grep { $_->[1] ne 'Z' } compilers($s->pid, 10); @c ? $c[0][0] : undef }, 30);
ok($c10, 'generation 10 compiles (held)');
set_target('g11', 50);
like($s->reload // '', qr/^ok generation 11 /, 'reload to generation 11: the same set, new targets');
release();
ok($s->wait_log(qr/generation 11: regex prefilter of 1 rule set compiled in [\d.]+ ms \(50 regexes held, 0 tested each; 1 set as before\)/, 30),
   "generation 11 takes the answer of generation 10's compile") or diag($s->error_log);
my @compiles = $s->error_log =~ /generation 1[01]: regex prefilter of 1 rule set compiled in [\d.]+ ms \(50 regexes held, 0 tested each; 0 sets as before\)/g;
is(scalar(@compiles), 1, 'one compile of the shared set in all (the one held)');
ok(Luxd::wait_for(sub { gone($c10) }, 30), 'and its child is gone');
is(scalar(grep { $_->[1] ne 'Z' } compilers($s->pid)), 0, 'no other compile was started');
is(loc('/b00050123'), '302 /g11/50/123', 'generation 11 answers');

# A stop while a compile is held: the server exits, the child with it.
set_target('g12', 51);
like($s->reload // '', qr/^ok generation 12 /, 'reload to generation 12');
my $c12 = Luxd::wait_for(sub { my @c = grep { $_->[1] ne 'Z' } compilers($s->pid, 12); @c ? $c[0][0] : undef }, 30);
ok($c12, 'generation 12 compiles (held)');
ok($s->stop, 'a stop does not wait for the compile: clean exit');
ok(Luxd::wait_for(sub { gone($c12) }, 30), 'and the compile child is gone');

# A server killed outright leaves no compile running either.
my $k = Luxd->new(config => conf('k'), files => { 'www/plain.txt' => "plain\n" }, test_handlers => 1);
my $ck = Luxd::wait_for(sub { my @c = compilers($k->pid); @c ? $c[0][0] : undef }, 30);
ok($ck, 'a second server: its compile child started (held)');
$k->signal('KILL');
ok(defined $k->wait_exit(30), 'the server was killed');
ok(Luxd::wait_for(sub { gone($ck) }, 30), 'its compile child died with it');
$k->{stopped} = 1;

# What is kept outlives generations between: a rollback during a compile
# of other rules, a generation replaced while it finishes a set the newer
# one shares, and sets of the same content in one generation (compiled
# once). Each vhost's set is a family of 20 regexes; a set compiled when it
# should have been kept would wait on the FIFO for good.
sub families {    # ([vhost, family]...): a config, vhost names v1.example...
    join '', map {
        my ($v, $fam) = @$_;
        my $rules = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/f$fam/%d/\$2" },\n), 100 * $fam + $_, $_ } 1 .. 20;
        qq(vhost "v$v.example" { root = "\$DIR/www",\n  redirect = {\n$rules  },\n}\n)
    } @_;
}
my $r = Luxd->new(config => families([1, 1], [2, 2], [3, 3], [4, 4]), files => { 'www/plain.txt' => "plain\n" }, test_handlers => 1);
sub set_families {
    my $text = do { local $/; open my $fh, '<', $r->config_file or die; <$fh> };
    (my $new = families(@_)) =~ s/\$DIR/$r->dir/ge;
    $text =~ s/vhost "v1\.example".*\z/$new/s or die;
    $r->write_config($text);
}
sub release_one {    # lets the next child go on, once it is there
    my ($srv, $gen) = @_;
    ok(Luxd::wait_for(sub { grep { $_->[1] ne 'Z' } compilers($srv->pid, $gen) }, 30), "generation $gen: its child is there");
    release();
}
release_one($r, 1);
ok($r->wait_log(qr/generation 1: regex prefilter of 4 rule sets compiled in [\d.]+ ms \(80 regexes held, 0 tested each; 0 sets as before\)/, 30),
   'rollback: generation 1 compiles four sets') or diag($r->error_log);
set_families([1, 5]);
like($r->reload // '', qr/^ok generation 2 /, 'generation 2: one other set');
my $c2r = Luxd::wait_for(sub { my @c = grep { $_->[1] ne 'Z' } compilers($r->pid, 2); @c ? $c[0][0] : undef }, 30);
ok($c2r, 'its compile is held');
set_families([1, 1], [2, 2], [3, 3], [4, 4]);
like($r->reload // '', qr/^ok generation 3 /, "generation 3: generation 1's sets again");
ok($r->wait_log(qr/generation 3: regex prefilter of 4 rule sets compiled in [\d.]+ ms \(80 regexes held, 0 tested each; 4 sets as before\)/, 30),
   'generation 3 takes all four kept answers, no compile') or diag($r->error_log);
ok(Luxd::wait_for(sub { gone($c2r) }, 30), "generation 2's compile was killed");
is(loc2($r, '/b00402345', 'v4.example'), '302 /f4/2/345', 'generation 3 answers');

set_families([1, 6]);
like($r->reload // '', qr/^ok generation 4 /, 'generation 4: a set of its own');
ok(Luxd::wait_for(sub { grep { $_->[1] ne 'Z' } compilers($r->pid, 4) }, 30), 'its compile is held');
set_families([1, 1], [2, 2], [3, 3], [4, 4], [5, 6]);
like($r->reload // '', qr/^ok generation 5 /, "generation 5: generation 3's sets and generation 4's");
release();
ok($r->wait_log(qr/generation 5: regex prefilter of 5 rule sets compiled in [\d.]+ ms \(100 regexes held, 0 tested each; 5 sets as before\)/, 30),
   "generation 5 takes generation 4's answer and the four before it") or diag($r->error_log);

set_families([1, 7], [2, 7], [3, 7], [4, 7]);
like($r->reload // '', qr/^ok generation 6 /, 'generation 6: four vhosts, one set of regexes');
release_one($r, 6);
ok($r->wait_log(qr/generation 6: regex prefilter of 4 rule sets compiled in [\d.]+ ms \(80 regexes held, 0 tested each; 3 sets as before\)/, 30),
   'the set is compiled once for all four') or diag($r->error_log);
is(loc2($r, '/a00702999', 'v3.example'), '302 /f7/2/999', 'generation 6 answers');
ok($r->stop, 'stopped cleanly');

# A compiler that fails (the byte 'k': the child exits 1 before it reads
# its request) is logged with how it ended, the next set gets a new child,
# and after three failures the rest of the generation is given up: not a
# child started per set of 5 (or of 10,000 vhosts).
my $five = join '', map {
    my $v = $_;
    my $rules = join '', map { sprintf qq(    { [[(a|b)%05d(\\d+)]], "/v$v/%d/\$2" },\n), $_, $_ } 1 .. 20;
    qq(vhost "v$v.example" { root = "\$DIR/www",\n  redirect = {\n$rules  },\n}\n)
} 1 .. 5;
my $f = Luxd->new(config => conf('f') . $five, files => { 'www/plain.txt' => "plain\n" }, test_handlers => 1);
my %was;
for my $n (1 .. 3) {
    # A new child each time, and the last one gone first: a FIFO still
    # open in a child that has read its byte would take this one's.
    my $c = Luxd::wait_for(sub { my @c = grep { $_->[1] ne 'Z' && !$was{$_->[0]} } compilers($f->pid); @c ? $c[0][0] : undef }, 30);
    ok($c, "compiler $n started");
    open(my $w, '>', $fifo) or die "open $fifo: $!";
    print $w 'k';
    close $w;
    $was{$c} = 1;
    ok(Luxd::wait_for(sub { gone($c) }, 30), "compiler $n exited");
}
ok($f->wait_log(qr/3 regex prefilter compiles failed; the rest of generation 1's regex rules are tested each/, 30),
   'after three failures the generation is given up') or diag($f->error_log);
like($f->error_log, qr/generation 1: regex prefilter of 0 rule sets compiled in [\d.]+ ms \(0 regexes held, 140 tested each; 0 sets as before\)/,
     'the summary counts every regex as tested each');
my @failed = $f->error_log =~ /compile of a set of \d+ regex rules failed \([^;]+; the compiler exit 1\)/g;
is(scalar(@failed), 3, 'each failure logged, with the compiler\'s exit status');
is(scalar(compilers($f->pid)), 0, 'and no compiler is left or started after');
is(loc2($f, '/b00012345', 'localhost'), '302 /f/12/345', 'the plain path answers');
is(loc2($f, '/a00020777', 'v5.example'), '302 /v5/20/777', '... in every vhost');
ok($f->stop, 'stopped cleanly');
sub loc2 { my ($srv, $p, $h) = @_; my $r = $srv->http(method => 'GET', path => $p, host => $h); ($r->{status} // 0) . ' ' . ($r->{headers}{location} // '-') }
done_testing;
