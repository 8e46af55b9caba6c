# Access log (combined format by default, common, off) and error log.
use strict;
use warnings;
use Test::More;
use lib 't/lib';
use Luxd;

my %files = ('www/index.html' => "<h1>home</h1>\n", 'www/a.txt' => "aaa\n");
my %MON = (Jan => 1, Feb => 2, Mar => 3, Apr => 4, May => 5, Jun => 6, Jul => 7, Aug => 8, Sep => 9, Oct => 10, Nov => 11, Dec => 12);
my $Q = qr/"((?:[^"\\]|\\.)*)"/;
my $COMBINED = qr{^(\S+) - (\S+) \[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})\] $Q (\d{3}) (\d+|-) $Q $Q$};
my $COMMON   = qr{^(\S+) - (\S+) \[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-]\d{4})\] $Q (\d{3}) (\d+|-)$};
my $ERRLINE  = qr{^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[(debug|info|notice|warn|error|crit|alert|emerg)\] \S};

sub parse_combined {
    my ($line) = @_;
    my @f = $line =~ $COMBINED or return undef;
    my %e = (addr => $f[0], user => $f[1], day => $f[2], mon => $f[3], year => $f[4], zone => $f[8],
             request => $f[9], status => $f[10], bytes => $f[11], referer => $f[12], agent => $f[13]);
    return \%e;
}

subtest 'combined format' => sub {
    my $s = Luxd->new(files => \%files);
    my @sent;    # [request line, status, bytes, referer, agent]
    my $r = $s->get('/a.txt', Referer => 'http://ref.example/page', 'User-Agent' => 'TestAgent/1.0');
    push @sent, ['GET /a.txt HTTP/1.1', 200, 4, 'http://ref.example/page', 'TestAgent/1.0'];
    $r = $s->get('/nope', 'User-Agent' => 'TestAgent/2.0');
    push @sent, ['GET /nope HTTP/1.1', 404, length($r->{body}), '-', 'TestAgent/2.0'];
    $r = $s->http(method => 'HEAD', path => '/a.txt', headers => ['User-Agent' => 'HeadAgent']);
    push @sent, ['HEAD /a.txt HTTP/1.1', 200, 0, '-', 'HeadAgent'];
    $r = $s->get('/a.txt?x=1&y=two');
    push @sent, ['GET /a.txt?x=1&y=two HTTP/1.1', 200, 4, '-', '-'];
    my $c = $s->connect;
    $c->send(join '', map { Luxd::request(path => '/a.txt', headers => ['User-Agent' => "Pipe$_"], close => $_ == 3) } 1 .. 3);
    my @rr = $c->responses(3);
    is(scalar @rr, 3, 'pipelined answers');
    $c->close;
    push @sent, map { ['GET /a.txt HTTP/1.1', 200, 4, '-', "Pipe$_"] } 1 .. 3;
    $r = $s->raw("GET /a.txt HTTP/1.0\r\n\r\n");
    push @sent, ['GET /a.txt HTTP/1.0', 200, 4, '-', '-'];

    ok($s->stop, 'stopped cleanly');
    my @lines = split /\n/, $s->access_log;
    is(scalar @lines, scalar @sent, 'one line per request, all flushed by the time the server stopped')
      or diag($s->access_log);
    my @parsed = map { parse_combined($_) } @lines;
    my @bad = grep { !defined $parsed[$_] } 0 .. $#lines;
    is(scalar @bad, 0, 'every line is in combined format') or diag(join "\n", @lines[@bad]);
    my @y = gmtime;
    for my $i (0 .. $#sent) {
        my $e = $parsed[$i] or next;
        my ($line, $st, $bytes, $ref, $ua) = @{ $sent[$i] };
        is($e->{addr}, '127.0.0.1', "$line: remote address");
        is($e->{request}, $line, "request line $i");
        is($e->{status}, $st, "$line: status");
        ok($e->{bytes} eq $bytes || ($bytes == 0 && $e->{bytes} eq '-'), "$line: body bytes $bytes") or diag("got $e->{bytes}");
        is($e->{referer}, $ref, "$line: referer");
        is($e->{agent}, $ua, "$line: user agent");
        ok($e->{year} == $y[5] + 1900 || $e->{year} == $y[5] + 1901, "$line: year") ;
        ok(exists $MON{ $e->{mon} }, "$line: month name");
    }
};

