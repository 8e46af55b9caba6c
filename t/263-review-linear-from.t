# A break review of the rule sets tested in order (up to 8 rules, issue
# 18): `luxd -t` warned that an error page could be denied by an access
# rule that never applies to its path (allow { regex = "^/admin", from })
# because the linear path asked for the client's address before the
# regex, where the indexed path never reached the rule. Now the address is
# asked last, and the check of error pages says nothing, as before.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my ($rc, $out) = Luxd::check_config(<<'EOF2', files => { 'www/404.html' => "nf\n" });
vhost "a.test" {
  default = true, root = "$DIR/www",
  error_pages = { [404] = "/404.html" },
  access = {
    allow { regex = "^/admin", from = { "10.0.0.0/8" } },
    deny  { regex = "^/admin" },
  },
}
EOF2
is($rc, 0, 'the config is ok');
unlike($out, qr/warning/, 'and no warning about the error page') or diag $out;
done_testing;
