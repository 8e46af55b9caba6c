package Luxd::Stream;

# Helpers for the tests of streamed responses and request bodies (issue 9,
# t/74 onwards), which talk to the test handler of build/luxd-test
# (Luxd->new(test_handlers => 1)).
#
#   pattern($n [, $from])   the body of /t/stream?bytes=N: byte i is
#                           chr(ord('a') + i % 26); $from starts at byte i
#   fnv1a64($bytes)         FNV-1a 64-bit, 16 lowercase hex digits, as
#                           /t/body answers it
#   body_bytes($n [, $seed]) $n pseudo-random bytes, the same for the same
#                           arguments
#   rss_kb($pid)            VmRSS of a process in kB (undef if gone)
#   Luxd::Stream::Chunked   a strict, incremental decoder of a chunked body:
#       my $d = Luxd::Stream::Chunked->new(check => 1, keep => 0);
#       $d->feed($bytes) ...; $d->{done}, $d->{error}, $d->{total},
#       $d->{chunks}, $d->{max_chunk}, $d->{body} (keep => 1),
#       $d->{bad_at} (check => 1: first byte that is not pattern()'s),
#       $d->rest (bytes after the last chunk's empty line)
#   read_chunked($conn, $timeout, %decoder_options)
#                           after $conn->response(head => 1) has taken the
#                           head: feeds the decoder from the connection's
#                           buffer and socket until the body ends, EOF or
#                           the timeout; returns the decoder ({eof} and
#                           {timed_out} set when so)

use strict;
use warnings;
use Time::HiRes qw(time);
use Exporter 'import';
our @EXPORT_OK = qw(pattern fnv1a64 body_bytes rss_kb read_chunked test_server $TEST_CONFIG);

my $ALPHA = join '', 'a' .. 'z';
# Long enough for any slice compared at once (see Chunked::_data).
my $PAT = $ALPHA x (int(262144 / 26) + 2);
my $SLICE = 262144;

# The site the test-handler tests share: the default vhost serving $DIR/www
# (with a.txt), and the test handler (t/handlers/test_handler.c) under /t/.
our $TEST_CONFIG = <<'EOF_CONF';
vhost "localhost" {
  default = true,
  root = "$DIR/www",
  location "/t/" { test_handler = true },
}
EOF_CONF

# Starts luxd-test with that site; files and server keys as Luxd->new's,
# the files added to www/a.txt.
sub test_server {
    my (%o) = @_;
    my $files = delete $o{files} || {};
    return Luxd->new(test_handlers => 1, config => $TEST_CONFIG,
                     files => { 'www/a.txt' => "aaa\n", %$files }, %o);
}

sub pattern {
    my ($n, $from) = @_;
    $from //= 0;
    my $out = '';
    while (length($out) < $n) {
        my $k = $n - length($out);
        $k = $SLICE if $k > $SLICE;
        $out .= substr($PAT, ($from + length $out) % 26, $k);
    }
    return $out;
}

# Perl is built with -fwrapv, so `use integer` multiplies modulo 2**64.
sub fnv1a64 {
    my ($d) = @_;
    use integer;
    no warnings "portable";
    my $h = -3750763034362895579;    # 0xcbf29ce484222325 as a signed IV
    my $p = 0x100000001b3;
    for (my $o = 0; $o < length $d; $o += 65536) {
        $h = ($h ^ $_) * $p for unpack 'C*', substr($d, $o, 65536);
    }
    return sprintf '%016x', $h;
}

sub body_bytes {
    my ($n, $seed) = @_;
    my $x = $seed // 12345;
    my $words = int($n / 4) + 1;
    my $out = pack 'N*', map { $x = ($x * 1103515245 + 12345) & 0xffffffff } 1 .. $words;
    return substr($out, 0, $n);
}

sub rss_kb {
    my ($pid) = @_;
    open my $fh, '<', "/proc/$pid/status" or return undef;
    while (<$fh>) { return $1 if /^VmRSS:\s+(\d+)\s+kB/ }
    return undef;
}

