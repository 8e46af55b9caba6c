# issue 8 #24, found in review: since includes are resolved against the
# including file, a pattern with ".." names a file by a path that grows on
# every turn of a cycle (d1/../d2/../d1/a.lua ...). The cycle check compared
# those paths as written, so a cycle was only stopped by the 32-level limit
# (or by whatever the second run of a file broke first) and never named as
# a cycle. It compares the files' real paths now, symlinks resolved.
use strict;
use warnings;
use Test::More;
use Luxd;

for my $case (
    [ 'through ..', { 'd1/a.lua' => qq{-- a\ninclude "../d2/b.lua"\n}, 'd2/b.lua' => qq{-- b\n\ninclude "../d1/a.lua"\n} },
      qr{d2/b\.lua:3: include "\.\./d1/a\.lua": "[^"]*d1/a\.lua" is already being run \(an include cycle\)} ],
    [ 'through a symlinked directory', { 'd1/a.lua' => qq{include "../link/b.lua"\n}, 'd2/b.lua' => qq{include "../link/b.lua"\n} },
      qr{b\.lua:1: include "\.\./link/b\.lua": "[^"]*b\.lua" is already being run \(an include cycle\)}, 'link' ],
  )
{
    my ($name, $files, $want, $link) = @$case;
    my $main = qq{include "d1/a.lua"\nvhost "localhost" { default = true, root = "\$DIR" }\n};
    my ($rc, $out);
    if ($link) {
        # check_config writes the files; the link is made by hand first.
        my $dir = File::Temp::tempdir('luxd-XXXXXX', TMPDIR => 1, CLEANUP => 1);
        for my $f (keys %$files) { Luxd::_write_file("$dir/$f", $files->{$f}) }
        symlink "$dir/d2", "$dir/link" or die "symlink: $!";
        Luxd::_write_file("$dir/luxd.lua", $main =~ s/\$DIR/$dir/r);
        ($rc, $out) = Luxd::run_luxd('-t', '-c', "$dir/luxd.lua");
    } else {
        ($rc, $out) = Luxd::check_config($main, files => $files);
    }
    is $rc, 1, "$name: -t refuses the cycle";
    like $out, $want, "$name: named as a cycle, at the include's file:line";
    unlike $out, qr/nested too deeply/, "$name: not by the depth limit";
}

# Including one file twice, not from itself, is no cycle.
my ($rc, $out) = Luxd::check_config(
    qq{include "d1/x.lua"\ninclude "d2/../d1/x.lua"\nvhost "localhost" { default = true, root = "\$DIR" }\n},
    files => { 'd1/x.lua' => "-- nothing\n", 'd2/keep' => '' });
is $rc, 0, 'the same file included twice, one after the other, is fine' or diag $out;
done_testing;
