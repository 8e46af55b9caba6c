#!/usr/bin/perl
# The demo site (conf/luxd.lua serving www/, what `make run` starts) as a
# visitor sees it in a real browser: Debian's headless Chromium loads the
# start page from a real luxd and the test checks the DOM after load (the
# title, the table of things to try), follows every link in that table with
# another load and checks what each row says happens (status in luxd's access
# log, page in the DOM), and proves the stylesheet was fetched by the browser
# (its GET with status 200 and Chromium's user agent in the access log) and
# applied (a screenshot whose background and heading have the colours
# www/style.css gives them; without the stylesheet they are white and black).
#
# Chromium runs with a fresh profile and HOME, only loopback (no proxy, every
# host name unresolvable, background networking off), in its own process
# group, killed after 60 s; no process of it may be left behind.
#
# Not skipped: without chromium the test fails and says how to install it.
use strict;
use warnings;
use Test::More;
use Luxd;
use Chromium;
use Compress::Zlib qw(uncompress);
use File::Temp qw(tempdir);
use POSIX qw(:sys_wait_h);
use Time::HiRes qw(time sleep);

unless (Chromium::path()) {
    ok(0, 'chromium is installed')
      or diag("chromium (Debian's package) is not installed or not in PATH: `make deps-test` installs it "
        . "(it is listed in deps/packages-test.txt)");
    done_testing;
    exit;
}

sub slurp { my ($f) = @_; open my $fh, '<:raw', $f or return undef; local $/; my $d = <$fh>; $d // '' }

# --- luxd with the demo config -------------------------------------------
# conf/luxd.lua as shipped, with its listen port replaced by a free one and
# its relative log paths ("logs/...", under the repository when `make run`
# serves it) moved into the test's temp dir, so the test can read the access
# log and writes nothing into the checkout. Everything else, root = "www"
# included, is the demo's own (the harness starts luxd in the repository).
my $demo = slurp("$Luxd::ROOT/conf/luxd.lua") // BAIL_OUT("cannot read conf/luxd.lua");
my $n_listen = (my $config = $demo) =~ s/"127\.0\.0\.1:8080"/"127.0.0.1:\$PORT"/g;
is($n_listen, 1, 'conf/luxd.lua listens on "127.0.0.1:8080" once (the port this test replaces)');
$config =~ s/"logs\//"\$DIR\//g;
like($config, qr/access_log\s*=\s*"\$DIR\/access\.log"/, 'the demo writes an access log (moved to the temp dir)');
my $s = Luxd->new(config => $config);
my $base = $s->url('');

# The access log's lines after byte $from, waiting (up to 10 s: luxd buffers
# the log and flushes it on a timer) until each of @want matches one.
sub log_lines_after {
    my ($from, @want) = @_;
    my $deadline = time + 10;
    my @lines;
    while (1) {
        my $log = $s->access_log;
        @lines = split /\n/, substr($log, $from);
        my $all = 1;
        for my $re (@want) { $all = 0, last unless grep { $_ =~ $re } @lines }
        return @lines if $all || time > $deadline;
        sleep 0.1;
    }
}

# A request by the browser in the combined format: "METHOD PATH HTTP/1.1"
# STATUS BYTES "REFERER" "USER-AGENT", with Chromium's headless user agent.
sub browser_req {
    my ($path, $status) = @_;
    return qr/"GET \Q$path\E HTTP\/1\.1" $status \d+ "[^"]*" "[^"]*HeadlessChrome\/[^"]*"$/;
}

# --- running Chromium (t/lib/Chromium.pm) ----------------------------------------
sub chromium {
    my ($url, @extra) = @_;
    my ($out) = Chromium::run($url, flags => \@extra);
    return $out;
}

