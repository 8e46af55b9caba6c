# issue 11: -t and start-up warn about a document root that does not exist,
# is not a directory, or cannot be searched by the user luxd serves as; a
# request whose file cannot be opened says why in the error log, as nginx's
# `open() "/path" failed (13: Permission denied)`: at error for every reason
# but a file that is not there, which is logged at info.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my $CONF = <<'EOF_CONF';
server {
  listen = "127.0.0.1:$PORT",
  user = "nobody",
  error_log = "$DIR/error.log",
  error_log_level = "LEVEL",
  access_log = false,
  pid_file = "$DIR/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true, follow_symlinks = false }
vhost "missing.test" { root = "$DIR/nowhere" }
vhost "file.test" { root = "$DIR/www/index.html" }
vhost "private.test" { root = "$DIR/private/www" }
vhost "loc.test" { root = "$DIR/www",
  location "/p/" { root = "$DIR/private/www" },
}
EOF_CONF

sub server {
    my ($level) = @_;
    (my $c = $CONF) =~ s/LEVEL/$level/;
    my $s = Luxd->new(no_start => 1, config => $c, files => {
        'www/index.html' => "hi\n", 'www/secret.html' => "root only\n",
        'private/www/index.html' => "private\n" });
    my $d = $s->dir;
    chmod 0711, $d;
    chmod 0755, "$d/www";
    chmod 0644, "$d/www/index.html";
    chmod 0600, "$d/www/secret.html";           # root's, nobody may not read it
    chmod 0700, "$d/private";                   # nobody may not pass
    symlink "$d/www/index.html", "$d/www/link.html" or die;
    return $s;
}

my @WANT = (
    [ qr{luxd\.lua:10: vhost "missing\.test": root \S+/nowhere does not exist; its files will be answered 404}, 'a root that does not exist' ],
    [ qr{luxd\.lua:11: vhost "file\.test": root \S+/www/index\.html is not a directory}, 'a root that is a file' ],
    [ qr{luxd\.lua:12: vhost "private\.test": root \S+/private/www cannot be searched by user "nobody": no search \(x\) permission on \S+/private \(mode 0700, owner root, group root\)}, 'a root nobody cannot search, with the directory in the way' ],
    [ qr{luxd\.lua:14: vhost "loc\.test" location "/p/": root \S+/private/www cannot be searched by user "nobody"}, "a location's own root" ],
);

my $s = server('info');
my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is($rc, 0, '-t: warnings do not fail the check');
for my $w (@WANT) { like($out, qr/^luxd: warning: \S*$w->[0]/m, "-t: $w->[1]") or diag($out) }
my $n = () = $out =~ /^luxd: warning: /mg;
is($n, scalar @WANT, 'and nothing else: the good roots (and the inherited one) are not named') or diag($out);

$s->start;
my $el = sub { Luxd::_slurp($s->dir . '/error.log') // '' };
for my $w (@WANT) { like($el->(), qr/\[warn\] \S*$w->[0]/, "start-up logs: $w->[1]") }

# Requests: EACCES at error, ENOENT at info, a refused link as such.
is($s->get('/secret.html')->{status}, 403, 'a file nobody may not read: 403');
is($s->get('/none.html')->{status}, 404, 'a file that is not there: 404');
is($s->get('/link.html')->{status}, 403, 'a link refused by follow_symlinks = false: 403');
is($s->get('/', Host => 'private.test')->{status}, 403, 'the unsearchable root: 403');
my $d = $s->dir;
my $t = time + 5;
sleep 0.05 until $el->() =~ /private\/www/ || time > $t;
like($el->(), qr{\[error\] open\(\) "\Q$d\E/www/secret\.html" failed \(13: Permission denied\), client: 127\.0\.0\.1, vhost: localhost, request: "GET /secret\.html"}, 'EACCES: [error] open() "PATH" failed (13: Permission denied), with client, vhost and request');
like($el->(), qr{\[info\] open\(\) "\Q$d\E/www/none\.html" failed \(2: No such file or directory\), client: 127\.0\.0\.1}, 'ENOENT: at info');
like($el->(), qr{\[error\] open\(\) "\Q$d\E/www/link\.html" refused by follow_symlinks = false \(a symbolic link or ".." on the way\)}, 'a refused link says so, not an errno');
like($el->(), qr{\[error\] open\(\) "\Q$d\E/private/www/index\.html" failed \(13: Permission denied\), client: 127\.0\.0\.1, vhost: private\.test, request: "GET /"}, 'the index file under the unsearchable root');

# A target with bytes that could forge a line is escaped.
# A path with bytes that could confuse a reader of the line: a quote, a
# backslash, 8-bit bytes (control bytes are refused with 400 before).
is($s->get('/none%22%5cforged%e2%82%ac.html')->{status}, 404, 'a quote, a backslash and UTF-8 in the path: 404');
$t = time + 5;
sleep 0.05 until $el->() =~ /forged/ || time > $t;
like($el->(), qr{\[info\] open\(\) "\Q$d\E/www/none\\x22\\x5Cforged\\xE2\\x82\\xAC\.html" failed \(2: No such file or directory\), .*request: "GET /none%22%5cforged%e2%82%ac\.html"$}m, 'the bytes as \xHH in the path, the target as sent');
is(scalar(() = $el->() =~ /private\/www\/(?:index\.html|")/g), 1, 'the unsearchable root: one line for its request, though the handler ran again after the load');

# A reload that finds a root gone says so too.
rename "$d/www", "$d/www.gone" or die;
like($s->reload // $s->reload_error, qr/^ok /, 'a reload with the root gone works');
ok($s->wait_log(qr{\[warn\] reload: \S+luxd\.lua:9: vhost "localhost": root \S+/www does not exist}), 'and warns');
rename "$d/www.gone", "$d/www" or die;
$s->stop;

# error_log_level = "warn": the 404 is not logged, the 403 is.
my $w = server('warn');
$w->start;
is($w->get('/none.html')->{status}, 404, 'warn level: 404');
is($w->get('/secret.html')->{status}, 403, 'warn level: 403');
my $wd = $w->dir;
$t = time + 5;
sleep 0.05 until (Luxd::_slurp("$wd/error.log") // '') =~ /secret/ || time > $t;
my $wel = Luxd::_slurp("$wd/error.log") // '';
like($wel, qr{\[error\] open\(\) "\S+/secret\.html" failed \(13: Permission denied\)}, 'the EACCES line at warn level');
unlike($wel, qr{none\.html}, 'no line for the missing file');
$w->stop;
done_testing;
