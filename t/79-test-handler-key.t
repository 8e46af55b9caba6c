# issue 9: `test_handler` is a key of the test build only (build/luxd-test,
# Luxd->new(test_handlers => 1)). The normal binary must refuse it, naming
# the key, so a production config can never switch the test handler on.
# Passes on today's luxd too (an unknown key is refused).
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

for my $t (['a location', qq{vhost "localhost" { default = true, root = "\$DIR", location "/t/" { test_handler = true } }\n}],
           ['a vhost', qq{vhost "localhost" { default = true, root = "\$DIR", test_handler = true }\n}],
           ['a location, false', qq{vhost "localhost" { default = true, root = "\$DIR", location "/t/" { test_handler = false } }\n}]) {
    my ($where, $text) = @$t;
    my ($rc, $out) = Luxd::check_config($text);
    isnt($rc, 0, "luxd -t refuses test_handler in $where");
    like($out, qr/test_handler/, '... naming the key') or diag($out);
    unlike($out, qr/AddressSanitizer|runtime error/, '... cleanly');
}

# The same config without the key is fine: the refusal is the key's.
my ($rc, $out) = Luxd::check_config(qq{vhost "localhost" { default = true, root = "\$DIR", location "/t/" { } }\n});
is($rc, 0, 'without the key the config is accepted') or diag($out);
done_testing;
