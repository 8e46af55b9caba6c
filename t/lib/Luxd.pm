package Luxd;

# Test harness for luxd: starts the server on a free port with a config the
# test writes, waits until it accepts, talks raw HTTP to it, and fails the test
# when the server died of a signal, exited non-zero or logged an alert.
#
# Core Perl only. Typical use:
#
#   use Test::More; use Luxd;
#   my $s = Luxd->new(
#       config => 'vhost "localhost" { default = true, root = "$DIR/www" }',
#       files  => { 'www/index.html' => "hi\n" },
#       server => { keepalive_requests => 3 },
#   );
#   my $r = $s->get('/');               # one parsed response
#   is $r->{status}, 200;
#   $s->stop;                           # also runs from END if forgotten
#   done_testing;
#
# Placeholders in the config text: $PORT (the port picked for this server) and
# $DIR (the absolute temp dir). Without a `server {` block in the config the
# harness prepends one (listen, workers, logs, pid_file under $DIR), merging the
# keys given as `server => {...}` (a key with an undef value is left out; a
# scalar ref is written as raw Lua, e.g. access_log => \'false').
#
# API: new(config, files, server, workers, no_start, test_handlers) / start / stop(signal,
# timeout) / signal / wait_exit / alive; port dir pid url error_log access_log
# stderr_log file write_file; write_config write_file_atomic reload_status_file
# reload_status reload(timeout, poll) reload_error wait_log(re, timeout, poll)
# (see "config reload" below); connect(rcvbuf) -> Luxd::Conn (send, response,
# responses, read_all, wait_closed, fill, buffered, eof, close); raw(bytes,
# pieces, delay, timeout); http(method, path, headers, body, version, host,
# close); get/head; curl; run_cases; request(); parse_one(); parse_responses();
# check_response(); check_config(); run_luxd(). Set LUXD_KEEP=1 to keep the
# temp dirs, LUXD_BIN to test another binary.
#
# test_handlers => 1 runs bin() . '-test' (build/luxd-test, or e.g.
# build/asan/luxd-test under LUXD_BIN=build/asan/luxd) instead of bin(): luxd
# plus the handler for tests only, which answers under a location with
# `test_handler = true` (t/74 onwards). Everything else is the same;
# check_config and run_luxd always run the normal binary.

use strict;
use warnings;
use Carp qw(croak);
use Cwd qw(abs_path getcwd);
use Errno qw(EINTR EAGAIN EWOULDBLOCK ECONNRESET EINPROGRESS);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::INET;
use IO::Socket::IP;
use POSIX qw(:sys_wait_h);
use Scalar::Util qw(weaken looks_like_number);
use Socket qw(IPPROTO_TCP TCP_NODELAY SOL_SOCKET SO_RCVBUF);
use Test::More ();
use Time::HiRes qw(time sleep);

use Exporter 'import';
our @EXPORT = qw(parse_responses check_response refused wait_for);
our @EXPORT_OK = qw(request parse_one lua_value);

$SIG{PIPE} = 'IGNORE';

our $ROOT = abs_path(dirname(__FILE__) . '/../..');
our %LIVE;    # pid => weak ref to the object, for END

# Patterns that fail a test when found in any log the server wrote.
our @BAD_LOG = (
    qr/\[alert\]/, qr/\[emerg\]/, qr/AddressSanitizer/, qr/LeakSanitizer/,
    qr/ThreadSanitizer/, qr/runtime error:/,
);

sub bin {
    my $b = $ENV{LUXD_BIN} || 'build/luxd';
    $b = "$ROOT/$b" unless $b =~ m{^/};
    return $b;
}

# Sets the environment a luxd started after it sees, so that its resident
# memory shows the buffers it holds: blocks of $threshold bytes and more
# mmap()ed and unmapped at free; under AddressSanitizer, no quarantine,
# and free pages back to the system at once.
sub heap_visible_env {
    my ($threshold) = @_;
    $ENV{GLIBC_TUNABLES} = "glibc.malloc.mmap_threshold=$threshold";
    $ENV{ASAN_OPTIONS} = join ':', grep { length } $ENV{ASAN_OPTIONS} // '', 'quarantine_size_mb=0',
      'thread_local_quarantine_size_kb=0', 'allocator_release_to_os_interval_ms=50';
}

# Whether the luxd under test is an AddressSanitizer build (make asan): its
# heap holds more per object (redzones), so a test that bounds memory per
# connection says by how much.
my $ASAN;
sub asan_build {
    return $ASAN if defined $ASAN;
    open my $fh, '<:raw', bin() or return $ASAN = 0;
    local $/;
    my $img = <$fh> // '';
    return $ASAN = ($img =~ /__asan_init/ ? 1 : 0);
}

sub free_port {
    my $s = IO::Socket::INET->new(
        LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp', Listen => 1, ReuseAddr => 0,
    ) or die "cannot bind a free port: $!";
    my $p = $s->sockport;
    close $s;
    return $p;
}

