#!/usr/bin/env bash
# Reverse-proxy benchmark (issue 10): one nginx backend serving a 1 KiB
# file; in front of it, one at a time, nginx (proxy_pass to a keepalive
# upstream), h2o (proxy.reverse.url), lighttpd (mod_proxy) and luxd
# (upstream + location proxy). What the handoff to a backend costs each.
#
# Usage: bash bench/proxy.sh [FRONT...]     FRONT: nginx h2o lighttpd luxd
#                                            (default, or "all": every one)
# Environment:
#   ROUNDS=1      rounds over "backend alone" and the fronts (see below)
#   DURATION=10   seconds of each measured wrk run
#   WARMUP=2      seconds of the wrk warm-up run before each measured run
#   CONNS=100     wrk connections (-c)
#   AB_N=1000 AB_C=20  the seed's shape: ab -n AB_N -c AB_C (no keep-alive),
#                 straight at the backend and through each front
#   AB_ROUNDS=5   ab runs per target (a run lasts a fraction of a second:
#                 the median of the rounds is reported)
#   NGINX_KEEPALIVE=32  idle upstream connections the nginx and luxd fronts keep
#   SERVER_CPU=0  CPU the backend and the front are pinned to (taskset -c)
#   CLIENT_CPU=1  CPU wrk and ab are pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   LUXD, NGINX, LIGHTTPD, H2O  binaries (default build/luxd, /usr/sbin/nginx,
#                 /usr/sbin/lighttpd, /usr/bin/h2o)
#
# First "backend alone": wrk straight at the backend. Then per front: the
# front starts (one worker/thread/process, access logging off, on its own
# free port), must return the file byte for byte, then WARMUP s and
# DURATION s of wrk -t1 -cCONNS through it; the CPU time (utime+stime from
# /proc) of the front's and of the backend's process trees is read before
# and after. Reported: req/s, CPU us/req of front + backend together and of
# each, and how many connections the front opened to the backend per 1,000
# requests (the backend's stub_status). luxd is checked with `luxd -t`
# first: a config it refuses makes its row "not available: <message>".
# Then ab: time through each front / time direct, the "slowdown" that was
# 8.6x for Tux handing requests to Apache. Raw results go to
# bench/results/proxy-DATE/. See bench/README.md.
#
# Rounds: one run varies by 10-20% on a shared machine, and a front
# measured later in a run tends to do better, so one run cannot show a
# ratio. With ROUNDS=N, "backend alone" and then every front are measured
# N times, odd rounds in the order given, even rounds reversed (each front
# early and late equally often); each front is started and stopped afresh
# every round. ab runs in round 1 only. Reported: each round's table, then
# per front the median over its clean rounds, and the median (min-max) of
# the per-round ratios front+be / h2o's front+be of the same round; the
# goal line uses luxd's (rounds where luxd or h2o was not clean are left
# out and counted). summary.tsv has a row per round and front (its first
# column: the round); with ROUNDS > 1 the wrk outputs are NAME-rN.*.txt.
#
# Exit status: 0 when every selected front was measured, 3 when one or more
# were not available or failed (the others are still measured), 1 on a
# setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

ALL_FRONTS=(nginx h2o lighttpd luxd)
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-1}
CONNS=${CONNS:-100}
AB_N=${AB_N:-1000}
AB_C=${AB_C:-20}
AB_ROUNDS=${AB_ROUNDS:-5}
NGINX_KEEPALIVE=${NGINX_KEEPALIVE:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15
MAXCONN=4096
NOFILE=10000

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
FRONTS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    all) FRONTS+=("${ALL_FRONTS[@]}") ;;
    nginx | h2o | lighttpd | luxd) FRONTS+=("$a") ;;
    *) usage >&2; die "unknown front '$a' (known: ${ALL_FRONTS[*]})" ;;
  esac
