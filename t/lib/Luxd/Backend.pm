package Luxd::Backend;

use strict;
use warnings;
use Carp qw(croak);
use Digest::SHA qw(sha1);
use Errno qw(EINTR EAGAIN EWOULDBLOCK ECONNRESET);
use Fcntl qw(:flock O_WRONLY O_APPEND O_CREAT);
use File::Temp qw(tempdir);
use IO::Select;
use IO::Socket::INET;
use IO::Socket::IP;
use IO::Socket::UNIX;
use MIME::Base64 qw(encode_base64);
use POSIX ();
use Scalar::Util qw(weaken);
use Socket qw(SOCK_STREAM SOL_SOCKET SO_LINGER IPPROTO_TCP TCP_NODELAY MSG_PEEK MSG_DONTWAIT SHUT_WR);
use Storable qw(nfreeze thaw);
use Time::HiRes qw(time sleep);
use Luxd ();

use Exporter 'import';
our @EXPORT_OK = qw(body body_piece hdr proxy_front upstream_idle raw_backend kill_backend);

=head1 NAME

Luxd::Backend - a misbehaving HTTP/1.1 backend for the proxy tests

=head1 SYNOPSIS

  use lib 't/lib';
  use Luxd; use Luxd::Backend qw(body hdr);
  my $be = Luxd::Backend->start;                 # TCP on 127.0.0.1, a free port
  my $ub = Luxd::Backend->start(unix => 1);      # a unix socket in a temp dir
  my $s  = Luxd->new(config => 'upstream "b" { "' . $be->addr . '" } ...');
  ... requests through luxd ...
  my @r = $be->requests;                         # what the backend received
  is hdr($r[0], 'X-Forwarded-For'), '127.0.0.1';
  is $r[1]{conn}, $r[0]{conn}, 'the pooled connection was reused';
  $be->stop;                                     # also from DESTROY / END

=head1 DESCRIPTION

A real server on loopback, forked from the test: C<start> binds the socket
in the test process (so it accepts as soon as C<start> returns), then forks
the server, which forks once more per accepted connection, so slow answers
on different connections never wait for each other. Both kinds of process
die with their parent (PR_SET_PDEATHSIG, and the server also polls
getppid), and C<stop> kills the whole process group; a test that dies or is
killed leaves nothing behind. Forked processes leave through POSIX::_exit,
so the test's END blocks and temp-dir clean-up run only in the test.

Every connection gets a serial number (1, 2, ... in accept order) and every
request on it a number (1 for the first); every response head carries
C<X-Conn: N>, C<X-Req: K> and C<X-Backend: NAME>, so a test can tell
whether the proxy reused a pooled connection and which backend answered.
(Exceptions: /http09 has no head, and 1xx interim heads carry none.)

Keep-alive as in HTTP/1.1: the connection stays open after a response
unless the request said C<Connection: close> or was HTTP/1.0 without
C<Connection: keep-alive> (then the response says C<Connection: close>), or
the behaviour below closes it. Pipelined requests are answered in order.

Request bodies (Content-Length or chunked, with trailers) are read whole
before the answer. C<Expect: 100-continue> on a request with a body is
honoured on every path (C<100 Continue> is sent before the body is read),
except /expect-ignore. A request with both Content-Length and
Transfer-Encoding, with differing Content-Lengths, a request line that is
not C<METHOD TARGET HTTP/x.y> or a bare LF in the head is answered 400 and
the connection closed (and recorded with C<bad>).

=head2 Constructor and methods

=over

=item start(%options)

C<unix =E<gt> 1>: listen on a unix socket (C<path>) instead of TCP.
C<port =E<gt> P>: this TCP port (e.g. to restart a backend where it was);
default a free one from Luxd::free_port. C<name =E<gt> 'a'>: the
X-Backend value (default the address). C<close_idle =E<gt> 1>: after every
response, close the connection (FIN) at once although the response did not
say so: the proxy's pooled connection is dead the moment it is idle (the
idle-close race, lost or won depending on whether the proxy notices the
EOF). C<drop_reused =E<gt> 1> (or C<'reset'>): a request that is not the
first on its connection is read whole, recorded with C<dropped =E<gt> 1>,
and the connection closed (or reset) without an answer: the idle-close race
lost for certain, so an idempotent request must be retried on a fresh
connection and any other must not be.

=item port, path, addr, name, pid, dir

C<addr> is what an upstream entry takes: C<127.0.0.1:PORT> or
C<unix:PATH>.

=item log

Every record, in order. Three types (C<type>):

C<accept>: C<conn>, C<peer>, C<time>; written when the connection is
accepted.

C<request>: written when the request (with its body) has been read and
before any byte of the answer is sent, so a test that has the response
also has the record. C<conn>, C<req> (K), C<method>, C<target> (as
received), C<path> (target without the query), C<version> (C<HTTP/1.1>),
C<request_line>, C<head> (the request line and header lines exactly as
received, without the final CRLF CRLF), C<header_lines> (the header lines
exactly as received, split on CRLF), C<headers> (C<[name, value]> pairs:
name as received, value without surrounding blanks; a line that is not
C<name: value> is in C<header_lines> only, and counted in C<bad_lines>),
C<body> (the body, de-chunked), C<body_raw> (the body bytes as on the
wire), C<chunked> (0/1), C<trailers> (raw trailer lines), C<expect> (1 when
the request carried C<Expect: 100-continue>), C<sent_100> (1 when the
backend answered it with 100 Continue), C<dropped>, C<bad> (why it was
answered 400), C<time>.

C<close>, written when the connection is gone (when the backend closes
it, after the peer's EOF or 1 s of draining what the peer still sends, so
wait for it with C<wait_close>): C<conn>, C<requests> (how many were read), C<how>: C<peer-eof>
(the peer closed, between requests or during a slow answer), C<peer-reset>,
C<write-failed>, C<server> (the backend closed it, as the behaviour said),
C<reset> (the backend reset it), C<idle-close> (/close-after or
C<close_idle>); C<during> (the path being answered, if any), C<sent> (body
bytes of that answer sent), C<discarded> (bytes that arrived after the
backend had decided to close), C<echoed> (/ws), C<time>.

