# A break review of the kept config heap (f693428): a reload whose config
# built much and then failed left that heap with the running server until
# the next good reload (263 MB for 3 million strings, against 7 MB before
# it). A failed load's heap is now let go.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my $s = Luxd->new(config => qq{include "\$DIR/extra.lua"\nvhost "a" { default = true, root = "\$DIR/www" }\n},
                  files => { 'extra.lua' => "-- nothing\n", 'www/index.html' => "a\n" });
sub rss_kb { my $st = Luxd::_slurp('/proc/' . $s->pid . '/status') // ''; $st =~ /^VmRSS:\s+(\d+)/m ? $1 : 0 }
my $before = rss_kb();
$s->write_file('extra.lua', qq{local t = {} for i = 1, 3000000 do t[i] = "x" .. i end error("failing on purpose")\n});
my $r = $s->reload(timeout => 60);
ok(!defined $r || $r !~ /^ok/, 'the reload fails') or diag $r;
like($s->error_log, qr/failing on purpose/, 'and says why');
my $after = rss_kb();
cmp_ok($after, '<', $before + 64 * 1024, "the failed config's heap is not kept ($before kB before, $after kB after)");
is($s->get('/')->{body}, "a\n", 'the old generation serves');
$s->stop;
done_testing;
