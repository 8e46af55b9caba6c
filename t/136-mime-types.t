# issue 11: mime_types = "/etc/mime.types" (server): a file of
# "type/subtype ext ..." lines read when the config is loaded, its types
# replacing the built-in ones for the extensions it names, the built-in
# table the fallback for the rest, mime { } above both, and text types with
# "; charset=utf-8". A file that cannot be read is an error at the key's
# line; malformed lines (and lines over 4096 bytes) are skipped with a
# warning. The test ships its own small file, and checks Debian's
# /etc/mime.types (package media-types, a test dependency) as well.
use strict;
use warnings;
use Test::More;
use Luxd;

my $UTF8 = '; charset=utf-8';
# A line of exactly the limit (4096 bytes before its newline) and one of a
# byte more, each naming an extension of its own.
my $long_ok  = 'text/x-long lim ' . ('b' x (4096 - 16));
my $long_bad = 'text/x-past lix ' . ('b' x (4097 - 16));
is length($long_ok), 4096, 'the line at the limit is 4096 bytes';
is length($long_bad), 4097, 'the one past it 4097';
my $types = join '', map { "$_\n" }
  '# a fixture in the format of Debian\'s media-types',
  '',
  'text/x-custom      cust  CUST2 # a comment after the extensions',
  'application/x-override  html',       # replaces a built-in type
  'text/x-second      cust',            # the file's first line keeps "cust"
  'application/json   jsonx',           # charset: JSON
  'application/x-bin  bin2',            # no charset: not text
  'image/svg+xml      svgx',            # charset: +xml
  'application/x-has-type-only',        # no extension: nothing
  'application/x-tar  gpkg.tar tarx',   # "gpkg.tar" cannot match; tarx can
  'types {',                            # nginx's format: skipped
  '    text/x-nginx  ngx;',             # skipped (";")
  'notatype  nta',                      # skipped (no "/")
  $long_ok,
  $long_bad,
  'text/x-after  after';

my %files = map { ("www/f.$_" => "$_\n") }
  qw(cust cust2 html jsonx bin2 svgx tarx css png ngx nta lim lix after mdx wasm);
$files{'mime.types'} = $types;