# Renders a Perl value as Lua: numbers stay numbers, strings are quoted, array
# refs become sequences, hash refs tables, scalar refs are raw Lua.
sub lua_value {
    my ($v) = @_;
    return 'nil' unless defined $v;
    if (ref $v eq 'SCALAR') { return $$v }
    if (ref $v eq 'ARRAY')  { return '{ ' . join(', ', map { lua_value($_) } @$v) . ' }' }
    if (ref $v eq 'HASH') {
        return '{ ' . join(', ', map {
            (/^[A-Za-z_][A-Za-z0-9_]*$/ ? $_ : '[' . lua_value("$_") . ']') . ' = ' . lua_value($v->{$_})
        } sort keys %$v) . ' }';
    }
    return $v if looks_like_number($v) && $v =~ /^-?\d+(?:\.\d+)?$/;
    (my $q = $v) =~ s/([\\"])/\\$1/g;
    $q =~ s/\n/\\n/g;
    return "\"$q\"";
}

sub _write_file {
    my ($path, $bytes) = @_;
    make_path(dirname($path));
    open my $fh, '>:raw', $path or die "write $path: $!";
    print $fh $bytes;
    close $fh or die "close $path: $!";
}

sub _slurp {
    my ($path) = @_;
    open my $fh, '<:raw', $path or return undef;
    local $/;
    my $d = <$fh>;
    return defined $d ? $d : '';
}

sub _subst {
    my ($text, $port, $dir) = @_;
    $text =~ s/\$PORT\b/$port/g;
    $text =~ s/\$DIR\b/$dir/g;
    return $text;
}

sub _default_config { qq{vhost "localhost" { default = true, root = "\$DIR/www", index = { "index.html" } }\n} }

sub new {
    my ($class, %o) = @_;
    my $self = bless {
        workers       => $o{workers} // 1,
        timeout       => $o{start_timeout} // 10,
        test_handlers => $o{test_handlers} ? 1 : 0,
    }, $class;
    $self->{dir} = tempdir('luxd-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
    $self->{dir} = abs_path($self->{dir});
    $self->{port} = $o{port} // free_port();
    my $dir = $self->{dir};
    make_path("$dir/www");

    my $files = $o{files} || {};
    for my $rel (sort keys %$files) {
        if ($rel =~ m{/$}) { make_path("$dir/$rel"); next }
        _write_file("$dir/$rel", $files->{$rel});
    }

    my $config = $o{config} // _default_config();
    if ($config !~ /(^|[^\w.])server\s*[\{\(]/m) {
        my %srv = (
            listen          => ['127.0.0.1:$PORT'],
            workers         => $self->{workers},
            error_log       => '$DIR/error.log',
            access_log      => '$DIR/access.log',
            error_log_level => 'info',
            pid_file        => '$DIR/luxd.pid',
            %{ $o{server} || {} },
        );
        my @keys = ('listen', grep { $_ ne 'listen' } sort keys %srv);
        my $block = "server {\n"
          . join('', map { "  $_ = " . lua_value($srv{$_}) . ",\n" } grep { defined $srv{$_} } @keys)
          . "}\n";
        $config = $block . $config;
    } elsif ($o{server}) {
        croak "Luxd->new: both a server {} block in the config and server => {...}";
    }
    $self->{config_raw} = $config;
    $self->{config_text} = _subst($config, $self->{port}, $dir);
    $self->{config_file} = "$dir/luxd.lua";
    _write_file($self->{config_file}, $self->{config_text});

    unless ($o{no_start}) {
        # free_port() closes its socket before luxd binds, so another
        # process may take the port meanwhile. When the harness picked the
        # port and no one has seen it yet (start from new), a start that
        # fails with "Address already in use" is retried on a new port.
        $self->{_port_retries} = 2 unless defined $o{port};
        $self->start;
    }
    return $self;
}

# The *.log files directly in the temp dir, name => content.
sub _top_logs {
    my ($self) = @_;
    my %l;
    for my $f (glob("$self->{dir}/*.log")) { $l{$f} = _slurp($f) // '' }
    return \%l;
}

# After a start that failed on a taken port: the logs as they were before
# it (its [emerg] would fail the test at stop), a new port, the config
# written again for it.
sub _retry_on_new_port {
    my ($self, $before) = @_;
    my $now = $self->_top_logs;
    for my $f (keys %$now) {
        if (exists $before->{$f}) { _write_file($f, $before->{$f}) } else { unlink $f }
    }
    $self->{port} = free_port();
    $self->{config_text} = _subst($self->{config_raw}, $self->{port}, $self->{dir});
    _write_file($self->{config_file}, $self->{config_text});
}

# What start() waits for once luxd accepts: luxd listens before it writes
# its pid file, drops to user = and starts its workers. When the config
# names a pid_file (an absolute literal path to a regular file), until it
# holds this pid; when luxd logs at info to one such file (_started_log),
# until that file has "started: generation" once more than before this
# start ($started_before).
sub _ready {
    my ($self, $pid, $started_before) = @_;
    my $t = _lua_code($self->{config_text} // '');
    if ($t =~ /\bpid_file\s*=\s*"(\/[^"]+)"/ && _plain_file($1)) {
        my $c = _slurp($1);
        return 0 unless defined $c && $c eq "$pid\n";
    }
    if (defined $started_before) {
        my $n = () = (_slurp($self->_started_log) // '') =~ /\bstarted: generation \d+/g;
        return 0 unless $n > $started_before;
    }
    return 1;
}

# The error log file luxd says "started" in: the config's one error_log,
# an absolute literal path to a regular file, at level info or debug; else
# undef.
sub _started_log {
    my ($self) = @_;
    my $t = _lua_code($self->{config_text} // '');
    my @logs = $t =~ /\berror_log\s*=\s*"(\/[^"]+)"/g;
    return undef unless @logs == 1 && $t !~ /\berror_log\s*=\s*[^"\s]/;
    return undef unless _plain_file($logs[0]);
    my @lv = $t =~ /\berror_log_level\s*=\s*"(\w+)"/g;
    return undef if @lv > 1 || (@lv && $lv[0] ne 'info' && $lv[0] ne 'debug');
    return $logs[0];
}

# A path the harness may read without blocking or reading its own fds: a
# regular file, or one not made yet outside /dev and /proc. /dev/stderr
# as error_log is luxd's stderr; read here it is the test's own.
sub _plain_file {
    my ($f) = @_;
    return 0 if $f =~ m{^/(?:dev|proc)/};
    return !-e $f || -f $f;
}

# Config text with Lua comments and long-bracket strings blanked out, so
# a key named in a comment ("-- pid_file = ...") or inside a [[...]] body
# is not taken for the key itself. Quoted strings stay: the keys' values
# are read from them.
sub _lua_code {
    my ($t) = @_;
    $t =~ s{("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|--\[(=*)\[.*?\]\2\]|\[(=*)\[.*?\]\3\]|--[^\n]*}
           {defined $1 ? $1 : ' '}gse;
    return $t;
}

sub start {
    my ($self) = @_;
    my $bin = bin();
    $bin .= '-test' if $self->{test_handlers};
    unless (-x $bin) {
        # A failed test, not only a die: prove then names the missing binary.
        Test::More::ok(0, "luxd binary $bin exists") if $self->{test_handlers};
        croak "luxd binary $bin is missing or not executable"
          . ($self->{test_handlers} ? ' (test_handlers => 1 needs the test build of luxd)' : '');
    }
    my $log = "$self->{dir}/stderr.log";
    $ENV{UBSAN_OPTIONS} //= 'print_stacktrace=1';
    my $retries = delete $self->{_port_retries} // 0;
    my $logs_before = $retries ? $self->_top_logs : undef;
  ATTEMPT: while (1) {
    my $started_before;
    if (defined(my $f = $self->_started_log)) {
        $started_before = () = (_slurp($f) // '') =~ /\bstarted: generation \d+/g;
    }
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDIN, '<', '/dev/null';
        open STDOUT, '>>', $log or POSIX::_exit(126);
        open STDERR, '>&', \*STDOUT or POSIX::_exit(126);
        chdir $ROOT;
        no warnings "exec";
        exec { $bin } $bin, '-c', $self->{config_file};
        print STDERR "exec $bin: $!\n";
        POSIX::_exit(127);
    }
    $self->{pid} = $pid;
    delete $self->{status};
    delete $self->{stopped};
    $LIVE{$pid} = $self;
    weaken($LIVE{$pid});

    my $deadline = time + $self->{timeout};
    my $accepted = 0;
    while (time < $deadline) {
        my $r = waitpid($pid, WNOHANG);
        if ($r == $pid) {
            $self->{status} = $?;
            delete $LIVE{$pid};
            $self->{stopped} = 1;
            if ($retries > 0 && $self->stderr_log =~ /Address already in use/) {
                $retries--;
                $self->_retry_on_new_port($logs_before);
                next ATTEMPT;
            }
            Test::More::ok(0, "luxd starts") or Test::More::diag(
                "luxd exited during start-up (" . _describe_status($?) . ")\n" . $self->_logs_for_diag);
            die "luxd did not start\n";
        }
        if (!$accepted) {
            my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $self->{port}, Proto => 'tcp', Timeout => 1);
            if ($c) { close $c; $accepted = 1 }
        }
        return $self if $accepted && $self->_ready($pid, $started_before);
        sleep($accepted ? 0.01 : 0.05);
    }
    Test::More::ok(0, "luxd starts") or Test::More::diag(
        ($accepted ? "luxd accepted on port $self->{port} but did not write its pid file / log \"started\" within $self->{timeout} s\n"
                   : "luxd did not accept on port $self->{port} within $self->{timeout} s\n") . $self->_logs_for_diag);
    kill 'KILL', $pid;
    waitpid($pid, 0);
    $self->{stopped} = 1;
    delete $LIVE{$pid};
    die "luxd did not start\n";
  }
}

sub port       { $_[0]{port} }
sub dir        { $_[0]{dir} }
sub pid        { $_[0]{pid} }
sub config_file { $_[0]{config_file} }
sub url        { my ($s, $p) = @_; $p //= '/'; "http://127.0.0.1:$s->{port}$p" }
sub error_log  { my $d = _slurp("$_[0]{dir}/error.log"); defined $d ? $d : '' }
sub access_log { my $d = _slurp("$_[0]{dir}/access.log"); defined $d ? $d : '' }
sub stderr_log { my $d = _slurp("$_[0]{dir}/stderr.log"); defined $d ? $d : '' }
sub file       { _slurp("$_[0]{dir}/$_[1]") }
sub write_file { my ($s, $rel, $bytes) = @_; _write_file("$s->{dir}/$rel", $bytes) }

# --- config reload --------------------------------------------------------
#
#   $s->write_config($text);            # replace luxd.lua whole (tmp + rename)
#   my $out = $s->reload;               # SIGHUP, wait for the status file
#   like($out // 'timeout', qr/^ok generation 2 /);
#   ok($s->wait_log(qr/reload: generation 2/), 'logged');

# Writes $path through "$path.tmp" and rename(), so a reader (a reload) never
# sees half a file. The bytes are written as given.
sub _write_atomic {
    my ($path, $bytes) = @_;
    open my $fh, '>:raw', "$path.tmp" or die "$path.tmp: $!";
    print $fh $bytes;
    close $fh or die "close $path.tmp: $!";
    rename "$path.tmp", $path or die "rename $path.tmp: $!";
}

# Replaces the config file (config_file) whole with $text, atomically. The
# text is written as is: no $DIR/$PORT substitution. Also kept as the
# object's config text.
sub write_config {
    my ($self, $text) = @_;
    _write_atomic($self->{config_file}, $text);
    $self->{config_text} = $text;
    return 1;
}

# Like write_file, but atomically (tmp + rename): for files a reload reads,
# e.g. an included policy file. The bytes are written as given.
sub write_file_atomic {
    my ($self, $rel, $bytes) = @_;
    make_path(dirname("$self->{dir}/$rel"));
    _write_atomic("$self->{dir}/$rel", $bytes);
    return 1;
}

# The file where the server reports each reload's outcome: the pid file's
# name plus ".reload". Assumes pid_file = "$DIR/luxd.pid" (the harness's
# default, and what the reload tests write).
sub reload_status_file { "$_[0]{dir}/luxd.pid.reload" }

# The reload status file's line "SEQ ok ..." / "SEQ failed MESSAGE" as
# (SEQ, "ok ..." | "failed MESSAGE"); (0, '') when there is no such file yet,
# (0, LINE) when the line has no sequence number.
sub reload_status {
    my ($self) = @_;
    open my $fh, '<', $self->reload_status_file or return (0, '');
    my $l = <$fh> // '';
    chomp $l;
    return $l =~ /^(\d+) (.*)$/ ? ($1, $2) : (0, $l);
}

# Sends SIGHUP, then waits until the status file's sequence number moves past
# the one seen before the signal. Returns the new message ("ok ..." or
# "failed ...") or undef: when the server is not running (the signal could
# not be sent) or no outcome came within timeout seconds (default 10); then
# reload_error says which ('not running' or 'timeout'). poll => seconds
# between reads of the status file (default 0.01).
sub reload {
    my ($self, %o) = @_;
    delete $self->{reload_error};
    my ($before) = $self->reload_status;
    if (!$self->signal('HUP')) { $self->{reload_error} = 'not running'; return undef }
    my $deadline = time + ($o{timeout} // 10);
    my $poll = $o{poll} // 0.01;
    while (time < $deadline) {
        my ($seq, $msg) = $self->reload_status;
        return $msg if $seq > $before;
        sleep $poll;
    }
    $self->{reload_error} = 'timeout';
    return undef;
}

# Why the last reload() returned undef: 'not running' or 'timeout'.
sub reload_error { $_[0]{reload_error} }

# Runs $code in a child process as the user $name (setgid, then setuid;
# root only) and returns whether it returned true: what that user can do,
# e.g. plant a link in a directory of its own.
sub as_user {
    my ($name, $code) = @_;
    my ($uid, $gid) = (getpwnam($name))[2, 3];
    defined $uid or die "no user $name";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        $( = $) = "$gid $gid";
        $< = $> = $uid;
        POSIX::_exit($code->() ? 0 : 1);
    }
    waitpid($pid, 0);
    return $? == 0;
}

# A process's anonymous resident memory (RssAnon) in kB, or undef: where
# heap and buffers are (VmRSS also counts file-backed pages, which page
# cache reclaim evicts and faults bring back, megabytes either way).
sub rss_anon_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return undef;
    while (<$fh>) { return $1 if /^RssAnon:\s+(\d+)\s+kB/ }
    return undef;
}

# Polls COND every 0.05 s until it returns true or TIMEOUT seconds (10 by
# default) pass; returns its last value. What a test awaits instead of a sleep.
sub wait_for {
    my ($cond, $timeout) = @_;
    my $deadline = Time::HiRes::time() + ($timeout // 10);
    while (1) {
        my $v = $cond->();
        return $v if $v || Time::HiRes::time() >= $deadline;
        Time::HiRes::sleep(0.05);
    }
}

# Waits up to $timeout seconds (default 5) for error.log to match $re, reading
# it every poll => seconds (default 0.05). Returns 1 when it matched, else 0.
sub wait_log {
    my ($self, $re, $timeout, %o) = @_;
    my $deadline = time + ($timeout // 5);
    my $poll = $o{poll} // 0.05;
    while (time < $deadline) {
        return 1 if $self->error_log =~ $re;
        sleep $poll;
    }
    return 0;
}

sub _logs_for_diag {
    my ($self) = @_;
    my $out = '';
    for my $f (sort glob("$self->{dir}/*.log")) {
        next if $f =~ /access\.log$/;
        my $t = _slurp($f) // '';
        $t = '...' . substr($t, -4000) if length $t > 4000;
        (my $n = $f) =~ s{.*/}{};
        $out .= "--- $n ---\n$t\n";
    }
    return $out;
}

sub _describe_status {
    my ($st) = @_;
    return 'still running' unless defined $st;
    return 'killed by signal ' . WTERMSIG($st) . (($st & 128) ? ' (core dumped)' : '') if WIFSIGNALED($st);
    return 'exit code ' . WEXITSTATUS($st);
}

# Sends a signal without waiting.
sub signal {
    my ($self, $sig) = @_;
    return kill($sig, $self->{pid}) if $self->{pid} && !defined $self->{status};
    return 0;
}

# Waits up to $timeout seconds for the process to exit; returns its wait status
# (0 = clean exit) or undef if it is still running.
sub wait_exit {
    my ($self, $timeout) = @_;
    return $self->{status} if defined $self->{status};
    my $deadline = time + ($timeout // 10);
    while (1) {
        my $r = waitpid($self->{pid}, WNOHANG);
        if ($r == $self->{pid}) { $self->{status} = $?; delete $LIVE{$self->{pid}}; return $? }
        return undef if time >= $deadline;
        sleep 0.02;
    }
}

sub alive { my ($s) = @_; return !defined $s->wait_exit(0) }

# Stops the server (SIGTERM unless signal => 'INT' etc.), then fails the test
# if it did not exit cleanly or a log holds an alert or sanitizer report.
# Returns true when all was well.
sub stop {
    my ($self, %o) = @_;
    return 1 if $self->{stopped};
    $self->{stopped} = 1;
    my $ok = 1;
    my @why;
    if (defined $self->{status}) {
        # Already reaped by wait_exit; nothing to signal.
    } elsif (defined $self->wait_exit(0)) {
        push @why, 'luxd had exited before stop (' . _describe_status($self->{status}) . ')' if $self->{status} != 0;
    } else {
        kill($o{signal} // 'TERM', $self->{pid});
        if (!defined $self->wait_exit($o{timeout} // 10)) {
            kill 'KILL', $self->{pid};
            waitpid($self->{pid}, 0);
            $self->{status} = $?;
            push @why, "luxd did not exit within " . ($o{timeout} // 10) . " s of SIG" . ($o{signal} // 'TERM') . "; killed";
        }
    }
    delete $LIVE{$self->{pid}};
    my $st = $self->{status};
    if (!@why && $st != 0) { push @why, 'luxd ' . _describe_status($st) }
    for my $f (sort glob("$self->{dir}/*.log")) {
        next if $f =~ /access\.log$/;
        my $t = _slurp($f) // '';
        for my $re (@BAD_LOG) {
            if ($t =~ /^(.*$re.*)$/m) { my $line = $1; (my $n = $f) =~ s{.*/}{}; push @why, "$n: $line"; last }
        }
    }
    if (@why) {
        $ok = 0;
        Test::More::ok(0, 'luxd stopped cleanly') or Test::More::diag(join("\n", @why) . "\n" . $self->_logs_for_diag);
    }
    return $ok;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop if $self->{pid} && !$self->{stopped} && ${^GLOBAL_PHASE} ne 'DESTRUCT';
    if ($self->{pid} && !$self->{stopped}) { kill 'KILL', $self->{pid}; waitpid($self->{pid}, 0) }
}

END {
    my $rc = $?;
    for my $pid (keys %LIVE) {
        my $s = $LIVE{$pid} or next;
        $s->stop unless $s->{stopped};
    }
    $? = $rc;
}

# --- talking to the server ------------------------------------------------

# Builds one request. Headers are a list of [name, value] pairs or a flat
# list; Host defaults to "localhost" (host => undef leaves it out).
sub request {
    my (%o) = @_;
    my $method  = $o{method}  // 'GET';
    my $path    = $o{path}    // '/';
    my $version = $o{version} // '1.1';
    my @h = @{ $o{headers} || [] };
    @h = map { ref $_ ? @$_ : $_ } @h;
    my %have; for (my $i = 0; $i < @h; $i += 2) { $have{ lc $h[$i] } = 1 }
    my $host = exists $o{host} ? $o{host} : 'localhost';
    my $r = "$method $path HTTP/$version\r\n";
    $r .= "Host: $host\r\n" if defined $host && !$have{host};
    for (my $i = 0; $i < @h; $i += 2) { $r .= "$h[$i]: $h[$i+1]\r\n" }
    $r .= "Connection: close\r\n" if $o{close} && !$have{connection};
    $r .= "Content-Length: " . length($o{body}) . "\r\n" if defined $o{body} && !$have{'content-length'} && !$have{'transfer-encoding'};
    $r .= "\r\n";
    $r .= $o{body} if defined $o{body};
    return $r;
}

sub connect {
    my ($self, %o) = @_;
    my $sock;
    if ($o{rcvbuf}) {
        # SO_RCVBUF must be set before connect() to limit the TCP window.
        $sock = IO::Socket::INET->new(Proto => 'tcp') or die "socket: $!";
        setsockopt($sock, SOL_SOCKET, SO_RCVBUF, pack('i', $o{rcvbuf})) or die "SO_RCVBUF: $!";
        my $addr = Socket::pack_sockaddr_in($self->{port}, Socket::inet_aton($o{host} // '127.0.0.1'));
        CORE::connect($sock, $addr) or die "connect to luxd: $!";
    } else {
        $sock = IO::Socket::IP->new(
            PeerHost => $o{host} // '127.0.0.1', PeerPort => $o{port} // $self->{port}, Proto => 'tcp', Timeout => 5,
        ) or die "connect to luxd on port $self->{port}: $@";
    }
    setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1);
    $sock->autoflush(1);
    return Luxd::Conn->new($sock);
}

# Sends bytes on a fresh connection and reads until the server closes or the
# timeout (default 3 s) passes. Options: pieces => [..] sent one by one with
# delay => seconds between them (instead of $bytes), timeout => s.
# Scalar context: the bytes read. List context: (bytes, info) where info has
# closed (EOF or reset seen), reset, timed_out, elapsed.
sub raw {
    my ($self, $bytes, %o) = @_;
    my $c = $self->connect(%o);
    my $t0 = time;
    my @pieces = $o{pieces} ? @{ $o{pieces} } : ($bytes);
    for my $i (0 .. $#pieces) {
        sleep($o{delay} // 0.1) if $i > 0;
        last unless $c->send($pieces[$i]);
    }
    my $data = $c->read_all($o{timeout} // 3);
    my %info = (closed => $c->{eof} ? 1 : 0, reset => $c->{reset} ? 1 : 0,
                timed_out => $c->{eof} ? 0 : 1, elapsed => time - $t0);
    $c->close;
    return wantarray ? ($data, \%info) : $data;
}

# One request, one parsed response (with {raw} and {closed} added).
# Options as for request(); close defaults to 1.
sub http {
    my ($self, %o) = @_;
    $o{close} //= 1;
    my $c = $self->connect;
    $c->send(request(%o));
    my $r = $c->response(head => (($o{method} // 'GET') eq 'HEAD'), timeout => $o{timeout} // 5);
    $r ||= { status => undef, error => 'no complete response', raw => $c->{buf}, headers => {}, hlist => {}, body => undef };
    $c->close;
    return $r;
}

sub get  { my ($s, $path, @h) = @_; $s->http(method => 'GET',  path => $path, headers => [@h]) }
sub head { my ($s, $path, @h) = @_; $s->http(method => 'HEAD', path => $path, headers => [@h]) }

# Runs curl -s with the arguments; returns its stdout (list context: also the
# exit code).
sub curl {
    my ($self, @args) = @_;
    open my $fh, '-|', 'curl', '-s', '-S', '--max-time', '30', @args or die "curl: $!";
    binmode $fh;
    local $/;
    my $out = <$fh> // '';
    close $fh;
    my $rc = $? >> 8;
    return wantarray ? ($out, $rc) : $out;
}

# Runs `luxd -t -c FILE` on a config text ($DIR is replaced by a temp dir,
# $PORT by a free port). Returns (exit code, stdout+stderr, config file path).
# refused($port [, $wait]): true when a connect to 127.0.0.1:$port is
# refused; with $wait seconds, keeps trying until it is (a port that is
# being closed), else answers for this moment.
sub refused {
    my ($port, $wait) = @_;
    my $deadline = time + ($wait // 0);
    while (1) {
        my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp',
                                      Timeout => 2);
        return 1 unless $c;
        close $c;
        return 0 if time >= $deadline;
        sleep 0.05;
    }
}

sub check_config {
    my ($text, %o) = @_;
    my $dir = abs_path(tempdir('luxd-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP}));
    my $file = "$dir/" . ($o{name} // 'luxd.lua');
    _write_file($file, _subst($text, free_port(), $dir));
    for my $rel (sort keys %{ $o{files} || {} }) { _write_file("$dir/$rel", $o{files}{$rel}) }
    my ($rc, $out) = run_luxd('-t', '-c', $file);
    return ($rc, $out, $file, $dir);
}

# Runs the binary with arguments, returns (exit code, combined output). A
# signal death is reported as 128 + signal number; a run that outlasts
# $Luxd::RUN_TIMEOUT seconds (default 20) is killed and reported as -1.
our $RUN_TIMEOUT = 20;
sub run_luxd {
    my (@args) = @_;
    my $bin = bin();
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if ($pid == 0) {
        open STDERR, '>&', \*STDOUT;
        open STDIN, '<', '/dev/null';
        chdir $ROOT;
        no warnings "exec";
        exec { $bin } $bin, @args;
        print "exec $bin: $!\n";
        POSIX::_exit(127);
    }
    binmode $fh;
    my $out = '';
    my $sel = IO::Select->new($fh);
    my $deadline = time + $RUN_TIMEOUT;
    my $timed_out = 0;
    while (1) {
        my $left = $deadline - time;
        if ($left <= 0) { $timed_out = 1; kill 'KILL', $pid; last }
        next unless $sel->can_read($left);
        my $n = sysread($fh, my $chunk, 65536);
        last unless $n;
        $out .= $chunk;
    }
    close $fh;
    my $st = $?;
    return (-1, $out . "\n[luxd @args: still running after $RUN_TIMEOUT s, killed]\n") if $timed_out;
    my $rc = WIFSIGNALED($st) ? 128 + WTERMSIG($st) : WEXITSTATUS($st);
    return ($rc, $out);
}

# --- response parsing -----------------------------------------------------

# Parses one response from the front of $$buf. Returns the response (and
# removes its bytes from $$buf) or undef when more bytes are needed.
# Options: head => 1 (answer to HEAD: no body), eof => 1 (no more bytes will
# come: a close-delimited body ends here).
sub parse_one {
    my ($buf, %o) = @_;
    my $end = index($$buf, "\r\n\r\n");
    if ($end < 0) {
        return undef unless $o{eof} && length $$buf;
        my $r = { status => undef, error => 'incomplete header', raw => $$buf, headers => {}, hlist => {}, body => undef };
        $$buf = '';
        return $r;
    }
    my $head = substr($$buf, 0, $end);
    my @lines = split /\r\n/, $head, -1;
    my $sl = shift @lines;
    my %r = (headers => {}, hlist => {}, status_line => $sl, raw_headers => $head);
    if ($sl =~ m{^(HTTP/\d\.\d) (\d{3})(?: (.*))?$}) {
        @r{qw(version status reason)} = ($1, $2 + 0, $3 // '');
    } else {
        $r{error} = "bad status line: $sl";
        $r{raw} = $$buf;
        $$buf = '';
        return \%r;
    }
    for my $l (@lines) {
        if ($l =~ /^([!#\$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/) {
            push @{ $r{hlist}{ lc $1 } }, $2;
        } else {
            $r{error} = "bad header line: $l";
        }
    }
    $r{headers}{$_} = join(', ', @{ $r{hlist}{$_} }) for keys %{ $r{hlist} };
    my $pos = $end + 4;
    my $st = $r{status};
    my $te = $r{headers}{'transfer-encoding'};
    my $cl = $r{headers}{'content-length'};
    if ($o{head} || $st < 200 || $st == 204 || $st == 304) {
        $r{body} = '';
    } elsif (defined $te && $te =~ /chunked\s*$/i) {
        my $body = '';
        my $p = $pos;
        while (1) {
            my $le = index($$buf, "\r\n", $p);
            return undef if $le < 0 && !$o{eof};
            if ($le < 0) { $r{error} = 'truncated chunked body'; $p = length $$buf; last }
            my $szl = substr($$buf, $p, $le - $p);
            unless ($szl =~ /^([0-9A-Fa-f]+)/) { $r{error} = "bad chunk size line: $szl"; $p = length $$buf; last }
            my $sz = hex $1;
            if ($sz == 0) {
                my $tend = index($$buf, "\r\n\r\n", $le);
                # The last chunk: "0\r\n" then trailers, then an empty line.
                if (substr($$buf, $le, 4) eq "\r\n\r\n") { $p = $le + 4; last }
                return undef if $tend < 0 && !$o{eof};
                if ($tend < 0) { $r{error} = 'truncated trailer'; $p = length $$buf; last }
                $p = $tend + 4;
                last;
            }
            if (length($$buf) < $le + 2 + $sz + 2) {
                return undef unless $o{eof};
                $r{error} = 'truncated chunk';
                $body .= substr($$buf, $le + 2);
                $p = length $$buf;
                last;
            }
            $body .= substr($$buf, $le + 2, $sz);
            $p = $le + 2 + $sz + 2;
        }
        $r{body} = $body;
        $r{chunked} = 1;
        $pos = $p;
    } elsif (defined $cl) {
        if ($cl !~ /^\d+$/) { $r{error} = "bad Content-Length: $cl"; $cl = 0 }
        if (length($$buf) - $pos < $cl) {
            return undef unless $o{eof};
            $r{error} = 'truncated body (' . (length($$buf) - $pos) . " of $cl bytes)";
            $cl = length($$buf) - $pos;
        }
        $r{body} = substr($$buf, $pos, $cl);
        $pos += $cl;
    } else {
        return undef unless $o{eof};
        $r{body} = substr($$buf, $pos);
        $r{close_delimited} = 1;
        $pos = length $$buf;
    }
    $r{raw} = substr($$buf, 0, $pos);
    substr($$buf, 0, $pos) = '';
    return \%r;
}

# Splits raw bytes into responses. head => 1 treats every response as an
# answer to HEAD; head => [0, 1, 0] says it per response.
sub parse_responses {
    my ($raw, %o) = @_;
    my $buf = $raw;
    my @out;
    while (length $buf) {
        my $h = ref $o{head} ? $o{head}[scalar @out] : $o{head};
        my $r = parse_one(\$buf, head => $h, eof => 1) or last;
        push @out, $r;
        last if $r->{error} && !defined $r->{status};
    }
    return @out;
}

# Checks a parsed response against expectations; one ok() per expectation.
#   status  => 200 or [400, 404]           (allowed statuses)
#   body    => 'exact' or qr/re/
#   headers => { name => 'exact' | qr/re/ | undef (must be absent) }
#   body_max => N                         (body length at most N)
sub check_response {
    my ($r, $e, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    $name //= '';
    my $ok = 1;
    if (exists $e->{status}) {
        my @allowed = ref $e->{status} ? @{ $e->{status} } : ($e->{status});
        my $st = $r ? $r->{status} : undef;
        $ok &= Test::More::ok(defined $st && grep({ $_ == $st } @allowed), "$name: status " . join('|', @allowed))
          or Test::More::diag('got ' . (defined $st ? $st : 'no response') . ($r && $r->{error} ? " ($r->{error})" : '')
                              . ($r && defined $r->{raw} ? "\n" . _short($r->{raw}) : ''));
    }
    return $ok unless $r && defined $r->{status};
    if (exists $e->{body}) {
        if (ref $e->{body} eq 'Regexp') {
            $ok &= Test::More::like($r->{body}, $e->{body}, "$name: body");
        } else {
            $ok &= Test::More::ok(defined $r->{body} && $r->{body} eq $e->{body}, "$name: body")
              or Test::More::diag('got ' . _short($r->{body}) . "\nexpected " . _short($e->{body}));
        }
    }
    if (exists $e->{body_max}) {
        $ok &= Test::More::cmp_ok(length($r->{body} // ''), '<=', $e->{body_max}, "$name: body at most $e->{body_max} bytes");
    }
    for my $h (sort keys %{ $e->{headers} || {} }) {
        my $want = $e->{headers}{$h};
        my $got = $r->{headers}{ lc $h };
        if (!defined $want) {
            $ok &= Test::More::ok(!defined $got, "$name: no $h header") or Test::More::diag("got $h: $got");
        } elsif (ref $want eq 'Regexp') {
            $ok &= Test::More::like($got, $want, "$name: $h");
        } else {
            $ok &= Test::More::is($got, $want, "$name: $h");
        }
    }
    return $ok;
}

sub _short {
    my ($s) = @_;
    return 'undef' unless defined $s;
    my $t = length $s > 600 ? substr($s, 0, 600) . '...(' . length($s) . ' bytes)' : $s;
    $t =~ s/([^\x20-\x7e\n])/sprintf '\\x%02x', ord $1/ge;
    return $t;
}

# Runs data-driven cases, each on its own connection:
#   { name, request => bytes | {request() options}, head => 1,
#     status, body, headers, body_max (as check_response),
#     closed => 1 (the server must close the connection after the answer),
#     pieces/delay/timeout (as raw) }
# Each case is a subtest.
sub run_cases {
    my ($self, @cases) = @_;
    for my $c (@cases) {
        Test::More::subtest($c->{name} => sub {
            my $req = ref $c->{request} ? request(%{ $c->{request} }) : $c->{request};
            my $head = $c->{head} // (ref $c->{request} && ($c->{request}{method} // '') eq 'HEAD');
            my $conn = $self->connect;
            if ($c->{pieces}) {
                for my $i (0 .. $#{ $c->{pieces} }) { sleep($c->{delay} // 0.1) if $i; $conn->send($c->{pieces}[$i]) }
            } else {
                $conn->send($req);
            }
            my $r = $conn->response(head => $head, timeout => $c->{timeout} // 3);
            check_response($r, $c, $c->{name});
            if ($c->{closed}) {
                Test::More::ok($conn->wait_closed($c->{timeout} // 3), "$c->{name}: connection closed after the answer");
                Test::More::is(lc($r->{headers}{connection} // ''), 'close', "$c->{name}: Connection: close")
                  if $r && $r->{status};
            }
            $conn->close;
        });
    }
}

# --- one client connection ------------------------------------------------

package Luxd::Conn;

use strict;
use warnings;
use Errno qw(EINTR EAGAIN EWOULDBLOCK ECONNRESET EPIPE);
use IO::Select;
use Time::HiRes qw(time);

sub new { my ($c, $sock) = @_; bless { sock => $sock, buf => '', eof => 0, reset => 0 }, $c }
sub sock { $_[0]{sock} }

# Writes all bytes; returns false when the peer is gone (EPIPE/ECONNRESET).
sub send {
    my ($self, $bytes) = @_;
    my $off = 0;
    while ($off < length $bytes) {
        my $n = syswrite($self->{sock}, $bytes, length($bytes) - $off, $off);
        if (!defined $n) {
            next if $! == EINTR;
            if ($! == EAGAIN || $! == EWOULDBLOCK) {
                IO::Select->new($self->{sock})->can_write(1);
                next;
            }
            $self->{write_error} = "$!";
            return 0;
        }
        $off += $n;
    }
    return 1;
}

# Reads what is available within $timeout seconds into the buffer. Returns the
# number of bytes read, 0 on EOF, undef on timeout.
sub _fill {
    my ($self, $timeout) = @_;
    return 0 if $self->{eof};
    my $sel = IO::Select->new($self->{sock});
    return undef unless $sel->can_read($timeout > 0 ? $timeout : 0);
    my $n = sysread($self->{sock}, my $chunk, 262144);
    if (!defined $n) {
        return undef if $! == EINTR || $! == EAGAIN;
        $self->{reset} = 1 if $! == ECONNRESET;
        $self->{read_error} = "$!";
        $self->{eof} = 1;
        return 0;
    }
    if ($n == 0) { $self->{eof} = 1; return 0 }
    $self->{buf} .= $chunk;
    return $n;
}

# Waits up to $timeout seconds for bytes or EOF (kept in the buffer). Returns
# bytes read, 0 on EOF, undef on timeout.
sub fill { my ($s, $t) = @_; $s->_fill($t // 0) }

# The next complete response, or undef on timeout / EOF before one.
sub response {
    my ($self, %o) = @_;
    my $deadline = time + ($o{timeout} // 3);
    while (1) {
        my $r = Luxd::parse_one(\$self->{buf}, head => $o{head}, eof => $self->{eof});
        return $r if $r;
        return undef if $self->{eof};
        my $left = $deadline - time;
        return undef if $left <= 0;
        $self->_fill($left);
    }
}

# $n responses; head => [flags] per response or a single flag.
sub responses {
    my ($self, $n, %o) = @_;
    my @r;
    for my $i (0 .. $n - 1) {
        my $h = ref $o{head} ? $o{head}[$i] : $o{head};
        my $r = $self->response(%o, head => $h) or last;
        push @r, $r;
    }
    return @r;
}

# Reads until EOF or the timeout; returns and empties the buffer.
sub read_all {
    my ($self, $timeout) = @_;
    my $deadline = time + ($timeout // 3);
    while (!$self->{eof}) {
        my $left = $deadline - time;
        last if $left <= 0;
        $self->_fill($left);
    }
    my $d = $self->{buf};
    $self->{buf} = '';
    return $d;
}

# True when the server closes (EOF or reset) within $timeout seconds. Bytes
# that arrive meanwhile stay in the buffer ({buf}).
sub wait_closed {
    my ($self, $timeout) = @_;
    my $deadline = time + ($timeout // 3);
    while (!$self->{eof}) {
        my $left = $deadline - time;
        return 0 if $left <= 0;
        $self->_fill($left);
    }
    return 1;
}

sub buffered { $_[0]{buf} }
sub eof      { $_[0]{eof} }
sub close    { my ($s) = @_; close $s->{sock} if $s->{sock}; $s->{sock} = undef }

1;
