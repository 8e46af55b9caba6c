#!/usr/bin/env bash
# HTTP/2 side by side: luxd against nginx, lighttpd and h2o over h2 (TLS,
# ALPN) and h2c (cleartext, prior knowledge), one ECDSA P-256 certificate for
# all, in ROUNDS rounds with the server order rotated each round, and the
# medians. Rows (all GETs, one docroot):
#   h2-1k          h2 over TLS, /1k.html, h2load -c 100 -m 10
#   h2-100k        h2 over TLS, /100k.html, h2load -c 10 -m 10
#   h2c-1k         h2c by prior knowledge, /1k.html, h2load -c 100 -m 10
#   h2c-100k       h2c by prior knowledge, /100k.html, h2load -c 10 -m 10
#   h2-idle-mem    server RSS growth per idle h2 connection (TLS): IDLE_CONNS
#                  connections, each after one answered GET /1k.html
#   h2c-idle-mem   the same over h2c
#
# Usage: bash bench/h2.sh [SERVER...]   SERVER: luxd luxd-base nginx lighttpd h2o
#                                       (default: luxd nginx lighttpd h2o, and
#                                       luxd-base when LUXD_BASE is set)
# Environment:
#   ROUNDS=5      rounds; round r measures the servers in the order given,
#                 rotated left by r-1
#   DURATION=6    seconds of each measured h2load run (h2load -D)
#   WARMUP=2      seconds of the warm-up run (same row) before each one
#   CONNS_1K=100 STREAMS_1K=10      h2load -c / -m of the 1k rows
#   CONNS_100K=10 STREAMS_100K=10   h2load -c / -m of the 100k rows
#   IDLE_CONNS=500  connections held open by the idle rows
#   SETTLE=2      seconds between the last idle connection's answer and the
#                 second RSS reading
#   ROWS="h2-1k h2-100k h2c-1k h2c-100k h2-idle-mem h2c-idle-mem"
#                 the rows, in this order (the idle rows run first in a round)
#   SUITES=TLS_AES_128_GCM_SHA256
#                 the TLS 1.3 suites h2load offers (an OpenSSL config in
#                 OPENSSL_CONF, as tls.sh's): every server then negotiates the
#                 same suite. Default: each server's order chooses
#   SERVER_CPU=0  CPU the servers are pinned to (taskset -c)
#   CLIENT_CPU=1  CPU the clients (h2load, the idle client) are pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, certificate, logs)
#   LUXD, NGINX, LIGHTTPD, H2O  binaries (default build/luxd, /usr/sbin/nginx,
#                 /usr/sbin/lighttpd, /usr/bin/h2o); luxd runs from a copy
#                 made at the start, so a rebuild during the run changes nothing
#   LUXD_BASE     a second luxd binary, measured as "luxd-base" in the same
#                 run if it takes the HTTP/2 config (luxd -t); a build from
#                 before HTTP/2 is left out with a message
#
# Each round, for each idle row, starts every server afresh (one at a time,
# in the round's order: a fresh heap, so connections are not absorbed by
# memory an earlier row freed), reads the RSS of its process tree, opens
# IDLE_CONNS h2 connections one after the other (an embedded python3 client
# with the h2 module: preface, SETTINGS, one GET /1k.html read and checked
# whole, then nothing), waits SETTLE s, reads the RSS again, and checks that
# every connection still answers a PING. Then it starts every server for the
# load rows, each pinned to SERVER_CPU with one worker, access logging off,
# an h2c listener and an h2 (TLS) one on free ports of 127.0.0.1; checks each
# (curl --http2 / --http2-prior-knowledge fetch both files with 200, their
# exact bytes and HTTP/2; a server that fails one transport is skipped for
# its rows); then for each row measures the servers one after the other with
# h2load pinned to CLIENT_CPU. Server CPU time is utime+stime of the server's
# whole process tree from /proc, before and after the measured run (lib.sh's
# measure_case). A run is clean only when h2load negotiated h2 (h2c), every
# request done succeeded, none failed, errored or timed out, and every answer
# was 2xx. Raw results go to bench/results/h2-DATE/; the table (table.md) has
# per row and server the median CPU us per request and req/s over the clean
# rounds, the median bytes per idle connection, and luxd over the best of
# nginx, lighttpd and h2o. See bench/README.md.
#
# Exit status: 0 when every selected server was measured cleanly in every
# round, 3 when a server or a row was skipped or not clean, 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
# shellcheck source=bench/tls_lib.sh
. "$HERE/tls_lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-6}
WARMUP=${WARMUP:-2}
CONNS_1K=${CONNS_1K:-100}
STREAMS_1K=${STREAMS_1K:-10}
CONNS_100K=${CONNS_100K:-10}
STREAMS_100K=${STREAMS_100K:-10}
IDLE_CONNS=${IDLE_CONNS:-500}
SETTLE=${SETTLE:-2}
SUITES=${SUITES:-}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
# tls_setup's protocol settings: TLS 1.2 and 1.3 offered (h2 needs 1.2 at
# least; every client here negotiates 1.3).
TLS12=0
# The python3 with the h2 module (Debian's python3-h2): not whatever
# python3 comes first in PATH (a pyenv shim, say).
PY=/usr/bin/python3
ALL_ROWS=(h2-1k h2-100k h2c-1k h2c-100k h2-idle-mem h2c-idle-mem)
read -r -a ROWS <<<"${ROWS:-${ALL_ROWS[*]}}"
READY_TIMEOUT=15
OPEN_TIMEOUT=300 # s for the idle client to open and get answers on all IDLE_CONNS
# Every server's idle timeout and requests-per-connection cap, set far past
# what a run needs: a GOAWAY in the middle of a run would be counted as
# failed requests, and an idle connection closed before the second RSS
# reading would make the idle rows meaningless (h2o's default closes idle
# h2 connections after 10 s, nginx's keepalive_requests 1000 ends a
# connection after 1000 streams).
IDLE_TIMEOUT=300
MAX_REQUESTS=10000000

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
SERVERS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    luxd | luxd-base | nginx | lighttpd | h2o) SERVERS+=("$a") ;;
    *) usage >&2; die "unknown server '$a' (known: luxd luxd-base nginx lighttpd h2o)" ;;
  esac
