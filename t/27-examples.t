# Every example in conf/examples/ passes `luxd -t` (run from the repo root,
# as a user would) and compiles with `luxd -T`.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my @examples = map { s{^\Q$Luxd::ROOT\E/}{}r } sort glob("$Luxd::ROOT/conf/examples/*.lua");

# The issue asks for these four kinds of example.
cmp_ok(scalar @examples, '>=', 4, 'at least four examples') or diag(join ' ', @examples);
my $all = join '', map { local $/; open my $fh, '<', "$Luxd::ROOT/$_" or die "$_: $!"; scalar <$fh> } @examples;
like($all, qr/\bvhost_dir\s*=/, 'one example uses vhost_dir (mass hosting)');
like($all, qr/suffix\s*=\s*\{\s*"~"\s*,\s*"\.inc"\s*\}/, "one example is lighttpd's url.access-deny = (\"~\", \".inc\")");
like($all, qr/\bfor\b[^\n]*\bdo\b/, 'one example generates its config with a Lua loop');
ok(scalar(() = $all =~ /^\s*vhost\s*[("]/mg) >= 2, 'one example has several vhosts');

for my $ex (@examples) {
    subtest $ex => sub {
        my ($rc, $out) = Luxd::run_luxd('-t', '-c', $ex);
        is($rc, 0, "luxd -t -c $ex exits 0") or diag($out);
        # The examples' roots (/srv/..., sites/...) are not on this machine:
        # the warnings about them are -t doing its job, nothing else may be.
        (my $rest = $out) =~ s/^luxd: warning: \S+:\d+: [^\n]*: root \S+ does not exist;[^\n]*\n//mg;
        unlike($rest, qr/\Q$ex\E:\d+:/, 'no FILE:LINE: message but missing roots') or diag($out);
        my ($rc2, $dump) = Luxd::run_luxd('-T', '-c', $ex);
        is($rc2, 0, "luxd -T -c $ex exits 0") or diag($dump);
        like($dump, qr/^vhost \S+/m, 'the dump lists at least one vhost');
    };
}

done_testing;
