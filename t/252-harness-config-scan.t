# The harness's start() reads the config for the pid_file and the error
# log it waits on. It must not read the test's own stderr (error_log =
# "/dev/stderr" is luxd's fd 2, and a read here would block on the test's),
# and must not wait for a pid_file or error_log named only in a Lua
# comment or a long string. Either mistake made start() hang or time out.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

$SIG{ALRM} = sub { die "start() hung\n" };

subtest 'error_log = "/dev/stderr" at info' => sub {
    alarm 30;
    my $s = Luxd->new(server => { error_log => '/dev/stderr' }, files => { 'www/a.txt' => "a\n" });
    alarm 0;
    is($s->get('/a.txt')->{status}, 200, 'serves');
    like($s->stderr_log, qr/started: generation 1/, 'luxd logged to its stderr');
    $s->stop;
};

subtest 'pid_file and error_log named in comments and long strings' => sub {
    alarm 30;
    my $s = Luxd->new(files => { 'www/a.txt' => "a\n" }, config => <<'CONF');
local dashes = "a--b" .. '[[' -- quotes holding comment and long-string openers
--[[ an old server block, kept for reference:
server {
  pid_file = "$DIR/oldest.pid", error_log = "$DIR/oldest.log",
}
]]
server {
  listen = "127.0.0.1:$PORT", workers = 1,
  -- pid_file = "$DIR/old.pid",
  --[==[ error_log = "$DIR/old.log", pid_file = "$DIR/older.pid" ]==]
  error_log = "$DIR/error.log", error_log_level = "info",
  pid_file = "$DIR/luxd.pid", access_log = "$DIR/access.log",
}
local note = [[ pid_file = "$DIR/never.pid" ]]
vhost "localhost" { default = true, root = "$DIR/www" }
CONF
    alarm 0;
    is($s->get('/a.txt')->{status}, 200, 'serves');
    $s->stop;
};

done_testing;
