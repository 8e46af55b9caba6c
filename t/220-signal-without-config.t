# issue 17 #9: `luxd -s` finds the running server without running the
# config. It used to run the whole config to learn pid_file: with a mistake
# saved but not reloaded (or an upstream name that did not resolve at that
# moment) logrotate's `luxd -s reopen` signalled nothing, luxd went on
# writing into access.log.1 and the next rotation deleted those lines; and
# at 10,000 vhosts each -s took 1.8 s. Now the pid file is -p, else the
# config file's pid_file read as a literal from its tokens, else the
# built-in default (none in this build).
use strict;
use warnings;
use Test::More;
use Luxd;
use Time::HiRes qw(time);

my $s = Luxd->new(server => { access_log_buffer => 0 }, files => { 'www/index.html' => "hi\n" });
my $d  = $s->dir;
my $cf = $s->config_file;
my $good = Luxd::_slurp($cf);
like $good, qr/^\s*pid_file = "\Q$d\E\/luxd\.pid",$/m, 'premise: the config names its pid file as a literal';

# Waits (up to 10 s) for a file to match: a request is logged once its
# response is written, which may be after the client has read it.
sub wait_file {
    my ($path, $re) = @_;
    my $deadline = time + 10;
    while (1) {
        return 1 if (Luxd::_slurp($path) // '') =~ $re;
        return 0 if time > $deadline;
        select undef, undef, undef, 0.01;
    }
}

# Each -s reopen is a SIGUSR1, and two sent before the server handled the
# first are one: every reopen is awaited (its "logs reopened" line) before
# the next is sent.
my $reopens = 0;
sub wait_reopens { my ($n) = @_; $s->wait_log(qr/(?:logs reopened.*?){$n}/s, 10) }
sub reopened {
    my ($what) = @_;
    $reopens++;
    ok wait_reopens($reopens), "$what: the server reopened its logs";
}

subtest 'logrotate with a broken config on disk: the lines land in the new file' => sub {
    is $s->get('/before')->{status}, 404, 'a request before the rotation';
    ok wait_file("$d/access.log", qr{GET /before }), 'logged';
    rename "$d/access.log", "$d/access.log.1" or die "rename: $!";
    # A mistake saved and not reloaded: the file no longer loads.
    $s->write_config("error('this config must not run')\n$good");
    my ($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reopen');
    is $rc, 0, 'luxd -s reopen exits 0' or diag $out;
    unlike $out, qr/must not run/, 'the config was not run';
    reopened('broken config');
    is $s->get('/after')->{status}, 404, 'a request after the rotation';
    ok wait_file("$d/access.log", qr{GET /after }), 'its line is in the new access.log';
    unlike Luxd::_slurp("$d/access.log.1") // '', qr{GET /after }, 'not in the rotated one';
};

subtest '10,000 vhosts and a print at the top: no Lua runs' => sub {
    my $big = "print('LUA RAN')\n$good" . <<'EOF';
for i = 1, 10000 do
  vhost(string.format("site%05d.example", i)) { root = "/nonexistent" }
end
EOF
    $s->write_config($big);
    my ($rc, $out) = Luxd::run_luxd('-t', '-c', $cf);
    like $out, qr/^LUA RAN$/m, 'control: running the config prints the marker (luxd -t)';
    ($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reopen');
    is $rc, 0, 'luxd -s reopen exits 0' or diag $out;
    unlike $out, qr/LUA RAN/, 'and never ran the config';
    reopened('10,000 vhosts');
};

# Each case: the config text (the server block is $good's), whether -s finds
# the running server's pid file, and what it says when it does not.
my ($server) = $good =~ /^(server \{.*?^\}\n)/ms;
(my $server_computed = $server) =~ s{pid_file = "\Q$d\E/luxd\.pid"}{pid_file = dir .. "/luxd.pid"};
my @cases = (
    [ 'decoys in comments and strings are not taken', <<"EOF", 1 ],
-- pid_file = "/nonexistent/a.pid"
--[==[ pid_file = "/nonexistent/b.pid" ]] still the comment ]==]
local s = "pid_file = '/nonexistent/c.pid'"
local t = [[ pid_file = "/nonexistent/d.pid" ]]
local u = 'x\\' pid_file = "/nonexistent/e.pid"'
$server
local same = s == t and s.pid_file == "/nonexistent/f.pid"
EOF
    [ 'the same literal twice', qq{pid_file = "$d/luxd.pid"\n$server}, 1 ],
    [ 'a long-bracket literal', do { (my $t = $server) =~ s{"(\Q$d\E/luxd\.pid)"}{[[$1]]}; $t }, 1 ],
    [ 'a computed pid_file', qq{local dir = "$d"\n$server_computed}, 0, qr/pid_file is not set to a plain string literal.*name it with -p PIDFILE/ ],
    [ 'a literal concatenated', do { (my $t = $server) =~ s{(pid_file = "[^"]*")}{$1 .. ""}; $t }, 0,
      qr/pid_file is not set to a plain string literal/ ],
    [ 'two different values', qq{pid_file = "/nonexistent/x.pid"\n$server}, 0, qr/pid_file is given more than one value/ ],
    [ 'no pid_file at all', qq{vhost "x" { root = "/tmp" }\n}, 0, qr/no pid_file in the config \Q$cf\E, and none is built in/ ],
);
for my $c (@cases) {
    my ($what, $text, $finds, $why) = @$c;
    subtest $what => sub {
        $s->write_config($text);
        my ($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reopen');
        if ($finds) {
            is $rc, 0, 'luxd -s reopen finds the server' or diag $out;
            reopened($what);
        } else {
            is $rc, 1, 'luxd -s reopen exits 1' or diag $out;
            like $out, $why, 'saying why' or diag $out;
            unlike $out, qr/nonexistent/, 'no decoy taken';
        }
    };
}

subtest '-p names the pid file: nothing else is read' => sub {
    $s->write_config(qq{local dir = "$d"\n$server_computed});
    my ($rc, $out) = Luxd::run_luxd('-c', "$d/no-such.lua", '-p', "$d/luxd.pid", '-s', 'reopen');
    is $rc, 0, 'luxd -s reopen -p PIDFILE with no config file at all' or diag $out;
    reopened('-p');
    ($rc, $out) = Luxd::run_luxd('-p', "$d/nope.pid", '-s', 'reopen');
    is $rc, 1, 'a -p file that is not there: exit 1';
    like $out, qr{cannot read the pid file \Q$d\E/nope\.pid \(-p\): No such file}, 'saying which file and where it came from';
};

# The config file cut at every byte: the scan never takes a decoy nor
# crashes; it finds the pid file exactly when the literal is whole.
subtest 'the config cut at every byte' => sub {
    my $text = <<"EOF";
#!/usr/bin/env luxd
-- pid_file = "/nonexistent/a.pid"
--[=[ pid_file = '/nonexistent/b.pid' ]=]
local v = { "pid_file = [[/nonexistent/c.pid]]", [==[ ]] pid_file = "/nonexistent/d.pid" ]==] }
server { pid_file = "$d/luxd.pid" }
EOF
    my ($start) = $text =~ /^(.*server \{ pid_file = "\Q$d\E\/luxd\.pid")/s;
    my @bad;
    my $found = 0;
    for my $n (0 .. length $text) {
        $s->write_config(substr($text, 0, $n));
        my ($rc, $out) = Luxd::run_luxd('-c', $cf, '-s', 'reopen');
        my $want = $n >= length $start ? 0 : 1;
        push @bad, "cut at $n: exit $rc, want $want: $out" if $rc != $want || $out =~ /nonexistent/;
        if ($rc == 0) {
            $found++;
            $reopens++;
            push @bad, "cut at $n: exit 0, but no \"logs reopened\" line followed" unless wait_reopens($reopens);
        }
    }
    is scalar(@bad), 0, 'every cut: found exactly when the literal is whole, no decoy, no crash'
      or diag join '', @bad[0 .. ($#bad < 4 ? $#bad : 4)];
    ok $found, 'found at the cuts past the literal';
};

$s->write_config($good);
$s->stop;
done_testing;