done
((${#FRONTS[@]})) || FRONTS=("${ALL_FRONTS[@]}")
need_whole ROUNDS DURATION WARMUP CONNS AB_N AB_C AB_ROUNDS NGINX_KEEPALIVE SERVER_CPU CLIENT_CPU
((DURATION > 0)) || die "DURATION must be > 0"
((AB_ROUNDS > 0)) || die "AB_ROUNDS must be > 0"
((ROUNDS > 0)) || die "ROUNDS must be > 0"

# ---- dependencies ----------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
LIGHTTPD=${LIGHTTPD:-/usr/sbin/lighttpd}
H2O=${H2O:-/usr/bin/h2o}
LUXD=${LUXD:-$ROOT/build/luxd}
want_bench=0 want_test=0
has taskset || want_bench=1
[[ -x $NGINX ]] || want_bench=1 # the backend, always
for f in "${FRONTS[@]}"; do
  case $f in
    lighttpd) [[ -x $LIGHTTPD ]] || want_bench=1 ;;
    h2o) [[ -x $H2O ]] || want_bench=1 ;;
  esac
done
for c in wrk curl ab; do has "$c" || want_test=1; done
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
check_tools_and_cpus
has ab || die "ab not found"
[[ -x $NGINX ]] || die "$NGINX (the backend) not found"
ulimit -n "$NOFILE" 2>/dev/null || NOFILE=$(ulimit -n)
check_idle

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-proxy proxy
SUMMARY=$RESULTS/summary.tsv
printf 'round\tfront\treq_per_s\trequests\tnon2xx\tsocket_errors\tfront_ticks\tbackend_ticks\telapsed_s\tfront_cpu_pct\tbackend_cpu_pct\tfront_us_per_req\tbackend_us_per_req\ttotal_us_per_req\tbackend_conns\tserver_core_busy_pct\tclient_core_busy_pct\tstatus\n' >"$SUMMARY"
AB_SUMMARY=$RESULTS/ab.tsv
printf 'target\tround\tcomplete\tfailed\tnon2xx\ttime_s\treq_per_s\tstatus\n' >"$AB_SUMMARY"

DOCROOT=$TMP/www
FILE=$DOCROOT/1k.html
make_docroot "$FILE"
URL_PATH=/1k.html
PIN=(taskset -c "$SERVER_CPU")
NGINX_USER=""
[[ $(id -u) -eq 0 ]] && NGINX_USER="user root;"

# ---- the backend -------------------------------------------------------------
BACKEND_PORT=$(free_port) || die "no free port for the backend"
mkdir -p "$TMP/backend-nginx/logs" "$TMP/backend-nginx-tmp"
render "$HERE/conf/nginx-backend.conf.in" "$TMP/backend-nginx.conf" PORT="$BACKEND_PORT" DIR="$TMP" \
  DOCROOT="$DOCROOT" NGINX_USER="$NGINX_USER" MAXCONN="$MAXCONN" NOFILE="$NOFILE" BIG_RATE=0
start_bg "$TMP/backend-nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/backend-nginx/" \
  -e "$TMP/backend-nginx-error.log" -c "$TMP/backend-nginx.conf" -g 'daemon off;'
BACKEND_PID=$BENCH_LAST_PID
BACKEND_URL=http://127.0.0.1:$BACKEND_PORT$URL_PATH
if ! wait_ready "$BACKEND_URL" "$BACKEND_PID" "$READY_TIMEOUT" || ! verify_body "$BACKEND_URL" "$FILE"; then
  tail_logs backend-nginx
  die "the nginx backend did not serve $URL_PATH"
fi
say "backend: nginx, pid $BACKEND_PID, port $BACKEND_PORT"

# backend_accepts — connections the backend has accepted so far (its
# stub_status, whose own request counts one more each time).
backend_accepts() {
  curl -s --max-time 2 "http://127.0.0.1:$BACKEND_PORT/bench-status" | awk 'NR == 3 { print $1 }'
}

# ---- the fronts: start_NAME PORT ---------------------------------------------
# Writes the config, starts the front in the foreground (in the background
# of this script) pinned to SERVER_CPU, sets SERVER_PID. Returns non-zero
# with SKIP_REASON set when it cannot run.
SERVER_PID="" SKIP_REASON=""

start_nginx() {
  local port=$1 conf=$TMP/front-nginx.conf
  mkdir -p "$TMP/front-nginx/logs" "$TMP/front-nginx-tmp"
  render "$HERE/conf/nginx-proxy.conf.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    NGINX_USER="$NGINX_USER" MAXCONN="$MAXCONN" NOFILE="$NOFILE" KEEPALIVE="$NGINX_KEEPALIVE" PROXY_EXTRA=""
  start_bg "$TMP/front-nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/front-nginx/" \
    -e "$TMP/front-nginx-error.log" -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

start_h2o() {
  local port=$1 conf=$TMP/h2o-proxy.conf user_line=""
  [[ -x $H2O ]] || { SKIP_REASON="$H2O not found"; return 1; }
  [[ $(id -u) -eq 0 ]] && user_line="user: root"
  render "$HERE/conf/h2o-proxy.conf.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    H2O_USER="$user_line" MAXCONN="$MAXCONN"
  start_bg "$TMP/h2o-stderr.log" "${PIN[@]}" "$H2O" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_lighttpd() {
  local port=$1 conf=$TMP/lighttpd-proxy.conf
  [[ -x $LIGHTTPD ]] || { SKIP_REASON="$LIGHTTPD not found"; return 1; }
  render "$HERE/conf/lighttpd-proxy.conf.in" "$conf" PORT="$port" DIR="$TMP" BACKEND_PORT="$BACKEND_PORT" \
    MAXCONN="$MAXCONN" NOFILE="$NOFILE" EXTRA=""
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
    MAXCONN="$MAXCONN" KEEPALIVE="$NGINX_KEEPALIVE"
  # Until the proxy handler lands, luxd -t refuses upstream/proxy: say so
  # instead of failing to start.
  if ! out=$("$LUXD" -t -c "$conf" 2>&1); then
    SKIP_REASON="not available: $(printf '%s' "$out" | head -n 1 | sed "s|$TMP/||g")"
    return 1
  fi
  start_bg "$TMP/luxd-stderr.log" "${PIN[@]}" "$LUXD" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# ---- measuring ---------------------------------------------------------------
# ROUND: the round being measured (1..ROUNDS). With one round, labels, file
# names and the names in FAILED are those of a run without rounds.
ROUND=1
rlabel() { if ((ROUNDS > 1)); then echo "round $ROUND: $1"; else echo "$1"; fi; }    # for messages
rfile() { if ((ROUNDS > 1)); then echo "$RESULTS/$1-r$ROUND"; else echo "$RESULTS/$1"; fi; } # wrk outputs
rfail() { if ((ROUNDS > 1)); then echo "$1/round$ROUND"; else echo "$1"; fi; }    # for FAILED

FAILED=()
record_skip() { # NAME REASON
  printf '%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n' "$ROUND" "$1" "$2" >>"$SUMMARY"
  # ab runs in round 1 only: its table says why a front has no rows once.
  ((ROUND > 1)) || printf '%s\t-\t-\t-\t-\t-\t-\t%s\n' "$1" "$2" >>"$AB_SUMMARY"
  FAILED+=("$(rfail "$1")")
  say "$(rlabel "$1"): $2"
}

dead() { ! kill -0 "$1" 2>/dev/null || [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]; }

# measure_pair NAME OUT FRONT_PID URL — WARMUP s of wrk, then DURATION s
# with the CPU time of the front's (none for "backend alone": FRONT_PID
# empty) and the backend's process trees, the busy ticks of both CPUs and
# the backend's accepted connections read before and after. Appends a row
# (ROUND, NAME, ...) to SUMMARY; sets MEASURE_STATUS.
MEASURE_STATUS=""
measure_pair() {
  local name=$1 label out=$2.wrk.txt warm=$2.warmup.txt fpid=$3 url=$4 rc=0 status=ok
  local f0=0 f1=0 b0 b1 a0 a1 t0 t1 s_busy0 s_tot0 c_busy0 c_tot0 s_busy1 s_tot1 c_busy1 c_tot1
  local rps requests non2xx sock
  label=$(rlabel "$name")
  if ((WARMUP > 0)); then
    say "$label: warm-up ${WARMUP}s"
    run_wrk "$warm" "$WARMUP" "$url" || true
  fi
  say "$label: measuring ${DURATION}s"
  a0=$(backend_accepts)
  read -r s_busy0 s_tot0 < <(core_ticks "$SERVER_CPU")
  read -r c_busy0 c_tot0 < <(core_ticks "$CLIENT_CPU")
  [[ -n $fpid ]] && f0=$(tree_cpu_ticks "$fpid")
  b0=$(tree_cpu_ticks "$BACKEND_PID")
  t0=$EPOCHREALTIME
  run_wrk "$out" "$DURATION" "$url" || rc=$?
  t1=$EPOCHREALTIME
  [[ -n $fpid ]] && f1=$(tree_cpu_ticks "$fpid")
  b1=$(tree_cpu_ticks "$BACKEND_PID")
  read -r s_busy1 s_tot1 < <(core_ticks "$SERVER_CPU")
  read -r c_busy1 c_tot1 < <(core_ticks "$CLIENT_CPU")
  a1=$(backend_accepts)
  read -r rps requests non2xx sock < <(parse_wrk "$out")
  ((rc == 0)) || status="wrk exit $rc"
  ((non2xx == 0)) || status="$non2xx non-2xx answers"
  if [[ -n $fpid ]] && dead "$fpid"; then status="front died during run"; fi
  if dead "$BACKEND_PID"; then status="backend died during run"; fi
  [[ $requests != 0 ]] || status="no requests completed"
  if [[ $status != ok ]]; then
    say "$label: $status"
    tail -n 20 "$out" >&2
  fi
  MEASURE_STATUS=$status
  awk -v OFS='\t' -v round="$ROUND" -v name="$name" -v rps="$rps" -v req="$requests" -v e1="$non2xx" -v e2="$sock" \
    -v fr="${fpid:+1}" -v ft="$((f1 - f0))" -v bt="$((b1 - b0))" -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" \
    -v ac="$(((${a1:-0} - ${a0:-0}) - 1))" -v sb="$((s_busy1 - s_busy0))" -v stt="$((s_tot1 - s_tot0))" \
    -v cb="$((c_busy1 - c_busy0))" -v ctt="$((c_tot1 - c_tot0))" -v st="$status" 'BEGIN {
      el = t1 - t0
      fus = (req > 0) ? ft / hz * 1e6 / req : 0
      bus = (req > 0) ? bt / hz * 1e6 / req : 0
      print round, name, rps, req, e1, e2, (fr ? ft : "-"), bt, sprintf("%.2f", el),
        (fr ? sprintf("%.1f", 100 * ft / hz / el) : "-"), sprintf("%.1f", 100 * bt / hz / el),
        (fr ? sprintf("%.2f", fus) : "-"), sprintf("%.2f", bus), sprintf("%.2f", fus + bus),
        (fr ? ac : "-"), sprintf("%.1f", stt > 0 ? 100 * sb / stt : 0), sprintf("%.1f", ctt > 0 ? 100 * cb / ctt : 0), st
    }' >>"$SUMMARY"
}

# run_ab LABEL URL [FIRST] — AB_ROUNDS runs of ab -n AB_N -c AB_C pinned
# to CLIENT_CPU, numbered from FIRST (default 1); a row of AB_SUMMARY each.
run_ab() {
  local label=$1 url=$2 first=${3:-1} out r rc
  say "$label: ab -n $AB_N -c $AB_C, $AB_ROUNDS rounds"
  for ((r = first; r < first + AB_ROUNDS; r++)); do
    out=$RESULTS/ab-$label-r$r.txt rc=0
    timeout --foreground -k 5 60 taskset -c "$CLIENT_CPU" ab -q -n "$AB_N" -c "$AB_C" "$url" >"$out" 2>&1 || rc=$?
    ab_row "$label" "$r" "$rc" "$out"
  done
}
ab_row() { # LABEL ROUND RC OUT
  awk -v OFS='\t' -v name="$1" -v round="$2" -v rc="$3" -v n="$AB_N" '
    /^Complete requests:/ { done = $3 }
    /^Failed requests:/ { failed = $3 }
    /^Non-2xx responses:/ { non2xx = $3 }
    /^Time taken for tests:/ { secs = $5 }
    /^Requests per second:/ { rps = $4 }
    END {
      st = "ok"
      if (rc != 0) st = "ab exit " rc
      else if (done != n) st = (done + 0) " of " n " complete"
      else if (failed + non2xx > 0) st = (failed + non2xx) " failed or non-2xx"
      print name, round, done + 0, failed + 0, non2xx + 0, (secs == "" ? "-" : secs), (rps == "" ? "-" : rps), st
    }' "$4" >>"$AB_SUMMARY"
}

# bench_front NAME — one front in round ROUND: start, check, measure (and
# in round 1 ab through it), stop.
bench_front() { # NAME
  local name=$1 label port url rc
  label=$(rlabel "$name")
  SERVER_PID="" SKIP_REASON=""
  port=$(free_port) || { record_skip "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port"; then
    record_skip "$name" "$SKIP_REASON"
    return 0
  fi
  url=http://127.0.0.1:$port$URL_PATH
  say "$label: started, pid $SERVER_PID, port $port; waiting for it to answer"
  rc=0
  wait_ready "$url" "$SERVER_PID" "$READY_TIMEOUT" || rc=$?
  if ((rc != 0)); then
    record_skip "$name" "$( ((rc == 2)) && echo "exited during start-up" || echo "no 2xx answer on $url within ${READY_TIMEOUT}s")"
    tail_logs "$name" "front-$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ! verify_body "$url" "$FILE"; then
    record_skip "$name" "did not return $URL_PATH with 200 and its 1024 bytes"
    tail_logs "$name" "front-$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  say "$label: verified 200 + 1024-byte body through the front; $(proc_tree "$SERVER_PID" | wc -l) process(es)"
  measure_pair "$name" "$(rfile "$name")" "$SERVER_PID" "$url"
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "$name" "front-$name"; FAILED+=("$(rfail "$name")"); }
  if ((ROUND == 1)) && ! dead "$SERVER_PID"; then run_ab "$name" "$url"; fi
  stop_tree "$SERVER_PID"
}

# ---- run ---------------------------------------------------------------------
# time_wait_count — TCP sockets in TIME_WAIT on this machine (state 06).
time_wait_count() { awk '$4 == "06" { n++ } END { print n + 0 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null; }
version_of() {
  case $1 in
    luxd)
      if [[ $LUXD == "$ROOT/build/luxd" ]]; then
        echo "luxd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no commit)') ($LUXD)"
      else
        echo "luxd $LUXD"
      fi
      ;;
    nginx) "$NGINX" -v 2>&1 | head -n 1 ;;
    lighttpd) "$LIGHTTPD" -v 2>&1 | head -n 1 ;;
    h2o) "$H2O" -v 2>&1 | head -n 1 ;;
  esac
}

