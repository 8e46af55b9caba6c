# Review of mime_types (issue 11): "a file that cannot be read is an error
# at this key's line". A path to something that is not a regular file is
# not a mime.types file, but lx_mime_load_file only refuses a directory
# (by fopen/fgets failing): a character device such as /dev/zero is read
# for ever (fgets gives empty "lines" that never end, and the loop that
# drops an over-long line spins on the NUL bytes), so `luxd -t` never
# finishes, and a reload never reports: its loader spins at 100% CPU for
# the life of the process. A FIFO blocks fopen() the same way. Expected: the
# path is refused at file:line, as a directory is, and a reload to it fails
# while the running generation keeps serving. Against a real luxd.
use strict;
use warnings;
use Test::More;
use POSIX qw(mkfifo);
use Luxd;

local $Luxd::RUN_TIMEOUT = 8;
my $conf = sub { my ($v) = @_; qq{server {\n  listen = "127.0.0.1:\$PORT",\n  mime_types = $v,\n}\nvhost "a" { root = "\$DIR" }\n} };

# A regular file at the same key is accepted (the control).
my ($rc, $o) = Luxd::check_config($conf->('"$DIR/m.types"'), files => { 'm.types' => "text/x-ok ok\n" });
is $rc, 0, '-t: a regular mime.types file is accepted' or diag $o;

($rc, $o) = Luxd::check_config($conf->('"/dev/zero"'));
isnt $rc, -1, '-t with mime_types = "/dev/zero" finishes (within 8 s)';
is $rc, 1, '... and refuses it';
like $o, qr{luxd\.lua:3: server: mime_types: cannot read "/dev/zero": not a regular file}, '... at the line of the key, naming the path' or diag $o;

# A FIFO: nobody writes to it, so opening it blocks.
my (undef, undef, undef, $dir) = Luxd::check_config($conf->('"$DIR/m.types"'), files => { 'm.types' => "text/x-ok ok\n" });
mkfifo("$dir/fifo.types", 0644) or die "mkfifo: $!";
($rc, $o) = Luxd::run_luxd('-t', '-c', do {
    my $f = "$dir/fifo.lua";
    open my $fh, '>', $f or die; print $fh Luxd::_subst($conf->(qq{"$dir/fifo.types"}), Luxd::free_port(), $dir); close $fh; $f });
isnt $rc, -1, '-t with mime_types = a FIFO finishes (within 8 s)';
is $rc, 1, '... and refuses it';
like $o, qr{fifo\.lua:3: server: mime_types: cannot read "[^"]*/fifo\.types": not a regular file}, '... as not a regular file' or diag $o;

# A running server: a reload to /dev/zero fails, reported, and the running
# generation keeps serving.
my $s = Luxd->new(files => { 'm.types' => "text/x-ok ok\n", 'www/a.ok' => "ok\n" },
                  server => { mime_types => '$DIR/m.types' });
is $s->http(path => '/a.ok')->{headers}{'content-type'}, 'text/x-ok; charset=utf-8', 'the file is read at start';
(my $text = $s->{config_text}) =~ s{mime_types = "[^"]*"}{mime_types = "/dev/zero"} or die 'no mime_types line';
$s->write_config($text);
my $out = $s->reload(timeout => 8);
ok defined $out, 'a reload to mime_types = "/dev/zero" reports an outcome (within 8 s)' or diag $s->reload_error;
like $out // '', qr{^failed .*luxd\.lua:\d+: server: mime_types: .*/dev/zero}, '... a failure at file:line';
is $s->http(path => '/a.ok')->{headers}{'content-type'}, 'text/x-ok; charset=utf-8', '... and the running generation serves';
$s->stop;

# The size: at most 16 MiB (16777216 bytes) is read, so a wrong path to a
# huge file cannot stall every load. A file of exactly the limit whose last
# line names a type is read to that line; one byte more is refused.
my $LIMIT = 16 * 1024 * 1024;
my $last = "text/x-end end\n";
my $pad = ('#' . ('p' x 4094) . "\n");                     # 4096 bytes a line
my $n = int(($LIMIT - length $last) / length $pad);
my $fill = $LIMIT - length($last) - $n * length($pad);      # one shorter comment line
my $at = ($pad x $n) . ($fill ? '#' . ('q' x ($fill - 2)) . "\n" : '') . $last;
is length($at), $LIMIT, 'the file at the limit is 16777216 bytes';
$s = Luxd->new(files => { 'm.types' => $at, 'www/a.end' => "end\n" },
               server => { mime_types => '$DIR/m.types' });
is $s->http(path => '/a.end')->{headers}{'content-type'}, 'text/x-end; charset=utf-8',
  'a mime_types file of 16 MiB is read to its last line';
$s->stop;
($rc, $o) = Luxd::check_config($conf->('"$DIR/m.types"'), files => { 'm.types' => "#$at" });
is $rc, 1, '-t: a mime_types file of 16 MiB and one byte is refused';
like $o, qr{luxd\.lua:3: server: mime_types: cannot read "[^"]*/m\.types": larger than 16777216 bytes},
  '... at the line of the key, saying why' or diag $o;

done_testing;