=item requests, connections, closes

The C<request>, C<accept> and C<close> records.

=item conns_used, closed_by_peer

How many connections carried a request, and how many the peer (the
proxy) closed (C<close> records with C<how> C<peer-eof>): a pooled
connection reused, or one the proxy let go.

=item proxy_front($be, $upstream_keys, status => 1)

A luxd whose only vhost proxies everything to the backend's address,
with C<$upstream_keys> in the upstream's table (C<"keepalive = 2">); with
C<status>, C</status> is luxd's status endpoint (see C<upstream_idle>).

=item raw_backend($code), kill_backend($b)

A scripted backend for what the table of paths cannot say: every accepted
connection is handled by C<$code-E<gt>($socket, $n)> in a child of its own
(C<$n>: the connection's number). Returns C<[pid, addr]>; C<kill_backend>
stops it and its children.

=item upstream_idle($luxd)

The idle upstream connections luxd's status endpoint counts (all
servers), from a front made with C<status =E<gt> 1>.

=item wait_requests($n, $timeout) / wait_close($conn, $timeout)

Polls the log until there are at least $n request records (returns them,
or the ones so far after $timeout seconds, default 5), or a close record
for connection $conn (returns it, or undef).

=item errors

What the backend's processes wrote to stderr: Perl errors and warnings.
C<stop> fails the test when there are any.

=item stop

Kills the backend's processes (TERM, then KILL after 3 s) and reaps the
server. Called from DESTROY and END if the test forgets.

=back

=head2 Functions

C<body($n)>: the deterministic body of /ok/N and the others: a run of
printable bytes with a period of 1021 (a prime, so a piece lost or
repeated at any buffer-sized boundary shows). C<body_piece($off, $len)>:
bytes $off .. $off+$len-1 of the same stream. C<hdr($record, $name)>: the
values of that request header (case-insensitive) as a list, or joined with
", " in scalar context (undef when absent).

=head2 Behaviours, by request path

Bodies below are C<body(N)> unless said otherwise; "keep-alive" means the
connection stays open for the next request (so a proxy that wrongly pools
it is caught by X-Conn). Unknown paths: 404 with C<not found\n>. A HEAD
request gets the head without the body, except on /head-body.

=over

=item /ok/N

200, Content-Length N, body(N). Keep-alive.

=item /chunked/N/M

200, Transfer-Encoding: chunked, N bytes of body(N) in chunks of M bytes
(the last may be shorter), then the last chunk. With C<?trailer> it
announces C<Trailer: X-Trailer> and sends C<X-Trailer: t> after the last
chunk. Keep-alive.

=item /close/N

200, neither Content-Length nor chunked, C<Connection: close>, body(N),
then the backend closes: the body ends with the connection.

=item /slow/N/MS, /slow/N/MS/P

200, Content-Length N; the head at once, then the body in pieces of P
bytes (default N/10 rounded up), each after a pause of MS milliseconds.
A peer that closes meanwhile ends it (close record C<peer-eof>, C<during>,
C<sent>).

=item /sleep/MS

Waits MS milliseconds (watching for the peer to close), then 200 with
C<slept MS\n>. For read_timeout and the client-went-away cases.

=item /reset-mid-body/N

200, Content-Length N, the first int(N/2) bytes, a pause of 100 ms, then
a reset (SO_LINGER 0 and close).

=item /lie-short/N

200, Content-Length N, only int(N/2) bytes, then the backend closes (FIN).

=item /lie-long/N

200, Content-Length N, body(N), and in the same write a whole second
response (C<HTTP/1.1 200 OK>, C<X-Smuggled: yes>, body C<smuggled\n>) that
nobody asked for. Keep-alive: a proxy that reuses the connection would
hand the smuggled response to the next request.

=item /two-cl

200 with C<Content-Length: 5> and C<Content-Length: 10>, then 10 bytes of
body. Keep-alive.

=item /cl-te

200 with C<Content-Length: 5> and C<Transfer-Encoding: chunked>, the body
C<hello cl-te\n> chunked (23 bytes on the wire). Keep-alive.

=item /bare-cr

200 whose head has a line ending in a bare CR: C<X-Bare: one\rX-Two:
two\r\n>. Content-Length 3, C<ok\n>. Keep-alive.

=item /obs-fold

200 with a folded header: C<X-Fold: first\r\n second\r\n>. Content-Length
3, C<ok\n>. Keep-alive.

=item /space-colon

200 with C<X-Space : v> (a blank before the colon). Content-Length 3,
C<ok\n>. Keep-alive.

=item /huge-headers/N

200 whose head (status line to the empty line included) is exactly N
bytes when N >= 200 (padded with C<X-Pad-NNNN: aaa...> lines of about 1000
bytes), Content-Length 3, C<ok\n>. Keep-alive.

=item /http2

The status line C<HTTP/2.0 200 OK>, then an HTTP/1.1-style head and body
(Content-Length 3, C<ok\n>). Keep-alive.

=item /http09

No status line and no head: C<hello http/0.9\n>, then close.

=item /head-body

200, Content-Length 16, body(16) - also to HEAD, where the body must not be
there. Keep-alive.

=item /204-body

204 without Content-Length, then C<body after 204\n> anyway. Keep-alive.

=item /304-body

304 with Content-Length 15 (allowed: the size the resource would have),
then C<body after 304\n> (15 bytes) anyway. Keep-alive.

=item /100

C<HTTP/1.1 100 Continue>, 50 ms pause, then 200 with C<after 100\n>,
whether or not the request asked.

=item /103

C<HTTP/1.1 103 Early Hints> with C<Link: </style.css>; rel=preload;
as=style>, 50 ms pause, then 200 with the same Link and C<after 103\n>.

=item /status/NNN

That status (200-599) with C<status NNN\n> (no body for 204, 304).
Keep-alive. Other NNN: 400.

=item /echo

200, Content-Length, the body is the request body as received (de-chunked),
byte for byte. Keep-alive.

=item /expect, /expect/NNN, /expect-ignore