sub read_chunked {
    my ($c, $timeout, %o) = @_;
    my $d = Luxd::Stream::Chunked->new(%o);
    my $deadline = time + ($timeout // 5);
    $d->feed($c->{buf});
    $c->{buf} = '';
    while (!$d->{done} && !$d->{error}) {
        if ($c->eof) { $d->{eof} = 1; last }
        my $left = $deadline - time;
        if ($left <= 0) { $d->{timed_out} = 1; last }
        $c->fill($left);
        $d->feed($c->{buf});
        $c->{buf} = '';
    }
    # What came after the body belongs to the next response.
    $c->{buf} = $d->rest . $c->{buf};
    $d->{buf} = '';
    return $d;
}

package Luxd::Stream::Chunked;

use strict;
use warnings;

sub new {
    my ($class, %o) = @_;
    return bless {
        buf => '', state => 'size', rem => 0, total => 0, chunks => 0, max_chunk => 0,
        done => 0, error => undef, body => '', keep => $o{keep} ? 1 : 0, check => $o{check} ? 1 : 0,
        bad_at => undef,
    }, $class;
}

sub rest { $_[0]{done} ? $_[0]{buf} : '' }

sub _fail {
    my ($s, $why) = @_;
    my $near = substr($s->{buf}, 0, 40);
    $near =~ s/([^\x20-\x7e])/sprintf '\\x%02x', ord $1/ge;
    $s->{error} = "$why after $s->{total} body bytes, $s->{chunks} chunks (next bytes: \"$near\")";
    return;
}

sub _data {
    my ($s, $piece) = @_;
    if ($s->{check} && !defined $s->{bad_at}) {
        for (my $o = 0; $o < length $piece; $o += $SLICE) {
            my $part = substr($piece, $o, $SLICE);
            next if $part eq substr($PAT, ($s->{total} + $o) % 26, length $part);
            my $want = Luxd::Stream::pattern(length $part, $s->{total} + $o);
            my $i = 0;
            $i++ while substr($part, $i, 1) eq substr($want, $i, 1);
            $s->{bad_at} = $s->{total} + $o + $i;
            last;
        }
    }
    $s->{body} .= $piece if $s->{keep};
    $s->{total} += length $piece;
}

# A chunk is hex digits, CRLF, data, CRLF; no extensions (luxd sends none);
# the last is "0" CRLF and, without trailers, an empty line.
sub feed {
    my ($s, $bytes) = @_;
    return if $s->{error} || !defined $bytes;
    $s->{buf} .= $bytes;
    while (!$s->{done}) {
        my $st = $s->{state};
        if ($st eq 'size') {
            my $e = index($s->{buf}, "\r\n");
            if ($e < 0) {
                return $s->_fail('a chunk size line without CRLF') if length $s->{buf} > 32;
                return $s->_fail('a bare LF in a chunk size line') if index($s->{buf}, "\n") >= 0;
                return;
            }
            my $line = substr($s->{buf}, 0, $e);
            return $s->_fail('bad chunk size line') unless $line =~ /^[0-9A-Fa-f]{1,15}$/;
            substr($s->{buf}, 0, $e + 2, '');
            my $n = hex $line;
            if ($n == 0) {
                $s->{state} = 'last';
            } else {
                $s->{rem} = $n;
                $s->{chunks}++;
                $s->{max_chunk} = $n if $n > $s->{max_chunk};
                $s->{state} = 'data';
            }
        } elsif ($st eq 'data') {
            my $l = length $s->{buf};
            return unless $l;
            my $n = $l < $s->{rem} ? $l : $s->{rem};
            $s->_data(substr($s->{buf}, 0, $n, ''));
            $s->{rem} -= $n;
            $s->{state} = 'crlf' unless $s->{rem};
        } else {
            return if length $s->{buf} < 2;
            if (substr($s->{buf}, 0, 2) ne "\r\n") {
                return $s->_fail($st eq 'crlf' ? 'chunk data not followed by CRLF'
                                               : 'the last chunk not followed by an empty line');
            }
            substr($s->{buf}, 0, 2, '');
            if ($st eq 'last') { $s->{done} = 1 } else { $s->{state} = 'size' }
        }
    }
    return;
}

1;
