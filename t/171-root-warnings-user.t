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
use POSIX ();

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

# Not root, luxd ignores `user` and serves as itself: -t then judges the
# roots as its own euid, not as the configured user. $d/www is daemon's
# (0700) and the config names the other user of the two.
sub t_as {
    my ($who, $file) = @_;
    my ($uid, $gid) = (getpwnam($who))[2, 3];
    # The checkout may sit where other users cannot go (/root/luxd on a
    # fresh machine): the binary runs from a copy in the test's directory.
    my $bin = "$d/luxd-as";
    unless (-x $bin) {
        system('cp', Luxd::bin(), $bin) == 0 or die "cp: $?";
        chmod 0755, $bin;
    }
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        chdir $d;
        POSIX::setgid($gid); $) = "$gid $gid";
        POSIX::setuid($uid) or POSIX::_exit(126);
        { exec { $bin } $bin, "-t", "-c", $file }
        POSIX::_exit(127);
    }
    my $out = do { local $/; <$fh> // '' };
    close $fh;
    return ($? >> 8, $out);
}
my $cfg = sub { my ($u) = @_; (my $c = $conf) =~ s/USER/$u/; $c =~ s/\$PORT/$s->{port}/g; $c =~ s/\$DIR/$d/g; $c };
open my $fh, '>', "$d/as.lua" or die; print $fh $cfg->('nobody'); close $fh;
chmod 0644, "$d/as.lua";
my ($rca, $outa) = t_as('daemon', "$d/as.lua");
is($rca, 0, '-t run as daemon with user = "nobody" works') or diag($outa);
unlike($outa, qr{root \S+/www cannot be searched}, '... and judges www as daemon, whose it is: no warning') or diag($outa);
open $fh, '>', "$d/as.lua" or die; print $fh $cfg->('daemon'); close $fh;
($rca, $outa) = t_as('nobody', "$d/as.lua");
is($rca, 0, '-t run as nobody with user = "daemon" works') or diag($outa);
like($outa, qr{vhost "localhost": root \S+/www cannot be searched by user "nobody"}, '... and judges www as nobody, who cannot enter it')
    or diag($outa);
done_testing;
