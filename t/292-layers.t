# The layering of doc/design.md (issue 20), read from the sources: the
# request core never includes a protocol's headers (it reaches HTTP/1 and
# HTTP/2 only through core/proto.h), handlers and policies see no
# protocol either, the transport knows neither protocols nor the core,
# HTTP/1 and HTTP/2 do not include each other's insides, and no source
# file is over 1,000 lines.
use strict;
use warnings;
use Test::More;
use File::Find;

my %inc;    # file => [included paths, relative to src/]
my @files;
find(sub { push @files, $File::Find::name if /\.[ch]$/ }, 'src');
for my $f (sort @files) {
    open my $fh, '<', $f or die "$f: $!";
    my ($dir) = $f =~ m{^src/(?:(.*)/)?[^/]+$};
    while (<$fh>) {
        next unless /^\s*#\s*include\s+"([^"]+)"/;
        my $p = $1;
        # Relative to the file's directory first (as the compiler looks),
        # then to src/ (-Isrc).
        my $rel = defined $dir ? "$dir/$p" : $p;
        1 while $rel =~ s{(^|/)[^/.][^/]*/\.\./}{$1};
        $rel = $p unless -e "src/$rel";
        push @{ $inc{$f} }, $rel;
    }
}

sub includes_from {
    my ($files_re, $banned_re) = @_;
    my @bad;
    for my $f (sort keys %inc) {
        next unless $f =~ $files_re;
        push @bad, map { "$f includes $_" } grep { $_ =~ $banned_re } @{ $inc{$f} };
    }
    return @bad;
}

my @bad = includes_from(qr{^src/core/}, qr{^(h1|h2)/});
is("@bad", '', 'src/core/ includes nothing of src/h1/ or src/h2/');
@bad = includes_from(qr{^src/(handlers|policy|upstream)/}, qr{^(h1|h2)/});
is("@bad", '', 'handlers, policies and upstreams include no protocol');
@bad = includes_from(qr{^src/net/}, qr{^(h1|h2|core|handlers)/});
is("@bad", '', 'the transport includes no protocol, core or handler');
@bad = includes_from(qr{^src/h1/}, qr{^h2/h2i\.h$});
is("@bad", '', 'HTTP/1 sees only h2/h2.h of HTTP/2');
@bad = includes_from(qr{^src/(?!h1/|h2/)}, qr{^h1/serve\.h$|^h2/h2i\.h$});
is("@bad", '', 'h1/serve.h and h2/h2i.h stay inside their folders');
# The core's interface to a protocol is the one way in.
ok((grep { $_ eq 'core/proto.h' or $_ eq 'proto.h' } @{ $inc{'src/core/request.h'} || [] }),
   'core/request.h brings core/proto.h');

# No file over 1,000 lines (sources, headers, the Lua of the config).
my @long;
my @lua = glob('lua/luxd/*.lua');
for my $f (sort(@files, @lua)) {
    open my $fh, '<', $f or die "$f: $!";
    my $n = 0;
    $n++ while <$fh>;
    push @long, "$f ($n lines)" if $n > 1000;
}
is("@long", '', 'no file of src/ or lua/luxd/ is over 1,000 lines');

done_testing;
