# Path safety: percent-decoding exactly once, dot-segment removal, no way out
# of the root by any encoding, NUL and control bytes refused.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $SECRET = "TOP-SECRET-outside-the-root\n";
my %files = (
    'secret.txt'          => $SECRET,          # next to www/, outside the root
    'www/index.html'      => "<h1>home</h1>\n",
    'www/a.txt'           => "aaa\n",
    'www/sub/file.txt'    => "sub file\n",
    'www/sub/deep/d.txt'  => "deep\n",
    'www/a b.txt'         => "space in name\n",
    "www/caf\xc3\xa9.txt" => "utf-8 name\n",
    'www/%41.txt'         => "literal percent name\n",
    'www/A.txt'           => "capital A\n",
    'www/100%.txt'        => "hundred percent\n",
);
my $s = Luxd->new(files => \%files);

sub req { my ($target) = @_; "GET $target HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" }
sub case { my ($target, $status, %o) = @_; { name => $target, request => req($target), status => $status, %o } }

$s->run_cases(
    # Climbing above the root: 400 (as nginx), whatever the encoding.
    case('/../secret.txt', 400),
    case('/../../secret.txt', 400),
    case('/sub/../../secret.txt', 400),
    case('/%2e%2e/secret.txt', 400),
    case('/%2E%2E/secret.txt', 400),
    case('/%2E%2E%2Fsecret.txt', 400),
    case('/%2e%2e%2fsecret.txt', 400),
    case('/..%2fsecret.txt', 400),
    case('/..%2Fsecret.txt', 400),
    case('/.%2e/secret.txt', 400),
    case('/%2e./secret.txt', 400),
    case('/sub/..%2f..%2fsecret.txt', 400),
    case('/sub/%2e%2e/%2e%2e/secret.txt', 400),
    case('/sub%2f..%2f..%2fsecret.txt', 400),
    case('/%2f..%2fsecret.txt', 400),
    case('/..', 400),
    case('/sub/../..', 400),
    # Double encoding decodes once: a literal "%2e%2e" segment, which does not exist.
    case('/%252e%252e/secret.txt', 404),
    case('/..%252fsecret.txt', 404),
    case('/%252e%252e%252fsecret.txt', 404),
    # Dot segments that stay inside the root.
    case('/sub/../index.html', 200, body => "<h1>home</h1>\n"),
    case('/sub/%2e%2e/a.txt', 200, body => "aaa\n"),
    case('/sub/./file.txt', 200, body => "sub file\n"),
    case('/sub/%2e/file.txt', 200, body => "sub file\n"),
    case('/./a.txt', 200, body => "aaa\n"),
    case('//sub//file.txt', 200, body => "sub file\n"),
    case('/%2fsub%2ffile.txt', 200, body => "sub file\n"),
    case('/sub/deep/../../a.txt', 200, body => "aaa\n"),
    case('/a.txt?../../secret.txt', 200, body => "aaa\n"),
    # Backslashes are ordinary bytes on Linux: never separators, never a way out.
    case('/..\\secret.txt', [400, 404]),
    case('/..%5csecret.txt', [400, 404]),
    case('/sub\\..\\..\\secret.txt', [400, 404]),
    # NUL and control bytes, raw or encoded: 400.
    case('/%00', 400, closed => 1),
    case('/a.txt%00', 400, closed => 1),
    case('/a.txt%00.html', 400, closed => 1),
    case('/a%0ab', 400, closed => 1),
    case('/a%0d%0aX-Injected:%20yes', 400, closed => 1),
    case('/a%01b', 400, closed => 1),
    case('/a%1fb', 400, closed => 1),
    case('/a%7fb', 400, closed => 1),
    case("/a\x01b", 400, closed => 1),
    case("/a\x7fb", 400, closed => 1),
    # Malformed escapes.
    case('/a%zz', 400),
    case('/a%4', 400),
    case('/a%', 400),
    # Valid encodings are served.
    case('/a%20b.txt', 200, body => "space in name\n"),
    case('/caf%C3%A9.txt', 200, body => "utf-8 name\n"),
    case('/caf%c3%a9.txt', 200, body => "utf-8 name\n"),
    case('/%61.txt', 200, body => "aaa\n"),
    case('/%41.txt', 200, body => "capital A\n"),
    case('/%2541.txt', 200, body => "literal percent name\n"),
    case('/100%25.txt', 200, body => "hundred percent\n"),
    case('/%73ub/%66ile.txt', 200, body => "sub file\n"),
);

subtest 'absolute-form targets are normalised too' => sub {
    my ($raw) = $s->raw("GET http://localhost/../secret.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    my ($r) = parse_responses($raw);
    is($r->{status}, 400, 'http://localhost/../secret.txt: 400');
    unlike($raw, qr/TOP-SECRET/, 'no secret');
};

# Every combination of dot and slash encodings, at several depths, with and
# without a prefix directory: never the secret, never a 2xx.
subtest 'no encoding reaches a file outside the root' => sub {
    my @dots   = ('..', '%2e%2e', '%2E%2E', '.%2e', '%2e.', '%2E.', '%252e%252e', '%%32%65%%32%65', '%u002e%u002e', '.%00.', "\xc0\xae\xc0\xae", '%c0%ae%c0%ae');
    my @slashes = ('/', '%2f', '%2F', '\\', '%5c', '%5C', '%252f', '//', '/./', '%c0%af');
    my ($n, $leaks, $ok2xx) = (0, 0, 0);
    my @bad;
    for my $prefix ('', '/sub', '/sub/deep') {
        for my $depth (1 .. 3) {
            for my $d (@dots) {
                for my $sl (@slashes) {
                    my $target = $prefix . join('', map { "/$d" } 1 .. $depth);
                    $target .= "$sl" . 'secret.txt';
                    my $raw = $s->raw(req($target), timeout => 10);
                    $n++;
                    my ($r) = parse_responses($raw);
                    if ($raw =~ /TOP-SECRET/) { $leaks++; push @bad, "LEAK: $target" }
                    elsif (!$r || !defined $r->{status}) { push @bad, "no answer: $target" }
                    elsif ($r->{status} < 300) { push @bad, "$r->{status}: $target" }
                }
            }
        }
    }
    is($leaks, 0, "no leak in $n requests");
    is(scalar @bad, 0, 'every one answered with an error status') or diag(join "\n", @bad[0 .. ($#bad < 20 ? $#bad : 19)]);
};

check_response($s->get('/a.txt'), { status => 200, body => "aaa\n" }, 'still serving');
$s->stop;
done_testing;
