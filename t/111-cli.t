# issue 11: luxd's command line. --help and --version (and -h, -v) answer on
# stdout with exit 0; -V prints the versions of libuv, LuaJIT, PCRE2 and
# llhttp and the flags this binary was built with, as nginx -V; every usage
# error (unknown option, missing argument, stray argument, unknown -s name,
# -s with -t) says what is wrong and the usage on stderr and exits 2; exit 1
# stays "the config or the server failed". doc/luxd.8 describes every
# option --help lists, every -s name and every exit status.
use strict;
use warnings;
use Test::More;
use POSIX ();
use File::Basename qw(dirname);
use File::Temp qw(tempdir);
use Luxd;

my $root = $Luxd::ROOT;
my $bin  = Luxd::bin();

# (exit status, stdout, stderr) of luxd with these arguments, run in $root.
sub luxd {
    my @args = @_;
    my $dir = tempdir('luxd-cli-XXXXXX', TMPDIR => 1, CLEANUP => 1);
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$dir/out";
        open STDERR, '>', "$dir/err";
        chdir $root;
        alarm 20;
        no warnings 'exec';
        exec { $bin } $bin, @args;
        POSIX::_exit(127);
    }
    waitpid $pid, 0;
    my $st = $? & 127 ? 128 + ($? & 127) : $? >> 8;
    my @o = map { open my $f, '<', "$dir/$_" or die; local $/; scalar(<$f>) // '' } qw(out err);
    return ($st, @o);
}

sub slurp { my ($f) = @_; open my $fh, '<', $f or return undef; local $/; <$fh> }

