# issue 8 #6: a config key that is accepted must work. This walks every key
# of every block in lua/luxd/schema.lua (S.KEYS, read through luajit, so the
# list is the schema's own) and, for each, either proves that it changes
# what a real luxd does (the same probe against a server with the key and
# one without, or with another value, must differ) or that `luxd -t`
# refuses it with file:line; the proxy keys, until the proxy handler
# serves them, that they reach the compiled configuration (`luxd -T`
# shows the value). A key added to the schema without an entry in
# %PROOF below makes this test fail, and so does an entry for a key the
# schema no longer has.
#
# Adding a key: add "block.key" => { ... } to %PROOF. A vhost key's proof
# also proves the same key on a location (the probe path is moved under
# "/l/" and the files are copied there) unless "location.key" has its own.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use POSIX qw(:sys_wait_h);
use Cwd qw(abs_path);
use File::Temp qw(tempdir);
use Luxd;
use TLSTest;
use IO::Socket::INET;

# --- the schema's keys ----------------------------------------------------
my $lua = q{
  package.path = os.getenv("LUXD_ROOT") .. "/lua/?.lua;" .. package.path
  local S = require("luxd.schema")
  local out = {}
  for block, keys in pairs(S.KEYS) do
    for k, chk in pairs(keys) do
      out[#out + 1] = block .. "." .. k
    end
  end
  table.sort(out)
  print(table.concat(out, "\n"))
};
local $ENV{LUXD_ROOT} = $Luxd::ROOT;
open my $fh, '-|', 'luajit', '-e', $lua or die "luajit: $!";
my %schema = map { chomp; ($_ => 1) } <$fh>;
close $fh;
ok scalar(keys %schema) > 50, scalar(keys %schema) . ' keys read from the schema';

# --- building blocks ------------------------------------------------------
sub vh  { my ($set) = @_; qq{vhost "localhost" { default = true, root = "\$DIR/www", $set }\n} }
sub loc { my ($set) = @_; qq{vhost "localhost" { default = true, root = "\$DIR/www", location "/l/" { $set } }\n} }

# The answer to one request, as a string: status, the headers a key might
# change, body.
sub answer {
    my ($s, %o) = @_;
    my $r = $s->http(%o);
    return 'no answer' unless $r && defined $r->{status};
    my @h = map { "$_=" . ($r->{headers}{$_} // '') }
      qw(etag last-modified cache-control content-encoding content-type location x-proof);
    return join ' ', $r->{status}, @h, 'body=' . ($r->{body} // '');
}

my %BASE_FILES = (
    'www/index.html'   => "index\n",
    'www/home.html'    => "home\n",
    'www/g.txt'        => "plain\n",
    'www/g.txt.gz'     => "gzipped\n",
    'www/d/file.txt'   => "in d\n",
    'www/e404.html'    => "custom 404\n",
    'other/index.html' => "other root\n",
);

# Starts a server and runs the probe, or returns the start failure.
sub observe {
    my ($p, $which) = @_;
    my %o = (
        config => $p->{$which} // '',
        files  => { %BASE_FILES, %{ $p->{files} || {} } },
        server => { access_log_buffer => 0, %{ $p->{"server_$which"} || {} } },
        workers => 1,
    );
    my $s = eval { Luxd->new(%o) } or return "did not start: $@";
    my $got = $p->{probe} ? $p->{probe}->($s) : answer($s, %{ $p->{req} || {} });
    $s->stop(timeout => 20);
    return $got;
}

sub traced {
    my ($server) = @_;
    my $s = Luxd->new(no_start => 1, server => $server);
    my $trace = $s->dir . "/strace.out";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        open STDOUT, '>', '/dev/null';
        open STDERR, '>', '/dev/null';
        no warnings 'exec';
        exec 'strace', '-f', '-qq', '-e', 'trace=setsockopt,listen', '-o', $trace,
          Luxd::bin(), '-c', $s->config_file;
        POSIX::_exit(127);
    }
    my $deadline = time + 20;
    until (!Luxd::refused($s->port) || time > $deadline) { sleep 0.05 }
    # Stop luxd itself (by its pid file), and strace ends with it: a TERMed
    # strace detaches and leaves luxd running, which left six servers
    # behind on every run of this test.
    my $lpid;
    my $pt = time + 5;
    until (($lpid) = (Luxd::_slurp($s->dir . '/luxd.pid') // '') =~ /^(\d+)/ or time > $pt) { sleep 0.02 }
    kill 'TERM', $lpid if $lpid;
    my $t = time + 5;
    sleep 0.02 while waitpid($pid, WNOHANG) == 0 && time < $t;
    kill 'TERM', $pid if waitpid($pid, WNOHANG) == 0;
    kill 'KILL', $lpid if $lpid && kill 0, $lpid;
    waitpid($pid, 0);
    open my $f, '<', $trace or return 'no trace';
    local $/;
    my $all = <$f> // '';
    my @l = grep { /TCP_NODELAY|TCP_DEFER_ACCEPT|^\d+\s+listen\(/ } split /\n/, $all;
    s/^\d+\s+// for @l;
    s/\d+(,\s*(?:SOL_TCP|IPPROTO_TCP))/FD$1/, s/listen\(\d+,/listen(FD,/ for @l;
    return join "\n", sort @l;
}

# luxd accepts on worker 0's listener before the other workers' threads
# exist; "started" is logged once all of them do.
sub threads {
    my ($s) = @_;
    my $t = time + 10;
    sleep 0.02 while time < $t && $s->error_log !~ /\bstarted: generation/;
    opendir my $d, "/proc/" . $s->pid . "/task" or return -1;
    scalar grep { /^\d+$/ } readdir $d;
}
sub closes_within { my ($c, $t) = @_; $c->wait_closed($t) ? 'closed' : 'open' }

# Requests whose line shows up in the access log right after the answer.
# Each request waits for its line (2 s at most): a buffered log is written
# on the worker's 1 s tick, so the next request, sent just after a flush,
# waits about a second for its line; an unbuffered one has it at once. The
# bound between the two is half the tick, and most requests must meet it
# (not all: a busy machine delays some).
sub logged_at_once {
    my ($s) = @_;
    my $n = 0;
    my $f = $s->dir . "/access.log";
    for my $i (1 .. 10) {
        my $before = -s $f // 0;
        $s->get('/');
        my $t0 = time;
        sleep 0.01 while (-s $f // 0) <= $before && time - $t0 < 2;
        $n++ if time - $t0 < 0.5;
        last if $n >= 6 || $i - $n > 4;    # the outcome is known
    }
    return $n >= 6 ? 'logged at once' : 'buffered';
}

# Waits (5 s at most) until one of the files in the server's directory has
# a whole line: the access log line of a request just answered.
sub log_line {
    my ($s, @files) = @_;
    @files = ('access.log') unless @files;
    my $t = time + 5;
    sleep 0.02 until grep({ (Luxd::_slurp($s->dir . "/$_") // '') =~ /\n/ } @files) || time > $t;
}

my $big = 'b' x (8 * 1048576);

# The client's address in the access log for a request whose X-Real-IP
# names 192.0.2.1.
sub logged_client {
    my ($s) = @_;
    $s->get('/', 'X-Real-IP' => '192.0.2.1');
    log_line($s);
    (split / /, (split /\n/, $s->access_log)[-1] // '')[0] // 'not logged';
}

# What `luxd -T` prints for a config, with the temporary directory as DIR
# and without the timing line, so two configs compare by what they mean.
sub dump_of {
    my ($text) = @_;
    my $dir = abs_path(tempdir('luxd-XXXXXX', TMPDIR => 1, CLEANUP => 1));
    my $file = "$dir/luxd.lua";
    (my $t = $text) =~ s/\$DIR\b/$dir/g;
    open my $fh, '>', $file or die "$file: $!";
    print $fh $t;
    close $fh;
    my ($rc, $out) = Luxd::run_luxd('-T', '-c', $file);
    $out =~ s/\Q$dir\E/DIR/g;
    $out =~ s/^luxd: configuration .* is ok .*\n//m;
    return $rc == 0 ? $out : "-T failed: $out";
}
my $UP = qq{upstream "u" { "127.0.0.1:1" }\nupstream "w" { "127.0.0.1:2" }\n};
sub up { my ($set) = @_; qq{upstream "u" {\n  "127.0.0.1:1",\n  $set\n}\n} . vh('proxy = "u"') }

# --- the proofs -----------------------------------------------------------
# a / b: config text of the two servers (vh() and loc() build a vhost);
# server_a / server_b: server { } keys; req: request() options for the
# default probe, or probe => sub ($server) returning an observation;
# dump => 1: a and b are compared by their `luxd -T` output, and a's must
# match want (the proxy keys, until the proxy handler answers requests).
# TLS: certificates made for this run; what a handshake on the server's
# port shows of the certificate it got.
my ($TLS) = TLSTest::certs('localhost', 'other.test');
my $TLS_LISTEN = { listen => \'{ { "127.0.0.1:$PORT", tls = true } }' };
sub tls_of { my ($c) = @_; TLSTest::tls_lua($TLS->{$c}) }
sub tls_subject { my $s = shift; TLSTest::subject(TLSTest::s_client($s->port, servername => 'localhost')) || 'refused' }
sub tls_protocol { my $s = shift; TLSTest::s_client($s->port, servername => 'localhost') =~ /^(New, .*)$/m ? $1 : 'refused' }
# Whether a connection that sends half a record header is closed within 3 s.
sub stalled_handshake {
    my $s = shift;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $s->port) or return 'no connection';
    syswrite $c, "\x16\x03";
    my $rin = '';
    vec($rin, fileno($c), 1) = 1;
    return select($rin, undef, undef, 3) > 0 && !sysread($c, my $buf, 1) ? 'closed' : 'open';
}
my $OTHER = 'vhost "other.test" { root = "$DIR/www", ' . tls_of('other.test') . " }\n";

my %PROOF = (
    'listen.tls' => { a => vh(tls_of('localhost')), b => vh(tls_of('localhost')), server_a => $TLS_LISTEN },
    'vhost.tls' => { a => vh(tls_of('localhost')) . $OTHER, b => vh('') . $OTHER, server_a => $TLS_LISTEN,
                     server_b => $TLS_LISTEN, probe => \&tls_subject },
    'tls.cert' => { a => vh(tls_of('localhost')), b => vh(tls_of('other.test')), server_a => $TLS_LISTEN,
                    server_b => $TLS_LISTEN, probe => \&tls_subject },
    'tls.key' => { direct => 1,
                   probe => sub { (Luxd::check_config(vh(tls_of('localhost'))))[1] },
                   probe_b => sub { (Luxd::check_config(vh(
                       TLSTest::tls_lua({ cert => $TLS->{localhost}{cert}, key => $TLS->{'other.test'}{key} }))))[1] } },
    # Client certificates (t/270 tests them in full): whether a handshake
    # without one succeeds.
    'tls.client_ca' => { direct => 1,
                   probe => sub { (Luxd::check_config(vh(tls_of('localhost') =~ s/ \}$/, client_ca = "\/nonexistent" }/r)))[1] },
                   probe_b => sub { (Luxd::check_config(vh(tls_of('localhost'))))[1] } },
    'tls.client_verify' => { a => vh(tls_of('localhost') =~ s/ \}$/, client_ca = "$TLS->{localhost}{cert}", client_verify = "optional" }/r),
                   b => vh(tls_of('localhost') =~ s/ \}$/, client_ca = "$TLS->{localhost}{cert}" }/r),
                   server_a => $TLS_LISTEN, server_b => $TLS_LISTEN,
                   probe => sub { my $s = shift; my ($o, $rc) = $s->curl('-k', '-s', 'https://127.0.0.1:' . $s->port . '/index.html'); "$rc $o" } },
    # server { tls = { ... } } (t/266 and t/267 test them in full).
    'server.tls' => { a => vh(tls_of('localhost')), b => vh(tls_of('localhost')),
                      server_a => { %$TLS_LISTEN, tls => \'{ protocols = "TLSv1.2" }' }, server_b => $TLS_LISTEN,
                      probe => \&tls_protocol },
    'server_tls.protocols' => { a => vh(tls_of('localhost')), b => vh(tls_of('localhost')),
                      server_a => { %$TLS_LISTEN, tls => \'{ protocols = "TLSv1.2" }' },
                      server_b => { %$TLS_LISTEN, tls => \'{ handshake_timeout = 10 }' }, probe => \&tls_protocol },
    'server_tls.ciphers' => { a => vh(tls_of('localhost')), b => vh(tls_of('localhost')),
                      server_a => { %$TLS_LISTEN, tls => \'{ protocols = "TLSv1.2", ciphers = "ECDHE-ECDSA-CHACHA20-POLY1305" }' },
                      server_b => { %$TLS_LISTEN, tls => \'{ protocols = "TLSv1.2" }' }, probe => \&tls_protocol },
    'server_tls.handshake_timeout' => { a => vh(tls_of('localhost')), b => vh(tls_of('localhost')),
                      server_a => { %$TLS_LISTEN, tls => \'{ handshake_timeout = 0.3 }' }, server_b => $TLS_LISTEN,
                      probe => \&stalled_handshake },
    'server_tls.ticket_key_file' => { direct => 1,
                      probe => sub { (Luxd::check_config(qq{server { tls = { ticket_key_file = "$0" } }\n} . vh('')))[1] },
                      probe_b => sub { (Luxd::check_config(qq{server { tls = { handshake_timeout = 1 } }\n} . vh('')))[1] } },
    # real_ip and the PROXY protocol (t/125-t/128 test them in full): the
    # address the access log shows for a request naming another client.
    'server.real_ip' => { server_a => { real_ip => \'{ from = "127.0.0.1", header = "X-Real-IP" }' }, probe => \&logged_client },
    'vhost.real_ip'  => { a => vh('real_ip = { from = "127.0.0.1", header = "X-Real-IP" }'), probe => \&logged_client },
    'real_ip.from'   => {
        server_a => { real_ip => \'{ from = "127.0.0.1", header = "X-Real-IP" }' },
        server_b => { real_ip => \'{ from = "10.0.0.0/8", header = "X-Real-IP" }' }, probe => \&logged_client,
    },
    'real_ip.header' => {
        server_a => { real_ip => \'{ from = "127.0.0.1", header = "X-Real-IP" }' },
        server_b => { real_ip => \'{ from = "127.0.0.1" }' }, probe => \&logged_client,
    },
    # HTTP/2 (t/290 and t/291 test it in full): what a client that speaks
    # only h2 by prior knowledge gets.
    'listen.http2' => {
        server_a => { listen => \'{ { "127.0.0.1:$PORT", http2 = true } }' },
        probe => sub {
            my $s = shift;
            my ($o, $rc) = $s->curl('--http2-prior-knowledge', '-o', '/dev/null', '-w', '%{http_version} %{http_code}',
                                    'http://127.0.0.1:' . $s->port . '/index.html');
            "$rc $o";
        },
    },
    'listen.proxy_protocol' => {
        server_a => { listen => \'{ { "127.0.0.1:$PORT", proxy_protocol = true } }', real_ip => \'{ from = "127.0.0.1" }' },
        server_b => { real_ip => \'{ from = "127.0.0.1" }' },
        probe => sub {
            my $s = shift;
            $s->raw("PROXY TCP4 192.0.2.1 127.0.0.1 1 80\r\nGET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
            log_line($s);
            (split / /, (split /\n/, $s->access_log)[-1] // '')[0] // 'not logged';
        },
    },

    # server { }
    'server.listen' => {
        server_a => { listen => ['127.0.0.1:$PORT', '[::1]:$PORT'] },
        probe => sub { my $c = eval { $_[0]->connect(host => '::1') }; $c ? 'on ::1' : 'not on ::1' },
    },
    'server.workers' => { server_a => { workers => 3 }, probe => \&threads },
    'server.user' => {
        # No pid file: it is written after the switch to nobody, who may not
        # write into the test's directory.
        server_a => { user => 'nobody', pid_file => undef }, server_b => { pid_file => undef },
        probe => sub { my $s = shift; open my $f, '<', "/proc/" . $s->pid . "/status"; my ($u) = join('', <$f>) =~ /^Uid:\s+(\d+)/m; "uid $u" },
    },
    'server.pid_file' => { server_a => { pid_file => '$DIR/other.pid' }, probe => sub { -e $_[0]->dir . '/other.pid' ? 'other.pid' : 'none' } },
    # luxd answers before it logs "started" (the workers' threads come
    # after the first listener): wait for the file to have a line.
    'server.error_log' => { server_a => { error_log => '$DIR/other.log' }, probe => sub {
        # (without the key, its lines go to error.log: done once "started" is there)
        my $f = $_[0]->dir . '/other.log';
        my $t = time + 10;
        sleep 0.05 until -s $f || $_[0]->error_log =~ /\bstarted: generation/ || time > $t;
        -s $f ? 'other.log' : 'none' } },
    # The port answers once the sockets listen, before "started" is logged:
    # give the info lines time to come (a slow start, e.g. under TSan).
    'server.error_log_level' => { server_a => { error_log_level => 'error' }, probe => sub {
        my $t = time + 5;
        sleep 0.05 until $_[0]->error_log =~ /\[info\]/ || time > $t;
        $_[0]->error_log =~ /\[info\]/ ? 'info lines' : 'none' } },
    'server.access_log' => {
        server_a => { access_log => \'false' },
        probe => sub { my $s = shift; $s->get('/'); log_line($s); -s $s->dir . '/access.log' ? 'logged' : 'not logged' },
    },
    'server.access_log_buffer' => { server_b => { access_log_buffer => 65536 }, probe => \&logged_at_once },
    'server.request_id_header' => {
        server_a => { request_id_header => 'X-Proof' },
        probe => sub { my $v = $_[0]->get('/')->{headers}{'x-proof'}; defined $v && $v =~ /^[0-9a-f]{32}$/ ? 'an id' : 'none' },
    },
    'server.keepalive_timeout' => {
        server_a => { keepalive_timeout => 0.3 },
        probe => sub { my $c = $_[0]->connect; $c->send(Luxd::request()); $c->response; closes_within($c, 5) },
    },
    'server.keepalive_requests' => {
        server_a => { keepalive_requests => 2 },
        probe => sub { my $c = $_[0]->connect; $c->send(Luxd::request() x 3); scalar(my @r = $c->responses(3)) . ' answers' },
    },
    'server.tcp_nodelay'  => { server_a => { tcp_nodelay => \'false' },  probe => sub { traced({ tcp_nodelay => \'false' }) } , direct => 1,
                               probe_b => sub { traced({}) } },
    'server.defer_accept' => { server_a => { defer_accept => \'false' }, probe => sub { traced({ defer_accept => \'false' }) }, direct => 1,
                               probe_b => sub { traced({}) } },
    'server.backlog'      => { probe => sub { traced({ backlog => 17 }) }, direct => 1, probe_b => sub { traced({}) } },
    'server.header_timeout' => {
        server_a => { header_timeout => 0.3 },
        probe => sub { my $c = $_[0]->connect; $c->send("GET / HTTP/1.1\r\n"); closes_within($c, 5) },
    },
    'server.body_timeout' => {
        server_a => { body_timeout => 0.3 },
        probe => sub { my $c = $_[0]->connect; $c->send("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nx"); closes_within($c, 5) },
    },
    'server.send_timeout' => {
        server_a => { send_timeout => 0.5 }, files => { 'www/big.bin' => $big },
        probe => sub {
            my $c = $_[0]->connect(rcvbuf => 4096);
            $c->send(Luxd::request(path => '/big.bin', close => 1));
            sleep 2;
            # 8 MiB through a 4 KiB window: slow on a busy machine; a cut
            # connection ends at once.
            length($c->read_all(60)) > length($big) ? 'whole file' : 'cut';
        },
    },
    'server.max_header_bytes' => { server_a => { max_header_bytes => 300 }, req => { headers => [ 'X-Pad' => 'p' x 400 ] } },
    'server.max_body_bytes'   => { server_a => { max_body_bytes => 10 }, req => { body => 'y' x 20 } },
    'server.max_connections' => {
        server_a => { max_connections => 1 },
        probe => sub {
            my $s = shift;
            my $c1 = $s->connect; $c1->send(Luxd::request()); $c1->response;
            my $c2 = $s->connect; $c2->send(Luxd::request(close => 1));
            my $r = $c2->response(timeout => 5);
            $r ? "second: $r->{status}" : 'second: not served';
        },
    },
    'server.vhost_dir' => {
        server_a => { vhost_dir => '$DIR/sites' }, files => { 'sites/foo.test/index.html' => "foo site\n" },
        req => { host => 'foo.test' },
    },
    'server.drain_timeout' => {
        server_a => { drain_timeout => 0.3 }, files => { 'www/big.bin' => $big },
        probe => sub {
            my $s = shift;
            my $c = $s->connect(rcvbuf => 4096);
            $c->send(Luxd::request(path => '/big.bin'));
            $c->fill(1);
            $s->signal('TERM');
            # 0.3 s against the default 30 s: 12 s tells them apart even
            # under a sanitizer on a loaded machine, where 2 s did not under
            # TSan and 5 s did not under ASan (whose exit, leak check
            # included, took longer while the other core was busy).
            my $st = $s->wait_exit(12);
            $c->close;
            defined $st ? 'stopped' : 'still draining';
        },
    },
    'server.policy_budget' => {
        a => vh('policy = function(r) local x = 0 for i = 1, 300000 do x = x + i end end'),
        b => vh('policy = function(r) local x = 0 for i = 1, 300000 do x = x + i end end'),
        server_a => { policy_budget => 1000 },
    },
    'server.mime_types' => {
        server_a => { mime_types => '$DIR/proof.types' }, files => { 'proof.types' => "text/x-proof txt\n" },
        path => '/g.txt',
    },
    'server.policy_memory' => {
        a => vh('policy = function(r) local t = {} for i = 1, 64 do t[i] = string.rep("m", 65536) .. i end end'),
        b => vh('policy = function(r) local t = {} for i = 1, 64 do t[i] = string.rep("m", 65536) .. i end end'),
        server_a => { policy_memory => 1048576 },
    },

    # server { access_log = { path, format, escape } }
    'access_log.path' => {
        server_a => { access_log => { path => '$DIR/other-access.log' } },
        probe => sub { my $s = shift; $s->get('/'); log_line($s, 'other-access.log'); -s $s->dir . '/other-access.log' ? 'other' : 'none' },
    },
    'access_log.escape' => {
        server_a => { access_log => { path => '$DIR/access.log', format => '$http_user_agent', escape => 'json' } },
        server_b => { access_log => { path => '$DIR/access.log', format => '$http_user_agent' } },
        probe => sub {
            my $s = shift; $s->get('/', 'User-Agent' => "\xc3\xa9\""); log_line($s);
            (split /\n/, $s->access_log)[-1] // '';
        },
    },
    'access_log.format' => {
        server_a => { access_log => { path => '$DIR/access.log', format => 'common' } },
        probe => sub {
            my $s = shift; $s->get('/'); log_line($s);
            my ($l) = (split /\n/, $s->access_log)[-1] // '';
            $l =~ s/\[[^]]*\]/[TIME]/; $l;
        },
    },

    # upstream "name" { }: each key against its default, in -T.
    # upstream { tls } (t/271 proxies through each against a TLS backend).
    'upstream.tls'               => { dump => 1, a => up('tls = true'), b => up(''), want => qr/^    tls: certificate checked for 127\.0\.0\.1 against the system's CAs/m },
    'upstream_tls.verify'        => { dump => 1, a => up('tls = { verify = false }'), b => up('tls = true'), want => qr/^    tls: certificate not checked \(verify = false\)/m },
    'upstream_tls.ca'            => { dump => 1, a => up(qq{tls = { ca = "$TLS->{localhost}{cert}" }}), b => up('tls = true'), want => qr/^    tls: .* against \Q$TLS->{localhost}{cert}\E/m },
    'upstream_tls.name'          => { dump => 1, a => up('tls = { name = "be.test" }'), b => up('tls = true'), want => qr/^    tls: certificate checked for be\.test .*, sent as SNI$/m },
    'upstream.keepalive'         => { dump => 1, a => up('keepalive = 7'),         b => up(''), want => qr/^  keepalive 7,/m },
    'upstream.keepalive_timeout' => { dump => 1, a => up('keepalive_timeout = 2'), b => up(''), want => qr/keepalive_timeout 2000ms/ },
    'upstream.connect_timeout'   => { dump => 1, a => up('connect_timeout = 1.5'), b => up(''), want => qr/connect_timeout 1500ms/ },
    'upstream.read_timeout'      => { dump => 1, a => up('read_timeout = 3'),      b => up(''), want => qr/read_timeout 3000ms/ },
    'upstream.send_timeout'      => { dump => 1, a => up('send_timeout = 4'),      b => up(''), want => qr/^  connect.*send_timeout 4000ms/m },
    'upstream.max_fails'         => { dump => 1, a => up('max_fails = 0'),         b => up(''), want => qr/max_fails 0,/ },
    'upstream.fail_timeout'      => { dump => 1, a => up('fail_timeout = 30'),     b => up(''), want => qr/fail_timeout 30000ms/ },
    'upstream.max_header_bytes'  => { dump => 1, a => up('max_header_bytes = 4096'), b => up(''), want => qr/^  max_fails.*max_header_bytes 4096$/m },
    # upstream "name" { { "host:port", weight = N } }: the server's own key.
    'upstream_server.weight' => { dump => 1, a => qq{upstream "u" { { "127.0.0.1:1", weight = 3 } }\n} . vh('proxy = "u"'),
                                  b => up(''), want => qr/^  server 127\.0\.0\.1:1 weight 3 /m },

    # access rules: the same rule with another value of the key.
    'rule.prefix' => { a => vh('access = { deny { prefix = "/ind" } }'),        b => vh('access = { deny { prefix = "/zzz" } }'),     req => { path => '/index.html' } },
    'rule.suffix' => { a => vh('access = { deny { suffix = ".html" } }'),       b => vh('access = { deny { suffix = ".css" } }'),     req => { path => '/index.html' } },
    'rule.regex'  => { a => vh('access = { deny { regex = "^/i.*x" } }'),       b => vh('access = { deny { regex = "^/z" } }'),       req => { path => '/index.html' } },
    'rule.method' => { a => vh('access = { deny { method = "GET" } }'),         b => vh('access = { deny { method = "POST" } }'),     req => { path => '/index.html' } },
    'rule.from'   => { a => vh('access = { deny { from = "127.0.0.1" } }'),     b => vh('access = { deny { from = "10.0.0.0/8" } }'), req => { path => '/index.html' } },
    'rule.all'    => { a => vh('access = { deny { all = true } }'),             b => vh('access = { deny { prefix = "/zzz" } }'),     req => { path => '/index.html' } },
    'rule.status' => { a => vh('access = { deny { all = true, status = 451 } }'), b => vh('access = { deny { all = true } }'),        req => { path => '/index.html' } },

    # redirect = { { regex, target, status = N } }: the entry's own key.
    'redirect.status' => { a => vh('redirect = { { "^/r$", "/x", status = 308 } }'), b => vh('redirect = { { "^/r$", "/x" } }'), req => { path => '/r' } },

    # vhost "name" { } (and, unless given below, location "/l/" { })
    'vhost.aliases' => {
        a => qq{vhost "main.test" { root = "\$DIR/www", aliases = { "alias.test" } }\nvhost "o.test" { default = true, root = "\$DIR/other" }\n},
        b => qq{vhost "main.test" { root = "\$DIR/www" }\nvhost "o.test" { default = true, root = "\$DIR/other" }\n},
        req => { host => 'alias.test' },
    },
    'vhost.default' => {
        a => qq{vhost "main.test" { root = "\$DIR/www", default = true }\n},
        b => qq{vhost "main.test" { root = "\$DIR/www" }\n},
        req => { host => 'unknown.test' },
    },
    # A vhost's own log takes its requests from the server's.
    'vhost.access_log' => {
        a => vh('access_log = "$DIR/vhost.log"'), b => vh(''),
        probe => sub { my $s = shift; $s->get('/'); log_line($s, 'vhost.log', 'access.log');
            join ' ', map { -s $s->dir . "/$_" ? "$_ logged" : "$_ empty" } qw(vhost.log access.log) },
    },
    'vhost.root'          => { set => 'root = "$DIR/other"', path => '/', files => { 'other/l/index.html' => "other l\n" } },
    'vhost.index'         => { set => 'index = { "home.html" }', path => '/' },
    'vhost.try_files'     => { set => 'try_files = { "$uri", "/home.html" }', path => '/missing' },
    'vhost.etag'          => { set => 'etag = false', path => '/index.html' },
    'vhost.last_modified' => { set => 'last_modified = false', path => '/index.html' },
    'vhost.cache_control' => { set => 'cache_control = "max-age=7"', path => '/index.html' },
    'vhost.headers'       => { set => 'headers = { ["X-Proof"] = "1" }', path => '/index.html' },
    'vhost.gzip_static'   => { set => 'gzip_static = true', path => '/g.txt', headers => [ 'Accept-Encoding' => 'gzip' ] },
    'vhost.dir_listing'   => { set => 'dir_listing = true', path => '/d/' },
    'vhost.access'        => { set => 'access = { deny { prefix = "/" } }', path => '/index.html' },
    'vhost.rewrite'       => { set => 'rewrite = { { "^/r$", "/index.html" } }', path => '/r' },
    'vhost.redirect'      => { set => 'redirect = { { "^/r$", "/x" } }', path => '/r' },
    'vhost.policy'        => { set => 'policy = function(r) return 418 end', path => '/index.html' },
    'vhost.error_pages'   => { set => 'error_pages = { [404] = "/e404.html" }', path => '/missing' },
    'vhost.status'        => { set => 'status = true', path => '/index.html' },
    # Only luxd-test has the test handler: the normal binary refuses the
    # key (t/79), luxd-test accepts it, and t/74..t/78 prove what it does.
    'vhost.test_handler'    => { test_only => vh("\n  test_handler = true,\n"), line => 2 },
    'location.test_handler' => { test_only => loc("\n  test_handler = true,\n"), line => 2 },
    # The proxy keys: -T shows the value reach the vhost's or the location's
    # site (a location's against one that inherits the vhost's).
    'vhost.proxy'            => { dump => 1, a => $UP . vh('proxy = "u"'), b => $UP . vh('fallback = "u"'), want => qr/^vhost .*\n(?:  .*\n)*  proxy u$/m },
    'vhost.fallback'         => { dump => 1, a => $UP . vh('fallback = "u"'), b => $UP . vh('proxy = "u"'), want => qr/^vhost .*\n(?:  .*\n)*  fallback u$/m },
    'vhost.proxy_host'       => { dump => 1, a => $UP . vh('proxy = "u", proxy_host = "app.test:81"'), b => $UP . vh('proxy = "u"'), want => qr/^  proxy_host app\.test:81, proxy_via on$/m },
    'vhost.proxy_headers'    => { dump => 1, a => $UP . vh('proxy = "u", proxy_headers = { ["X-A"] = "1", ["X-B"] = "" }'), b => $UP . vh('proxy = "u"'), want => qr/^  proxy_headers:\n    X-A: 1\n    X-B \(removed\)$/m },
    'vhost.proxy_via'        => { dump => 1, a => $UP . vh('proxy = "u", proxy_via = false'), b => $UP . vh('proxy = "u"'), want => qr/^  proxy_host \(the client's Host\), proxy_via off$/m },
    'vhost.proxy_underscores'    => { dump => 1, a => $UP . vh('proxy = "u", proxy_underscores = true'), b => $UP . vh('proxy = "u"'), want => qr/^  proxy_underscores on /m },
    'location.proxy_underscores' => { dump => 1, a => $UP . vh('proxy = "u", location "/l/" { proxy_underscores = true }'), b => $UP . vh('proxy = "u", location "/l/" { }'), want => qr/^    proxy_underscores on /m },
    'location.proxy'         => { dump => 1, a => $UP . vh('proxy = "u", location "/l/" { proxy = "w" }'), b => $UP . vh('proxy = "u", location "/l/" { }'), want => qr/^  location \/l\/ .*\n(?:    .*\n)*    proxy w$/m },
    'location.fallback'      => { dump => 1, a => $UP . vh('fallback = "u", location "/l/" { fallback = false }'), b => $UP . vh('fallback = "u", location "/l/" { }'), want => qr/^  location \/l\/ .*\n(?:    (?!fallback ).*\n)*+(?!    )/m },
    'location.proxy_host'    => { dump => 1, a => $UP . vh('proxy = "u", proxy_host = "a.test", location "/l/" { proxy_host = false }'), b => $UP . vh('proxy = "u", proxy_host = "a.test", location "/l/" { }'), want => qr/^    proxy_host \(the client's Host\), proxy_via on$/m },
    'location.proxy_headers' => { dump => 1, a => $UP . vh('proxy = "u", proxy_headers = { ["X-A"] = "1" }, location "/l/" { proxy_headers = { ["X-C"] = "3" } }'), b => $UP . vh('proxy = "u", proxy_headers = { ["X-A"] = "1" }, location "/l/" { }'), want => qr/^    proxy_headers:\n      X-C: 3$/m },
    'location.proxy_via'     => { dump => 1, a => $UP . vh('proxy = "u", location "/l/" { proxy_via = false }'), b => $UP . vh('proxy = "u", location "/l/" { }'), want => qr/^    proxy_host .*, proxy_via off$/m },

    # follow_symlinks: two entries, because the probe makes the link itself
    # (a derived location proof would not move it under /l/), and a/b both
    # set the key, as the tests may run as root and "owner" would follow a
    # link to a root-owned file.
    'vhost.follow_symlinks' => {
        a => vh('follow_symlinks = true'), b => vh('follow_symlinks = false'),
        probe => sub { my $s = shift; symlink "$s->{dir}/other/index.html", "$s->{dir}/www/ln.html";
                       answer($s, path => '/ln.html') } },
    'location.follow_symlinks' => {
        a => loc('follow_symlinks = true'), b => loc('follow_symlinks = false'),
        probe => sub { my $s = shift; mkdir "$s->{dir}/www/l"; symlink "$s->{dir}/other/index.html", "$s->{dir}/www/l/ln.html";
                       answer($s, path => '/l/ln.html') } },
);

# --- the walk -------------------------------------------------------------
# SCHEMA_KEYS=regex walks only the keys it matches (while writing a proof).
for my $key (sort keys %schema) {
    next if $ENV{SCHEMA_KEYS} && $key !~ /$ENV{SCHEMA_KEYS}/;
    my ($block, $name) = split /\./, $key;
    my $p = $PROOF{$key};
    if (!$p && $block eq 'location' && $PROOF{"vhost.$name"} && $PROOF{"vhost.$name"}{set}) {
        # The vhost's proof, one level down: under location "/l/".
        my $v = $PROOF{"vhost.$name"};
        my %files = %{ $v->{files} || {} };
        for my $f (keys %BASE_FILES) { (my $l = $f) =~ s{^([^/]+)/}{$1/l/}; $files{$l} = $BASE_FILES{$f} }
        $p = { %$v, a => loc($v->{set}), b => loc(''), files => \%files, path => '/l' . $v->{path} };
    } elsif ($p && $p->{set}) {
        $p = { %$p, a => vh($p->{set}), b => vh('') };
    }
    if (!$p) {
        fail "$key: no proof that it works or is refused; add one to %PROOF in t/61-schema-keys.t";
        next;
    }
    subtest $key => sub {
        if ($p->{test_only}) {
            my ($rc, $out) = Luxd::check_config($p->{test_only});
            is $rc, 1, "$key: luxd -t refuses it";
            like $out, qr/luxd\.lua:$p->{line}: .*\Q$name\E.* exists only in luxd-test/, "$key: at file:line";
            local $ENV{LUXD_BIN} = ($ENV{LUXD_BIN} || 'build/luxd') . '-test';
            ($rc, $out) = Luxd::check_config($p->{test_only});
            is $rc, 0, "$key: luxd-test accepts it" or diag $out;
            return;
        }
        if ($p->{dump}) {
            my ($a, $b) = (dump_of($p->{a}), dump_of($p->{b}));
            unlike $a, qr/^-T failed/, "$key: luxd -T accepts it" or diag $a;
            like $a, $p->{want}, "$key: -T shows it" or diag $a;
            unlike $b, $p->{want}, "$key: and not without it" or diag $b;
            isnt $a, $b, "$key: setting it changes the compiled configuration" or diag "both: $a";
            return;
        }
        my %q = %$p;
        $q{req} //= { path => $p->{path}, headers => $p->{headers} || [] } if $p->{path};
        $q{a} //= vh('');
        $q{b} //= vh('');
        my ($a, $b);
        if ($p->{direct}) {
            ($a, $b) = ($p->{probe}->(), $p->{probe_b}->());
        } else {
            $a = observe(\%q, 'a');
            $b = observe(\%q, 'b');
        }
        unlike $a, qr/^did not start/, "$key: a server with it starts";
        isnt $a, $b, "$key: setting it changes what luxd does" or diag "both: $a";
    };
}
for my $key (sort keys %PROOF) {
    ok exists $schema{$key}, "%PROOF entry $key is a key of the schema";
}
done_testing;