sub entities {
    my ($t) = @_;
    $t =~ s/&lt;/</g; $t =~ s/&gt;/>/g; $t =~ s/&quot;/"/g; $t =~ s/&nbsp;/ /g; $t =~ s/&#39;/'/g; $t =~ s/&amp;/&/g;
    return $t;
}
sub text_of { my ($h) = @_; $h =~ s/<[^>]*>//g; $h = entities($h); $h =~ s/\s+/ /g; $h =~ s/^ | $//g; $h }
sub title_of { my ($dom) = @_; $dom =~ m{<title>(.*?)</title>}s ? text_of($1) : undef }

# --- the start page -------------------------------------------------------------
my $from = length $s->access_log;
my $dom = chromium($base . '/', '--dump-dom');
is(title_of($dom), 'luxd is running', 'title after load');
like($dom, qr{<h1>luxd is running</h1>}, 'the heading');
my @lines = log_lines_after($from, browser_req('/', 200), browser_req('/style.css', 200));
ok((grep { $_ =~ browser_req('/', 200) } @lines), 'the browser fetched / (200)');
ok((grep { $_ =~ browser_req('/style.css', 200) && /"\Q$base\E\/"/ } @lines),
    'the browser fetched the page\'s stylesheet /style.css (200, referred by the page)')
  or diag("access log since the load:\n" . join("\n", @lines));
like($dom, qr{<link rel="stylesheet" href="/style\.css">}, 'the page links /style.css');

# The table that follows "Things to try", row by row: the request (a link),
# what happens, and the config that does it.
my ($table) = $dom =~ m{<h2>Things to try</h2>\s*<table>(.*?)</table>}s;
ok(defined $table, 'a table follows the heading "Things to try"') or $table = '';
my @rows = $table =~ m{<tr>(.*?)</tr>}sg;
my ($head) = grep { /<th>/ } @rows;
is_deeply([ map { text_of($_) } ($head // '') =~ m{<th>(.*?)</th>}sg ], [ 'Request', 'What happens', 'Because of' ],
    'the table\'s columns');
my @try;
for my $row (grep { !/<th>/ } @rows) {
    my @cells = $row =~ m{<td>(.*?)</td>}sg;
    my ($href) = ($cells[0] // '') =~ m{<a href="([^"]*)">};
    push @try, { href => defined $href ? entities($href) : undef, cells => [ map { text_of($_) } @cells ] };
}

# What each row says happens, as the browser shows it: the statuses luxd logs
# for the browser's requests (a redirect, then where it leads) and the page.
# A row added to the demo needs its line here: the test fails on a row it does
# not know, so the demo cannot claim what is not checked.
my $readme = slurp("$Luxd::ROOT/www/static/readme.txt");
my ($readme_first) = $readme =~ /^(.*)$/m;
my %expect = (
    '/static/readme.txt' => { log => [ [ '/static/readme.txt', 200 ] ], dom => qr/\Q$readme_first\E/,
                              says => qr/a text file, with Cache-Control: public, max-age=3600/ },
    '/readme'            => { log => [ [ '/readme', 200 ] ], dom => qr/\Q$readme_first\E/,
                              says => qr/the same file/ },
    '/home'              => { log => [ [ '/home', 301 ], [ '/', 200 ] ], title => 'luxd is running',
                              says => qr/^301 to \/$/ },
    '/index.html~'       => { log => [ [ '/index.html~', 403 ] ], title => '403 Forbidden', says => qr/^403\b/ },
    '/.git/config'       => { log => [ [ '/.git/config', 403 ] ], title => '403 Forbidden', says => qr/^403$/ },
    '/private/'          => { log => [ [ '/private/', 200 ] ], title => 'Private',
                              says => qr/^200 from this machine/ },
    '/no/such/page'      => { log => [ [ '/no/such/page', 404 ], [ '/style.css', 200 ] ], title => '404 Not Found',
                              says => qr/^404, answered with www\/404\.html$/ },
);
cmp_ok(scalar @try, '>=', scalar keys %expect, 'the table has a row for each thing to try')
  or diag(explain [ map { $_->{href} } @try ]);
my %seen;
for my $t (@try) {
    my $href = $t->{href};
    ok(defined $href && $href =~ m{^/}, 'row "' . ($t->{cells}[0] // '') . '" links a path on this site')
      or next;
    $seen{$href} = 1;
    my $e = $expect{$href};
    ok($e, "row $href is one this test knows what to expect of") or next;
    is($t->{cells}[0], $href, "row $href shows the request it links");
    like($t->{cells}[1] // '', $e->{says}, "row $href says what happens");
    # Follow the link as a visitor would: a new load of the href resolved
    # against the page's URL.
    my $at = length $s->access_log;
    my $got = chromium($base . $href, '--dump-dom');
    my @want = map { browser_req(@$_) } @{ $e->{log} };
    my @l = log_lines_after($at, @want);
    for my $i (0 .. $#want) {
        my ($p, $code) = @{ $e->{log}[$i] };
        ok((grep { $_ =~ $want[$i] } @l), "following $href: the browser got $code for $p")
          or diag("access log since the load:\n" . join("\n", @l));
    }
    is(title_of($got), $e->{title}, "following $href: the page's title") if $e->{title};
    like($got, $e->{dom}, "following $href: the page shows it") if $e->{dom};
}
ok($seen{$_}, "the table has the row $_") for sort keys %expect;

# What the page promises that a page cannot show: the first row's header,
# and the "From a shell" lines (TRACE refused, validators on /style.css).
my $r = $s->get('/static/readme.txt');
is($r->{headers}{'cache-control'}, 'public, max-age=3600', '/static/readme.txt has the Cache-Control the table says');
like($dom, qr{curl -i -X TRACE http://127\.0\.0\.1:8080/ +# 405}, 'the page says TRACE gets 405');
is($s->http(method => 'TRACE', path => '/')->{status}, 405, 'TRACE / is 405');
like($dom, qr{curl -I http://127\.0\.0\.1:8080/style\.css +# ETag, Last-Modified}, 'the page says /style.css has validators');
$r = $s->head('/style.css');
ok($r->{headers}{etag} && $r->{headers}{'last-modified'}, 'HEAD /style.css has ETag and Last-Modified');

# --- the stylesheet applied -------------------------------------------------------
# Decodes an 8-bit RGB or RGBA PNG (what Chromium writes) into
# (width, height, channels, rows of bytes).
sub png_decode {
    my ($png) = @_;
    return unless substr($png, 0, 8) eq "\x89PNG\r\n\x1a\n";
    my ($pos, $idat, $w, $h, $depth, $type, $interlace) = (8, '');
    while ($pos + 8 <= length $png) {
        my ($len, $kind) = unpack('N a4', substr($png, $pos, 8));
        my $data = substr($png, $pos + 8, $len);
        $pos += 12 + $len;
        if ($kind eq 'IHDR') { ($w, $h, $depth, $type, undef, undef, $interlace) = unpack('N N C C C C C', $data) }
        elsif ($kind eq 'IDAT') { $idat .= $data }
        elsif ($kind eq 'IEND') { last }
    }
    return unless $w && $depth == 8 && ($type == 2 || $type == 6) && !$interlace;
    my $ch = $type == 6 ? 4 : 3;
    my $raw = uncompress($idat) // return;
    my $stride = $w * $ch;
    return unless length $raw == $h * ($stride + 1);
    my @rows;
    my @prev = (0) x $stride;
    for my $y (0 .. $h - 1) {
        my $f = ord substr($raw, $y * ($stride + 1), 1);
        my @cur = unpack('C*', substr($raw, $y * ($stride + 1) + 1, $stride));
        for my $i (0 .. $stride - 1) {
            my $a = $i >= $ch ? $cur[$i - $ch] : 0;
            my $b = $prev[$i];
            my $c = $i >= $ch ? $prev[$i - $ch] : 0;
            my $pred = $f == 0 ? 0 : $f == 1 ? $a : $f == 2 ? $b : $f == 3 ? int(($a + $b) / 2) : do {
                my $p = $a + $b - $c;
                my ($pa, $pb, $pc) = (abs($p - $a), abs($p - $b), abs($p - $c));
                $pa <= $pb && $pa <= $pc ? $a : $pb <= $pc ? $b : $c;
            };
            $cur[$i] = ($cur[$i] + $pred) & 0xff;
        }
        push @rows, [@cur];
        @prev = @cur;
    }
    return ($w, $h, $ch, \@rows);
}

# The colours the stylesheet gives the page's background and its heading.
my $css = slurp("$Luxd::ROOT/www/style.css") // '';
my ($bg)     = $css =~ /--bg:\s*#([0-9a-fA-F]{6})\b/;
my ($accent) = $css =~ /--accent:\s*#([0-9a-fA-F]{6})\b/;
ok($bg && $accent, 'www/style.css defines --bg and --accent') or ($bg, $accent) = ('000000', '000000');
like($css, qr/body\s*\{[^}]*background:\s*var\(--bg\)/, 'the body\'s background is --bg');
like($css, qr/h1\s*\{[^}]*\bcolor:\s*var\(--accent\)/, 'h1 is in --accent');
my @bg = map { hex } unpack('(A2)3', $bg);
my @accent = map { hex } unpack('(A2)3', $accent);

my $shotdir = tempdir('shot-XXXXXX', TMPDIR => 1, CLEANUP => !$ENV{LUXD_KEEP});
$from = length $s->access_log;
chromium($base . '/', '--screenshot=' . "$shotdir/shot.png", '--window-size=1000,800', '--hide-scrollbars',
    '--force-color-profile=srgb');
@lines = log_lines_after($from, browser_req('/style.css', 200));
ok((grep { $_ =~ browser_req('/style.css', 200) } @lines), 'the screenshot\'s load fetched /style.css (200)');
my ($w, $h, $ch, $px) = png_decode(slurp("$shotdir/shot.png") // '');
ok($w, 'chromium wrote a PNG screenshot') or diag('no decodable PNG in ' . "$shotdir/shot.png");
if ($w) {
    is("${w}x$h", '1000x800', 'the screenshot has the window\'s size');
    my $at = sub { my ($x, $y) = @_; [ @{ $px->[$y] }[ $x * $ch .. $x * $ch + 2 ] ] };
    # The corners are the page's background; the heading is in the top 150
    # pixels of the page (2rem bold, after 2.5rem of padding).
    is_deeply($at->($_->[0], $_->[1]), \@bg, "pixel ($_->[0],$_->[1]) is the stylesheet's background #$bg")
      for [ 2, 2 ], [ $w - 3, $h - 3 ];
    my $hits = 0;
    for my $y (0 .. 149) {
        for my $x (0 .. $w - 1) {
            my $p = $at->($x, $y);
            $hits++ if $p->[0] == $accent[0] && $p->[1] == $accent[1] && $p->[2] == $accent[2];
        }
    }
    cmp_ok($hits, '>', 200, "the heading is drawn in the stylesheet's accent #$accent ($hits pixels)");
}

$s->stop;
done_testing;
