# A rule's regex that is a UTF pattern ((*UTF)) met a path that is not
# UTF-8 (the client's %FF): PCRE2's JIT fast path (pcre2_jit_match) skips
# the subject check, so it read past the path: /%E9%FF was denied as if it
# matched \p{L}+, and /%FF took the server down. A path that is not UTF-8
# matches no UTF pattern; valid ones match as before. Each case is sent
# twice, and the server must still answer after all of them.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(config => <<'EOF_CONF', files => { 'www/x.txt' => "x\n" });
vhost "localhost" { default = true, root = "$DIR/www",
  access = { deny { regex = [[(*UTF)^/\p{L}+$]] } },
  rewrite = { { [[(*UTF)^/r/(\p{L}+)$]], "/x.txt" } },
}
EOF_CONF

my @cases = (
    [ '/%C3%A9', 403, 'é is a letter: denied' ],
    [ '/abc', 403, 'ASCII letters: denied' ],
    [ '/%E9%FF', 404, 'Latin-1 bytes are not UTF-8: no match' ],
    [ '/%FF', 404, 'a lone 0xFF: no match' ],
    [ '/%C3', 404, 'a truncated sequence at the end: no match' ],
    [ '/a%C3', 404, 'one after a letter: no match' ],
    [ '/%F0%9F%98', 404, 'a truncated 4-byte sequence: no match' ],
    [ '/r/%C3%A9', 200, 'the rewrite matches a valid path' ],
    [ '/r/%FF%FE', 404, 'and not an invalid one' ],
);
for my $round (1, 2) {
    for my $c (@cases) {
        my $r = $s->get($c->[0]);
        is($r->{status} // 'no answer', $c->[1], "$c->[0]: $c->[2] (round $round)");
    }
}
is($s->get('/x.txt')->{status}, 200, 'the server still serves');
ok($s->stop, 'stopped cleanly');
done_testing;