{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "backend:    $(version_of nginx), 1 worker, sendfile, GET $URL_PATH (1024 bytes)"
  echo "fronts:     ${FRONTS[*]}"
  for s in "${FRONTS[@]}"; do printf '  %-9s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  if ((ROUNDS > 1)); then
    echo "rounds:     $ROUNDS; in each backend alone, then the fronts: odd rounds in the order given, even rounds reversed; ab in round 1 only"
  else
    echo "rounds:     1 of 1"
  fi
  echo "pinning:    backend and front taskset -c $SERVER_CPU; wrk and ab taskset -c $CLIENT_CPU; access logging OFF everywhere"
  echo "load:       wrk -t1 -c$CONNS -d${DURATION}s (keep-alive), warm-up ${WARMUP}s; ab -n $AB_N -c $AB_C (no keep-alive), $AB_ROUNDS rounds"
  echo "nginx:      upstream keepalive $NGINX_KEEPALIVE, proxy_http_version 1.1, Connection \"\""
  echo "cpu:        utime+stime of the front's and of the backend's processes (/proc/PID/stat), CLK_TCK=$CLK_TCK"
  echo "time-wait:  $(time_wait_count) TCP sockets in TIME_WAIT at the start (many: ab's connects may be slowed)"
} | tee "$RESULTS/env.txt" >&2

