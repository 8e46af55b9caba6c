# The read buffer follows the limits in force, not those of the moment the
# connection was accepted (issue 8 #19):
# - a keep-alive connection opened before a reload that raised
#   max_header_bytes took headers only up to the old size, and stalled until
#   408 on one between the old and the new;
# - a body that started exactly at the end of the read buffer stalled the
#   same way: no byte of it could be read.
# Both at exactly the limit and one byte past it. max_header_bytes counts the
# request line and the headers up to the end of the last field (the CRLF
# CRLF after it is not counted).
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use lib 't/lib';
use Luxd;

my $OLD = 1024;
my $NEW = 16384;

my $s = Luxd->new(
    files  => { 'www/index.html' => "index\n" },
    # Timeouts of 10 s: the stall this test is about lasted until 408, so
    # the 5 s bounds below still tell it from a slow run.
    server => { max_header_bytes => $OLD, header_timeout => 10, body_timeout => 10,
                keepalive_timeout => 60 },
);
my ($dir, $port) = ($s->dir, $s->port);

# A request whose bytes up to the end of its last field number exactly $n.
sub req_of {
    my ($n, %o) = @_;
    my $head = "GET /index.html HTTP/1.1\r\nHost: localhost\r\n";
    $head .= "Content-Length: " . length($o{body}) . "\r\n" if defined $o{body};
    $head .= "X-Pad: ";
    my $pad = $n - length $head;
    die "request of $n bytes cannot be built" if $pad < 1;
    return $head . ('a' x $pad) . "\r\n\r\n";
}

sub config {
    my ($max) = @_;
    return <<"EOF";
server {
  listen = { "127.0.0.1:$port" },
  workers = 1,
  error_log = "$dir/error.log",
  error_log_level = "info",
  access_log = "$dir/access.log",
  pid_file = "$dir/luxd.pid",
  max_header_bytes = $max,
  header_timeout = 10,
  body_timeout = 10,
  keepalive_timeout = 60,
}
vhost "localhost" { default = true, root = "$dir/www", index = { "index.html" } }
EOF
}

# Sends $bytes (in pieces when asked) and returns the first response and
# the seconds it took.
sub ask {
    my ($c, $bytes, %o) = @_;
    my $t0 = time;
    if ($o{split}) {
        # The CRLF CRLF arrives in reads of its own.
        my $cut = length($bytes) - 4;
        $c->send(substr($bytes, 0, $cut));
        for my $i ($cut .. length($bytes) - 1) { sleep 0.05; $c->send(substr($bytes, $i, 1)) }
    } else {
        $c->send($bytes);
    }
    my $r = $c->response(timeout => 15);
    return ($r, time - $t0);
}

# --- a body that starts exactly at the end of the read buffer --------------
{
    # The buffer holds max_header_bytes + 4096 bytes: four pipelined requests
    # of 1023 bytes, then one whose header (at the limit) ends on the
    # buffer's last byte; its body follows in a later read.
    for my $case ([$OLD, 200], [$OLD + 1, 431]) {
        my ($n, $want) = @$case;
        my $c = $s->connect;
        my $first = join '', map { req_of(1023 - 4) } 1 .. 4;
        my $last = req_of($n, body => 'hello');
        $c->send($first . $last);
        sleep 0.2;
        $c->send('hello');
        my @r = $c->responses(5, timeout => 15);
        is(scalar(@r), 5, "body at the end of the buffer, header of $n: five responses");
        is_deeply([map { $_->{status} } @r], [200, 200, 200, 200, $want],
                  "body at the end of the buffer, header of $n: statuses");
        $c->close;
    }
}

# --- a reload that raises max_header_bytes --------------------------------
my @ka = map { $s->connect } 1 .. 3;
for my $c (@ka) {
    my ($r) = ask($c, req_of(100));
    is($r && $r->{status}, 200, 'keep-alive connection opened before the reload');
}
$s->write_config(config($NEW));
like($s->reload // $s->reload_error, qr/^ok generation 2 /, 'reload to max_header_bytes = 16384');

{
    my ($r, $took) = ask($ka[0], req_of($NEW));
    is($r && $r->{status}, 200, 'old connection, header at exactly the new limit: 200');
    cmp_ok($took, '<', 5, '... at once, not after header_timeout');
    is($r && $r->{body}, "index\n", '... the file');
}
{
    my ($r, $took) = ask($ka[1], req_of($NEW), split => 1);
    is($r && $r->{status}, 200, 'old connection, header at the limit, blank line in pieces: 200');
}
{
    my ($r, $took) = ask($ka[2], req_of($NEW + 1));
    is($r && $r->{status}, 431, 'old connection, header one byte past the new limit: 431');
    cmp_ok($took, '<', 5, '... at once, not after header_timeout');
    ok($ka[2]->wait_closed(10), '... and the connection closes');
}
$_->close for @ka;

# A fresh connection answers the same.
{
    my ($r) = ask($s->connect, req_of($NEW));
    is($r && $r->{status}, 200, 'new connection, header at exactly the limit: 200');
    ($r) = ask($s->connect, req_of($NEW), split => 1);
    is($r && $r->{status}, 200, 'new connection, header at the limit, blank line in pieces: 200');
    ($r) = ask($s->connect, req_of($NEW + 1));
    is($r && $r->{status}, 431, 'new connection, header one byte past the limit: 431');
}

# And a reload back down: the larger buffer does not widen the limit.
$s->write_config(config($OLD));
like($s->reload // $s->reload_error, qr/^ok generation 3 /, 'reload back to 1024');
{
    my $c = $s->connect;
    my ($r) = ask($c, req_of($OLD));
    is($r && $r->{status}, 200, 'after lowering: header at exactly the limit: 200');
    ($r) = ask($c, req_of($OLD + 1));
    is($r && $r->{status}, 431, 'after lowering: one byte past the limit: 431');
}

# --- a request half-received when the reload lands -------------------------
# The limit checked is the one in force, but the buffer was fitted to the
# limit when the request began (max_header_bytes + 4096): a header that
# outgrows that buffer is refused at once (it stalled until 408: the buffer
# was full and nothing more could be read). One that fits completes.
for my $case ([$OLD, 200], [$OLD + 1, 200], [$OLD + 4096 - 4, 200], [$OLD + 4096 - 3, 431],
              [$OLD + 4096 + 2000, 431]) {
    my ($n, $want) = @$case;
    $s->write_config(config($OLD));
    like($s->reload // $s->reload_error, qr/^ok /, "half-received $n: limit $OLD");
    my $c = $s->connect;
    my $bytes = req_of($n);
    $c->send(substr($bytes, 0, 600));
    sleep 0.2;
    $s->write_config(config($NEW));
    like($s->reload // $s->reload_error, qr/^ok /, "half-received $n: reload to $NEW");
    my ($r, $took) = ask($c, substr($bytes, 600));
    is($r && $r->{status}, $want, "half-received header of $n at the reload: $want");
    cmp_ok($took, '<', 5, '... at once, not after header_timeout');
    $c->close;
}

# Lines are buffered up to a second; a stop writes out every one (read
# before it, the log could miss the very line looked for).
ok($s->stop, 'stopped cleanly');
unlike($s->access_log, qr/" 408 /, 'no request timed out');
done_testing;
