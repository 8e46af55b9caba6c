# issue 17 #12: an error in an included file names the file as it was
# opened. It was named relative to the working directory whenever the file
# lay under it: `luxd -c /etc/luxd/luxd.lua` run from / printed
# etc/luxd/conf.d/sites.lua:17. Now an included file is named by its
# absolute path unless both the include pattern and the name of the file
# holding it are relative (`-c conf/luxd.lua` from the source tree keeps
# conf/conf.d/a.lua).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use Cwd qw(abs_path);
use POSIX ();
use Luxd;

my $bin = abs_path(Luxd::bin());
my $d   = abs_path(tempdir('luxd-inc-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP}));
Luxd::_write_file("$d/luxd.lua", qq{include "conf.d/*.lua"\nvhost "localhost" { default = true, root = "$d" }\n});
Luxd::_write_file("$d/conf.d/sites.lua", qq{-- a site\nvhost "x.test" { root = "$d", no_such_key = 1 }\n});
Luxd::_write_file("$d/abs.lua", qq{include "$d/conf.d/sites.lua"\n});
(my $up = $d) =~ s{/[^/]+$}{};

# (exit status, output) of luxd run in $dir.
sub luxd_in {
    my ($dir, @args) = @_;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        chdir $dir or POSIX::_exit(126);
        exec { $bin } $bin, @args or POSIX::_exit(127);
    }
    local $/;
    my $out = <$fh> // '';
    close $fh;
    return ($? >> 8, $out);
}

my $err = qr{:2: vhost "x\.test": unknown key "no_such_key"$}m;
for my $cwd ('/', $up, $d) {
    my ($rc, $out) = luxd_in($cwd, '-t', '-c', "$d/luxd.lua");
    is $rc, 1, "-t -c $d/luxd.lua from $cwd: exit 1";
    like $out, qr{^\Q$d\E/conf\.d/sites\.lua$err}, 'the included file named by its absolute path' or diag $out;
    ($rc, $out) = luxd_in($cwd, '-t', '-c', "$d/abs.lua");
    like $out, qr{^\Q$d\E/conf\.d/sites\.lua$err}, 'an absolute include: absolute' or diag $out;
}
my ($rc, $out) = luxd_in($d, '-t', '-c', 'luxd.lua');
like $out, qr{^conf\.d/sites\.lua$err}, 'a relative -c and a relative include: relative, as opened' or diag $out;
($rc, $out) = luxd_in($up, '-t', '-c', ($d =~ m{([^/]+)$})[0] . '/luxd.lua');
like $out, qr{^\Q@{[ ($d =~ m{([^/]+)$})[0] ]}\E/conf\.d/sites\.lua$err}, 'from the parent directory: relative to it' or diag $out;
($rc, $out) = luxd_in($d, '-t', '-c', 'abs.lua');
like $out, qr{^\Q$d\E/conf\.d/sites\.lua$err}, 'an absolute include from a relative -c: absolute' or diag $out;

# At start-up and at reload too: the server started from / (as a unit with
# no WorkingDirectory would) reports a reload's error with the absolute name.
my $s = Luxd->new(config => qq{include "conf.d/*.lua"\nvhost "localhost" { default = true, root = "\$DIR/www" }\n}, no_start => 1);
{
    local $Luxd::ROOT = '/';
    local $ENV{LUXD_BIN} = abs_path($bin);
    $s->start;
}
$s->write_file_atomic('conf.d/bad.lua', qq{-- a site\nvhost "y.test" { root = "/tmp", no_such_key = 1 }\n});
my $msg = $s->reload // 'timeout';
my $sd = $s->dir;
like $msg, qr{^failed \Q$sd\E/conf\.d/bad\.lua:2: vhost "y\.test": unknown key "no_such_key"$}, 'a reload of a server run from /: absolute' or diag $msg;
unlink $s->dir . '/conf.d/bad.lua';
$s->stop;
done_testing;