my ($version) = (slurp("$root/src/lx.h") // '') =~ /#define LX_VERSION "([^"]+)"/;
ok $version, "LX_VERSION is $version";

# --- --help, -h -------------------------------------------------------------
my ($st, $out, $err) = luxd('--help');
is $st, 0, '--help exits 0';
is $err, '', '--help writes nothing on stderr';
like $out, qr/^usage: luxd /, '--help prints the usage on stdout';
like $out, qr/^\s+-$_\b/m, "--help describes -$_" for qw(c t T s V);
like $out, qr/^\s+-h, --help\b/m, '--help describes -h, --help';
like $out, qr/^\s+-v, --version\b/m, '--help describes -v, --version';
like $out, qr/\bluxd\(8\)/, '--help points to luxd(8)';
my $help = $out;
($st, $out, $err) = luxd('-h');
is $st, 0, '-h exits 0';
is $out, $help, '-h prints what --help prints';

# --- --version, -v ---------------------------------------------------------
for my $o ('--version', '-v') {
    ($st, $out, $err) = luxd($o);
    is $st, 0, "$o exits 0";
    is $out, "luxd $version\n", "$o prints luxd $version";
    is $err, '', "$o writes nothing on stderr";
}

# --- -V -------------------------------------------------------------------
($st, $out, $err) = luxd('-V');
is $st, 0, '-V exits 0';
is $err, '', '-V writes nothing on stderr';
my @l = split /\n/, $out;
is $l[0], "luxd $version", '-V: the first line is the version';

sub modversion { my $v = `pkg-config --modversion $_[0] 2>/dev/null`; chomp $v; $v }
my $uv = modversion('libuv');
ok $uv, "pkg-config knows libuv $uv";
like $out, qr/^libuv \Q$uv\E \(built with \Q$uv\E\)$/m, "-V: libuv $uv, as installed";

my $inc = `pkg-config --variable=includedir luajit 2>/dev/null`;
chomp $inc;
my ($lj) = (slurp("$inc/luajit-2.1/luajit.h") // slurp("$inc/luajit.h") // '')
  =~ /#define LUAJIT_VERSION\s+"([^"]+)"/;
ok $lj, "luajit.h says $lj";
like $out, qr/^\Q$lj\E$/m, "-V: $lj";

my $pcre = modversion('libpcre2-8');
ok $pcre, "pkg-config knows PCRE2 $pcre";
like $out, qr/^PCRE2 \Q$pcre\E \d{4}-\d\d-\d\d \(built with \Q$pcre\E\)$/m, "-V: PCRE2 $pcre with its date";

my $llh = slurp('/usr/share/include/llhttp/llhttp.h') // '';
my @llv = map { $llh =~ /#define LLHTTP_VERSION_$_ (\d+)/ ? $1 : '?' } qw(MAJOR MINOR PATCH);
my $llv = join '.', @llv;
like $out, qr/^llhttp \Q$llv\E \(compiled in with -DLLHTTP_STRICT_MODE=1\)$/m,
  "-V: llhttp $llv in strict mode";

# The flags are the ones the Makefile built this binary with: those it
# wrote to BUILD/gen/build-flags (LUXD_BIN=build/asan/luxd reads build/asan).
my $flags = slurp(dirname($bin) . '/gen/build-flags');
ok defined $flags, 'the build wrote gen/build-flags beside the binary';
my ($cflags)  = ($flags // '') =~ /-DLX_BUILD_CFLAGS='"(.*?)"'/;
my ($ldflags) = ($flags // '') =~ /-DLX_BUILD_LDFLAGS='"(.*?)"'/;
ok $cflags, "the build's CFLAGS: $cflags";
like $cflags // '', qr/-fstack-protector-strong .*-D_FORTIFY_SOURCE=2/, 'they hold the hardening flags';
like $out, qr/^CFLAGS: \Q$cflags\E$/m, '-V: the CFLAGS of the build';
like $out, qr/^LDFLAGS: \Q$ldflags\E$/m, '-V: the LDFLAGS of the build';
like $out, qr/^compiler: (gcc|clang) \d/m, '-V: the compiler and its version';

# --- usage errors: exit 2, the reason and the usage on stderr ------------
for my $case (
    [ [ '--no-such-option' ],       qr/unrecognized option '--no-such-option'/ ],
    [ [ '-x' ],                     qr/invalid option -- 'x'/ ],
    [ [ '-c' ],                     qr/option requires an argument -- 'c'/ ],
    [ [ 'conf/luxd.lua' ],          qr/unexpected argument "conf\/luxd\.lua" \(the config is given with -c\)/ ],
    [ [ '-t', 'stray' ],            qr/unexpected argument "stray"/ ],
    [ [ '-s', 'restart' ],          qr/unknown signal "restart" \(stop, quit, reload, reopen\)/ ],
    [ [ '-s', 'stop', '-t' ],       qr/-s cannot be combined with -t or -T/ ],
    [ [ '-p', '/run/x.pid' ],       qr/-p goes with -s/ ],
  ) {
    my ($args, $why) = @$case;
    ($st, $out, $err) = luxd(@$args);
    is $st, 2, "luxd @$args: exit 2";
    is $out, '', "luxd @$args: nothing on stdout";
    like $err, $why, "luxd @$args: says what is wrong";
    like $err, qr/^usage: luxd /m, "luxd @$args: and the usage";
}

# --- exit 0 and 1 ---------------------------------------------------------
my ($rc, $text, $file) = Luxd::check_config(qq{vhost "localhost" { default = true, root = "\$DIR" }\n});
($st, $out, $err) = luxd('-t', '-c', $file);
is $st, 0, '-t with a good config: exit 0';
like $err, qr/^luxd: configuration \Q$file\E is ok \(1 vhosts, 0 upstreams, compiled in [\d.]+ ms\)$/m,
  '-t says so on stderr';
is $out, '', '-t prints nothing on stdout';
($st, $out, $err) = luxd('-T', '-c', $file);
is $st, 0, '-T with a good config: exit 0';
like $out, qr/^vhost localhost \[default\]/m, '-T prints the tables on stdout';
($st, $out, $err) = luxd('-t', '-c', '/nonexistent/luxd.lua');
is $st, 1, '-t with a missing config: exit 1';
# The config has no pid_file (and this build has none built in): -s cannot
# find the server, and says how to name the pid file.
($st, $out, $err) = luxd('-s', 'reload', '-c', $file);
is $st, 1, '-s without a pid_file: exit 1';
like $err, qr/no pid file to read \(no pid_file in the config \Q$file\E, and none is built in\): name it with -p PIDFILE/,
  '-s says why';

# --- luxd(8) describes all of it -------------------------------------------
my $man = slurp("$root/doc/luxd.8") // '';
ok length $man, 'doc/luxd.8 exists';
my @opts = $help =~ /^\s+(-\w)\b/mg;
ok @opts >= 7, '--help lists ' . join(' ', @opts);
for my $o (@opts) {
    (my $f = $o) =~ s/^-//;
    like $man, qr/^\.It Fl \Q$f\E\b/m, "doc/luxd.8 describes $o";
}
like $man, qr/^\.It Fl h , Fl -help$/m, 'doc/luxd.8 describes --help';
like $man, qr/^\.It Fl v , Fl -version$/m, 'doc/luxd.8 describes --version';
my ($names) = $help =~ /-s (stop\|[\w|]+)/;
for my $n (split /\|/, $names // '') {
    like $man, qr/^\.It Cm \Q$n\E$/m, "doc/luxd.8 describes -s $n";
}
my ($exit) = $man =~ /^\.Sh EXIT STATUS\n(.*?)^\.Sh /ms;
like $exit // '', qr/^\.It $_$/m, "doc/luxd.8 EXIT STATUS describes $_" for 0, 1, 2;
# The signals main.c installs handlers for, read from it.
my ($installed) = (slurp("$root/src/main.c") // '') =~ /static const int sigs\[\] = \{([^}]*)\}/;
my @installed = ($installed // '') =~ /\b(SIG[A-Z0-9]+)\b/g;
ok @installed >= 5, 'main.c handles ' . join(' ', @installed);
my ($sigs) = $man =~ /^\.Sh SIGNALS\n(.*?)^\.Sh /ms;
like $sigs // '', qr/^\.It (?:Dv SIG\w+ , )*Dv $_\b/m, "doc/luxd.8 SIGNALS describes $_" for @installed;
done_testing;
