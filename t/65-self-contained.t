# issue 8 #26: a clone is complete. Nothing in the repository refers to
# files outside it (the README used to send users to the config spec in the
# shared folder beside the repository, comments cited its design notes), and
# the documentation is in it: the config
# reference is the man page doc/luxd.lua.5 (t/110-reference.t proves it
# names every key of lua/luxd/schema.lua, and only those), the command line
# doc/luxd.8, and doc/config.md points to them.
use strict;
use warnings;
use Test::More;
use Luxd;

my $root = $Luxd::ROOT;
ok -s "$root/doc/config.md", 'doc/config.md exists';
ok -s "$root/doc/luxd.lua.5", 'doc/luxd.lua.5 exists';
ok -s "$root/doc/luxd.8", 'doc/luxd.8 exists';
ok -s "$root/doc/design.md", 'doc/design.md exists';

# Every tracked file (and new ones not yet committed), but not build output.
my @files = grep { length && -f "$root/$_" }
  split /\n/, `cd '$root' && git ls-files --cached --others --exclude-standard 2>/dev/null`;
ok @files > 50, scalar(@files) . ' files in the repository'
  or diag 'git ls-files listed nothing: this test needs git (deps/packages-test.txt) and a clone';
# The names it must not find, built from pieces so that this file does not
# hold them itself (it is read like every other).
my ($sh, $de, $co) = ('sha' . 'red', 'DES' . 'IGN', 'con' . 'fig');
my $outside = qr{(\.\./$sh\b|/work/$sh\b|\b$de\.md\b|\bspec/$co\.md\b)};
my @bad;
for my $f (@files) {
    open my $fh, '<:raw', "$root/$f" or next;
    my $n = 0;
    while (my $l = <$fh>) {
        $n++;
        push @bad, "$f:$n: $1" if $l =~ $outside;
    }
}
is_deeply \@bad, [], 'no reference to files outside the repository' or diag join "\n", @bad;

# One reference, not two that drift: config.md points to the man pages.
open my $fh, '<', "$root/doc/config.md" or die;
my $doc = do { local $/; <$fh> };
like $doc, qr{doc/luxd\.lua\.5}, 'doc/config.md points to doc/luxd.lua.5';
like $doc, qr{doc/luxd\.8}, 'doc/config.md points to doc/luxd.8';
unlike $doc, qr/^\|.*\|$/m, 'doc/config.md holds no key table of its own';
done_testing;