subtest 'quotes and odd bytes in logged fields are escaped' => sub {
    my $s = Luxd->new(files => \%files);
    $s->get('/a.txt', 'User-Agent' => 'evil" 200 "x', Referer => "a\\b\"c");
    $s->raw("GET /a.txt?q=%22x HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bin\xff\xfe\r\nConnection: close\r\n\r\n");
    $s->stop;
    my @lines = split /\n/, $s->access_log;
    is(scalar @lines, 2, 'two lines (no line split by a field)');
    for my $l (@lines) {
        my $e = parse_combined($l);
        ok($e, 'still in combined format') or diag($l);
    }
    my $e = parse_combined($lines[0] // '') || {};
    like($e->{agent} // '', qr/^evil\\?(\\x22|\\")/, 'the quote in the user agent is escaped');
    like($lines[1] // '', qr{"GET /a\.txt\?q=%22x HTTP/1\.1" 200 4 }, 'the encoded quote stays as sent');
};

subtest 'access_log = false' => sub {
    my $s = Luxd->new(files => \%files, server => { access_log => \'false' });
    $s->get('/a.txt') for 1 .. 3;
    $s->stop;
    ok(!-s $s->dir . '/access.log', 'no access.log written');
    my @logged = grep { (Luxd::_slurp($_) // '') =~ m{"GET /a\.txt HTTP} } glob($s->dir . '/*.log');
    is(scalar @logged, 0, 'no request line in any log file') or diag("@logged");
};

subtest 'access_log { path, format = "common" }' => sub {
    my $s = Luxd->new(files => \%files, server => { access_log => { path => '$DIR/common.log', format => 'common' } });
    $s->get('/a.txt', 'User-Agent' => 'UA');
    $s->get('/nope');
    $s->stop;
    my @lines = split /\n/, ($s->file('common.log') // '');
    is(scalar @lines, 2, 'two lines in the configured file');
    like($lines[0] // '', $COMMON, 'common format');
    like($lines[0] // '', qr{"GET /a\.txt HTTP/1\.1" 200 4$}, 'request, status, bytes and nothing after');
    like($lines[1] // '', qr{"GET /nope HTTP/1\.1" 404 \d+$}, '404 line');
};

subtest 'error log' => sub {
    my $s = Luxd->new(files => \%files);
    $s->get('/a.txt');
    $s->stop;
    my @lines = split /\n/, $s->error_log;
    ok(scalar @lines, 'the error log has lines');
    my @bad = grep { $_ !~ $ERRLINE } @lines;
    is(scalar @bad, 0, 'every line is "TIME [level] text"') or diag(join "\n", @bad);
    ok((grep { /\[(info|notice)\]/ } @lines), 'start-up info at level info or notice') or diag($s->error_log);
};

subtest 'error_log_level = "error" drops info and notice' => sub {
    my $s = Luxd->new(files => \%files, server => { error_log_level => 'error' });
    $s->get('/a.txt');
    $s->get('/nope');
    $s->stop;
    my @low = grep { /\[(debug|info|notice|warn)\]/ } split /\n/, $s->error_log;
    is(scalar @low, 0, 'nothing below error') or diag(join "\n", @low);
};

subtest 'error_log = "stderr"' => sub {
    my $s = Luxd->new(files => \%files, server => { error_log => 'stderr' });
    $s->get('/a.txt');
    $s->stop;
    my @lines = grep { $_ =~ $ERRLINE } split /\n/, $s->stderr_log;
    ok(scalar @lines, 'log lines on stderr') or diag($s->stderr_log);
    ok(!-e $s->dir . '/error.log', 'no error.log file');
};

done_testing;
