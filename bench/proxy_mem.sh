#!/usr/bin/env bash
# Memory of a reverse proxy under slow downloads (issue 10): CONNS (1,000)
# clients each download a large file (FILE_MB, 64 MiB) through the front
# from a fast nginx backend, reading RATE bytes/s each; the front's RSS
# before, while they read, and after. A front that streams with
# backpressure holds a bounded buffer per download; one that reads the
# backend as fast as it can holds what the clients have not taken yet.
#
# Usage: bash bench/proxy_mem.sh [FRONT...]     FRONT: luxd nginx lighttpd
#                                                (default: luxd nginx)
# Environment:
#   CONNS=1000    concurrent downloads
#   RATE=4096     bytes per second each client reads
#   BACKEND_RATE=16384  bytes per second the backend sends each download
#                 (nginx limit_rate): faster than the clients, so a front
#                 that does not push back piles up BACKEND_RATE - RATE per
#                 second per download, yet bounded so that 1,000 full
#                 socket buffers cannot exhaust the kernel's TCP memory
#   HOLD=10       seconds the clients read after all have their heads
#   FILE_MB=64    size of the file (MiB); far more than RATE * HOLD, so no
#                 download ends during the run
#   RCVBUF=4096   the clients' SO_RCVBUF (small: the kernel does not take
#                 the body off the front's hands)
#   SETTLE=2      seconds after the clients closed before the last reading
#   MEM_LIMIT_MB=4096  a front whose RSS passes this is stopped (the row
#                 says so): a guard for a shared machine; so is a run in
#                 which the kernel's TCP memory passes half of its pressure
#                 threshold (tcp_mem's first value)
#   SERVER_CPU=0  CPU the backend and the front are pinned to
#   CLIENT_CPU=1  CPU the client is pinned to
#   KEEP_TMP=1    keep the temp dir after the run
#   LUXD, NGINX, LIGHTTPD  binaries (default build/luxd, /usr/sbin/nginx,
#                 /usr/sbin/lighttpd)
#
# The fronts are configured as in bench/proxy.sh, with two changes that
# make nginx and lighttpd stream rather than spool: nginx
# `proxy_max_temp_file_size 0` (by default it would write up to 1 GiB per
# response to temp files), lighttpd `server.stream-response-body = 2`. h2o
# is not offered: 2.2's proxy buffers a response without limit (its
# proxy.max-buffer-size came in 2.3), so 1,000 slow downloads could take
# 1,000 x FILE_MB of memory or temp files. Raw results go to
# bench/results/proxy-mem-DATE/. See bench/README.md.
#
# Exit status: 0 when every selected front was measured cleanly, 3 when one
# or more were not available or not clean, 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

CONNS=${CONNS:-1000}
RATE=${RATE:-4096}
BACKEND_RATE=${BACKEND_RATE:-16384}
HOLD=${HOLD:-10}
FILE_MB=${FILE_MB:-64}
RCVBUF=${RCVBUF:-4096}
SETTLE=${SETTLE:-2}
MEM_LIMIT_MB=${MEM_LIMIT_MB:-4096}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15
MAXCONN=$((4 * CONNS + 256))

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

FRONTS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    luxd | nginx | lighttpd) FRONTS+=("$a") ;;
    h2o) die "h2o is not offered here: see the comment at the top of bench/proxy_mem.sh" ;;
    *) usage >&2; die "unknown front '$a' (known: luxd nginx lighttpd)" ;;
  esac
