# issue 18: the document-root check at -t, start and reload remembers the
# roots it found clean, so ten thousand vhosts on one root cost one check.
# What it remembers must not hide a warning: a root clean without
# dir_listing still draws the warning for a vhost that lists it, and a
# broken root is named for every vhost that has it, as before.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

plan skip_all => 'needs root (user = "nobody" judges the modes)' if $> != 0;

my $s = Luxd->new(no_start => 1, files => { 'list/index.html' => "hi\n" }, config => <<'EOF_CONF');
server {
  listen = "127.0.0.1:$PORT", user = "nobody", error_log = "$DIR/error.log",
  access_log = false, pid_file = "$DIR/luxd.pid",
}
vhost "a.test" { root = "$DIR/list", default = true }
vhost "b.test" { root = "$DIR/list" }
vhost "c.test" { root = "$DIR/list", dir_listing = true }
vhost "d.test" { root = "$DIR/nowhere" }
vhost "e.test" { root = "$DIR/nowhere" }
vhost "f.test" { root = "$DIR/list", location "/x/" { root = "$DIR/list", dir_listing = true } }
EOF_CONF
chmod 0711, $s->dir;
chmod 0711, $s->dir . '/list';    # nobody may search it, not read it

my ($rc, $out) = Luxd::run_luxd('-t', '-c', $s->config_file);
is($rc, 0, '-t: warnings do not fail the check') or diag($out);
like($out, qr/^luxd: warning: \S*luxd\.lua:7: vhost "c\.test": root \S+\/list cannot be read by user "nobody", and dir_listing is on/m,
     'a root found clean for a.test and b.test still warns for c.test, which lists it') or diag($out);
like($out, qr/^luxd: warning: \S*luxd\.lua:10: vhost "f\.test" location "\/x\/": root \S+\/list cannot be read/m,
     'and for a location that lists it') or diag($out);
like($out, qr/^luxd: warning: \S*luxd\.lua:8: vhost "d\.test": root \S+\/nowhere does not exist/m, 'd.test named') or diag($out);
like($out, qr/^luxd: warning: \S*luxd\.lua:9: vhost "e\.test": root \S+\/nowhere does not exist/m, 'e.test named too') or diag($out);
my $n = () = $out =~ /^luxd: warning: /mg;
is($n, 4, 'four warnings, none for a.test, b.test or f.test\'s own root') or diag($out);
done_testing;
