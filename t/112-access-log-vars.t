# issue 11, "Observe": access-log templates. Every variable's output, the
# strict parsing of names at -t (file:line, did-you-mean), the prefix cases
# that used to print a neighbour's value followed by the rest of the name,
# JSON with UTF-8 passed through and control and invalid bytes escaped, and
# the line of a request refused while it was parsed.
use strict;
use warnings;
use Test::More;
use Time::HiRes qw(time sleep);
use POSIX qw(strftime);
use JSON::PP ();
use lib 't/lib';
use Luxd;
use Luxd::Backend qw(hdr);

my %files = ('www/a.txt' => "aaa\n", 'www/index.html' => "<h1>home</h1>\n", 'www/err.html' => "oops\n");
my $CLF = qr{\d\d/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/\d{4}:\d\d:\d\d:\d\d \+0000};
my $ISO = qr{\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00};

# A server logging `format` (unbuffered), with extra server keys.
sub server_with {
    my ($format, %o) = @_;
    my %al = (path => '$DIR/access.log', format => $format);
    $al{escape} = $o{escape} if $o{escape};
    return Luxd->new(files => \%files, config => $o{config},
                     server => { access_log => \%al, access_log_buffer => 0, %{ $o{server} || {} } });
}

# The log's whole lines once there are at least $n (the loops write each
# line as its request ends, which may be just after the client read the
# answer; a line still being written, 60 kB say, is not one yet).
sub lines_of {
    my ($s, $n) = @_;
    my @l;
    for (my $end = time + 10; ; sleep 0.05) {
        my $log = $s->access_log // '';
        @l = split /\n/, $log;
        pop @l if length $log && substr($log, -1) ne "\n";
        last if @l >= $n || time > $end;
    }
    return @l;
}

# Expects `luxd -t` to fail with FILE:LINE on $line and a message like $re.
sub bad_template {
    my ($name, $text, $line, $re) = @_;
    subtest $name => sub {
        my ($rc, $out, $file) = Luxd::check_config($text);
        is $rc, 1, 'luxd -t exits 1' or diag $out;
        like $out, qr/^\Q$file\E:$line: /m, "the message names $file:$line" or diag $out;
        like $out, $re, 'and says what is wrong';
        unlike $out, qr/traceback/, 'no Lua traceback';
    };
}

