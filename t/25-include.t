# include "glob": the matching files run in sorted order in the same
# language and environment; errors in them name the included file and line.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;
use File::Path ();

my $SERVER = 'server { listen = { "127.0.0.1:$PORT" }, workers = 1, error_log = "$DIR/error.log", access_log = false }';

# The harness writes `files` as they are; included configs need $DIR
# replaced, so they are written here before the server starts.
sub server_with_includes {
    my (%o) = @_;
    my $inc = delete $o{includes};
    my $s = Luxd->new(%o, no_start => 1);
    my $dir = $s->dir;
    for my $rel (sort keys %$inc) {
        (my $t = $inc->{$rel}) =~ s/\$DIR\b/$dir/g;
        write_file("$dir/$rel", $t);
    }
    $s->start;
    return $s;
}

sub write_file {
    my ($path, $bytes) = @_;
    (my $d = $path) =~ s{/[^/]*$}{};
    File::Path::make_path($d);
    open my $fh, '>:raw', $path or die "write $path: $!";
    print $fh $bytes;
    close $fh or die "close $path: $!";
}

subtest 'included files serve vhosts, run in sorted order, share globals' => sub {
    my $s = server_with_includes(
        config => <<'LUA',
vhost "main-before.test" { root = "$DIR/sites/main-before" }
include "$DIR/conf.d/*.lua"
vhost "main-after.test" { root = SITES .. "/main-after" }
vhost "order.test" { root = SITES .. "/" .. table.concat(ORDER, "-") }
LUA
        includes => {
            # Sorted as strings: "1-..." < "10-..." < "2-..." < "a-..."
            'conf.d/2-use.lua'  => qq{ORDER[#ORDER + 1] = "2"\nvhost "two.test" { root = SITES .. "/" .. ROOT_OF_ONE }\n},
            'conf.d/1-set.lua'  => qq{SITES = "\$DIR/sites"\nORDER = { "1" }\nROOT_OF_ONE = "one"\nvhost "one.test" { root = SITES .. "/one", default = true }\n},
            'conf.d/10-mid.lua' => qq{ORDER[#ORDER + 1] = "10"\nvhost "ten.test" { root = SITES .. "/ten", aliases = { "*.ten.test" } }\n},
            'conf.d/a-last.lua' => qq{ORDER[#ORDER + 1] = "a"\n},
            'conf.d/not-lua.txt' => qq{error("a file the glob does not match was run")\n},
        },
        files => {
            'sites/main-before/index.html' => "main before\n",
            'sites/main-after/index.html'  => "main after\n",
            'sites/one/index.html'  => "one\n",
            'sites/ten/index.html'  => "ten\n",
            'sites/1-10-2-a/index.html' => "sorted order\n",
            'sites/1-2-10-a/index.html' => "WRONG: numeric order\n",
        },
    );
    check_response($s->get('/', Host => 'one.test'), { status => 200, body => "one\n" }, 'a vhost from 1-set.lua');
    check_response($s->get('/', Host => 'two.test'), { status => 200, body => "one\n" },
                   '2-use.lua sees the globals 1-set.lua set');
    check_response($s->get('/', Host => 'x.ten.test'), { status => 200, body => "ten\n" }, 'a wildcard from 10-mid.lua');
    check_response($s->get('/', Host => 'main-before.test'), { status => 200, body => "main before\n" },
                   'a vhost of the main file before the include');
    check_response($s->get('/', Host => 'main-after.test'), { status => 200, body => "main after\n" },
                   'the main file after the include sees what the included files set');
    check_response($s->get('/', Host => 'order.test'), { status => 200, body => "sorted order\n" },
                   'the files ran in sorted order: 1, 10, 2, a');
    check_response($s->get('/', Host => 'unknown.test'), { status => 200, body => "one\n" },
                   'default = true from an included file');
    $s->stop;
};

subtest 'nested includes' => sub {
    my $s = server_with_includes(
        config => qq{include "\$DIR/conf.d/*.lua"\n},
        includes => {
            'conf.d/a.lua'       => qq{include "\$DIR/inner/*.lua"\nvhost "outer.test" { root = "\$DIR/o", default = true }\n},
            'inner/b.lua'        => qq{vhost "inner.test" { root = "\$DIR/i" }\n},
        },
        files => { 'o/index.html' => "outer\n", 'i/index.html' => "inner\n" },
    );
    check_response($s->get('/', Host => 'inner.test'), { status => 200, body => "inner\n" }, 'from an include in an include');
    check_response($s->get('/', Host => 'outer.test'), { status => 200, body => "outer\n" }, 'from the first include');
    $s->stop;
};

# An include's files are written by the test; $DIR in them is replaced here.
sub check_with_includes {
    my ($main, %inc) = @_;
    my ($rc, $out, $file, $dir) = Luxd::check_config($main, files => {});
    # check_config wrote $main already; now write the included files with $DIR
    # replaced and run -t again.
    for my $rel (keys %inc) {
        (my $t = $inc{$rel}) =~ s/\$DIR\b/$dir/g;
        write_file("$dir/$rel", $t);
    }
    ($rc, $out) = Luxd::run_luxd('-t', '-c', $file);
    return ($rc, $out, $file, $dir);
}

sub bad_include {
    my ($name, $main, $inc, $where, $line, $re) = @_;
    subtest $name => sub {
        my ($rc, $out, $file, $dir) = check_with_includes($main, %$inc);
        is($rc, 1, 'luxd -t exits 1') or diag($out);
        my $path = "$dir/$where";
        like($out, qr/^\Q$path\E:\Q$line\E: /m, "the message starts with $where:$line") or diag($out);
        like($out, $re, 'says what is wrong') if $re;
        unlike($out, qr/stack traceback/, 'no Lua traceback');
    };
}

bad_include('unknown key in an included file', <<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
LUA
    { 'conf.d/10-ok.lua'  => qq{vhost "ok.test" { root = "\$DIR/www", default = true }\n},
      'conf.d/20-bad.lua' => qq{-- a comment\n\nvhost "bad.test" {\n  root = "\$DIR/www",\n  rooot = "x",\n}\n} },
    'conf.d/20-bad.lua', 5, qr/unknown key "rooot".*did you mean "root"/);

bad_include('Lua syntax error in an included file', <<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
vhost "ok.test" { root = "\$DIR/www", default = true }
LUA
    { 'conf.d/a.lua' => qq{local x = 1\n\nvhost "bad.test" { root = , }\n} },
    'conf.d/a.lua', 3, qr/near|unexpected|expected/);

bad_include('runtime error in an included file', <<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
LUA
    { 'conf.d/a.lua' => qq{vhost "ok.test" { root = "\$DIR/www", default = true }\nlocal t = nil\nlocal y = 2\nerror("boom in include")\n} },
    'conf.d/a.lua', 4, qr/boom in include/);

bad_include('error in a file included by an included file', <<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
LUA
    { 'conf.d/a.lua' => qq{include "\$DIR/deeper/*.lua"\n},
      'deeper/x.lua' => qq{\n\nvhost "x.test" { root = "\$DIR/www", etag = "yes" }\n} },
    'deeper/x.lua', 3, qr/etag/);

bad_include('a name claimed in the main file and again in an included file', <<"LUA",
$SERVER
vhost "dup.test" { root = "\$DIR/www", default = true }
include "\$DIR/conf.d/*.lua"
LUA
    { 'conf.d/a.lua' => qq{\nvhost "dup.test" { root = "\$DIR/www" }\n} },
    'conf.d/a.lua', 2, qr/dup\.test/);

subtest 'two included files claim one name: the later in sorted order is the error' => sub {
    my ($rc, $out, $file, $dir) = check_with_includes(<<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
LUA
        'conf.d/b.lua' => qq{vhost "other.test" { root = "\$DIR/www" }\nvhost "same.test" { root = "\$DIR/www" }\n},
        'conf.d/a.lua' => qq{vhost "same.test" { root = "\$DIR/www", default = true }\n});
    is($rc, 1, 'exit 1') or diag($out);
    like($out, qr/^\Q$dir\E\/conf\.d\/b\.lua:2: /m, 'reported at b.lua:2 (a.lua ran first)') or diag($out);
    like($out, qr/\Q$dir\E\/conf\.d\/a\.lua:1/, 'and names a.lua:1, where the name was first claimed') or diag($out);
};

subtest 'luxd -T names the included file and line of vhosts, rules and locations' => sub {
    my ($rc, $out, $file, $dir) = check_with_includes(<<"LUA",
$SERVER
include "\$DIR/conf.d/*.lua"
LUA
        'conf.d/a.lua' => qq{-- site a\nvhost "inc-a.test" { default = true, root = "\$DIR/www",\n  access = {\n    deny { prefix = "/x/" },\n  },\n  location "/l/" { etag = false },\n}\n});
    is($rc, 0, '-t passes') or diag($out);
    my ($rc2, $dump) = Luxd::run_luxd('-T', '-c', $file);
    is($rc2, 0, '-T exits 0') or diag($dump);
    my $inc = "$dir/conf.d/a.lua";
    like($dump, qr/inc-a\.test.*\Q$inc\E:2\b/, 'the vhost at a.lua:2') or diag($dump);
    like($dump, qr{/x/.*\Q$inc\E:4\b}, 'the rule at a.lua:4') or diag($dump);
    like($dump, qr{location\s+"?/l/.*\Q$inc\E:6\b}, 'the location at a.lua:6') or diag($dump);
};

subtest 'an include of a missing file names the include line' => sub {
    my ($rc, $out, $file) = Luxd::check_config(<<"LUA");
$SERVER
vhost "ok.test" { root = "\$DIR/www", default = true }
include "\$DIR/no-such-file.lua"
LUA
    is($rc, 1, 'exit 1');
    like($out, qr/^\Q$file\E:3: /m, 'main file, line 3') or diag($out);
};

done_testing;
