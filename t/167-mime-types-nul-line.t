# Review of mime_types (issue 11): a line with a NUL byte is to be skipped
# whole and counted, and the lines after it read as usual. lx_mime_load_file
# takes strlen() of what fgets read, so a NUL makes the line look
# unfinished ("no newline and not at EOF"), and the loop that drops the
# rest of an over-long line then reads and drops the NEXT line as well: its
# extensions are lost without a warning, and every later line number in the
# warning is one short. The line before the NUL line and lines at the limit
# are checked as well. Against a real luxd on loopback.
use strict;
use warnings;
use Test::More;
use Luxd;

my $UTF8 = '; charset=utf-8';
my $types = join '',
  "text/x-before bef\n",                 # line 1
  "application/x-nul nul\0junk\n",       # line 2: skipped (NUL)
  "text/x-next nxt\n",                   # line 3: must be read
  "application/x-nul2 nul2\0junk\n",     # line 4: skipped (NUL)
  "bad line without a slash\n",          # line 5: skipped
  "text/x-third thd\n";                  # line 6
my %files = ('m.types' => $types);
$files{"www/a.$_"} = "$_\n" for qw(bef nul nxt thd);

my $s = Luxd->new(files => \%files, server => { mime_types => '$DIR/m.types' });

sub ctype {
    my $r = $s->http(path => "/a.$_[0]");
    return "$r->{status} " . ($r->{headers}{'content-type'} // '');
}
is ctype('bef'), "200 text/x-before$UTF8", 'the line before the NUL line is read';
is ctype('nul'), '200 application/octet-stream', 'the line with a NUL byte is skipped whole';
is ctype('nxt'), "200 text/x-next$UTF8", 'the line right after it is read, not swallowed with it';
is ctype('thd'), "200 text/x-third$UTF8", 'and the one after that';
$s->stop;

# -t counts both bad lines and names the first; the count is of lines as
# the file has them: the line after a NUL line is not eaten uncounted.
my ($rc, $out) = Luxd::check_config(
    qq{server {\n  listen = "127.0.0.1:\$PORT",\n  mime_types = "\$DIR/m.types",\n}\nvhost "a" { root = "\$DIR" }\n},
    files => { 'm.types' => $types });
is $rc, 0, '-t accepts the file';
like $out, qr{luxd\.lua:3: mime_types: 3 lines of \S+m\.types skipped, not "type/subtype ext \.\.\." \(the first is line 2\)},
  '-t: 3 lines skipped (2 and 4 with a NUL, 5 without a type), the first line 2' or diag $out;

done_testing;
