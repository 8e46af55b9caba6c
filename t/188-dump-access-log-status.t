# luxd -T shows what a vhost logs and which locations answer with the
# counters: a vhost's own access_log, access_log = false under a server
# that logs, and status = true were accepted and worked but were not in
# the compiled tables (named in the notes since issue 11).
use strict;
use warnings;
use Test::More;
use File::Temp qw(tempdir);
use lib 't/lib';
use Luxd;

my $dir = tempdir('luxd-dump-XXXXXX', TMPDIR => 1, CLEANUP => 1);
mkdir "$dir/www";
open my $fh, '>', "$dir/luxd.lua" or die $!;
print $fh <<"EOF2";
server { listen = { "127.0.0.1:1" }, workers = 1, access_log = "$dir/server.log" }
vhost "inherits" { default = true, root = "$dir/www" }
vhost "quiet" { root = "$dir/www", access_log = false }
vhost "own" { root = "$dir/www", access_log = { path = "$dir/own.log", format = "json" },
  location "/status" { status = true } }
EOF2
close $fh;
my $out = `${\ Luxd::bin()} -T -c $dir/luxd.lua 2>&1`;
is $? >> 8, 0, '-T: exit 0' or diag $out;
my %v;
for my $block (split /^(?=vhost )/m, $out) {
    $v{$1} = $block if $block =~ /^vhost (\S+)/;
}
like $out, qr{^server\n(?:  .*\n)*  access_log \Q$dir\E/server\.log \(combined, \d+ pieces\)$}m,
  'the server\'s access_log';
unlike $v{inherits} // '', qr/access_log/, 'a vhost that inherits the server\'s log: not repeated';
like $v{quiet} // '', qr/^  access_log off$/m, 'access_log = false under a server that logs: off';
like $v{own} // '', qr{^  access_log \Q$dir\E/own\.log \(json; JSON escaping, \d+ pieces\)$}m,
  'a vhost\'s own access_log, with its format';
like $v{own} // '', qr{^  location /status .*\n(?:    .*\n)*    status on}m, 'status = true on its location';
unlike $v{own} =~ s/^  location .*//msr, qr/status on/, 'and not on the vhost itself';
unlike $v{quiet} // '', qr/status on/, 'nor on a vhost without it';
done_testing;