done
((${#FRONTS[@]})) || FRONTS=(luxd nginx)
need_whole CONNS RATE BACKEND_RATE HOLD FILE_MB RCVBUF SETTLE MEM_LIMIT_MB SERVER_CPU CLIENT_CPU
((CONNS > 0 && RATE > 0 && FILE_MB > 0)) || die "CONNS, RATE and FILE_MB must be > 0"

NGINX=${NGINX:-/usr/sbin/nginx}
LIGHTTPD=${LIGHTTPD:-/usr/sbin/lighttpd}
LUXD=${LUXD:-$ROOT/build/luxd}
want_bench=0 want_test=0 want_build=0
has taskset || want_bench=1
[[ -x $NGINX ]] || want_bench=1
[[ " ${FRONTS[*]} " == *" lighttpd "* && ! -x $LIGHTTPD ]] && want_bench=1
has curl || want_test=1
has cc || want_build=1
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
if ((want_build)); then deps_install build; fi
for c in taskset curl cc cmp awk; do has "$c" || die "$c not found"; done
taskset -c "$SERVER_CPU" true 2>/dev/null || die "cannot pin to CPU $SERVER_CPU (SERVER_CPU)"
taskset -c "$CLIENT_CPU" true 2>/dev/null || die "cannot pin to CPU $CLIENT_CPU (CLIENT_CPU)"

# Front, backend and client each hold CONNS sockets or more.
NEED_FDS=$((2 * CONNS + 256))
HARD=$(ulimit -Hn)
if [[ $HARD != unlimited ]] && ((HARD < NEED_FDS)); then
  die "the hard open-files limit (ulimit -Hn) is $HARD; CONNS=$CONNS needs $NEED_FDS (raise it, or lower CONNS)"
fi
if [[ $HARD == unlimited ]]; then NOFILE=$((MAXCONN + 256)); else NOFILE=$HARD; fi
ulimit -n "$NOFILE" || die "ulimit -n $NOFILE failed"

setup_dirs luxd-proxy-mem proxy-mem
SUMMARY=$RESULTS/summary.tsv
printf 'front\tconns\tok\tfailed\topen\tclosed\tclient_bytes\trss_before_kb\trss_max_kb\trss_end_kb\trss_after_kb\tbytes_per_download\ttcp_mem_delta_pages\tstatus\n' >"$SUMMARY"

DOCROOT=$TMP/www
make_docroot "$DOCROOT/1k.html"
yes 'luxd bench large file line: 0123456789abcdefghijklmnopqrstuvwxy' | head -c $((FILE_MB * 1048576)) >"$DOCROOT/big.bin" || true
[[ $(wc -c <"$DOCROOT/big.bin") -eq $((FILE_MB * 1048576)) ]] || die "could not write the $FILE_MB MiB file"
chmod 644 "$DOCROOT/big.bin"
if ! cc -O2 -o "$TMP/slow_client" "$HERE/slow_client.c" >"$TMP/client-build.log" 2>&1; then
  cat "$TMP/client-build.log" >&2
  die "cc -O2 bench/slow_client.c failed"
fi
PIN=(taskset -c "$SERVER_CPU")
NGINX_USER=""
[[ $(id -u) -eq 0 ]] && NGINX_USER="user root;"

# ---- the backend -------------------------------------------------------------
BACKEND_PORT=$(free_port) || die "no free port for the backend"
mkdir -p "$TMP/backend-nginx/logs" "$TMP/backend-nginx-tmp"
render "$HERE/conf/nginx-backend.conf.in" "$TMP/backend-nginx.conf" PORT="$BACKEND_PORT" DIR="$TMP" \
  DOCROOT="$DOCROOT" NGINX_USER="$NGINX_USER" MAXCONN="$MAXCONN" NOFILE="$NOFILE" BIG_RATE="$BACKEND_RATE"
start_bg "$TMP/backend-nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/backend-nginx/" \
  -e "$TMP/backend-nginx-error.log" -c "$TMP/backend-nginx.conf" -g 'daemon off;'
BACKEND_PID=$BENCH_LAST_PID
if ! wait_ready "http://127.0.0.1:$BACKEND_PORT/1k.html" "$BACKEND_PID" "$READY_TIMEOUT"; then
  tail_logs backend-nginx
  die "the nginx backend did not start"
fi

# ---- the fronts --------------------------------------------------------------
SERVER_PID="" SKIP_REASON=""
start_nginx() {
  local port=$1 conf=$TMP/front-nginx.conf
  mkdir -p "$TMP/front-nginx/logs" "$TMP/front-nginx-tmp"
  render "$HERE/conf/nginx-proxy.conf.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    NGINX_USER="$NGINX_USER" MAXCONN="$MAXCONN" NOFILE="$NOFILE" KEEPALIVE=32 \
    PROXY_EXTRA="            proxy_max_temp_file_size 0;"
  start_bg "$TMP/front-nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/front-nginx/" \
    -e "$TMP/front-nginx-error.log" -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}
start_lighttpd() {
  local port=$1 conf=$TMP/lighttpd-proxy.conf
  render "$HERE/conf/lighttpd-proxy.conf.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    MAXCONN="$MAXCONN" NOFILE="$NOFILE" EXTRA="server.stream-response-body = 2"
  start_bg "$TMP/lighttpd-stderr.log" "${PIN[@]}" "$LIGHTTPD" -D -f "$conf"
  SERVER_PID=$BENCH_LAST_PID
}
start_luxd() {
  local port=$1 conf=$TMP/luxd-proxy.lua out
  if [[ ! -x $LUXD ]]; then
    say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
    if ! make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1 || [[ ! -x $LUXD ]]; then
      SKIP_REASON="$LUXD missing and 'make' did not build it (log: $RESULTS/luxd-make.log)"
      return 1
    fi
  fi
  render "$HERE/conf/luxd-proxy.lua.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    MAXCONN="$MAXCONN" KEEPALIVE=32
  if ! out=$("$LUXD" -t -c "$conf" 2>&1); then
    SKIP_REASON="not available: $(printf '%s' "$out" | head -n 1 | sed "s|$TMP/||g")"
    return 1
  fi
  start_bg "$TMP/luxd-stderr.log" "${PIN[@]}" "$LUXD" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# mem_pid NAME PID — the process whose RSS counts: nginx's worker (the
# master's child running "nginx: worker process"), else PID.
mem_pid() {
  local p i
  if [[ $1 != nginx ]]; then echo "$2"; return 0; fi
  for ((i = 0; i < 50; i++)); do
    while read -r p; do
      [[ $p == "$2" ]] && continue
      if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'worker process'; then echo "$p"; return 0; fi
    done < <(proc_tree "$2")
    sleep 0.1
  done
  return 1
}
rss_kb() { awk '$1 == "VmRSS:" { print $2; f = 1 } END { if (!f) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0; }
tcp_mem_pages() {
  awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") { print $(i + 1); exit } }' /proc/net/sockstat
}
TCP_MEM_LIMIT=$(($(awk '{print $1}' /proc/sys/net/ipv4/tcp_mem) / 2))

FAILED=()
record_skip() {
  printf '%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n' "$1" "$CONNS" "$2" >>"$SUMMARY"
  FAILED+=("$1")
  say "$1: $2"
}

CLIENT_PID="" CLIENT_OUT="" CLIENT_IN=""
# stop_client — end of the client's stdin (it exits), then stop_tree.
stop_client() {
  local fd
  [[ -n $CLIENT_PID ]] || return 0
  for fd in $CLIENT_IN $CLIENT_OUT; do exec {fd}>&-; done
  CLIENT_IN="" CLIENT_OUT=""
  sleep 0.2
  stop_tree "$CLIENT_PID"
  CLIENT_PID=""
}
bench_front() { # NAME
  local name=$1 port url mpid rc line status=ok ok=-1 failed=-1 open=-1 closed=-1 bytes=0
  local rss0 rssmax rssend rss1 tcp0 tcp1 r deadline
  SERVER_PID="" SKIP_REASON=""
  port=$(free_port) || { record_skip "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port"; then record_skip "$name" "$SKIP_REASON"; return 0; fi
  url=http://127.0.0.1:$port
  rc=0
  wait_ready "$url/1k.html" "$SERVER_PID" "$READY_TIMEOUT" || rc=$?
  if ((rc != 0)) || ! verify_body "$url/1k.html" "$DOCROOT/1k.html"; then
    record_skip "$name" "did not serve /1k.html from the backend"
    tail_logs "$name" "front-$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ! mpid=$(mem_pid "$name" "$SERVER_PID"); then
    record_skip "$name" "no worker process under pid $SERVER_PID"
    stop_tree "$SERVER_PID"
    return 0
  fi
  sleep 0.5
  rss0=$(rss_kb "$mpid") tcp0=$(tcp_mem_pages)
  rssmax=$rss0 rssend=$rss0 tcp1=$tcp0
  say "$name: pid $mpid, RSS $rss0 KiB; $CONNS downloads of $FILE_MB MiB at $RATE B/s each"
  coproc SLOW_CLIENT { exec taskset -c "$CLIENT_CPU" "$TMP/slow_client" "$port" /big.bin "$CONNS" "$RATE" "$HOLD" \
    "$RCVBUF" 2>"$TMP/$name-client.log"; }
  CLIENT_PID=$SLOW_CLIENT_PID CLIENT_OUT=${SLOW_CLIENT[0]} CLIENT_IN=${SLOW_CLIENT[1]}
  BENCH_PIDS+=("$CLIENT_PID")
  line=""
  read -r -t 90 -u "$CLIENT_OUT" line || true
  if [[ $line =~ ^ready\ ok=([0-9]+)\ failed=([0-9]+)$ ]]; then
    ok=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]}
    say "$name: $ok downloads under way, $failed failed; reading for ${HOLD}s"
    # Sample the RSS while they read; stop the front past MEM_LIMIT_MB.
    deadline=$((SECONDS + HOLD + 30))
    line=""
    while ((SECONDS < deadline)); do
      if read -r -t 0.5 -u "$CLIENT_OUT" line; then break; fi
      r=$(rss_kb "$mpid")
      ((r > rssmax)) && rssmax=$r
      rssend=$r
      tcp1=$(tcp_mem_pages)
      if ((r > MEM_LIMIT_MB * 1024)); then status="RSS passed MEM_LIMIT_MB=$MEM_LIMIT_MB: front stopped"; break; fi
      if ((tcp1 > TCP_MEM_LIMIT)); then status="kernel TCP memory passed $TCP_MEM_LIMIT pages: stopped"; break; fi
      if dead "$SERVER_PID"; then status="front died during the run"; break; fi
    done
    if [[ $status == ok ]]; then
      if [[ $line =~ ^done\ open=([0-9]+)\ closed=([0-9]+)\ bytes=([0-9]+)$ ]]; then
        open=${BASH_REMATCH[1]} closed=${BASH_REMATCH[2]} bytes=${BASH_REMATCH[3]}
      else
        status="client did not finish (got '${line:0:80}')"
      fi
    fi
  else
    status="client did not get its heads (got '${line:0:80}')"
  fi
  if [[ $status == ok ]]; then
    if ((failed > 0)); then status="NOT A RESULT: $failed downloads failed"
    elif ((open != CONNS)); then status="NOT A RESULT: $closed of $CONNS downloads ended early"
    fi
  fi
  [[ $status == *stopped ]] && stop_tree "$SERVER_PID"
  stop_client
  [[ -s $TMP/$name-client.log ]] && { say "--- $name client:"; head -n 12 "$TMP/$name-client.log" >&2; }
  rss1=$rssend
  if ! dead "$SERVER_PID"; then
    sleep "$SETTLE"
    rss1=$(rss_kb "$mpid")
  fi
  stop_tree "$SERVER_PID"
  [[ $status == ok ]] || { say "$name: $status"; tail_logs "$name" "front-$name"; FAILED+=("$name"); }
  awk -v OFS='\t' -v name="$name" -v n="$CONNS" -v ok="$ok" -v f="$failed" -v o="$open" -v c="$closed" \
    -v b="$bytes" -v r0="$rss0" -v rm="$rssmax" -v re="$rssend" -v r1="$rss1" -v p0="$tcp0" -v p1="$tcp1" \
    -v st="$status" 'BEGIN {
      print name, n, ok, f, o, c, b, r0, rm, re, r1, sprintf("%.0f", (rm - r0) * 1024 / n), p1 - p0, st
    }' >>"$SUMMARY"
}
dead() { ! kill -0 "$1" 2>/dev/null || [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]; }

version_of() {
  case $1 in
    luxd) echo "luxd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') ($LUXD)" ;;
    nginx) "$NGINX" -v 2>&1 | head -n 1 ;;
    lighttpd) "$LIGHTTPD" -v 2>&1 | head -n 1 ;;
  esac
}
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs"
  echo "backend:    $(version_of nginx), 1 worker, sendfile; GET /big.bin ($FILE_MB MiB) at $BACKEND_RATE B/s per connection"
  echo "fronts:     ${FRONTS[*]}"
  for s in "${FRONTS[@]}"; do printf '  %-9s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  echo "client:     bench/slow_client.c, taskset -c $CLIENT_CPU: $CONNS connections, $RATE B/s each, SO_RCVBUF $RCVBUF, ${HOLD}s"
  echo "memory:     VmRSS of the front (nginx: its worker), sampled every 0.5 s"
} | tee "$RESULTS/env.txt" >&2

