# issue 8 #24: include "conf.d/*.lua" is resolved against the directory of
# the file that includes it, not the directory luxd was started in (the
# harness starts luxd in the repository, the config lives in a temp dir);
# a pattern that matches nothing is a warning, a missing plain name an
# error with file:line.
use strict;
use warnings;
use Test::More;
use Luxd;

subtest 'a relative glob and a relative name are found next to the including file' => sub {
    my $s = Luxd->new(
        config => qq{include "conf.d/*.lua"\ninclude "more/one.lua"\n}
          . qq{vhost "localhost" { default = true, root = "\$DIR/www" }\n},
        files => {
            'www/index.html'    => "default\n",
            'site/index.html'   => "included site\n",
            'inner/index.html'  => "nested\n",
            'one/index.html'    => "one\n",
            # $DIR is written as is: the harness substitutes only the main file.
            'conf.d/a.lua'      => qq{vhost "inc.test" { root = "DIR/site" }\ninclude "../nested/*.lua"\n},
            'nested/n.lua'      => qq{vhost "nested.test" { root = "DIR/inner" }\n},
            'more/one.lua'      => qq{vhost "one.test" { root = "DIR/one" }\n},
        },
        no_start => 1,
    );
    for my $f ('conf.d/a.lua', 'nested/n.lua', 'more/one.lua') {
        (my $t = $s->file($f)) =~ s/DIR/$s->{dir}/g;
        $s->write_file($f, $t);
    }
    $s->start;
    isnt $Luxd::ROOT, $s->dir, 'luxd runs in another directory than its config';
    check_response($s->get('/', Host => 'inc.test'), { status => 200, body => "included site\n" }, 'vhost from conf.d/*.lua');
    check_response($s->get('/', Host => 'nested.test'), { status => 200, body => "nested\n" },
                   'an include in an included file is relative to that file');
    check_response($s->get('/', Host => 'one.test'), { status => 200, body => "one\n" }, 'a plain relative name');
    unlike $s->error_log, qr/\[warn\].*include/, 'no warning when every pattern matches';
    $s->stop;
};

subtest 'a glob that matches nothing: a warning at -t, at start and at reload' => sub {
    my $conf = qq{vhost "localhost" { default = true, root = "\$DIR/www" }\n\ninclude "none.d/*.lua"\n};
    my ($rc, $out, $file) = Luxd::check_config($conf);
    is $rc, 0, '-t passes';
    like $out, qr{^luxd: warning: \Q$file\E:3: include "none\.d/\*\.lua" matches no file \(.*/none\.d/\*\.lua\)$}m,
      '-t says which include, where, and where it looked';
    my $s = Luxd->new(config => $conf);
    like $s->error_log, qr{\[warn\] .*luxd\.lua:\d+: include "none\.d/\*\.lua" matches no file}, 'the error log at start';
    $s->write_config($s->{config_text});
    like $s->reload // 'timeout', qr/^ok/, 'the reload succeeds';
    ok $s->wait_log(qr{\[warn\] reload: .*luxd\.lua:\d+: include "none\.d/\*\.lua" matches no file}), 'and warns again';
    $s->stop;
};

subtest 'a plain name that is missing is an error with file:line' => sub {
    my ($rc, $out, $file, $dir) = Luxd::check_config(qq{-- one\ninclude "missing.lua"\n});
    is $rc, 1, '-t fails';
    like $out, qr{^\Q$file\E:2: include "missing\.lua": no such file \(\Q$dir\E/missing\.lua\)$}m, 'file:line and the path';
};
done_testing;
