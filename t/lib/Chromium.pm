package Chromium;

# Debian's headless Chromium for the browser tests (t/145, t/273): a fresh
# profile and HOME per run, only loopback (no proxy, host names resolved
# only as the caller maps them), in its own process group, killed after
# $TIMEOUT s; no process of it may be left behind. Each run is also a few
# test assertions (it finished, exited 0, loaded the page, left nothing).
#
#   my $path = Chromium::path() or ...;            # undef: not installed
#   my ($stdout, $stderr) = Chromium::run($url, flags => [...], home => sub { my ($home) = @_; ... },
#                                         resolve => 'MAP a.test 127.0.0.1', expect_load => 1);

use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);

our $TIMEOUT = 60;    # seconds one run may take before it is killed

sub path {
    for my $d (split /:/, $ENV{PATH} // '') { return "$d/chromium" if -x "$d/chromium" && !-d "$d/chromium" }
    return undef;
}

sub slurp { my ($f) = @_; open my $fh, '<:raw', $f or return undef; local $/; my $d = <$fh>; $d // '' }

sub procs_with {
    my ($needle) = @_;
    my @p;
    for my $d (glob '/proc/[0-9]*') {
        my $c = slurp("$d/cmdline") // next;
        push @p, $d =~ s{.*/}{}r if index($c, $needle) >= 0;
    }
    return @p;
}

# Runs Chromium on $url; returns (stdout, stderr). Options: flags (more
# arguments), home (called with the fresh HOME before the run: an NSS
# database goes there), resolve (host-resolver rules before the default,
# which makes every other name unresolvable), expect_load (default 1:
# assert that the page loaded; 0: that it did not).
my $runs = 0;
sub run {
    my ($url, %o) = @_;
    my $chromium = path() // die 'chromium is not installed';
    $runs++;
    my $tmp = tempdir('chromium-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
    $o{home}->($tmp) if $o{home};
    my $rules = join ', ', grep { defined } $o{resolve}, 'MAP * ~NOTFOUND, EXCLUDE 127.0.0.1';
    my @cmd = (
        $chromium, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        '--disable-default-apps', '--disable-extensions', '--no-default-browser-check',
        # Only loopback: no proxy (nor its auto-detection), every other host
        # name unresolvable; 127.0.0.1 is loaded by address (the rules apply
        # to addresses too, hence the EXCLUDE).
        '--no-proxy-server', "--host-resolver-rules=$rules",
        "--user-data-dir=$tmp/profile", @{ $o{flags} || [] }, $url,
    );
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        $ENV{HOME} = $tmp;
        $ENV{XDG_CONFIG_HOME} = "$tmp/config";
        $ENV{XDG_CACHE_HOME} = "$tmp/cache";
        open STDIN, '<', '/dev/null';
        open STDOUT, '>', "$tmp/stdout" or POSIX::_exit(126);
        open STDERR, '>', "$tmp/stderr" or POSIX::_exit(126);
        no warnings 'exec';
        exec { $cmd[0] } @cmd;
        POSIX::_exit(127);
    }
    my $deadline = time + $TIMEOUT;
    my $st;
    while (1) {
        my $r = waitpid($pid, WNOHANG);
        if ($r == $pid) { $st = $?; last }
        last if time > $deadline;
        sleep 0.05;
    }
    kill 'KILL', -$pid;    # the group: helpers (zygote, renderer) too
    if (!defined $st) { waitpid($pid, 0) }
    my $what = "chromium run $runs ($url @{ $o{flags} || [] })";
    ok(defined $st, "$what finished within $TIMEOUT s");
    my $err = slurp("$tmp/stderr") // '';
    is($st, 0, "$what exited 0") or diag("stderr:\n$err");
    # Chromium exits 0 when the load failed too; it says so on stderr.
    if ($o{expect_load} // 1) {
        unlike($err, qr/Page load failed/, "$what loaded the page") or diag("stderr:\n$err");
    } else {
        like($err, qr/Page load failed/, "$what did not load the page") or diag("stderr:\n$err");
    }
    # Every process of this run names its temp dir: the browser's processes
    # the profile, the crash handlers (which leave the process group) their
    # database under HOME. Up to 20 s: on a loaded machine Chromium's
    # helpers take seconds to go.
    my @left;
    $deadline = time + 20;
    while (1) { @left = procs_with($tmp); last if !@left || time > $deadline; sleep 0.05 }
    ok(!@left, "$what left no process behind") or do { diag("left: @left"); kill 'KILL', @left };
    return (slurp("$tmp/stdout") // '', $err);
}

1;
