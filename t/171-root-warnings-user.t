# issue 11 review: the root warnings must judge the user luxd serves as.
# A reload that changes `user` keeps the old user (it needs a restart, and
# the reload says so), yet the reload's root check judged the roots as the
# new user: a root the running user cannot search got no warning, while
# every request for it is refused.
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(sleep time);

my ($duid, $dgid) = (getpwnam('daemon'))[2, 3];
defined $duid && defined getpwnam('nobody') or BAIL_OUT('no users daemon and nobody');

my $conf = <<'EOF_CONF';
server {
  listen = "127.0.0.1:$PORT",
  workers = 1,
  user = "USER",
  error_log = "$DIR/error.log",
  access_log = "$DIR/access.log",
  error_log_level = "info",
  pid_file = "$DIR/luxd.pid",
}
vhost "localhost" { root = "$DIR/www", default = true }
EOF_CONF
(my $c1 = $conf) =~ s/USER/nobody/;
my $s = Luxd->new(no_start => 1, config => $c1, files => { 'www/index.html' => "hi\n" });
my $d = $s->dir;
chmod 0711, $d;
# daemon's own root: nobody may not enter it.
chown $duid, $dgid, "$d/www", "$d/www/index.html";
chmod 0700, "$d/www";
$s->start;
my $re = qr{vhost "localhost": root \S+/www cannot be searched by user "nobody"};
like($s->error_log, $re, 'start-up: www cannot be searched by user "nobody"');
is($s->get('/')->{status}, 403, 'and nobody is refused it');

# At the limit: a reload that keeps the user warns again (holds).
my ($rc0, $out0) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc0, 0, 'a reload with the same user works') or diag($out0);
ok((grep { /reload: .*$re/ } split /\n/, $s->error_log), 'and warns about www as user "nobody" again');

# One past: the reload names another user.
(my $c2 = $conf) =~ s/USER/daemon/;
$c2 =~ s/\$PORT/$s->{port}/g; $c2 =~ s/\$DIR/$d/g;
$s->write_config($c2);
my ($rc, $out) = Luxd::run_luxd('-s', 'reload', '-c', $s->config_file);
is($rc, 0, 'the reload works') or diag($out);
my $t = time + 5;
sleep 0.05 until $s->error_log =~ /user needs a restart/ || time > $t;
like($s->error_log, qr/reload: user needs a restart; still running as before/, 'it says user needs a restart');
is($s->get('/')->{status}, 403, 'still serving as nobody: still refused');
# The second reload's lines: all after "generation 2".
$t = time + 3;
sleep 0.05 until (grep { /generation 3/ } split /\n/, $s->error_log) || time > $t;
my @lines = split /\n/, $s->error_log;
my ($g2) = grep { $lines[$_] =~ /reload: generation 2 / } 0 .. $#lines;
my @after = grep { /reload: / } @lines[$g2 + 1 .. $#lines];
ok((grep { /$re/ } @after), 'the reload warns about the root as the user it still serves as (nobody)')
    or diag(join "\n", @after);
$s->stop;
done_testing;
