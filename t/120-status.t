# issue 11, Observe: the status endpoint (status = true in a location).
# Against a real luxd with two workers: the Prometheus output parses line by
# line, the JSON parses, and the numbers add up to the requests sent
# (exactly: by vhost and class, bytes in and out, connections); access rules
# guard it; a location without status does not expose it; reloads are
# counted and the counters survive them; a scrape under wrk counts what wrk
# reports; bad configs are refused with file:line.
use strict;
use warnings;
use Test::More;
use JSON::PP;
use Time::HiRes qw(sleep time);
use Luxd;

my $CONFIG = <<'EOF';
vhost "localhost" {
  default = true, root = "$DIR/www",
  location "/status" {
    status = true,
    access = { allow { from = "127.0.0.1" }, deny { all = true } },
  },
  location "/forbidden/" { access = { deny { all = true } } },
  location "/nostatus/" { },
}
vhost "other.test" { root = "$DIR/other" }
EOF

my $s = Luxd->new(
    workers => 2,
    config  => $CONFIG,
    # wrk's connections stay open for the whole run (counted below).
    server  => { keepalive_requests => 10_000_000 },
    files   => {
        'www/index.html'     => "index\n",
        'www/1k.html'        => 'x' x 1024,
        'www/forbidden/a'    => "no\n",
        'www/nostatus/x'     => "x\n",
        'other/index.html'   => "other\n",
    },
);

# --- parsing --------------------------------------------------------------

my $NAME  = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
my $LABEL = qr/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"/;