/expect: like /echo but the body is C<expect=E sent_100=S body=LEN\n> (E:
whether the request asked for 100-continue, S: whether it was sent).
/expect/NNN: when the request asks for 100-continue, answers NNN at once
without reading the body and closes (C<Connection: close>); otherwise
reads the body and answers NNN. /expect-ignore: never sends 100 Continue,
reads the body (whenever it comes) and answers like /expect.

=item /slow-upload/P/MS

Reads the request body P bytes at a time with MS ms between reads
(backpressure on the sender), then 200 with C<got LEN\n>.

=item /close-after

200 with C<close-after\n>, keep-alive; then, if no next request starts
within 50 ms, the backend closes the idle connection (close record
C<idle-close>): the idle-close race.

=item /set-cookie

200 with three Set-Cookie fields, one with a comma in its Expires date:
C<a=1; Path=/>, C<b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT>,
C<c=3; HttpOnly>. Content-Length 3, C<ok\n>. Keep-alive.

=item /hop

200 with the hop-by-hop fields a proxy must remove: C<Connection: X-Foo,
Keep-Alive>, C<X-Foo: hop>, C<Keep-Alive: timeout=5, max=100>,
C<Upgrade: h2c>, C<Trailer: X-Trailer>, C<Proxy-Authenticate: Basic
realm="hop">, C<Proxy-Connection: keep-alive>, C<TE: trailers>, and one
it must keep, C<X-End-To-End: kept>. Content-Length 3, C<ok\n>. Keep-alive.

=item /ws

A request with C<Upgrade: websocket> (and C<upgrade> in Connection) gets
C<101 Switching Protocols> (C<Upgrade: websocket>, C<Connection: Upgrade>,
C<Sec-WebSocket-Accept> computed from C<Sec-WebSocket-Key> when given);
then every byte received is echoed back as is (no frame parsing) until the
peer closes, then the backend closes (close record C<echoed>). Without the
upgrade fields: 426.

=back

=cut

$SIG{PIPE} = 'IGNORE';

our %LIVE;    # pid => weak ref, for END

my $PERIOD = 1021;
my $PAT = join '', map { chr(0x21 + ($_ * 37 + ($_ >> 3)) % 94) } 0 .. $PERIOD - 1;
my $SLICE = 65536;
my $BIG = $PAT x (int(($SLICE + $PERIOD) / $PERIOD) + 1);

sub body_piece {
    my ($off, $len) = @_;
    my $out = '';
    while ($len > 0) {
        my $k = $len > $SLICE ? $SLICE : $len;
        $out .= substr($BIG, $off % $PERIOD, $k);
        $off += $k;
        $len -= $k;
    }
    return $out;
}

sub body { body_piece(0, $_[0]) }

sub hdr {
    my ($rec, $name) = @_;
    my @v = map { $_->[1] } grep { lc $_->[0] eq lc $name } @{ $rec->{headers} || [] };
    return @v if wantarray;
    return @v ? join(', ', @v) : undef;
}

# ---- the test side ------------------------------------------------------

sub start {
    my ($class, %o) = @_;
    my $self = bless { opt => \%o }, $class;
    $self->{dir} = tempdir('luxd-be-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
    $self->{log_file} = "$self->{dir}/backend.log";
    $self->{err_file} = "$self->{dir}/backend.err";
    open my $fh, '>', $self->{log_file} or croak "create $self->{log_file}: $!";
    close $fh;
    my $lsock;
    if ($o{unix}) {
        $self->{path} = "$self->{dir}/be.sock";
        $lsock = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $self->{path}, Listen => 1024)
          or croak "listen on $self->{path}: $!";
        $self->{addr} = "unix:$self->{path}";
    } else {
        # The socket is bound here, in the test, so the backend accepts
        # (into the backlog) as soon as start() returns.
        for my $try (1 .. 20) {
            my $port = $o{port} // Luxd::free_port();
            $lsock = IO::Socket::IP->new(
                LocalHost => '127.0.0.1', LocalPort => $port, Proto => 'tcp', Listen => 1024, ReuseAddr => 1,
            ) and do { $self->{port} = $port; last };
            croak "listen on 127.0.0.1:$port: $!" if $o{port} && $try >= 20;
            sleep 0.05 if $o{port};
        }
        croak "no free port for the backend" unless $lsock;
        $self->{addr} = "127.0.0.1:$self->{port}";
    }
    $self->{name} = $o{name} // $self->{addr};
    my $ppid = $$;
    my $pid = fork // croak "fork: $!";
    if ($pid == 0) {
        my $ok = eval { _server_main($self, $lsock, $ppid); 1 };
        print STDERR "backend: $@" unless $ok;
        POSIX::_exit($ok ? 0 : 1);
    }
    setpgid($pid);
    close $lsock;
    $self->{pid} = $pid;
    $self->{owner} = $$;
    $LIVE{$pid} = $self;
    weaken($LIVE{$pid});
    return $self;
}

sub setpgid { my ($pid) = @_; POSIX::setpgid($pid, $pid) }

sub port { $_[0]{port} }
sub path { $_[0]{path} }
sub addr { $_[0]{addr} }
sub name { $_[0]{name} }
sub pid  { $_[0]{pid} }
sub dir  { $_[0]{dir} }

sub errors {
    my ($self) = @_;
    open my $fh, '<', $self->{err_file} or return '';
    local $/;
    return <$fh> // '';
}

sub log {
    my ($self) = @_;
    open my $fh, '<:raw', $self->{log_file} or return ();
    flock $fh, LOCK_SH;
    local $/;
    my $all = <$fh> // '';
    close $fh;
    my @out;
    my $p = 0;
    while ($p < length $all) {
        my $nl = index($all, "\n", $p);
        last if $nl < 0;
        my $len = substr($all, $p, $nl - $p);
        last if length($all) < $nl + 1 + $len;
        push @out, thaw(substr($all, $nl + 1, $len));
        $p = $nl + 1 + $len;
    }
    return @out;
}

sub requests    { grep { $_->{type} eq 'request' } $_[0]->log }
sub connections { grep { $_->{type} eq 'accept' } $_[0]->log }
sub closes      { grep { $_->{type} eq 'close' } $_[0]->log }
sub conns_used { my %c = map { $_->{conn} => 1 } $_[0]->requests; scalar keys %c }
sub closed_by_peer { scalar grep { $_->{how} eq 'peer-eof' } $_[0]->closes }