ORDERS=() # ORDERS[ROUND]: the fronts in the order that round measured them
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  order=("${FRONTS[@]}")
  if ((ROUND % 2 == 0)); then
    order=()
    for ((i = ${#FRONTS[@]} - 1; i >= 0; i--)); do order+=("${FRONTS[i]}"); done
  fi
  ORDERS[ROUND]="${order[*]}"
  say "round $ROUND of $ROUNDS: backend alone, then ${order[*]}"
  measure_pair "backend alone" "$(rfile backend)" "" "$BACKEND_URL"
  [[ $MEASURE_STATUS == ok ]] || FAILED+=("$(rfail backend-alone)")
  if ((ROUND == 1)); then run_ab direct "$BACKEND_URL"; fi
  for f in "${order[@]}"; do
    bench_front "$f"
  done
  # direct again: its rounds before and after the fronts make one median,
  # so a drift of the machine during the run weighs on both sides.
  if ((ROUND == 1)); then run_ab direct "$BACKEND_URL" $((AB_ROUNDS + 1)); fi
done
ROUND=1

# ---- tables ------------------------------------------------------------------
# print_table ROUND — that round's rows in the order it measured them; x h2o
# against h2o's row of the same round.
print_table() {
  awk -F'\t' -v round="$1" '
    NR == 1 || $1 != round { next }
    { rows[++n] = $0; if ($2 == "h2o" && $18 == "ok") h2o = $14 }
    END {
      printf "%-13s %8s %6s %9s %9s %9s %7s %9s %6s %6s\n", "front", "req/s", "errors", "front+be", "front", "backend", "x h2o", "be conns", "core%", "wrk%"
      printf "%-13s %8s %6s %9s %9s %9s %7s %9s %6s %6s\n", "", "", "", "us/req", "us/req", "us/req", "", "/1k req", "", ""
      for (i = 1; i <= n; i++) {
        split(rows[i], f, "\t")
        if (f[3] == "-") { printf "%-13s %s\n", f[2], f[18]; continue }
        ratio = (h2o > 0 && f[18] == "ok" && f[7] != "-") ? sprintf("%.2f", f[14] / h2o) : "-"
        conns = (f[15] == "-" || f[4] == 0) ? "-" : sprintf("%.1f", 1000 * f[15] / f[4])
        printf "%-13s %8.0f %6d %9.2f %9s %9.2f %7s %9s %6.1f %6.1f%s\n", f[2], f[3], f[5] + f[6], f[14], f[12], f[13], ratio, conns, f[16], f[17], (f[18] == "ok" ? "" : "  (" f[18] ")")
      }
    }' "$SUMMARY"
}

# print_ab — per target the median of its clean rounds' times (and their
# range), and slowdown = that median / the direct one.
print_ab() {
  awk -F'\t' '
    NR == 1 { next }
    !($1 in seen) { seen[$1] = 1; order[++n] = $1 }
    $2 == "-" { skip[$1] = $8; next }
    $8 == "ok" { t[$1, ++k[$1]] = $6; next }
    { bad[$1] = $8 }
    function median(name,   i, j, m, v, a) {
      m = k[name]
      for (i = 1; i <= m; i++) a[i] = t[name, i]
      for (i = 2; i <= m; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
      lo = a[1]; hi = a[m]
      return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
      if (k["direct"] > 0) direct = median("direct")
      printf "%-13s %9s %15s %9s %9s\n", "ab through", "median s", "(min-max)", "req/s", "slowdown"
      for (i = 1; i <= n; i++) {
        name = order[i]
        if (name in skip) { printf "%-13s %s\n", name, skip[name]; continue }
        if (k[name] == 0) { printf "%-13s no clean round (%s)\n", name, bad[name]; continue }
        med = median(name)
        sl = (direct > 0) ? sprintf("%.2fx", med / direct) : "-"
        printf "%-13s %9.3f %15s %9.0f %9s%s\n", name, med, sprintf("(%.3f-%.3f)", lo, hi), AB_N / med, sl,
          (name in bad ? "  (a round: " bad[name] ")" : "")
      }
    }' AB_N="$AB_N" "$AB_SUMMARY"
}

# AWK_MEDIAN — median(a, m): sorts a[1..m] in place, sets lo and hi to its
# ends and returns its median (the mean of the middle two when m is even).
AWK_MEDIAN='
  function median(a, m,   i, j, v) {
    for (i = 2; i <= m; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
    lo = a[1]; hi = a[m]
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }'

# print_rounds_summary — with ROUNDS > 1: per front (and backend alone) the
# median over its clean rounds of req/s and CPU us/req, and the median
# (min-max) of its per-round ratios front+be / h2o's front+be of the same
# round, over the rounds where both were clean ("paired").
print_rounds_summary() {
  awk -F'\t' -v rounds="$ROUNDS" "$AWK_MEDIAN"'
    NR == 1 { next }
    !($2 in seen) { seen[$2] = 1; order[++n] = $2 }
    $18 == "ok" {
      k = ++clean[$2]; rps[$2, k] = $3; tot[$2, k] = $14; fr[$2, k] = $12; be[$2, k] = $13
      ok[$1, $2] = $14
    }
    function med(arr, name,   i, a) {
      for (i = 1; i <= clean[name]; i++) a[i] = arr[name, i]
      return median(a, clean[name])
    }
    END {
      printf "%-13s %6s %8s %9s %15s %9s %9s %7s %11s %7s\n", "median of", "clean", "req/s", "front+be", "(min-max)", "front", "backend", "x h2o", "(min-max)", "paired"
      printf "%-13s %6s %8s %9s %15s %9s %9s %7s %11s %7s\n", "rounds", "rounds", "", "us/req", "", "us/req", "us/req", "", "", "rounds"
      for (i = 1; i <= n; i++) {
        name = order[i]
        m = 0; delete ra
        for (r = 1; r <= rounds; r++)
          if (((r, name) in ok) && ((r, "h2o") in ok) && ok[r, "h2o"] > 0) ra[++m] = ok[r, name] / ok[r, "h2o"]
        ratio = "-"; range = ""; paired = "-"
        if (name != "backend alone" && name != "h2o") {
          paired = m "/" rounds
          if (m > 0) { ratio = sprintf("%.2f", median(ra, m)); range = sprintf("(%.2f-%.2f)", lo, hi) }
        }
        if (clean[name] == 0) { printf "%-13s %6s  no clean round%s\n", name, "0/" rounds, (paired == "-" ? "" : "; paired rounds " paired); continue }
        t = med(tot, name); trange = sprintf("(%.2f-%.2f)", lo, hi)
        printf "%-13s %6s %8.0f %9.2f %15s %9s %9.2f %7s %11s %7s\n", name, clean[name] "/" rounds, med(rps, name), t, trange,
          (name == "backend alone" ? "-" : sprintf("%.2f", med(fr, name))), med(be, name), ratio, range, paired
      }
    }' "$SUMMARY"
}

# goal_line — issue 10's target: luxd's front+backend CPU us/req at most
# 0.8x h2o's, in the same run. With ROUNDS > 1: the median of the ratios
# of the rounds where both were measured cleanly (the others left out and
# counted).
goal_line() {
  awk -F'\t' -v rounds="$ROUNDS" "$AWK_MEDIAN"'
    NR > 1 { seen[$2] = 1 }
    NR > 1 && $18 == "ok" { t[$2] = $14; ok[$1, $2] = $14 }
    END {
      g = "goal (luxd <= 0.80x h2o, front+backend CPU us/req): "
      # With rounds, a front selected but never clean is counted below.
      if (rounds == 1 && !("h2o" in t) || !("h2o" in seen)) { print g "h2o not measured"; exit }
      if (rounds == 1 && !("luxd" in t) || !("luxd" in seen)) { print g "luxd not measured"; exit }
      if (rounds == 1) {
        r = t["luxd"] / t["h2o"]
        printf "%s%.2f / %.2f = %.2fx: %s\n", g, t["luxd"], t["h2o"], r, (r <= 0.8 ? "met" : "NOT met")
        exit
      }
      m = 0
      for (i = 1; i <= rounds; i++)
        if (((i, "luxd") in ok) && ((i, "h2o") in ok) && ok[i, "h2o"] > 0) ra[++m] = ok[i, "luxd"] / ok[i, "h2o"]
      left = rounds - m
      note = left ? sprintf("; %d of %d round(s) left out: luxd or h2o not measured cleanly", left, rounds) : ""
      if (m == 0) { print g "no round with both luxd and h2o measured cleanly" note; exit }
      r = median(ra, m)
      printf "%smedian of %d paired round%s %.2fx (%.2f-%.2f): %s%s\n", g, m, (m == 1 ? "" : "s"), r, lo, hi, (r <= 0.8 ? "met" : "NOT met"), note
    }' "$SUMMARY"
}

AB_WHEN=""
((ROUNDS == 1)) || AB_WHEN=", in round 1"
{
  echo
  echo "Reverse proxy, 1 KiB from an nginx backend; ${DURATION}s per run, wrk -t1 -c$CONNS; front and backend on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU."
  for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    if ((ROUND > 1)); then echo; fi
    echo "round $ROUND of $ROUNDS: backend alone, then ${ORDERS[ROUND]}"
    print_table "$ROUND"
  done
  if ((ROUNDS > 1)); then
    echo
    print_rounds_summary
    echo "median over each one's clean rounds (min-max: of front+be); x h2o = median (min-max) of the per-round ratios"
    echo "front+be / h2o's front+be in the same round, over the rounds where both were clean (paired rounds)."
  fi
  echo
  echo "front+be us/req = CPU time (utime+stime) of the front's and the backend's processes over the run * 1e6 / requests;"
  echo "front, backend us/req = each alone; x h2o = front+be over h2o's; be conns /1k req = connections the front opened"
  echo "to the backend per 1,000 requests (0 = all pooled; 1000 = one per request); errors = non-2xx + socket errors;"
  echo "core% / wrk% = busy % of CPU $SERVER_CPU / CPU $CLIENT_CPU (softirq included)."
  goal_line
  echo
  echo "The seed's shape: ab -n $AB_N -c $AB_C (a new connection per request), straight at the backend (before and after the"
  echo "fronts) and through each front, $AB_ROUNDS rounds each${AB_WHEN}."
  print_ab
  echo "slowdown = median time through the front / median time direct (Tux handing requests to Apache: 8.6x)."
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