for f in "${FRONTS[@]}"; do
  bench_front "$f"
done

{
  echo
  echo "Slow downloads through a proxy: $CONNS clients, each reading $FILE_MB MiB at $RATE B/s for ${HOLD}s, from an nginx backend"
  echo "sending at $BACKEND_RATE B/s each."
  awk -F'\t' '
    NR == 1 { next }
    $3 == "-" { printf "%-9s %s\n", $1, $14; next }
    !hdr++ { printf "%-9s %6s %6s %11s %11s %11s %11s %10s %9s %10s\n", "front", "ok", "failed", "RSS before", "RSS max", "RSS end", "RSS after", "B/download", "read MB", "kernel TCP" }
    { printf "%-9s %6d %6d %7d KiB %7d KiB %7d KiB %7d KiB %10s %9.1f %7.0f MiB%s\n", $1, $3, $4, $8, $9, $10, $11, $12, $7 / 1048576, $13 * 4 / 1024, ($14 == "ok" ? "" : "  (" $14 ")") }
  ' "$SUMMARY"
  echo
  echo "RSS = VmRSS of the front (nginx: the worker) before the clients, the highest and the last reading while they read"
  echo "(every 0.5 s), and ${SETTLE}s after they closed; B/download = (max - before) * 1024 / $CONNS; read MB = what the"
  echo "clients received in all; kernel TCP = the kernel's TCP buffer memory at the last reading minus before (not in RSS)."
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
