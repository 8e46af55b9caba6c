# issue 8 #26: a clone is complete. Nothing in the repository refers to
# files outside it (the README used to send users to ../shared/spec/config.md,
# comments cited DESIGN.md), and the config reference in doc/config.md names
# every key the schema accepts (read from lua/luxd/schema.lua, so a key
# added without documentation fails here).
use strict;
use warnings;
use Test::More;
use Luxd;

my $root = $Luxd::ROOT;
ok -s "$root/doc/config.md", 'doc/config.md exists';
ok -s "$root/doc/design.md", 'doc/design.md exists';

# Every tracked file (and new ones not yet committed), but not build output.
my @files = grep { length && -f "$root/$_" }
  split /\n/, `cd '$root' && git ls-files --cached --others --exclude-standard 2>/dev/null`;
ok @files > 50, scalar(@files) . ' files in the repository'
  or diag 'git ls-files listed nothing: this test needs git (deps/packages-test.txt) and a clone';
my @bad;
for my $f (@files) {
    next if $f eq 't/65-self-contained.t';
    open my $fh, '<:raw', "$root/$f" or next;
    my $n = 0;
    while (my $l = <$fh>) {
        $n++;
        push @bad, "$f:$n: $1" if $l =~ m{(\.\./shared\b|/work/shared\b|\bDESIGN\.md\b|\bspec/config\.md\b)};
    }
}
is_deeply \@bad, [], 'no reference to files outside the repository' or diag join "\n", @bad;

open my $fh, '<', "$root/doc/config.md" or die;
my $doc = do { local $/; <$fh> };
local $ENV{LUXD_ROOT} = $root;
my @keys = `luajit -e 'package.path = os.getenv("LUXD_ROOT") .. "/lua/?.lua;" .. package.path
  for b, keys in pairs(require("luxd.schema").KEYS) do for k in pairs(keys) do print(b .. "." .. k) end end'`;
chomp @keys;
ok @keys > 50, scalar(@keys) . ' schema keys';
for my $k (sort @keys) {
    my ($block, $name) = split /\./, $k;
    like $doc, qr/`[^`]*\b\Q$name\E\b[^`]*`/, "doc/config.md documents $k";
}
like $doc, qr/^## Not in the language yet$/m, 'doc/config.md says what the language does not have';
like $doc, qr/^## upstream "name" \{ \}$/m, 'doc/config.md has a section for upstream "name" { }';
done_testing;