done
if ((${#SERVERS[@]} == 0)); then
  SERVERS=(luxd nginx lighttpd h2o)
  [[ -n ${LUXD_BASE:-} ]] && SERVERS=(luxd luxd-base nginx lighttpd h2o)
fi
need_whole ROUNDS DURATION WARMUP CONNS_1K STREAMS_1K CONNS_100K STREAMS_100K IDLE_CONNS SETTLE SERVER_CPU CLIENT_CPU
((ROUNDS > 0 && DURATION > 0 && CONNS_1K > 0 && STREAMS_1K > 0 && CONNS_100K > 0 && STREAMS_100K > 0 && IDLE_CONNS > 0)) ||
  die "ROUNDS, DURATION, CONNS_*, STREAMS_* and IDLE_CONNS must be > 0"
((${#ROWS[@]})) || die "ROWS is empty (known: ${ALL_ROWS[*]})"
for r in "${ROWS[@]}"; do
  [[ " ${ALL_ROWS[*]} " == *" $r "* ]] || die "unknown row '$r' in ROWS (known: ${ALL_ROWS[*]})"
done
# The idle rows and the load rows, each in ROWS' order.
IDLE_ROWS=() LOAD_ROWS=()
for r in "${ROWS[@]}"; do
  if [[ $r == *-idle-mem ]]; then IDLE_ROWS+=("$r"); else LOAD_ROWS+=("$r"); fi
done
# Which transports the rows need: the checks skip only what is asked for.
WANT_H2=0 WANT_H2C=0
for r in "${ROWS[@]}"; do
  if [[ $r == h2c-* ]]; then WANT_H2C=1; else WANT_H2=1; fi
done

# ---- dependencies ----------------------------------------------------------
# wrk only because lib.sh's check_tools_and_cpus insists on it.
tls_deps h2load curl wrk
if ! "$PY" -c 'import h2' 2>/dev/null; then deps_install test; fi
"$PY" -c 'import h2.connection' 2>/dev/null || die "$PY has no h2 module (Debian package python3-h2)"
has h2load || die "h2load not found (Debian package nghttp2-client)"
has openssl || die "openssl not found (Debian package openssl)"
curl -V | grep -qw HTTP2 || die "curl has no HTTP/2 support (it checks every server over h2 and h2c)"
check_tools_and_cpus
check_idle

# Each idle client holds IDLE_CONNS sockets, each server as many.
NEED_FDS=$((IDLE_CONNS + 256))
if (($(ulimit -n) < NEED_FDS)); then
  ulimit -n "$NEED_FDS" 2>/dev/null || die "ulimit -n $NEED_FDS failed (the hard limit is $(ulimit -Hn)); lower IDLE_CONNS"
fi

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-h2 h2
SUMMARY=$RESULTS/summary.tsv
printf 'round\tserver\trow\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\n' >"$SUMMARY"
IDLE_TSV=$RESULTS/idle.tsv
printf 'round\tserver\trow\tconns\tok\tfailed\tstill_open\tclosed\trss_before_kb\trss_after_kb\tdelta_kb\tbytes_per_conn\topen_ms\tstatus\n' >"$IDLE_TSV"
TLSINFO=$RESULTS/tls-info.tsv
printf 'round\tserver\tprotocol\tcipher\tgroup\tsignature\tresumed\n' >"$TLSINFO"

LUXD=${LUXD:-$ROOT/build/luxd}
copy_luxd_bins # (tls_lib.sh)
client_suites

# ---- docroot and certificate ------------------------------------------------
DOCROOT=$TMP/www
make_docroot "$DOCROOT/1k.html"
# 64-byte lines, as static.sh's and tls.sh's
yes 'luxd bench large file line: 0123456789abcdefghijklmnopqrstuvwxy' | head -c 102400 >"$DOCROOT/100k.html" || true
[[ $(wc -c <"$DOCROOT/100k.html") -eq 102400 ]] || die "$DOCROOT/100k.html is not 102400 bytes"
chmod 644 "$DOCROOT/100k.html"

tls_setup # CERT, KEY, the protocol settings (tls_lib.sh)

# ---- start functions ------------------------------------------------------------
# tls_lib.sh's start_luxd and start_luxd-base are used as they are; the
# functions they and the loop call are replaced here, because the shared
# bench/conf/*-tls.* templates have no HTTP/2 switch (and tls.sh must keep
# measuring HTTP/1.1 with them). Each config below is its -tls template
# with HTTP/2 on both listeners, the idle timeout and request cap above.
# start_NAME PORT TLS_PORT: PORT speaks h2c (by prior knowledge) and, where
# the server can, HTTP/1.1 too; TLS_PORT speaks h2 by ALPN.

# luxd_conf NAME PORT TLS_PORT — writes TMP/NAME.lua.
luxd_conf() {
  cat >"$TMP/$1.lua" <<EOF
-- luxd config for bench/h2.sh: one worker, access logging off; h2c by prior
-- knowledge (beside HTTP/1.1) on the plain listener, h2 by ALPN on the TLS one.
server {
  listen = { { "127.0.0.1:$2", http2 = true }, { "127.0.0.1:$3", tls = true, http2 = true } },
  workers = 1,
  error_log = "$TMP/$1-error.log",
  access_log = false,
  keepalive_timeout = $IDLE_TIMEOUT,
  keepalive_requests = $MAX_REQUESTS,
  tls = { protocols = $LUXD_PROTOCOLS },
}
vhost "bench" { default = true, root = "$DOCROOT", tls = { cert = "$CERT", key = "$KEY" } }
EOF
}

# luxd_takes_h2 NAME BINARY — true when BINARY accepts the config (luxd -t);
# else sets SKIP_REASON.
luxd_takes_h2() {
  luxd_conf "$1" 1 2
  "$2" -t -c "$TMP/$1.lua" >"$TMP/$1-check.log" 2>&1 && return 0
  SKIP_REASON="refuses the HTTP/2 config (luxd -t: $(head -n 1 "$TMP/$1-check.log")): a build without HTTP/2?"
  return 1
}

start_luxd_binary() { # NAME BINARY PORT TLS_PORT
  local name=$1 bin=$2 port=$3 tport=$4
  luxd_takes_h2 "$name" "$bin" || return 1
  luxd_conf "$name" "$port" "$tport"
  start_bg "$TMP/$name-stderr.log" taskset -c "$SERVER_CPU" "$bin" -c "$TMP/$name.lua"
  SERVER_PID=$BENCH_LAST_PID
}

# nginx 1.22: "listen ... http2" without ssl speaks h2c by prior knowledge
# only (no HTTP/1.1 on that port); "ssl http2" offers h2 by ALPN.
# keepalive_timeout and keepalive_requests govern h2 connections since 1.19.7.
start_nginx() {
  local port=$1 tport=$2 conf=$TMP/nginx.conf user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  cat >"$conf" <<EOF
# nginx config for bench/h2.sh: one worker (plus an idle master; both are
# counted), access logging off, h2c on the plain listener, h2 on the TLS one.
$user_line
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log warn;
events {
    worker_connections 4096;
    multi_accept off;
}
http {
    access_log off;
    client_body_temp_path $TMP/nginx-tmp/client_body;
    proxy_temp_path       $TMP/nginx-tmp/proxy;
    fastcgi_temp_path     $TMP/nginx-tmp/fastcgi;
    uwsgi_temp_path       $TMP/nginx-tmp/uwsgi;
    scgi_temp_path        $TMP/nginx-tmp/scgi;
    types { text/html html; }
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    keepalive_requests $MAX_REQUESTS;
    keepalive_timeout ${IDLE_TIMEOUT}s;
    ssl_certificate     $CERT;
    ssl_certificate_key $KEY;
    ssl_protocols       $NGINX_PROTOCOLS;
    ssl_session_cache   shared:SSL:10m;
    ssl_session_timeout 1h;
    ssl_session_tickets on;
    server {
        listen 127.0.0.1:$port http2 default_server;
        listen 127.0.0.1:$tport ssl http2 default_server;
        server_name bench;
        root $DOCROOT;
    }
}
EOF
  start_bg "$TMP/nginx-stderr.log" taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP/nginx/" -e "$TMP/nginx-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

# lighttpd 1.4.69 has h2 on by default; the feature flag says so anyway. Its
# plain port takes h2c by prior knowledge beside HTTP/1.1.
start_lighttpd() {
  local port=$1 tport=$2 conf=$TMP/lighttpd.conf
  if [[ ! -e $LIGHTTPD_MODDIR/mod_openssl.so ]]; then
    SKIP_REASON="$LIGHTTPD_MODDIR/mod_openssl.so missing (Debian package lighttpd-mod-openssl)"
    return 1
  fi
  cat >"$conf" <<EOF
# lighttpd config for bench/h2.sh: one process, no mod_accesslog (access
# logging off), h2c on the plain socket, h2 by ALPN on the TLS one.
server.modules = ( "mod_openssl" )
server.feature-flags = ( "server.h2proto" => "enable" )
server.document-root = "$DOCROOT"
server.bind = "127.0.0.1"
server.port = $port
server.pid-file = "$TMP/lighttpd.pid"
server.errorlog = "$TMP/lighttpd-error.log"
server.tag = "lighttpd"
server.max-worker = 0
server.max-keep-alive-requests = $MAX_REQUESTS
server.max-keep-alive-idle = $IDLE_TIMEOUT
server.max-read-idle = $IDLE_TIMEOUT
server.max-fds = 8192
server.max-connections = 4096
index-file.names = ( "index.html" )
mimetype.assign = ( ".html" => "text/html" )
\$SERVER["socket"] == "127.0.0.1:$tport" {
    ssl.engine = "enable"
    ssl.pemfile = "$CERT"
    ssl.privkey = "$KEY"
    ssl.openssl.ssl-conf-cmd = ( "MinProtocol" => "TLSv1.2", "MaxProtocol" => "$MAX_PROTOCOL" )
}
EOF
  start_bg "$TMP/lighttpd-stderr.log" taskset -c "$SERVER_CPU" "$LIGHTTPD" -D -f "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# h2o 2.2.5 offers h2 by ALPN on a TLS listener and takes h2c by prior
# knowledge beside HTTP/1.1 on a plain one, both by default.
start_h2o() {
  local port=$1 tport=$2 conf=$TMP/h2o.conf user_line=""
  # As root h2o would setuid to nobody; stay root (the files are in TMP).
  [[ $(id -u) -eq 0 ]] && user_line="user: root"
  cat >"$conf" <<EOF
# h2o config for bench/h2.sh: one thread, no access-log (access logging off);
# the private key in h2o's neverbleed process (counted, as in tls.sh).
$user_line
num-threads: 1
pid-file: $TMP/h2o.pid
error-log: $TMP/h2o-error.log
http2-idle-timeout: $IDLE_TIMEOUT
listen:
  host: 127.0.0.1
  port: $port
listen:
  host: 127.0.0.1
  port: $tport
  ssl:
    certificate-file: $CERT
    key-file: $KEY
    minimum-version: TLSv1.2
hosts:
  default:
    paths:
      /:
        file.dir: $DOCROOT
EOF
  start_bg "$TMP/h2o-stderr.log" taskset -c "$SERVER_CPU" "$H2O" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# A LUXD_BASE from before HTTP/2 refuses "http2 = true": found once here
# (luxd -t) and left out of every row, with a message, rather than failing
# each round.
BASE_NOTE=""
if [[ " ${SERVERS[*]} " == *" luxd-base "* ]]; then
  if [[ -z ${LUXD_BASE:-} || ! -x $LUXD_BASE ]]; then
    BASE_NOTE="luxd-base: LUXD_BASE is not set to an executable luxd: left out"
  elif ! luxd_takes_h2 luxd-base "$LUXD_BASE"; then
    BASE_NOTE="luxd-base: $SKIP_REASON: left out of every h2 row"
  fi
  if [[ -n $BASE_NOTE ]]; then
    say "$BASE_NOTE"
    keep=()
    for s in "${SERVERS[@]}"; do [[ $s == luxd-base ]] || keep+=("$s"); done
    SERVERS=("${keep[@]}")
  fi
fi
((${#SERVERS[@]})) || die "no server left to measure"

# ---- checks ---------------------------------------------------------------------
# h2_fetch URL FILE CURL_ARG... — one GET with curl: must be HTTP/2, 200 and
# exactly FILE's bytes; says what was wrong otherwise.
h2_fetch() {
  local url=$1 file=$2 tmp got
  shift 2
  tmp=$(mktemp)
  got=$(curl -s -o "$tmp" -w '%{http_version} %{http_code}' --max-time 5 "$@" "$url") || got="curl failed ($?)"
  if [[ $got != "2 200" ]]; then
    say "check: $url answered '$got', want HTTP/2 and 200"
    rm -f "$tmp"
    return 1
  fi
  if ! cmp -s "$tmp" "$file"; then
    say "check: body from $url ($(wc -c <"$tmp") bytes) differs from $file ($(wc -c <"$file") bytes)"
    rm -f "$tmp"
    return 1
  fi
  rm -f "$tmp"
}

FAILED=()
record_skip() { # ROUND NAME REASON
  printf '%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\t-\t-\t-\n' "$1" "$2" "$3" >>"$SUMMARY"
  FAILED+=("r$1/$2")
  say "round $1: $2: SKIPPED: $3"
}

declare -A PID_OF PORT_OF TPORT_OF CAN
# start_checked ROUND NAME — starts NAME and checks it over the transports
# the rows need; sets PID_OF[NAME] (empty when skipped), PORT_OF, TPORT_OF,
# and CAN[NAME,h2] / CAN[NAME,h2c] (1 when that transport passed its check).
start_checked() {
  local round=$1 name=$2 port tport rc p info ok_h2=0 ok_h2c=0
  PID_OF[$name]=""
  CAN[$name,h2]=0 CAN[$name,h2c]=0
  SERVER_PID="" SKIP_REASON=""
  read -r port tport < <(two_ports) || { record_skip "$round" "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port" "$tport"; then
    record_skip "$round" "$name" "$SKIP_REASON"
    return 0
  fi
  # Ready: an answer over TLS (every server's plain port but nginx's speaks
  # HTTP/1.1; all TLS ports speak it or h2, and curl takes either).
  rc=0
  wait_ready "https://127.0.0.1:$tport/1k.html" "$SERVER_PID" "$READY_TIMEOUT" --cacert "$CERT" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      record_skip "$round" "$name" "exited during start-up"
    else
      record_skip "$round" "$name" "no 2xx answer on https://127.0.0.1:$tport/1k.html within ${READY_TIMEOUT}s"
    fi
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ((WANT_H2)); then
    ok_h2=1
    for p in /1k.html /100k.html; do
      h2_fetch "https://127.0.0.1:$tport$p" "$DOCROOT$p" --http2 --cacert "$CERT" || ok_h2=0
    done
    ((ok_h2)) || record_skip "$round" "$name" "h2 rows: did not serve both files over h2 (TLS, ALPN) with 200 and their bytes"
    info=$(tls_info "$name" "$tport")
    printf '%s\t%s\t%s\n' "$round" "$name" "$info" >>"$TLSINFO"
  fi
  if ((WANT_H2C)); then
    ok_h2c=1
    for p in /1k.html /100k.html; do
      h2_fetch "http://127.0.0.1:$port$p" "$DOCROOT$p" --http2-prior-knowledge || ok_h2c=0
    done
    ((ok_h2c)) || record_skip "$round" "$name" "h2c rows: did not serve both files over h2c (prior knowledge) with 200 and their bytes"
  fi
  if ((!ok_h2 && !ok_h2c)); then
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  CAN[$name,h2]=$ok_h2 CAN[$name,h2c]=$ok_h2c
  PID_OF[$name]=$SERVER_PID PORT_OF[$name]=$port TPORT_OF[$name]=$tport
  say "round $round: $name: pid $SERVER_PID, $(proc_tree "$SERVER_PID" | wc -l) process(es), h2c $port, h2 $tport: checked"
}

# ---- the load rows: h2load under lib.sh's measure_case ---------------------------
row_transport() { if [[ $1 == h2c-* ]]; then echo h2c; else echo h2; fi; }
row_path() { if [[ $1 == *-100k ]]; then echo /100k.html; else echo /1k.html; fi; }
row_shape() { if [[ $1 == *-100k ]]; then echo "$CONNS_100K $STREAMS_100K"; else echo "$CONNS_1K $STREAMS_1K"; fi; }

# measure_case calls run_wrk and parse_wrk: here they run h2load (-t 1: one
# thread on the one client CPU; --npn-list=h2: over TLS, h2 or nothing, never
# a silent fallback to HTTP/1.1) for SECONDS with the row's H2_CONNS
# connections of H2_STREAMS streams each.
H2_CONNS=1 H2_STREAMS=1
run_wrk() { # OUT SECONDS URL
  local out=$1 secs=$2 url=$3
  client_env timeout --foreground -k 5 $((secs + 30)) \
    taskset -c "$CLIENT_CPU" h2load --npn-list=h2 -t 1 -c "$H2_CONNS" -m "$H2_STREAMS" -D "$secs" "$url" >"$out" 2>&1
}
# parse_wrk FILE — "rps requests non2xx errors" from h2load's output:
# requests = succeeded, non2xx = 3xx + 4xx + 5xx, errors = failed + errored
# + timeout.
parse_wrk() {
  awk '
    /^finished in / { rps = $4 }
    # requests: T total, S started, D done, OK succeeded, F failed, E errored, O timeout
    /^requests: / { ok = $8; bad = $10 + $12 + $14 }
    /^status codes: / { non2xx = $5 + $7 + $9 }
    END { printf "%s %d %d %d\n", (rps == "" ? "0" : rps), ok, non2xx, bad }
  ' "$1"
}
# h2load_unclean FILE PROTO — prints why an h2load run is not clean (nothing
# when it is): the protocol it negotiated is not PROTO, or a request failed,
# errored or timed out, or "done" is not all "succeeded".
h2load_unclean() {
  awk -v want="$2" '
    /^Application protocol: / { proto = $3 }
    /^requests: / { done = $6; ok = $8; failed = $10; errored = $12; tmo = $14; seen = 1 }
    END {
      if (!seen) { print "no requests line from h2load"; exit }
      if (proto != want) { printf "h2load negotiated %s, want %s\n", (proto == "" ? "nothing" : proto), want; exit }
      if (failed + errored + tmo > 0 || ok != done)
        printf "h2load: %d done, %d succeeded, %d failed, %d errored, %d timeout\n", done, ok, failed, errored, tmo
    }' "$1"
}
# set_last_status STATUS — the status column of SUMMARY's last line
# (measure_case has written it) becomes STATUS.
set_last_status() {
  awk -F'\t' -v OFS='\t' -v st="$1" -v n="$(wc -l <"$SUMMARY")" 'NR == n { $14 = st } { print }' "$SUMMARY" >"$SUMMARY.new"
  mv "$SUMMARY.new" "$SUMMARY"
}

MEASURE_NON2XX_FAILS=1
measure_row() { # ROUND NAME ROW
  local round=$1 name=$2 row=$3 pid=${PID_OF[$2]} tr url out why
  tr=$(row_transport "$row")
  [[ ${CAN[$name,$tr]} == 1 ]] || return 0 # skipped (and recorded) at the check
  if [[ $tr == h2 ]]; then
    url=https://127.0.0.1:${TPORT_OF[$name]}$(row_path "$row")
  else
    url=http://127.0.0.1:${PORT_OF[$name]}$(row_path "$row")
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    record_skip "$round" "$name" "$row: the server is gone"
    return 0
  fi
  read -r H2_CONNS H2_STREAMS < <(row_shape "$row")
  out=$RESULTS/$name-$row.r$round
  MEASURE_PRE=$round$'\t'$name$'\t'$row
  measure_case "round $round: $name: $row" "$out" "$pid" "$url"
  if [[ $MEASURE_STATUS == ok ]]; then
    why=$(h2load_unclean "$out.wrk.txt" "$tr")
    if [[ -n $why ]]; then
      say "round $round: $name: $row: not clean: $why"
      set_last_status "$why"
      MEASURE_STATUS=$why
    fi
  fi
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "$name"; FAILED+=("r$round/$name/$row"); }
}

# ---- the idle rows ----------------------------------------------------------------
# The idle client: IDLE_CONNS connections opened one after the other, so at
# most one request is ever in flight and the figure is the cost of an idle
# h2 connection, not of a burst. Talks over its stdin and stdout (see below).
cat >"$TMP/h2_idle_client.py" <<'PY'
"""h2.sh's idle client: h2_idle_client.py PORT h2|h2c PATH FILE N CAFILE

Opens N connections to 127.0.0.1:PORT one after the other: TLS with ALPN h2
(h2) or plain with the preface (h2c, prior knowledge), SETTINGS, one GET
PATH; reads the whole answer, which must be 200 with exactly FILE's bytes;
then leaves the connection idle. Prints "opened ok=K failed=F"; on a line
"check" from stdin sends each open connection a PING and prints
"check open=O closed=C" (closed: no PING ACK within 5 s, a GOAWAY, or EOF);
at the end of stdin closes every connection and exits.
"""
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events


def open_one(port, ctx, path, want):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is not None:
        sock = ctx.wrap_socket(sock, server_hostname="bench.test")
        if sock.selected_alpn_protocol() != "h2":
            raise RuntimeError(f"ALPN chose {sock.selected_alpn_protocol()!r}, not h2")
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":scheme", "https" if ctx else "http"),
                          (":authority", f"127.0.0.1:{port}"), (":path", path)], end_stream=True)
    sock.sendall(conn.data_to_send())
    status, body, done = None, bytearray(), False
    while not done:
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("closed by the server before the answer's end")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers).get(b":status")
            elif isinstance(ev, h2.events.DataReceived):
                body += ev.data
            elif isinstance(ev, h2.events.StreamEnded):
                done = True
            elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                raise RuntimeError(f"server sent {ev}")
        out = conn.data_to_send()  # SETTINGS ACK and the like
        if out:
            sock.sendall(out)
    if status != b"200" or bytes(body) != want:
        raise RuntimeError(f"status {status!r}, {len(body)} bytes: not 200 with the file's {len(want)}")
    return sock, conn


def alive(sock, conn):
    try:
        conn.ping(b"h2bench!")
        sock.sendall(conn.data_to_send())
        sock.settimeout(5)
        while True:
            data = sock.recv(65536)
            if not data:
                return False
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.PingAckReceived):
                    return True
                if isinstance(ev, h2.events.ConnectionTerminated):
                    return False
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (OSError, h2.exceptions.ProtocolError):
        return False


def main():
    port, mode, path, file, n, cafile = (int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4],
                                         int(sys.argv[5]), sys.argv[6])
    want = open(file, "rb").read()
    ctx = None
    if mode == "h2":
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.set_alpn_protocols(["h2"])
    conns, failed, first = [], 0, None
    for _ in range(n):
        try:
            conns.append(open_one(port, ctx, path, want))
        except Exception as e:  # counted and reported, never fatal
            failed += 1
            first = first or repr(e)
    if first:
        print(f"{failed} failed; the first: {first}", file=sys.stderr)
    print(f"opened ok={len(conns)} failed={failed}", flush=True)
    if sys.stdin.readline().strip() == "check":
        up = sum(1 for s, c in conns if alive(s, c))
        print(f"check open={up} closed={len(conns) - up}", flush=True)
        sys.stdin.read()
    for s, _ in conns:
        s.close()


main()
PY

# tree_rss_kb PID — VmRSS summed over PID and its descendants, KiB (nginx's
# master and h2o's neverbleed do not grow with connections, so the sum's
# growth is the worker's).
tree_rss_kb() {
  local p kb total=0
  while read -r p; do
    kb=$(awk '$1 == "VmRSS:" { print $2; exit }' "/proc/$p/status" 2>/dev/null) || kb=0
    total=$((total + ${kb:-0}))
  done < <(proc_tree "$1")
  echo "$total"
}

# The running idle client: its pid and our ends of its stdin and stdout
# (copied from the coproc's variables, which bash clears when it exits).
CLIENT_PID="" CLIENT_IN="" CLIENT_OUT=""
stop_client() { # end of its stdin (it closes everything and exits), then stop_tree
  local i fd
  [[ -n $CLIENT_PID ]] || return 0
  for fd in $CLIENT_IN $CLIENT_OUT; do exec {fd}>&-; done
  CLIENT_IN="" CLIENT_OUT=""
  for ((i = 0; i < 100; i++)); do
    kill -0 "$CLIENT_PID" 2>/dev/null || break
    [[ $(awk '{print $3}' "/proc/$CLIENT_PID/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
  done
  stop_tree "$CLIENT_PID"
  CLIENT_PID=""
}

idle_row() { # ROUND NAME ROW — a fresh server, measured, stopped
  local round=$1 name=$2 row=$3 tr pid port line status=ok ok=-1 failed=-1 open=-1 closed=-1
  local rss0=- rss1=- t0 t1
  tr=$(row_transport "$row")
  start_checked "$round" "$name"
  pid=${PID_OF[$name]}
  [[ -n $pid ]] || return 0
  if [[ ${CAN[$name,$tr]} != 1 ]]; then
    stop_tree "$pid"
    return 0
  fi
  if [[ $tr == h2 ]]; then port=${TPORT_OF[$name]}; else port=${PORT_OF[$name]}; fi
  sleep 0.5 # let the checks' connections go
  rss0=$(tree_rss_kb "$pid")
  say "round $round: $name: $row: opening $IDLE_CONNS connections"
  t0=$EPOCHREALTIME
  coproc IDLE_CLIENT { exec taskset -c "$CLIENT_CPU" "$PY" "$TMP/h2_idle_client.py" "$port" "$tr" /1k.html \
    "$DOCROOT/1k.html" "$IDLE_CONNS" "$CERT" 2>"$TMP/$name-$row-client.log"; }
  CLIENT_PID=$IDLE_CLIENT_PID CLIENT_OUT=${IDLE_CLIENT[0]} CLIENT_IN=${IDLE_CLIENT[1]}
  BENCH_PIDS+=("$CLIENT_PID")
  line=""
  read -r -t "$OPEN_TIMEOUT" -u "$CLIENT_OUT" line || true
  t1=$EPOCHREALTIME
  if [[ $line =~ ^opened\ ok=([0-9]+)\ failed=([0-9]+)$ ]]; then
    ok=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]}
    sleep "$SETTLE"
    rss1=$(tree_rss_kb "$pid")
    echo check >&"$CLIENT_IN"
    line=""
    read -r -t 60 -u "$CLIENT_OUT" line || true
    if [[ $line =~ ^check\ open=([0-9]+)\ closed=([0-9]+)$ ]]; then
      open=${BASH_REMATCH[1]} closed=${BASH_REMATCH[2]}
    else
      status="the client gave no check answer"
    fi
  else
    status="the client did not finish opening (got '${line:0:80}')"
  fi
  if [[ $status == ok ]]; then
    if ((failed > 0)); then
      status="NOT A RESULT: $failed failed"
    elif ((open != IDLE_CONNS)); then
      status="NOT A RESULT: $closed of $IDLE_CONNS closed before the second reading"
    fi
  fi
  kill -0 "$pid" 2>/dev/null || status="server died during run"
  [[ -s $TMP/$name-$row-client.log ]] && { say "--- $name $row client:"; cat "$TMP/$name-$row-client.log" >&2; }
  stop_client
  stop_tree "$pid"
  PID_OF[$name]=""
  [[ $status == ok ]] || { say "round $round: $name: $row: $status"; tail_logs "$name"; FAILED+=("r$round/$name/$row"); }
  awk -v OFS='\t' -v r="$round" -v s="$name" -v row="$row" -v n="$IDLE_CONNS" -v ok="$ok" -v f="$failed" \
    -v o="$open" -v c="$closed" -v r0="$rss0" -v r1="$rss1" -v t0="$t0" -v t1="$t1" -v st="$status" 'BEGIN {
      d = (r1 == "-" ? "-" : r1 - r0); b = (r1 == "-" ? "-" : sprintf("%.0f", (r1 - r0) * 1024 / n))
      print r, s, row, n, ok, f, o, c, r0, r1, d, b, sprintf("%.0f", (t1 - t0) * 1000), st
    }' >>"$IDLE_TSV"
  say "round $round: $name: $row: RSS $rss0 -> $rss1 KiB over $IDLE_CONNS connections ($status)"
}

# ---- run ---------------------------------------------------------------------
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "servers:    ${SERVERS[*]}"
  for s in "${SERVERS[@]}"; do printf '  %-10s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  [[ -n $BASE_NOTE ]] && echo "            $BASE_NOTE"
  echo "h2load:     $(h2load --version 2>&1 | head -n 1)"
  echo "openssl:    $(openssl version)"
  echo "tls:        ECDSA P-256 self-signed certificate (openssl req, this run), $WANT_PROTO, ALPN h2${SUITES:+; h2load offers only $SUITES}"
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging OFF, idle timeout ${IDLE_TIMEOUT}s; fresh servers each round"
  echo "clients:    taskset -c $CLIENT_CPU: h2load -t1 -D; 1k rows -c$CONNS_1K -m$STREAMS_1K, 100k rows -c$CONNS_100K -m$STREAMS_100K;"
  echo "            ${DURATION}s each after a ${WARMUP}s warm-up; idle rows: $IDLE_CONNS connections (python3 h2), RSS ${SETTLE}s after"
  echo "rows:       ${ROWS[*]}"
  echo "rounds:     $ROUNDS, server order rotated each round"
  echo "cpu:        utime+stime of each server's process tree (/proc/PID/stat), CLK_TCK=$CLK_TCK"
} | tee "$RESULTS/env.txt" >&2

n=${#SERVERS[@]}
for ((round = 1; round <= ROUNDS; round++)); do
  k=$(((round - 1) % n))
  order=("${SERVERS[@]:k}" "${SERVERS[@]:0:k}")
  say "round $round of $ROUNDS: ${order[*]}"
  for row in "${IDLE_ROWS[@]}"; do
    for s in "${order[@]}"; do idle_row "$round" "$s" "$row"; done
  done
  ((${#LOAD_ROWS[@]})) || continue
  for s in "${order[@]}"; do start_checked "$round" "$s"; done
  for row in "${LOAD_ROWS[@]}"; do
    for s in "${order[@]}"; do
      [[ -n ${PID_OF[$s]} ]] && measure_row "$round" "$s" "$row"
    done
  done
  for s in "${order[@]}"; do [[ -n ${PID_OF[$s]} ]] && stop_tree "${PID_OF[$s]}"; done
done

# ---- table -------------------------------------------------------------------
"$PY" - "$SUMMARY" "$IDLE_TSV" "$TLSINFO" "${LOAD_ROWS[*]}" "${IDLE_ROWS[*]}" "${SERVERS[*]}" "$ROUNDS" "$IDLE_CONNS" \
  <<'PY' >"$RESULTS/table.md"
import sys, statistics, collections
summary, idle, tlsinfo = sys.argv[1:4]
load_rows, idle_rows, servers = sys.argv[4].split(), sys.argv[5].split(), sys.argv[6].split()
nrounds, nidle = int(sys.argv[7]), int(sys.argv[8])
peers = [s for s in ('nginx', 'lighttpd', 'h2o') if s in servers]

def med(xs):
    return statistics.median(xs) if xs else None

def fmt(x, p=1):
    return '-' if x is None else f'{x:.{p}f}'

def read(path, row_col, status_col, values):
    """(row, server) -> round -> values, and (row, server) -> runs not clean."""
    runs, bad = collections.defaultdict(dict), collections.defaultdict(int)
    for line in list(open(path))[1:]:
        f = line.rstrip('\n').split('\t')
        if len(f) <= status_col or f[row_col] == '-':
            continue
        if f[status_col] != 'ok':
            bad[(f[row_col], f[1])] += 1
            continue
        runs[(f[row_col], f[1])][f[0]] = values(f)
    return runs, bad

def table(rows, runs, bad, cols, digits):
    print(f'| row | {cols} | best peer | luxd/best | paired luxd/best (min-max) |')
    print('|' + '---|' * (len(cols.split('|')) + 4))
    for row in rows:
        m = {s: med([v[0] for v in runs[(row, s)].values()]) for s in servers}
        cells = []
        for s in servers:
            k = len(runs[(row, s)])
            note = f' ({k}/{nrounds})' if 0 < k < nrounds or bad.get((row, s)) else ''
            cell = f'{fmt(m[s], digits(m[s]))}{note}'
            if 'req/s' in cols:
                cell += f' | {fmt(med([v[1] for v in runs[(row, s)].values()]), 0)}'
            cells.append(cell)
        have = [(m[p], p) for p in peers if m[p] is not None]
        best = min(have) if have else (None, '-')
        ratio = m['luxd'] / best[0] if best[0] and m.get('luxd') is not None else None
        paired = []
        for rnd, v in runs[(row, 'luxd')].items():
            pv = [runs[(row, p)][rnd][0] for p in peers if rnd in runs[(row, p)]]
            if pv and len(pv) == len(peers) and min(pv) > 0:
                paired.append(v[0] / min(pv))
        pr = f'{med(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})' if paired else '-'
        print(f'| {row} | ' + ' | '.join(cells) + f' | {best[1]} {fmt(best[0], digits(best[0]))} | {fmt(ratio, 2)} | {pr} |')
    if 'luxd' in servers and 'luxd-base' in servers:
        parts = []
        for row in rows:
            a, b = runs[(row, 'luxd')], runs[(row, 'luxd-base')]
            ma, mb = med([v[0] for v in a.values()]), med([v[0] for v in b.values()])
            if ma is not None and mb:
                parts.append(f'{row} {ma / mb:.2f}')
        if parts:
            print('\nluxd / luxd-base, ratio of the medians: ' + '; '.join(parts))

notclean = []
if load_rows:
    runs, bad = read(summary, 2, 13, lambda f: (float(f[11]), float(f[3])))
    print(f'Medians over the clean rounds (of {nrounds}); CPU us/req = server process tree utime+stime per request.\n')
    table(load_rows, runs, bad, ' | '.join(f'{s} us/req | {s} req/s' for s in servers),
          lambda x: 2 if (x or 0) < 100 else 0)
    notclean += [f'{s}/{row} x{k}' for (row, s), k in bad.items() if k]
if idle_rows:
    runs, bad = read(idle, 2, 13, lambda f: (float(f[11]),))
    print(f'\nIdle h2 connections: RSS growth of the server process tree per connection, bytes (median over the clean'
          f' rounds of {nrounds}; {nidle} connections, each after one answered GET /1k.html).\n')
    table(idle_rows, runs, bad, ' | '.join(f'{s} B/conn' for s in servers), lambda x: 0)
    notclean += [f'{s}/{row} x{k}' for (row, s), k in bad.items() if k]
info = collections.OrderedDict()
for line in list(open(tlsinfo))[1:]:
    f = line.rstrip('\n').split('\t')
    info.setdefault(f[1], set()).add(' '.join(f[2:6]))
if info:
    print('\nNegotiated by openssl s_client (h2load offers the same suites unless SUITES is set):')
    for s, v in info.items():
        print(f'- {s}: ' + '; '.join(sorted(v)))
if notclean:
    print('\nNot clean (left out of the medians): ' + ', '.join(notclean))
skipped = collections.Counter()
for line in list(open(summary))[1:]:
    f = line.rstrip('\n').split('\t')
    if len(f) > 13 and f[13].startswith('skipped: '):
        skipped[f'{f[1]}: {f[13][9:]}'] += 1
if skipped:
    print('\nSkipped: ' + '; '.join(f'{k} (x{n})' for k, n in skipped.items()))
PY
{
  echo
  cat "$RESULTS/table.md"
  echo
  echo "paired = the median (min-max) over rounds of luxd's figure over the best peer's of the same round."
  echo "A count (n/$ROUNDS) after a figure: only n clean rounds. Per-run details in summary.tsv and idle.tsv."
  [[ -n $BASE_NOTE ]] && echo "$BASE_NOTE"
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