sub proxy_front {
    my ($be, $up, %o) = @_;
    my $a = ref $be ? $be->addr : $be;
    my $status = $o{status} ? 'location "/status" { status = true }, ' : '';
    Luxd->new(config => qq{upstream "b" { "$a", $up }\n}
          . qq{vhost "l" { default = true, ${status}location "/" { proxy = "b" } }\n},
              $o{server} ? (server => $o{server}) : ());
}

# A scripted backend: every accepted connection is handled by $code in a
# child process of its own ($code gets the socket and the connection's
# number). Returns [pid, addr]; kill_backend stops it.
sub raw_backend {
    my ($code) = @_;
    my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 128, ReuseAddr => 1)
      or die "listen: $!";
    my $pid = fork // die "fork: $!";
    if ($pid == 0) {
        setpgrp(0, 0);
        $SIG{CHLD} = 'IGNORE';
        my $n = 0;
        while (1) {
            my $c = $l->accept;
            if (!$c) { next if $!{EINTR}; last }
            $n++;
            my $k = fork;
            if (defined $k && $k == 0) {
                close $l;
                eval { $code->($c, $n) };    # never back into the test's code
                POSIX::_exit(0);
            }
            close $c;
        }
        POSIX::_exit(0);
    }
    my $addr = '127.0.0.1:' . $l->sockport;
    close $l;
    return [$pid, $addr];
}

sub kill_backend {
    my ($b) = @_;
    kill 'KILL', -$b->[0];
    kill 'KILL', $b->[0];
    waitpid $b->[0], 0;
}

sub upstream_idle {
    my ($s) = @_;
    my $b = $s->get('/status?format=prometheus')->{body} // '';
    my $n = 0;
    $n += $1 while $b =~ /^luxd_upstream_idle_connections\{[^}]*\} (\d+)$/mg;
    $n;
}