my $SRV_HEAD = qq(server {\n  listen = "127.0.0.1:\$PORT", error_log = "\$DIR/error.log",\n);
my $VHOST = qq{vhost "localhost" { default = true, root = "\$DIR/www" }\n};

subtest 'every variable, in one template' => sub {
    my @vars = qw(remote_addr time_local time_iso8601 msec request request_method request_uri uri args
                  server_protocol status body_bytes_sent bytes_sent request_time request_id host
                  http_referer http_user_agent http_x_forwarded_for http_x_multi http_absent
                  upstream_addr upstream_status upstream_response_time);
    my $s = server_with(join('|', map { "\$$_" } @vars));
    my $t0 = time;
    my $req = "GET /sub/../a.txt?x=1&y=%41 HTTP/1.1\r\nHost: LocalHost:" . $s->port . "\r\n"
            . "Referer: http://ref.example/p\r\nUser-Agent: Agent/1.0\r\nX-Forwarded-For: 10.1.2.3\r\n"
            . "X-Multi: one\r\nx-multi: two\r\nConnection: close\r\n\r\n";
    my $raw = $s->raw($req);
    my $t1 = time;
    like $raw, qr{^HTTP/1\.1 200 }, 'answered';
    my @l = lines_of($s, 1);
    is scalar @l, 1, 'one line';
    my @f = split /\|/, $l[0] // '', -1;
    is scalar @f, scalar @vars, 'one field per variable' or diag $l[0];
    my %v;
    @v{@vars} = @f;
    is $v{remote_addr}, '127.0.0.1', '$remote_addr';
    like $v{time_local}, qr/^$CLF$/, '$time_local';
    like $v{time_iso8601}, qr/^$ISO$/, '$time_iso8601';
    my ($iso_day) = $v{time_iso8601} =~ /^(\S{10})/;
    ok $iso_day eq strftime('%Y-%m-%d', gmtime $t0) || $iso_day eq strftime('%Y-%m-%d', gmtime $t1),
       '$time_iso8601 is today (UTC)';
    like $v{msec}, qr/^\d+\.\d{3}$/, '$msec: seconds.milliseconds';
    ok $v{msec} >= int($t0) - 1 && $v{msec} <= $t1 + 1, '$msec is the time of the request' or diag "$v{msec} vs $t0";
    is $v{request}, 'GET /sub/../a.txt?x=1&y=%41 HTTP/1.1', '$request: the line as sent';
    is $v{request_method}, 'GET', '$request_method';
    is $v{request_uri}, '/sub/../a.txt?x=1&y=%41', '$request_uri: the target as sent';
    is $v{uri}, '/a.txt', '$uri: decoded and normalised';
    is $v{args}, 'x=1&y=%41', '$args';
    is $v{server_protocol}, 'HTTP/1.1', '$server_protocol';
    is $v{status}, 200, '$status';
    is $v{body_bytes_sent}, 4, '$body_bytes_sent';
    is $v{bytes_sent}, length $raw, '$bytes_sent: head and body, all the client read';
    like $v{request_time}, qr/^\d+\.\d{3}$/, '$request_time: seconds.milliseconds';
    like $v{request_id}, qr/^[0-9a-f]{32}$/, '$request_id: 32 hex digits';
    is $v{host}, 'localhost', '$host: the Host header in lower case, no port';
    is $v{http_referer}, 'http://ref.example/p', '$http_referer';
    is $v{http_user_agent}, 'Agent/1.0', '$http_user_agent';
    is $v{http_x_forwarded_for}, '10.1.2.3', '$http_x_forwarded_for: any header, "-" as "_"';
    is $v{http_x_multi}, 'one, two', '$http_NAME of a repeated header: its values joined';
    is $v{http_absent}, '-', '$http_NAME of an absent header: -';
    is $v{upstream_addr}, '-', '$upstream_addr of a file: -';
    is $v{upstream_status}, '-', '$upstream_status of a file: -';
    is $v{upstream_response_time}, '-', '$upstream_response_time of a file: -';
    ok $s->stop, 'stopped';
};

subtest '$host: the host the request named, or the vhost\'s name' => sub {
    my $s = server_with('$host|$http_host|$request');
    $s->raw("GET http://WWW.Example.COM:8080/a.txt HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n");
    $s->raw("GET /a.txt HTTP/1.0\r\n\r\n");
    my @l = lines_of($s, 2);
    is $l[0], 'www.example.com|WWW.Example.COM:8080|GET http://WWW.Example.COM:8080/a.txt HTTP/1.1',
       'an absolute target: its authority, in lower case, no port';
    is $l[1], 'localhost|-|GET /a.txt HTTP/1.0', 'HTTP/1.0 without Host: the name of the vhost that answered';
    $s->stop;
};

subtest '$request_time counts from the first byte of the request' => sub {
    my $s = server_with('$request_time $status');
    my $head = Luxd::request(path => '/a.txt', close => 1);
    $s->raw(undef, pieces => [substr($head, 0, 5), substr($head, 5)], delay => 1);
    $s->get('/a.txt');
    my @l = lines_of($s, 2);
    my ($slow) = ($l[0] // '') =~ /^(\d+\.\d{3}) 200$/;
    my ($fast) = ($l[1] // '') =~ /^(\d+\.\d{3}) 200$/;
    # 1 s apart, so that a loaded machine's stalls (a few tenths) cannot
    # make the one look like the other: luxd times the first byte when its
    # loop reads it, which may be a while after it was sent (0.980 seen).
    ok defined $slow && $slow >= 0.5 && $slow < 5, "a head sent in two pieces 1 s apart: $l[0]";
    ok defined $fast && $fast < 0.5, "a request sent at once: $l[1]";
    $s->stop;
};

subtest '$request_id: new for each request; request_id_header sends it' => sub {
    my $s = server_with('$request_id $status');
    $s->get('/a.txt') for 1 .. 3;
    my @ids = map { /^([0-9a-f]{32}) 200$/ ? $1 : () } lines_of($s, 3);
    is scalar @ids, 3, 'three ids';
    my %u = map { $_ => 1 } @ids;
    is scalar keys %u, 3, 'all different';
    ok !defined $s->get('/a.txt')->{headers}{'x-request-id'}, 'no header unless asked for';
    $s->stop;

    my $be = Luxd::Backend->start(name => 'rid');
    my $a = $be->addr;
    $s = server_with('$request_id $status $uri', server => { request_id_header => 'X-Request-Id' },
                     config => "upstream \"b\" { \"$a\" }\nvhost \"localhost\" { default = true, root = \"\$DIR/www\",\n"
                               . "  error_pages = { [404] = \"/err.html\" }, location \"/app/\" { proxy = \"b\" } }\n");
    my @r = ($s->get('/a.txt'), $s->get('/nope'), $s->get('/app/x', 'X-Request-Id' => 'forged'));
    my @got = map { $_->{headers}{'x-request-id'} } @r;
    my @l = lines_of($s, 3);
    for my $i (0 .. 2) {
        my ($id) = ($l[$i] // '') =~ /^([0-9a-f]{32}) /;
        ok defined $id && defined $got[$i] && $got[$i] eq $id, "response $i carries the id its log line has ($l[$i])"
          or diag explain $r[$i]{headers};
    }
    like $l[1] // '', qr{ 404 /err\.html$}, 'the error page kept the id';
    my ($q) = $be->requests;
    is hdr($q, 'X-Request-Id'), $got[2], "the backend got luxd's id, not the client's";
    $s->stop;
    $be->stop;
};

subtest '$upstream_* of a proxied request' => sub {
    my $be = Luxd::Backend->start(name => 'up');
    my $a = $be->addr;
    my $s = server_with('$upstream_addr $upstream_status $upstream_response_time $status',
                        config => qq{upstream "b" { "$a" }\nvhost "l" { default = true, location "/" { proxy = "b" } }\n});
    $s->get('/sleep/150');
    $s->get('/missing');
    my @l = lines_of($s, 2);
    my ($urt) = ($l[0] // '') =~ m{^\Q$a\E 200 (\d+\.\d{3}) 200$};
    ok defined $urt && $urt >= 0.150 && $urt < 5, "the backend's address, status and time (at least its 0.15 s): $l[0]";
    like $l[1] // '', qr{^\Q$a\E 404 \d+\.\d{3} 404$}, "its 404: $l[1]";
    $s->stop;
    $be->stop;
};

subtest 'names are whole: the prefix cases' => sub {
    my $s = server_with('[$request_time] [${host}name] [$status$$] [${status}x] [$http_user_agent_x] [$uri.$args]');
    $s->get('/a.txt?q', 'User-Agent' => 'UA', 'User-Agent-X' => 'UAX');
    my @l = lines_of($s, 1);
    like $l[0] // '', qr{^\[\d+\.\d{3}\] }, '$request_time is the time, not $request followed by "_time"';
    like $l[0] // '', qr{ \[localhostname\] }, '${host}name: the host, then "name"';
    like $l[0] // '', qr{ \[200\$\] }, '$$ is a dollar';
    like $l[0] // '', qr{ \[200x\] }, '${status}x';
    like $l[0] // '', qr{ \[UAX\] }, '$http_user_agent_x is the User-Agent-X header, not User-Agent and "_x"';
    like $l[0] // '', qr{ \[/a\.txt\.q\]$}, 'a name ends at a dot';
    $s->stop;
};

# --- -t -------------------------------------------------------------------
my $FMT_LINE = 4;    # the line the format key is on, in the configs below
sub cfg { my ($fmt) = @_; "$SRV_HEAD  access_log = { path = \"\$DIR/a.log\",\n    format = [[$fmt]] },\n}\n$VHOST" }

bad_template('an unknown name: did you mean', cfg('$remote_addr $request_tme'), $FMT_LINE,
             qr/unknown variable "\$request_tme" \(did you mean "\$request_time"\?\)/);
bad_template('$hostname (once the host followed by "name")', cfg('$hostname $status'), $FMT_LINE,
             qr/unknown variable "\$hostname" \(for \$host followed by "name", write \$\{host\}name\)/);
bad_template('$request_times', cfg('$request_times'), $FMT_LINE, qr/unknown variable "\$request_times" \(did you mean "\$request_time"\?\)/);
bad_template('a name cut short', cfg('$time_iso $status'), $FMT_LINE, qr/unknown variable "\$time_iso" \(did you mean "\$time_iso8601"\?\)/);
bad_template('case matters', cfg('$Status'), $FMT_LINE, qr/unknown variable "\$Status" \(did you mean "\$status"\?\)/);
bad_template('$http_ without a header', cfg('$http_ $status'), $FMT_LINE, qr/"\$http_" without a header name/);
bad_template('an unclosed ${', cfg('${status'), $FMT_LINE, qr/"\$\{" without a variable name and "\}"/);
bad_template('a lone $', cfg('cost: $ $status'), $FMT_LINE, qr/a "\$" that starts no variable name \(write "\$\$"/);
bad_template('apache-style %h', cfg('%h %s'), $FMT_LINE, qr/not "%h %s"/);
bad_template('the table on one line', "$SRV_HEAD  error_log_level = \"warn\",\n  access_log = { path = \"\$DIR/a.log\", format = \"\$status \$bogus\" },\n}\n$VHOST",
             4, qr/unknown variable "\$bogus"/);

subtest 'a good template passes -t and -T shows it compiled' => sub {
    my ($rc, $out) = Luxd::check_config(cfg('$remote_addr ${host}name $http_x_y $$ $upstream_addr'));
    is $rc, 0, 'luxd -t exits 0' or diag $out;
    my ($file) = (Luxd::check_config(cfg('$status')))[2];
    my ($trc, $tout) = Luxd::run_luxd('-T', '-c', $file);
    is $trc, 0, '-T exits 0';
    like $tout, qr/access_log \S+ \(\$status, 1 pieces\)/, '-T: one piece' or diag $tout;
};

# --- JSON -----------------------------------------------------------------
subtest 'format = "json": UTF-8 as it is, control and invalid bytes escaped, ISO 8601 time' => sub {
    my $s = server_with('json');
    my $ua = "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80";          # héllo ✓ 😀, valid UTF-8
    my $bad = "a\xffb\xc3(c\xed\xa0\x80d\xc0\xafe";                     # invalid byte, cut sequence, surrogate, overlong
    my $r = $s->raw("GET /a.txt?q=\"x\\ HTTP/1.1\r\nHost: localhost\r\nUser-Agent: $ua\r\n"
                    . "Referer: $bad\tq\"\\\r\nConnection: close\r\n\r\n");
    like $r, qr{^HTTP/1\.1 200 }, 'answered';
    $s->raw("GET /a\x01 HTTP/1.1\r\nHost: localhost\r\n\r\n");       # refused: a control byte in the target
    my @l = lines_of($s, 2);
    is scalar @l, 2, 'two lines';
    my $line = $l[0] // '';
    ok index($line, $ua) >= 0, 'valid UTF-8 is written as it is, not byte by byte' or diag $line;
    ok index($line, 'a\u00FFb\u00C3(c\u00ED\u00A0\u0080d\u00C0\u00AFe\u0009q\"\\\\') >= 0,
       'invalid bytes, the tab, the quote and the backslash escaped' or diag $line;
    my $j = eval { JSON::PP->new->utf8->decode($line) };
    ok $j, 'the line is valid JSON (and UTF-8)' or diag "$@: $line";
    $j ||= {};
    is $j->{user_agent}, "h\x{e9}llo \x{2713} \x{1f600}", 'the user agent decodes to what was sent';
    like $j->{time} // '', qr/^$ISO$/, 'time: ISO 8601';
    is $j->{status}, 200, 'status: a number';
    is $j->{bytes}, 4, 'bytes';
    like $j->{request_time} // '', qr/^\d+(\.\d+)?$/, 'request_time: a number';
    is $j->{request}, 'GET /a.txt?q="x\\ HTTP/1.1', 'request';
    is $j->{host}, 'localhost', 'host';
    is $j->{remote_addr}, '127.0.0.1', 'remote_addr';
    my $j2 = eval { JSON::PP->new->utf8->decode($l[1] // '') };
    ok $j2, 'the refused request\'s line is valid JSON too' or diag $l[1];
    is $j2 && $j2->{request}, "GET /a\x01 HTTP/1.1", 'its request, the control byte escaped (\u0001)';
    like $l[1] // '', qr{"GET /a\\u0001 HTTP/1\.1"}, 'as \u0001 in the line';
    is $j2 && $j2->{referer}, '', 'an absent header is ""';
    $s->stop;
};

subtest 'escape = "json" with a template; plain escaping otherwise' => sub {
    my $s = server_with('{"ua":"$http_user_agent","r":"$http_referer","s":$status}', escape => 'json');
    $s->get('/a.txt', 'User-Agent' => "\xc3\xa9\"\\");
    my @l = lines_of($s, 1);
    is $l[0], qq({"ua":"\xc3\xa9\\"\\\\","r":"","s":200}), 'UTF-8 kept, quote and backslash escaped, absent is empty';
    ok eval { JSON::PP->new->utf8->decode($l[0] // '') }, 'valid JSON';
    $s->stop;
    $s = server_with('"$http_user_agent"');
    $s->get('/a.txt', 'User-Agent' => "\xc3\xa9\"\\x");
    @l = lines_of($s, 1);
    is $l[0], '"\xC3\xA9\x22\x5Cx"', 'the default escaping: 8-bit bytes, quote and backslash as \xHH, as nginx';
    $s->stop;
};

# --- refused requests -----------------------------------------------------
subtest 'a request refused while it was parsed is logged with what was received' => sub {
    my $s = server_with('$status "$request" [$request_method] [$request_uri] [$server_protocol] [$uri] $body_bytes_sent',
                        server => { header_timeout => 1, max_header_bytes => 1024 });
    my @cases = (
        ["DELETE /x HTTP/1.0\r\nBad Header\r\n\r\n", 400, 'DELETE /x HTTP/1.0', 'a bad header line'],
        ["GET /y HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, 'GET /y HTTP/2.0', 'HTTP/2.0'],
        ["GET /z HTTP/1.1\r\nHost: localhost\r\nX-Big: " . ('b' x 2000) . "\r\n\r\n", 431, 'GET /z HTTP/1.1', 'a head over max_header_bytes'],
        ["\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, '\x16\x03\x01\x02\x00\x01\x00\x01\xFC\x03\x03', 'TLS spoken to a plain port'],
        ["\r\nPUT /q HTTP/1.1 extra\r\n\r\n", 400, 'PUT /q HTTP/1.1 extra', 'a malformed request line after an empty line'],
    );
    for my $c (@cases) { $s->raw($c->[0]) }
    $s->raw(undef, pieces => ["GET /slow HT"], timeout => 10);            # header_timeout: 408
    $s->raw("GET / HTTP/1.1\r\n\r\n");                                      # no Host: refused once parsed
    my @l = lines_of($s, @cases + 2);
    is scalar @l, @cases + 2, 'one line each' or diag join "\n", @l;
    for my $i (0 .. $#cases) {
        my ($bytes, $st, $want, $name) = @{ $cases[$i] };
        is $l[$i], "$st \"$want\" [-] [-] [-] [-] " . ($l[$i] =~ / (\d+)$/)[0], "$name: $want";
        unlike $l[$i] // '', qr/"DELETE  HTTP/, "$name: not the parser's zeroes";
    }
    like $l[-2] // '', qr{^408 "GET /slow HT" \[-\]}, 'a head cut off by header_timeout: what came of it';
    is $l[-1], '400 "GET / HTTP/1.1" [GET] [/] [HTTP/1.1] [-] ' . ($l[-1] =~ / (\d+)$/)[0],
       'refused after the head was parsed (no Host): the line as parsed';
    ok $s->stop, 'stopped';
};

subtest 'an error page keeps the method as sent in the log' => sub {
    my $s = server_with('$request_method "$request" $status $uri',
                        config => qq{vhost "localhost" { default = true, root = "\$DIR/www", error_pages = { [405] = "/err.html" } }\n});
    my $r = $s->http(method => 'POST', path => '/a.txt', body => 'x');
    is $r->{status}, 405, 'answered 405';
    is $r->{body}, "oops\n", 'with the error page';
    my @l = lines_of($s, 1);
    is $l[0], 'POST "POST /a.txt HTTP/1.1" 405 /err.html', 'the method as sent; $uri is the page served';
    $s->stop;
};

subtest 'built-in formats are templates too' => sub {
    my $s = server_with('common');
    $s->get('/a.txt', 'User-Agent' => 'UA');
    my @l = lines_of($s, 1);
    like $l[0] // '', qr{^127\.0\.0\.1 - - \[$CLF\] "GET /a\.txt HTTP/1\.1" 200 4$}, 'common';
    $s->stop;
    $s = server_with('combined');
    $s->get('/a.txt', 'User-Agent' => 'UA');
    @l = lines_of($s, 1);
    like $l[0] // '', qr{^127\.0\.0\.1 - - \[$CLF\] "GET /a\.txt HTTP/1\.1" 200 4 "-" "UA"$}, 'combined';
    $s->stop;
};

subtest 'a line longer than the log buffer is written whole' => sub {
    my $s = server_with('$http_x_long $status', server => { max_header_bytes => 65536 });
    my $long = 'z' x 30000;
    $s->get('/a.txt', 'X-Long' => $long, 'X-Long' => $long);               # 60 kB joined: over 16 kB
    my @l = lines_of($s, 1);
    is length($l[0] // ''), 60002 + 4, 'one line of 60 kB';
    like $l[0] // '', qr/^z+, z+ 200$/, 'whole';
    $s->stop;
};

done_testing;
