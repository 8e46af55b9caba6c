# The error log and the access logs keep close-on-exec through a reload and
# a reopen (SIGUSR1). They were swapped in with dup2, which clears it: after
# the first reopen, every process the config's Lua starts (io.popen,
# os.execute) inherited the log files. (From the review of t/177.)
use strict;
use warnings;
use Test::More;
use Luxd;

my $s = Luxd->new(files => { 'www/index.html' => "hi\n" });
my $dir = $s->dir;

# fd -> [target, O_CLOEXEC set] for the log files luxd holds.
sub logs {
    my %r;
    for my $l (glob '/proc/' . $s->pid . '/fd/*') {
        my $t = readlink $l // next;
        my ($kind) = $t =~ m{/(error|access)\.log\z} or next;
        my ($n) = $l =~ /(\d+)\z/;
        open my $fh, '<', '/proc/' . $s->pid . "/fdinfo/$n" or next;
        my ($flags) = map { /^flags:\s+([0-7]+)/ ? oct $1 : () } <$fh>;
        $r{$n} = [$kind, ($flags & 02000000) ? 1 : 0];
    }
    return \%r;
}

sub check {
    my ($when) = @_;
    my $l = logs();
    my %kinds = map { $_->[0] => 1 } values %$l;
    ok($kinds{error} && $kinds{access}, "$when: both logs are open") or diag explain $l;
    my @open = grep { !$l->{$_}[1] } sort keys %$l;
    is("@open", '', "$when: each log fd has close-on-exec") or diag explain $l;
}

is($s->get('/')->{status}, 200, 'serving');
check('at start');
$s->signal('USR1');
ok($s->wait_log(qr/reopen/i, 5), 'the logs were reopened');
is($s->get('/')->{status}, 200, 'serving after the reopen');
check('after a reopen');
like($s->reload, qr/^ok/, 'a reload');
check('after a reload');
$s->stop;
done_testing;