sub wait_requests {
    my ($self, $n, $timeout) = @_;
    my $deadline = time + ($timeout // 5);
    while (1) {
        my @r = $self->requests;
        return @r if @r >= $n || time >= $deadline;
        sleep 0.02;
    }
}

sub wait_close {
    my ($self, $conn, $timeout) = @_;
    my $deadline = time + ($timeout // 5);
    while (1) {
        my ($c) = grep { $_->{conn} == $conn } $self->closes;
        return $c if $c;
        return undef if time >= $deadline;
        sleep 0.02;
    }
}

sub alive {
    my ($self) = @_;
    return 0 if $self->{stopped};
    return waitpid($self->{pid}, POSIX::WNOHANG()) == 0;
}

sub stop {
    my ($self) = @_;
    # Only the process that started it: a child the test forked (and that
    # exits through END) must not take the backend down.
    return 1 if $self->{stopped} || !$self->{pid} || $$ != $self->{owner};
    $self->{stopped} = 1;
    my $pid = $self->{pid};
    kill 'TERM', -$pid or kill 'TERM', $pid;
    my $deadline = time + 3;
    my $r = 0;
    while (($r = waitpid($pid, POSIX::WNOHANG())) == 0 && time < $deadline) { sleep 0.01 }
    # The connection processes die with the server (PDEATHSIG); make sure.
    kill 'KILL', -$pid;
    waitpid($pid, 0) if $r == 0;
    delete $LIVE{$pid};
    my $err = $self->errors;
    if (length $err) {
        Test::More::ok(0, "backend $self->{name}: no Perl errors") or Test::More::diag($err);
        return 0;
    }
    return 1;
}

sub DESTROY {
    my ($self) = @_;
    local ($@, $!, $?);
    $self->stop if $self->{pid} && !$self->{stopped};
}

END {
    my $rc = $?;
    for my $pid (keys %LIVE) {
        my $s = $LIVE{$pid} or next;
        $s->stop unless $s->{stopped};
    }
    $? = $rc;
}

# ---- the server side (forked) -------------------------------------------

my $PR_SET_PDEATHSIG = 1;
my $SYS_prctl = eval { require 'syscall.ph'; &SYS_prctl() } // 157;

# Dies with the parent: the test (for the server) or the server (for a
# connection's process).
sub _die_with_parent {
    my ($ppid) = @_;
    syscall($SYS_prctl, $PR_SET_PDEATHSIG, POSIX::SIGTERM() + 0, 0, 0, 0);
    POSIX::_exit(0) if getppid() != $ppid;    # it died before prctl
}

my ($LOG_FH, $SELF);

# Each process opens the log itself: flock locks belong to the open file,
# so processes sharing one would not exclude each other.
sub _open_log {
    close $LOG_FH if $LOG_FH;
    sysopen $LOG_FH, $SELF->{log_file}, O_WRONLY | O_APPEND | O_CREAT or die "open log: $!";
    binmode $LOG_FH;
}

# One record: its length, a newline, the Storable blob (binary-safe and
# fast for large bodies).
sub _record {
    my (%r) = @_;
    $r{time} //= time;
    my $blob = nfreeze(\%r);
    my $out = length($blob) . "\n" . $blob;
    flock $LOG_FH, LOCK_EX;
    for (my $off = 0; $off < length $out;) {
        my $n = syswrite $LOG_FH, $out, length($out) - $off, $off;
        if (!defined $n) { next if $! == EINTR; die "write log: $!" }
        $off += $n;
    }
    flock $LOG_FH, LOCK_UN;
}

sub _server_main {
    my ($self, $lsock, $ppid) = @_;
    $SELF = $self;
    POSIX::setpgid(0, 0);
    _die_with_parent($ppid);
    open STDIN, '<', '/dev/null';
    open STDOUT, '>', '/dev/null';
    open STDERR, '>>', $self->{err_file};
    # Drop the test's other descriptors (its client sockets above all: a
    # copy held here would keep a connection open the test closed). They
    # become /dev/null rather than closed, so their numbers are not reused
    # under the Perl handles that still name them.
    my %keep = map { $_ => 1 } 0, 1, 2, fileno($lsock);
    if (opendir my $d, '/proc/self/fd') {
        my @fds = grep { /^\d+$/ && !$keep{$_} } readdir $d;
        closedir $d;
        my $null = POSIX::open('/dev/null', POSIX::O_RDWR());
        for my $fd (@fds) { POSIX::dup2($null, $fd) if $fd != $null }
    }
    _open_log();
    $SIG{CHLD} = 'IGNORE';    # connection processes are reaped by the kernel
    $SIG{PIPE} = 'IGNORE';
    $SIG{TERM} = sub { POSIX::_exit(0) };
    my $me = $$;
    my $sel = IO::Select->new($lsock);
    my $serial = 0;
    while (1) {
        POSIX::_exit(0) if getppid() != $ppid;
        next unless $sel->can_read(0.2);
        my $c = $lsock->accept or next;
        $serial++;
        my $peer = $self->{path} ? 'unix' : $c->peerhost . ':' . $c->peerport;
        _record(type => 'accept', conn => $serial, peer => $peer);
        my $kid = fork;
        if (!defined $kid) { warn "backend: fork: $!\n"; close $c; next }
        if ($kid == 0) {
            close $lsock;
            # The parent's TERM handler (_exit) stays: setting 'DEFAULT'
            # here raced a TERM already pending (the group kill of stop()),
            # which Perl then dispatched to a sub named DEFAULT and printed
            # "SIGTERM handler "DEFAULT" not defined" (t/93 failed on it).
            _die_with_parent($me);
            _open_log();
            my $ok = eval { _serve(_conn($c, $serial)); 1 };
            print STDERR "backend conn $serial: $@" unless $ok;
            POSIX::_exit(0);
        }
        close $c;
    }
}

sub _conn {
    my ($sock, $serial) = @_;
    setsockopt($sock, IPPROTO_TCP, TCP_NODELAY, 1) unless $SELF->{path};
    return { sock => $sock, conn => $serial, buf => '', k => 0, opt => $SELF->{opt} };
}

# -- connection I/O --

sub _finish {
    my ($st, $how, %x) = @_;
    return if $st->{finished}++;
    _record(type => 'close', conn => $st->{conn}, requests => $st->{k}, how => $how, %x);
}

# Reads more bytes into the buffer; 0 on EOF or error (with {why} set).
sub _fill {
    my ($st, $max) = @_;
    while (1) {
        my $n = sysread($st->{sock}, my $chunk, $max // 65536);
        if (!defined $n) {
            next if $! == EINTR;
            $st->{why} = $! == ECONNRESET ? 'peer-reset' : "read-error: $!";
            return 0;
        }
        if ($n == 0) { $st->{why} = 'peer-eof'; return 0 }
        $st->{buf} .= $chunk;
        return $n;
    }
}

sub _send {
    my ($st, $bytes) = @_;
    my $off = 0;
    while ($off < length $bytes) {
        my $n = syswrite($st->{sock}, $bytes, length($bytes) - $off, $off);
        if (!defined $n) {
            next if $! == EINTR;
            $st->{why} = 'write-failed';
            return 0;
        }
        $off += $n;
    }
    return 1;
}

# Sends $len bytes of body() from $off; counts them in {sent}.
sub _send_body {
    my ($st, $off, $len) = @_;
    while ($len > 0) {
        my $k = $len > $SLICE ? $SLICE : $len;
        _send($st, body_piece($off, $k)) or return 0;
        $st->{sent} += $k;
        $off += $k;
        $len -= $k;
    }
    return 1;
}

# Sleeps $secs, but returns 0 at once when the peer closes meanwhile.
sub _pause {
    my ($st, $secs) = @_;
    my $deadline = time + $secs;
    my $sel = IO::Select->new($st->{sock});
    while ((my $left = $deadline - time) > 0) {
        next unless $sel->can_read($left);
        my $r = recv($st->{sock}, my $peek, 1, MSG_PEEK | MSG_DONTWAIT);
        if (!defined $r) {
            next if $! == EINTR || $! == EAGAIN;
            $st->{why} = 'peer-reset';
            return 0;
        }
        if ($peek eq '') { $st->{why} = 'peer-eof'; return 0 }
        # Bytes of a next request: leave them; just wait the time out.
        sleep $left if ($left = $deadline - time) > 0;
        return 1;
    }
    return 1;
}

# Closes after FIN: reads (and counts) what the peer still sends until its
# EOF or 1 s, so a reset does not destroy the answer in flight.
sub _close {
    my ($st, $how, %x) = @_;
    shutdown($st->{sock}, SHUT_WR);
    my $discarded = length $st->{buf};
    my $sel = IO::Select->new($st->{sock});
    my $deadline = time + 1;
    while ((my $left = $deadline - time) > 0) {
        last unless $sel->can_read($left);
        my $n = sysread($st->{sock}, my $junk, 65536);
        last unless $n;
        $discarded += $n;
    }
    $x{discarded} = $discarded if $discarded;
    _finish($st, $how, %x);
    close $st->{sock};
}

sub _reset {
    my ($st, %x) = @_;
    setsockopt($st->{sock}, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0));
    close $st->{sock};
    _finish($st, 'reset', %x);
}

# -- requests --

# The next request, its body read; undef at EOF (after _finish).
sub _read_request {
    my ($st) = @_;
    my $end;
    while (($end = index($st->{buf}, "\r\n\r\n")) < 0) {
        last if $st->{buf} =~ /(?<!\r)\n\r?\n/;    # a bare-LF head: refused below
        if (length $st->{buf} > 1 << 20) { last }
        unless (_fill($st)) {
            _finish($st, $st->{why}, length $st->{buf} ? (partial => $st->{buf}) : ());
            return undef;
        }
    }
    $st->{k}++;
    $st->{sent} = 0;
    my %q = (type => 'request', conn => $st->{conn}, req => $st->{k}, body => '', body_raw => '',
             chunked => 0, expect => 0, sent_100 => 0, bad_lines => 0);
    if ($end < 0 || substr($st->{buf}, 0, $end) =~ /(?<!\r)\n/) {
        $q{head} = $st->{buf};
        $q{bad} = length $st->{buf} > 1 << 20 ? 'head over 1 MiB' : 'bare LF in the head';
        $st->{buf} = '';
        return \%q;
    }
    my $head = substr($st->{buf}, 0, $end);
    substr($st->{buf}, 0, $end + 4) = '';
    my ($line, @lines) = split /\r\n/, $head, -1;
    @q{qw(head request_line header_lines headers)} = ($head, $line, \@lines, []);
    if ($line =~ m{^([!#\$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) (HTTP/\d\.\d)$}) {
        @q{qw(method target version)} = ($1, $2, $3);
        ($q{path} = $2) =~ s/\?.*//s;
    } else {
        $q{bad} = 'bad request line';
        return \%q;
    }
    for my $l (@lines) {
        if ($l =~ /^([^:\s]+):[ \t]*(.*?)[ \t]*$/s) { push @{ $q{headers} }, [$1, $2] }
        else { $q{bad_lines}++ }
    }
    my @cl = hdr(\%q, 'Content-Length');
    my $te = hdr(\%q, 'Transfer-Encoding');
    my $conn = lc(hdr(\%q, 'Connection') // '');
    $q{keepalive} = $q{version} eq 'HTTP/1.1' ? $conn !~ /\bclose\b/ : $conn =~ /\bkeep-alive\b/;
    $q{expect} = lc(hdr(\%q, 'Expect') // '') eq '100-continue' ? 1 : 0;
    if (defined $te && @cl) { $q{bad} = 'Content-Length and Transfer-Encoding'; return \%q }
    my %dist = map { $_ => 1 } @cl;
    if (keys %dist > 1 || (@cl && $cl[0] !~ /^\d+$/)) { $q{bad} = 'bad Content-Length'; return \%q }
    if (defined $te && $te !~ /(?:^|,)\s*chunked\s*$/i) { $q{bad} = 'Transfer-Encoding not chunked'; return \%q }
    my $has_body = defined $te || (@cl && $cl[0] > 0);
    if ($has_body && $q{expect}) {
        if ($q{path} =~ m{^/expect/(\d{3})$}) { $q{early} = $1; return \%q }
        if ($q{path} ne '/expect-ignore') {
            _send($st, "HTTP/1.1 100 Continue\r\n\r\n") or do { _finish($st, $st->{why}); return undef };
            $q{sent_100} = 1;
        }
    }
    my ($piece, $delay) = $q{path} =~ m{^/slow-upload/(\d+)/(\d+)$} ? ($1 || 1, $2 / 1000) : (undef, 0);
    # $n bytes of body, from the buffer and the socket; for /slow-upload
    # $piece at a time with a pause between (the socket is not read
    # meanwhile, so the sender feels it once the buffers are full).
    my $take = sub {
        my ($n) = @_;
        my $b = '';
        while (length $b < $n) {
            if (!length $st->{buf}) { _fill($st, $piece) or return undef }
            my $k = $n - length $b;
            $k = length $st->{buf} if $k > length $st->{buf};
            $k = $piece if $piece && $k > $piece;
            $b .= substr($st->{buf}, 0, $k, '');
            sleep $delay if $piece && length $b < $n;
        }
        $q{body_raw} .= $b;
        return $b;
    };
    my $line_of = sub {    # one CRLF-terminated line of the chunked body
        my $i;
        while (($i = index($st->{buf}, "\r\n")) < 0) { _fill($st) or return undef }
        return $take->($i + 2);
    };
    my $incomplete = sub { $q{incomplete} = 1; _record(%q); _finish($st, $st->{why}, during => $q{path}); undef };
    if (defined $te) {
        $q{chunked} = 1;
        while (1) {
            my $sz = $line_of->() // return $incomplete->();
            unless ($sz =~ /^([0-9A-Fa-f]+)[ \t;\r]/) { $q{bad} = 'bad chunk size'; return \%q }
            my $n = hex $1;
            if ($n == 0) {
                my @tr;
                while (1) {
                    my $t = $line_of->() // return $incomplete->();
                    last if $t eq "\r\n";
                    push @tr, substr($t, 0, -2);
                }
                $q{trailers} = \@tr;
                last;
            }
            my $d = $take->($n + 2) // return $incomplete->();
            if (substr($d, -2) ne "\r\n") { $q{bad} = 'chunk not followed by CRLF'; return \%q }
            $q{body} .= substr($d, 0, -2);
        }
    } elsif (@cl && $cl[0] > 0) {
        $q{body} = $take->($cl[0]) // return $incomplete->();
    }
    return \%q;
}

my %REASON = (
    100 => 'Continue', 101 => 'Switching Protocols', 103 => 'Early Hints', 200 => 'OK', 201 => 'Created',
    202 => 'Accepted', 204 => 'No Content', 206 => 'Partial Content', 301 => 'Moved Permanently',
    302 => 'Found', 304 => 'Not Modified', 307 => 'Temporary Redirect', 400 => 'Bad Request',
    401 => 'Unauthorized', 403 => 'Forbidden', 404 => 'Not Found', 405 => 'Method Not Allowed',
    413 => 'Content Too Large', 417 => 'Expectation Failed', 426 => 'Upgrade Required',
    429 => 'Too Many Requests', 500 => 'Internal Server Error', 502 => 'Bad Gateway',
    503 => 'Service Unavailable', 504 => 'Gateway Timeout',
);

# The fields every answer carries.
sub _ids { my ($st) = @_; "X-Conn: $st->{conn}\r\nX-Req: $st->{k}\r\nX-Backend: $SELF->{name}\r\n" }

# A status line plus the id fields plus $extra (raw lines), plus
# Connection: close when the request did not keep the connection alive.
sub _head {
    my ($st, $q, $status, $extra) = @_;
    my $h = "HTTP/1.1 $status " . ($REASON{$status} // 'Status') . "\r\n" . _ids($st) . ($extra // '');
    $h .= "Connection: close\r\n" unless $q->{keepalive};
    return $h . "\r\n";
}

# A whole ordinary answer with Content-Length; no body to HEAD.
sub _answer {
    my ($st, $q, $status, $body, $extra) = @_;
    my $nobody = $status == 204 || $status == 304;
    my $h = _head($st, $q, $status, ($nobody ? '' : "Content-Type: text/plain\r\nContent-Length: " . length($body) . "\r\n") . ($extra // ''));
    _send($st, $h . ($q->{method} eq 'HEAD' || $nobody ? '' : $body)) or return 'gone';
    return 'keep';
}

# Sends N bytes of body() with a Content-Length head.
sub _answer_n {
    my ($st, $q, $n, $extra) = @_;
    _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: $n\r\n" . ($extra // ''))) or return 'gone';
    return 'keep' if $q->{method} eq 'HEAD';
    _send_body($st, 0, $n) or return 'gone';
    return 'keep';
}

my $OK3 = "Content-Type: text/plain\r\nContent-Length: 3\r\n";

# Each handler: ($st, $q, @captures) -> 'keep' (the connection goes on,
# unless the request ends it), 'close' (the backend closes, FIN), 'gone'
# (the peer went away: closed, recorded) or 'done' (closed, recorded).
my @ROUTES = (
    [qr{^/ok/(\d+)$} => sub { _answer_n($_[0], $_[1], $_[2]) }],
    [qr{^/chunked/(\d+)/(\d+)$} => sub {
        my ($st, $q, $n, $m) = @_;
        $m ||= 1;
        my $tr = $q->{target} =~ /\?trailer/;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                                       . ($tr ? "Trailer: X-Trailer\r\n" : ''))) or return 'gone';
        return 'keep' if $q->{method} eq 'HEAD';
        for (my $off = 0; $off < $n; $off += $m) {
            my $k = $n - $off < $m ? $n - $off : $m;
            _send($st, sprintf("%x\r\n", $k) . body_piece($off, $k) . "\r\n") or return 'gone';
            $st->{sent} += $k;
        }
        _send($st, "0\r\n" . ($tr ? "X-Trailer: t\r\n" : '') . "\r\n") or return 'gone';
        'keep';
    }],
    [qr{^/close/(\d+)$} => sub {
        my ($st, $q, $n) = @_;
        $q->{keepalive} = 0;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\n")) or return 'gone';
        return 'gone' if $q->{method} ne 'HEAD' && !_send_body($st, 0, $n);
        'close';
    }],
    [qr{^/slow/(\d+)/(\d+)(?:/(\d+))?$} => sub {
        my ($st, $q, $n, $ms, $p) = @_;
        $p ||= int(($n + 9) / 10) || 1;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: $n\r\n")) or return 'gone';
        return 'keep' if $q->{method} eq 'HEAD';
        for (my $off = 0; $off < $n; $off += $p) {
            _pause($st, $ms / 1000) or return 'gone';
            _send_body($st, $off, $n - $off < $p ? $n - $off : $p) or return 'gone';
        }
        'keep';
    }],
    [qr{^/sleep/(\d+)$} => sub {
        my ($st, $q, $ms) = @_;
        _pause($st, $ms / 1000) or return 'gone';
        _answer($st, $q, 200, "slept $ms\n");
    }],
    [qr{^/reset-mid-body/(\d+)$} => sub {
        my ($st, $q, $n) = @_;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: $n\r\n")) or return 'gone';
        _send_body($st, 0, int($n / 2)) or return 'gone';
        sleep 0.1;
        _reset($st, during => $q->{path}, sent => $st->{sent});
        'done';
    }],
    [qr{^/lie-short/(\d+)$} => sub {
        my ($st, $q, $n) = @_;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: $n\r\n")) or return 'gone';
        _send_body($st, 0, int($n / 2)) or return 'gone';
        'close';
    }],
    [qr{^/lie-long/(\d+)$} => sub {
        my ($st, $q, $n) = @_;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: $n\r\n") . body($n)
                   . "HTTP/1.1 200 OK\r\nX-Smuggled: yes\r\nContent-Length: 9\r\n\r\nsmuggled\n") or return 'gone';
        'keep';
    }],
    [qr{^/two-cl$} => sub {
        my ($st, $q) = @_;
        _send($st, _head($st, $q, 200, "Content-Length: 5\r\nContent-Length: 10\r\n") . body(10)) or return 'gone';
        'keep';
    }],
    [qr{^/cl-te$} => sub {
        my ($st, $q) = @_;
        _send($st, _head($st, $q, 200, "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
                   . "c\r\nhello cl-te\n\r\n0\r\n\r\n") or return 'gone';
        'keep';
    }],
    [qr{^/bare-cr$} => sub { _send($_[0], _head($_[0], $_[1], 200, "X-Bare: one\rX-Two: two\r\n$OK3") . "ok\n") ? 'keep' : 'gone' }],
    [qr{^/obs-fold$} => sub { _send($_[0], _head($_[0], $_[1], 200, "X-Fold: first\r\n second\r\n$OK3") . "ok\n") ? 'keep' : 'gone' }],
    [qr{^/space-colon$} => sub { _send($_[0], _head($_[0], $_[1], 200, "X-Space : v\r\n$OK3") . "ok\n") ? 'keep' : 'gone' }],
    [qr{^/huge-headers/(\d+)$} => sub {
        my ($st, $q, $n) = @_;
        my $base = _head($st, $q, 200, $OK3);
        my $room = $n - length $base;    # bytes of pad lines wanted
        my @pad;
        for (my $i = 0; $room > 0; $i++) {
            my $pre = sprintf 'X-Pad-%04d: ', $i;
            my $len = $room >= 2000 ? 1000 : $room > 1000 ? int($room / 2) : $room;
            $len = length($pre) + 3 if $len < length($pre) + 3;    # a short tail: the head comes out longer
            push @pad, $pre . ('a' x ($len - length($pre) - 2)) . "\r\n";
            $room -= $len;
        }
        _send($st, _head($st, $q, 200, $OK3 . join('', @pad)) . "ok\n") ? 'keep' : 'gone';
    }],
    [qr{^/http2$} => sub { _send($_[0], "HTTP/2.0 200 OK\r\n" . _ids($_[0]) . "$OK3\r\nok\n") ? 'keep' : 'gone' }],
    [qr{^/http09$} => sub { _send($_[0], "hello http/0.9\n"); 'close' }],
    [qr{^/head-body$} => sub {
        my ($st, $q) = @_;
        _send($st, _head($st, $q, 200, "Content-Type: text/plain\r\nContent-Length: 16\r\n") . body(16)) ? 'keep' : 'gone';
    }],
    [qr{^/204-body$} => sub { _send($_[0], _head($_[0], $_[1], 204) . "body after 204\n") ? 'keep' : 'gone' }],
    [qr{^/304-body$} => sub {
        _send($_[0], _head($_[0], $_[1], 304, "Content-Length: 15\r\n") . "body after 304\n") ? 'keep' : 'gone';
    }],
    [qr{^/100$} => sub {
        my ($st, $q) = @_;
        _send($st, "HTTP/1.1 100 Continue\r\n\r\n") or return 'gone';
        sleep 0.05;
        _answer($st, $q, 200, "after 100\n");
    }],
    [qr{^/103$} => sub {
        my ($st, $q) = @_;
        my $link = "Link: </style.css>; rel=preload; as=style\r\n";
        _send($st, "HTTP/1.1 103 Early Hints\r\n$link\r\n") or return 'gone';
        sleep 0.05;
        _answer($st, $q, 200, "after 103\n", $link);
    }],
    [qr{^/status/(\d{3})$} => sub {
        my ($st, $q, $s) = @_;
        return _answer($st, $q, 400, "status $s is not 200-599\n") if $s < 200 || $s > 599;
        _answer($st, $q, $s, "status $s\n");
    }],
    [qr{^/echo$} => sub { _answer($_[0], $_[1], 200, $_[1]{body}) }],
    [qr{^/(?:expect|expect-ignore|slow-upload/\d+/\d+)$} => sub {
        my ($st, $q) = @_;
        return _answer($st, $q, 200, 'got ' . length($q->{body}) . "\n") if $q->{path} =~ /^\/slow/;
        _answer($st, $q, 200, "expect=$q->{expect} sent_100=$q->{sent_100} body=" . length($q->{body}) . "\n");
    }],
    [qr{^/expect/(\d{3})$} => sub {
        my ($st, $q, $s) = @_;
        $q->{keepalive} = 0 if $q->{early};    # its body was never read
        my $r = _answer($st, $q, $s, "status $s\n");
        return $q->{early} ? 'close' : $r;
    }],
    [qr{^/close-after$} => sub {
        my ($st, $q) = @_;
        my $r = _answer($st, $q, 200, "close-after\n");
        return $r unless $r eq 'keep' && $q->{keepalive};
        return 'keep' if length $st->{buf} || IO::Select->new($st->{sock})->can_read(0.05);
        _close($st, 'idle-close');
        'done';
    }],
    [qr{^/set-cookie$} => sub {
        _send($_[0], _head($_[0], $_[1], 200, "Set-Cookie: a=1; Path=/\r\n"
              . "Set-Cookie: b=2; Expires=Wed, 21 Oct 2037 07:28:00 GMT\r\nSet-Cookie: c=3; HttpOnly\r\n$OK3") . "ok\n")
          ? 'keep' : 'gone';
    }],
    [qr{^/hop$} => sub {
        _send($_[0], _head($_[0], $_[1], 200, "Connection: X-Foo, Keep-Alive\r\nX-Foo: hop\r\n"
              . "Keep-Alive: timeout=5, max=100\r\nUpgrade: h2c\r\nTrailer: X-Trailer\r\n"
              . "Proxy-Authenticate: Basic realm=\"hop\"\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
              . "X-End-To-End: kept\r\n$OK3") . "ok\n") ? 'keep' : 'gone';
    }],
    [qr{^/ws$} => sub {
        my ($st, $q) = @_;
        my $up = lc(hdr($q, 'Upgrade') // '');
        my $cn = lc(hdr($q, 'Connection') // '');
        return _answer($st, $q, 426, "websocket upgrade wanted\n") unless $up eq 'websocket' && $cn =~ /\bupgrade\b/;
        my $key = hdr($q, 'Sec-WebSocket-Key');
        my $acc = defined $key
          ? 'Sec-WebSocket-Accept: ' . encode_base64(sha1($key . '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'), '') . "\r\n" : '';
        _send($st, "HTTP/1.1 101 Switching Protocols\r\n" . _ids($st)
                   . "Upgrade: websocket\r\nConnection: Upgrade\r\n$acc\r\n") or return 'gone';
        my $echoed = 0;
        while (1) {
            if (length $st->{buf}) {
                my $b = $st->{buf};
                $st->{buf} = '';
                _send($st, $b) or last;
                $echoed += length $b;
            }
            _fill($st) or last;
        }
        shutdown($st->{sock}, SHUT_WR);
        close $st->{sock};
        _finish($st, $st->{why} // 'peer-eof', during => '/ws', echoed => $echoed);
        'done';
    }],
);

sub _serve {
    my ($st) = @_;
    my $opt = $st->{opt};
    while (1) {
        my $q = _read_request($st) or return;
        if ($opt->{drop_reused} && $q->{req} > 1) {
            $q->{dropped} = 1;
            _record(%$q);
            if ($opt->{drop_reused} eq 'reset') { _reset($st, during => $q->{path}) }
            else { _close($st, 'server', during => $q->{path}) }
            return;
        }
        _record(%$q);
        if ($q->{bad}) {
            $q->{keepalive} = 0;
            $q->{method} //= 'GET';
            _answer($st, $q, 400, "bad request: $q->{bad}\n");
            return _close($st, 'server', during => 'bad request');
        }
        my $r;
        for my $route (@ROUTES) {
            next unless $q->{path} =~ $route->[0];
            $r = $route->[1]->($st, $q, @{^CAPTURE});
            last;
        }
        $r //= _answer($st, $q, 404, "not found\n");
        if ($r eq 'gone') { _finish($st, $st->{why} // 'write-failed', during => $q->{path}, sent => $st->{sent}); return }
        return if $r eq 'done';
        return _close($st, 'server', during => $q->{path}) if $r eq 'close';
        return _close($st, 'server') unless $q->{keepalive};
        return _close($st, 'idle-close') if $opt->{close_idle};
    }
}

1;