my $s = Luxd->new(
    files  => \%files,
    config => qq{server {\n  listen = "127.0.0.1:\$PORT",\n  error_log = "\$DIR/error.log",\n  access_log = "\$DIR/access.log",\n  pid_file = "\$DIR/luxd.pid",\n  mime_types = "\$DIR/mime.types",\n}\n}
      . qq{mime { [".mdx"] = "text/mdx", [".cust2"] = "text/from-mime-block" }\n}
      . qq{vhost "localhost" { default = true, root = "\$DIR/www" }\n},
);
sub ctype { my $r = $s->get("/f.$_[0]"); "$r->{status} " . ($r->{headers}{'content-type'} // '-') }

is ctype('cust'),  "200 text/x-custom$UTF8",        'a type the file adds, with the charset of text';
is ctype('cust2'), "200 text/from-mime-block$UTF8", 'mime { } replaces what the file gives';
is ctype('html'),  '200 application/x-override',    'the file replaces a built-in type';
is ctype('jsonx'), "200 application/json$UTF8",     'application/json gets the charset';
is ctype('bin2'),  '200 application/x-bin',         'a binary type gets none';
is ctype('svgx'),  "200 image/svg+xml$UTF8",        '+xml types get it';
is ctype('tarx'),  '200 application/x-tar',         'a line with an unusable "gpkg.tar" still gives its other extensions';
is ctype('css'),   "200 text/css$UTF8",             'an extension the file lacks: the built-in table';
is ctype('png'),   '200 image/png',                 '... for images too';
is ctype('wasm'),  '200 application/wasm',          '... and wasm';
is ctype('mdx'),   "200 text/mdx$UTF8",             'mime { } adds as before';
is ctype('ngx'),   '200 application/octet-stream',  "nginx's format is not read as types";
is ctype('nta'),   '200 application/octet-stream',  'a line without a type is skipped';
is ctype('lim'),   "200 text/x-long$UTF8",          'a line of 4096 bytes is read';
is ctype('lix'),   '200 application/octet-stream',  'a line of 4097 bytes is skipped';
is ctype('after'), "200 text/x-after$UTF8",         'the line after it is read';
my $r = $s->head('/f.cust');
is $r->{headers}{'content-type'}, "text/x-custom$UTF8", 'HEAD has the same type';

# A reload reads the file again.
$s->write_file('mime.types', "text/x-reloaded cust\n");
like $s->reload // 'timeout', qr/^ok generation 2 /, 'reload';
is ctype('cust'), "200 text/x-reloaded$UTF8", 'after a reload, the file as it is now';
is ctype('html'), "200 text/html$UTF8", '... and html is the built-in again';

# A reload with the file gone fails and keeps the running generation.
unlink $s->dir . '/mime.types';
my $out = $s->reload // 'timeout';
like $out, qr/luxd\.lua:6: server: mime_types: cannot read "[^"]*mime\.types": No such file or directory/,
  'a reload without the file fails at the line of the key' or diag $out;
is ctype('cust'), "200 text/x-reloaded$UTF8", '... and the old generation keeps serving';
$s->stop;

# --- luxd -t -------------------------------------------------------------------
my $conf = sub { my ($v) = @_; qq{server {\n  listen = "127.0.0.1:\$PORT",\n  mime_types = $v,\n}\nvhost "a" { root = "\$DIR" }\n} };
my ($rc, $o) = Luxd::check_config($conf->('"$DIR/nope.types"'));
is $rc, 1, '-t: a missing file is an error';
like $o, qr{luxd\.lua:3: server: mime_types: cannot read "[^"]*/nope\.types": No such file or directory}, '... at file:line, with the reason';
($rc, $o) = Luxd::check_config($conf->('"$DIR"'));
is $rc, 1, '-t: a directory is an error';
like $o, qr{luxd\.lua:3: server: mime_types: cannot read "[^"]*": Is a directory}, '... saying so';
($rc, $o) = Luxd::check_config($conf->('"relative.types"'), files => { 'relative.types' => "text/x-rel rel\n" });
is $rc, 1, '-t: a relative path is resolved against the working directory, not the config file\'s';
like $o, qr{cannot read "\Q$Luxd::ROOT\E/relative\.types"}, '... as PATHS says' or diag $o;
($rc, $o) = Luxd::check_config($conf->('42'));
is $rc, 1, '-t: a number is refused';
like $o, qr/luxd\.lua:3: .*mime_types/, '... at its line';
($rc, $o) = Luxd::check_config($conf->('"$DIR/m.types"'), files => { 'm.types' => $types });
is $rc, 0, '-t: the fixture is accepted';
like $o, qr{warning: .*luxd\.lua:3: mime_types: 4 lines of \S+m\.types skipped, not "type/subtype ext \.\.\." \(the first is line 11\)},
  '... with a warning for its malformed lines' or diag $o;
($rc, $o) = Luxd::check_config($conf->('"$DIR/e.types"'), files => { 'e.types' => "# nothing\n" });
is $rc, 0, '-t: a file without types is accepted';
like $o, qr/warning: .*mime_types: \S+ names no extension; only the built-in types apply/, '... with a warning';
($rc, $o) = Luxd::check_config(qq{server { listen = "127.0.0.1:\$PORT" }\nvhost "a" { root = "\$DIR", mime_types = "/etc/mime.types" }\n});
is $rc, 1, '-t: mime_types in a vhost is refused';
like $o, qr/luxd\.lua:2: .*mime_types.*belongs in server/, '... saying where it belongs';

# --- Debian's /etc/mime.types (media-types) ---------------------------------------
ok -r '/etc/mime.types', '/etc/mime.types is there (deps/packages-test.txt installs media-types)';
$s = Luxd->new(
    files  => { map { ("www/f.$_" => "x\n") } qw(docx js css md odt map) },
    server => { mime_types => '/etc/mime.types' },
);
is ctype('docx'), '200 application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'Debian: .docx';
is ctype('odt'),  '200 application/vnd.oasis.opendocument.text', 'Debian: .odt';
is ctype('js'),   "200 text/javascript$UTF8", "Debian's type for .js, with the charset";
is ctype('css'),  "200 text/css$UTF8", 'Debian: .css';
is ctype('md'),   "200 text/markdown$UTF8", 'an extension Debian lists no type for: the built-in one';
my $dump = `cd $Luxd::ROOT && @{[Luxd::bin()]} -T -c @{[$s->config_file]} 2>&1`;
like $dump, qr{^  mime_types /etc/mime\.types \((\d{3,}) extensions\)$}m, '-T shows the file and how many extensions it gave';
$s->stop;

done_testing;