# Prometheus text format 0.0.4: every line a sample, # HELP or # TYPE (no
# other comments from luxd); each TYPE once, before its samples. Returns
# { "name{labels}" => value } or fails.
sub parse_prom {
    my ($text, $what) = @_;
    my (%v, %type, %hist, @bad);
    for my $l (split /\n/, $text) {
        if ($l =~ /^# HELP ($NAME) \S.*$/) { next }
        if ($l =~ /^# TYPE ($NAME) (counter|gauge|histogram)$/) {
            push @bad, "TYPE twice: $l" if $type{$1}++;
            $hist{$1} = 1 if $2 eq 'histogram';
            next;
        }
        # Counts are integers; seconds (a histogram's sum, a max) decimals.
        if ($l =~ /^($NAME)(\{$LABEL(?:,$LABEL)*\})? (\d+(?:\.\d+)?)$/) {
            my ($name, $labels, $value) = ($1, $2 // '', $3);
            my ($fam) = $name =~ /^(.*)_(?:bucket|sum|count)$/;
            push @bad, "sample before its TYPE: $l" unless $type{$name} || ($fam && $hist{$fam});
            push @bad, "twice: $l" if exists $v{ $name . $labels };
            $v{ $name . $labels } = $value;
            next;
        }
        push @bad, "not a metric line: $l";
    }
    ok !@bad, "$what: every line is a sample, # HELP or # TYPE" or diag join "\n", @bad[0 .. ($#bad < 9 ? $#bad : 9)];
    ok substr($text, -1) eq "\n", "$what: ends with a newline";
    return \%v;
}

# One request on its own connection, read until luxd closes it: luxd
# counts a request once its response is written (the write's callback may
# come a loop turn after the client has the bytes), and closes after that,
# so a response read to EOF has been counted.
sub fetch {
    my (%o) = @_;
    my $req = Luxd::request(%o, close => 1);
    my $data = $s->raw($req, timeout => 5);
    my ($r) = parse_responses($data, head => ($o{method} // '') eq 'HEAD');
    $r ||= { status => undef, headers => {}, body => '' };
    $r->{raw} = $data;
    $r->{req} = $req;
    return $r;
}

sub scrape_prom {
    my ($what, @h) = @_;
    my $r = fetch(path => '/status', headers => [@h]);
    is $r->{status}, 200, "$what: 200";
    like $r->{headers}{'content-type'}, qr{^text/plain; version=0\.0\.4}, "$what: Prometheus text 0.0.4";
    return (parse_prom($r->{body}, $what), $r);
}

sub scrape_json {
    my ($what, $path, @h) = @_;
    my $r = fetch(path => $path // '/status?format=json', headers => [@h]);
    is $r->{status}, 200, "$what: 200";
    like $r->{headers}{'content-type'}, qr{^application/json}, "$what: application/json";
    my $j = eval { decode_json($r->{body}) };
    ok $j, "$what: JSON::PP parses it" or diag "$@\n$r->{body}";
    return ($j || {}, $r);
}

# --- the requests, each on its own connection (so both loops get some) ----

my %sent;            # vhost => class => n
my ($bytes_out, $bytes_in, $conns) = (0, 0, 0);
sub send_req {
    my ($host, $path, $want) = @_;
    my $r = fetch(path => $path, host => $host);
    $conns++;
    $bytes_in += length $r->{req};
    $bytes_out += length $r->{raw};
    return fail "$host $path: want $want, got " . ($r->{status} // 'none') unless ($r->{status} // 0) == $want;
    $sent{ $host eq 'other.test' ? 'other.test' : 'localhost' }{ int($want / 100) . 'xx' }++;
}
my @plan = (
    ['localhost', '/', 200, 20], ['localhost', '/1k.html', 200, 10], ['localhost', '/missing', 404, 9],
    ['localhost', '/forbidden/a', 403, 7], ['other.test', '/', 200, 6], ['other.test', '/nope', 404, 4],
    ['localhost', '/nostatus/', 403, 1],    # no status = true: a directory without index, 403
);
my $N = 0;
for my $p (@plan) {
    send_req(@$p[0 .. 2]) for 1 .. $p->[3];
    $N += $p->[3];
}
is $N, 57, "$N requests sent: 200, 404 and 403, on two vhosts";

# --- the first scrape: exactly what was sent -----------------------------

my ($p, $r1) = scrape_prom('first scrape');
for my $vh ('localhost', 'other.test') {
    for my $c (qw(1xx 2xx 3xx 4xx 5xx)) {
        is $p->{qq{luxd_requests_total{vhost="$vh",class="$c"}}}, $sent{$vh}{$c} // 0,
          "$vh $c: " . ($sent{$vh}{$c} // 0) . " (the scrape does not count itself)";
    }
}
is $p->{'luxd_requests_by_class_total{class="2xx"}'}, 36, 'by class: 2xx 36';
is $p->{'luxd_requests_by_class_total{class="4xx"}'}, 21, 'by class: 4xx 21 (9 + 4 404s, 7 + 1 403s)';
is $p->{luxd_sent_bytes_total}, $bytes_out, "bytes out: $bytes_out, the sum of the responses as received";
cmp_ok $p->{luxd_sent_bytes_total}, '>=', $bytes_out, 'bytes out >= the sum of the response sizes';
# Bytes in: the requests, and this scrape's own request (read before it is answered).
is $p->{luxd_received_bytes_total}, $bytes_in + length($r1->{req}), 'bytes in: the requests plus the scrape request';
# Connections: one per request, the harness's start-up probe, this scrape's.
is $p->{luxd_connections_accepted_total}, $conns + 2, 'accepted: one per request, the start-up probe and the scrape';
is $p->{luxd_connections_closed_total}, $conns + 1, 'closed: all but the scrape\'s';
is $p->{'luxd_connections{state="handling"}'}, 1, 'the scrape is the one connection handling';
is $p->{'luxd_connections{state="idle"}'}, 0, 'none idle';
is $p->{luxd_connections_refused_total}, 0, 'none refused';
is $p->{luxd_requests_aborted_total}, 0, 'none aborted';
cmp_ok $p->{luxd_file_cache_hits_total} + $p->{luxd_file_cache_misses_total}, '>=', 36, 'file cache: a lookup per file served';
cmp_ok $p->{luxd_file_cache_misses_total}, '>=', 3, 'file cache: misses for the first loads';
cmp_ok $p->{luxd_file_cache_hits_total}, '>', 0, 'file cache: hits';
is $p->{luxd_file_io_jobs}, 0, 'no file-I/O job outstanding';
cmp_ok $p->{luxd_file_io_jobs_total}, '>=', $p->{luxd_file_cache_misses_total} > 0 ? 1 : 0, 'file-I/O jobs were queued';
is $p->{luxd_workers}, 2, 'two workers';
is $p->{'luxd_worker_generation{worker="0"}'}, 1, 'worker 0 on generation 1';
is $p->{'luxd_worker_generation{worker="1"}'}, 1, 'worker 1 on generation 1';
is $p->{luxd_generation}, 1, 'live generation 1';
is $p->{luxd_generations_draining}, 0, 'none draining';
is $p->{'luxd_reloads_total{result="ok"}'}, 0, 'no reload yet';
is $p->{'luxd_policy_runs_total'}, 0, 'no policy';
is $r1->{headers}{'cache-control'}, 'no-store', 'Cache-Control: no-store';

# --- JSON, two ways of asking for it -------------------------------------

my ($j) = scrape_json('?format=json');
is $j->{vhosts}{localhost}{'2xx'}, 31, 'JSON: localhost 2xx 31 (30 and the first scrape)';
is $j->{vhosts}{localhost}{'4xx'}, 17, 'JSON: localhost 4xx 17';
is $j->{vhosts}{'other.test'}{total}, 10, 'JSON: other.test total 10';
is $j->{requests}{total}, $N + 1, 'JSON: total N + the first scrape';
is $j->{bytes}{out}, $bytes_out + length($r1->{raw}), 'JSON: bytes out grew by the first scrape\'s response';
is $j->{server}{workers}, 2, 'JSON: two workers';
is scalar @{ $j->{workers} }, 2, 'JSON: a record per worker';
my ($j2) = scrape_json('Accept: application/json', '/status', 'Accept' => 'text/html, application/json;q=0.9');
is $j2->{requests}{total}, $N + 2, 'Accept: application/json gives JSON too';
my $r = fetch(path => '/status?format=prometheus', headers => ['Accept' => 'application/json']);
like $r->{headers}{'content-type'}, qr{^text/plain}, '?format=prometheus beats Accept: application/json';

# --- access and exposure --------------------------------------------------

my ($out, $rc) = $s->curl('-o', '/dev/null', '-w', '%{http_code}', '--interface', '127.0.0.2', $s->url('/status'));
is $out, '403', 'from 127.0.0.2 (not allowed): 403' or diag "curl rc $rc";
$r = fetch(path => '/nostatus/x');
is $r->{status}, 200, 'a location without status = true serves its files';
unlike $r->{body}, qr/luxd_/, '... and no counters';
$r = fetch(path => '/nostatus/?format=json');
unlike $r->{body}, qr/luxd_|"vhosts"/, '... not even when asked for them';
$r = $s->http(method => 'POST', path => '/status', body => 'x');
is $r->{status}, 405, 'POST /status: 405';
is $r->{headers}{allow}, 'GET, HEAD', '... Allow: GET, HEAD';

# --- reloads ---------------------------------------------------------------

($p) = scrape_prom('before reloads');
my $before = $p->{'luxd_requests_total{vhost="localhost",class="2xx"}'};
like $s->reload // '', qr/^ok/, 'a good reload';
($p) = scrape_prom('after a good reload');
is $p->{'luxd_reloads_total{result="ok"}'}, 1, 'reloads ok: 1';
is $p->{'luxd_reloads_total{result="failed"}'}, 0, 'reloads failed: 0';
is $p->{luxd_generation}, 2, 'live generation 2';
is $p->{'luxd_requests_total{vhost="localhost",class="2xx"}'}, $before + 1,
  'localhost\'s counters survive the reload (one more: the scrape before it)';
is $p->{'luxd_requests_total{vhost="other.test",class="2xx"}'}, 6, 'other.test\'s too';
my $good = $s->{config_text};
$s->write_config("server { listen = { \"127.0.0.1:$s->{port}\" } \n");
like $s->reload // '', qr/^failed/, 'a bad reload fails';
$s->write_config($good);
($p) = scrape_prom('after a bad reload');
is $p->{'luxd_reloads_total{result="ok"}'}, 1, 'reloads ok: still 1';
is $p->{'luxd_reloads_total{result="failed"}'}, 1, 'reloads failed: 1';
is $p->{luxd_generation}, 2, 'still generation 2';

# Generations 1 and 2 were replaced; with no request left under them they
# are gone once both loops have adopted the new one.
# (Polled up to 10 s: on a loaded machine a loop may adopt late.)
my $g;
for (my $end = time + 10; ; sleep 0.05) {
    $g = fetch(path => '/status')->{body} =~ /^luxd_generations_draining (\d+)$/m ? $1 : -1;
    last if $g == 0 || time > $end;
}
is $g, 0, 'no older generation draining';

# --- a scrape under load ---------------------------------------------------

($j) = scrape_json('before wrk');
my $req_before = $j->{vhosts}{localhost}{'2xx'};
my $acc_before = $j->{connections}{accepted};
my $C = 8;
open my $wrk, '-|', 'wrk', '-t', '2', '-c', $C, '-d', '3s', $s->url('/1k.html') or die "wrk: $!";
my $wout = do { local $/; <$wrk> };
close $wrk;
my ($wn) = $wout =~ /(\d+) requests in /;
ok $wn, "wrk ran: $wn requests" or diag $wout;
like $wout, qr/^(?!.*Non-2xx)/s, 'wrk saw only 2xx' or diag $wout;
# Until wrk's connections are closed on luxd's side too (their last
# requests counted), scrapes show only the scrape's own connection.
my $polls = 0;
for (my $end = time + 10; ; sleep 0.05) {
    ($j) = decode_json(fetch(path => '/status?format=json')->{body});
    $polls++;
    my $open = 0;
    $open += $_ for values %{ $j->{connections}{states} };
    last if $open == 1 || time > $end;
}
($j) = scrape_json('after wrk');
# The JSON scrape before wrk and the polls are counted now; wrk's requests
# are all 2xx on localhost.
my $counted = $j->{vhosts}{localhost}{'2xx'} - $req_before - 1 - $polls;
# wrk counts the responses it read; when it stops it closes its $C
# connections, each with at most one request in flight, whose response
# luxd may have sent in full (and counted) without wrk reading it.
cmp_ok $counted, '>=', $wn, "luxd counted $counted, wrk reported $wn";
cmp_ok $counted, '<=', $wn + $C, "at most $C more (one in flight per connection when wrk stops)";
note "under load: wrk $wn, luxd $counted (difference " . ($counted - $wn) . ")";
# wrk's main thread connects once before the run (and sends nothing).
is $j->{connections}{accepted} - $acc_before, $C + 1 + $polls + 1,
  "accepted: wrk's $C connections, its first probe, the polls' and the scrape's";

# --- config errors -----------------------------------------------------------

my ($crc, $cout) = Luxd::check_config(qq{vhost "a" {\n  default = true,\n  location "/s" {\n    status = "yes",\n  },\n}\n});
is $crc, 1, 'status = "yes" is refused';
like $cout, qr/luxd\.lua:4: .*"status" must be true or false, got string/, '... at file:line, saying what it must be' or diag $cout;
($crc, $cout) = Luxd::check_config(qq{upstream "u" { "127.0.0.1:1" }\nvhost "a" {\n  default = true,\n  location "/s" { status = true,\n    proxy = "u" },\n}\n});
is $crc, 1, 'status beside proxy is refused';
like $cout, qr/luxd\.lua:5: .*"proxy" would never be used/, '... at file:line' or diag $cout;

$s->stop;
unlike $s->error_log, qr/\[(?:alert|emerg)\]|ThreadSanitizer/, 'error log clean';
done_testing;
