#!/usr/bin/env bash
# Side-by-side static-file benchmark: luxd against nginx, lighttpd, h2o and a
# bare epoll loop (bench/epoll_fixed.c), all serving the same files: 1 KiB
# (keep-alive and Connection: close), 100 KiB and 10 MiB (keep-alive).
#
# Usage: bash bench/static.sh [SERVER...]     SERVER: epoll luxd luxd-base nginx lighttpd h2o
#                                              (default, or "all": every one)
# Environment:
#   DURATION=10   seconds of each measured wrk run
#   WARMUP=2      seconds of the wrk warm-up run before each measured run
#   CONNS=50      wrk connections (-c)
#   MODES="keepalive close ka-100k ka-10m"  the workloads, in this order:
#                 keepalive / close: GET /1k.html, keep-alive / Connection: close
#                 ka-100k / ka-10m: keep-alive GET of a 100 KiB / 10 MiB file
#                 (CPU us/req of ka-10m is the CPU per 10 MiB response). The
#                 epoll floor serves one fixed 1 KiB body: 1 KiB modes only.
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU wrk is pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   NGINX_SENDFILE=on  nginx sendfile + tcp_nopush (on) or neither (off)
#   LUXD, NGINX, LIGHTTPD, H2O  binaries (default build/luxd, /usr/sbin/nginx,
#                 /usr/sbin/lighttpd, /usr/bin/h2o)
#   LUXD_BASE     a second luxd binary (say, a build of the previous commit),
#                 measured as server "luxd-base" in the same run, so a change
#                 is judged against its parent side by side, not across runs
#
# Each server runs one worker, pinned to SERVER_CPU, access logging OFF, on
# its own free port on 127.0.0.1; wrk (-t1) runs pinned to CLIENT_CPU, once
# per mode (see MODES), against one server process per server. Server CPU time is
# utime+stime of all its processes, read from /proc before and after the run.
# Raw results go to bench/results/static-DATE/. See bench/README.md.
#
# Exit status: 0 when every selected server was measured, 3 when one or more
# were skipped or failed (the others are still measured), 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

ALL_SERVERS=(epoll luxd nginx lighttpd h2o)
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
NGINX_SENDFILE=${NGINX_SENDFILE:-on}
ALL_MODES=(keepalive close ka-100k ka-10m)
read -r -a MODES <<<"${MODES:-${ALL_MODES[*]}}"
READY_TIMEOUT=15

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
SERVERS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    all) SERVERS+=("${ALL_SERVERS[@]}") ;;
    epoll | luxd | luxd-base | nginx | lighttpd | h2o) SERVERS+=("$a") ;;
    *) usage >&2; die "unknown server '$a' (known: ${ALL_SERVERS[*]})" ;;
  esac
done
((${#SERVERS[@]})) || SERVERS=("${ALL_SERVERS[@]}")
need_whole DURATION WARMUP CONNS SERVER_CPU CLIENT_CPU
((DURATION > 0)) || die "DURATION must be > 0"
[[ $NGINX_SENDFILE == on || $NGINX_SENDFILE == off ]] || die "NGINX_SENDFILE must be on or off"
((${#MODES[@]})) || die "MODES is empty (known: ${ALL_MODES[*]})"
for m in "${MODES[@]}"; do
  [[ " ${ALL_MODES[*]} " == *" $m "* ]] || die "unknown mode '$m' in MODES (known: ${ALL_MODES[*]})"
done

# ---- dependencies ----------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
LIGHTTPD=${LIGHTTPD:-/usr/sbin/lighttpd}
H2O=${H2O:-/usr/bin/h2o}
want_bench=0 want_test=0 want_build=0
has taskset || want_bench=1
for s in "${SERVERS[@]}"; do
  case $s in
    nginx) [[ -x $NGINX ]] || want_bench=1 ;;
    lighttpd) [[ -x $LIGHTTPD ]] || want_bench=1 ;;
    h2o) [[ -x $H2O ]] || want_bench=1 ;;
    epoll) has cc || want_build=1 ;;
  esac
done
has wrk || want_test=1
has curl || want_test=1
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
if ((want_build)); then deps_install build; fi
check_tools_and_cpus
check_idle

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-bench static
SUMMARY=$RESULTS/summary.tsv
printf 'server\tmode\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\n' >"$SUMMARY"

# ---- the docroot: 1 KiB, 100 KiB and 10 MiB files --------------------------
DOCROOT=$TMP/www
FILE=$DOCROOT/1k.html
make_docroot "$FILE"
URL_PATH=/1k.html
# The large files: 64-byte lines, so both sizes are whole lines. Made only
# when a mode wants them (the 10 MiB one costs a moment).
big_file() { # NAME BYTES
  yes 'luxd bench large file line: 0123456789abcdefghijklmnopqrstuvwxy' | head -c "$2" >"$DOCROOT/$1" || true
  [[ $(wc -c <"$DOCROOT/$1") -eq $2 ]] || die "$DOCROOT/$1 is not $2 bytes"
  chmod 644 "$DOCROOT/$1"
}
# mode_path MODE / mode_args MODE — the URL path and the extra wrk arguments.
mode_path() {
  case $1 in
    keepalive | close) echo /1k.html ;;
    ka-100k) echo /100k.html ;;
    ka-10m) echo /10m.html ;;
  esac
}
mode_args() {
  case $1 in
    close) printf '%s\n' -H 'Connection: close' ;;
    # wrk's default 2 s request timeout could cut a 10 MiB answer shared
    # with CONNS-1 others on a busy machine: a socket error, not a result.
    ka-10m) printf '%s\n' --timeout 30s ;;
  esac
}
for m in "${MODES[@]}"; do
  case $m in
    ka-100k) [[ -e $DOCROOT/100k.html ]] || big_file 100k.html 102400 ;;
    ka-10m) [[ -e $DOCROOT/10m.html ]] || big_file 10m.html 10485760 ;;
  esac
done

# ---- per-server start functions --------------------------------------------
# start_NAME PORT: writes the config, starts the server in the foreground (in
# the background of this script) pinned to SERVER_CPU, sets SERVER_PID.
# Returns non-zero with SKIP_REASON set when it cannot run.
SERVER_PID="" SKIP_REASON=""
PIN=(taskset -c "$SERVER_CPU")

start_epoll() {
  local port=$1
  if [[ ! -x $TMP/epoll_fixed ]]; then
    if ! cc -O2 -o "$TMP/epoll_fixed" "$HERE/epoll_fixed.c" >"$TMP/epoll-build.log" 2>&1; then
      SKIP_REASON="cc -O2 bench/epoll_fixed.c failed: $(head -c 300 "$TMP/epoll-build.log")"
      return 1
    fi
  fi
  start_bg "$TMP/epoll-stderr.log" "${PIN[@]}" "$TMP/epoll_fixed" "$port" "$FILE"
  SERVER_PID=$BENCH_LAST_PID
}

LUXD=${LUXD:-$ROOT/build/luxd}
start_luxd() {
  local port=$1 conf=$TMP/luxd.lua
  if [[ ! -x $LUXD ]]; then
    say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
    if ! make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1; then
      SKIP_REASON="build/luxd missing and 'make' failed: $(tail -n 1 "$RESULTS/luxd-make.log") (log: $RESULTS/luxd-make.log)"
      return 1
    fi
    if [[ ! -x $LUXD ]]; then
      SKIP_REASON="'make' succeeded but build/luxd still missing"
      return 1
    fi
  fi
  render "$HERE/conf/luxd.lua.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT"
  start_bg "$TMP/luxd-stderr.log" "${PIN[@]}" "$LUXD" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# The same config under another binary: the before/after comparison of a change.
start_luxd-base() {
  local port=$1 conf=$TMP/luxd-base.lua
  if [[ -z ${LUXD_BASE:-} || ! -x $LUXD_BASE ]]; then
    SKIP_REASON="LUXD_BASE is not set to an executable luxd"
    return 1
  fi
  render "$HERE/conf/luxd.lua.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT"
  start_bg "$TMP/luxd-base-stderr.log" "${PIN[@]}" "$LUXD_BASE" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_nginx() {
  local port=$1 conf=$TMP/nginx.conf user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  render "$HERE/conf/nginx.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" NGINX_USER="$user_line" \
    SENDFILE="$NGINX_SENDFILE"
  # -e: the error log nginx opens before reading the config (else /var/log).
  start_bg "$TMP/nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/nginx/" -e "$TMP/nginx-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

start_lighttpd() {
  local port=$1 conf=$TMP/lighttpd.conf
  render "$HERE/conf/lighttpd.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT"
  start_bg "$TMP/lighttpd-stderr.log" "${PIN[@]}" "$LIGHTTPD" -D -f "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_h2o() {
  local port=$1 conf=$TMP/h2o.conf user_line=""
  # As root h2o would setuid to nobody; stay root (the docroot is in our temp dir).
  [[ $(id -u) -eq 0 ]] && user_line="user: root"
  render "$HERE/conf/h2o.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" H2O_USER="$user_line"
  start_bg "$TMP/h2o-stderr.log" "${PIN[@]}" "$H2O" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# ---- measuring ---------------------------------------------------------------
FAILED=()
record_skip() { # NAME REASON
  printf '%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\t-\t-\t-\n' "$1" "$2" >>"$SUMMARY"
  FAILED+=("$1")
  say "$1: SKIPPED: $2"
}

measure() { # NAME MODE URL PID — false when the server died
  local name=$1 mode=$2 url=$3 pid=$4
  local -a hdr=()
  mapfile -t hdr < <(mode_args "$mode")
  ((WARMUP > 0)) || say "$name: $mode: warm-up 0s"
  MEASURE_PRE=$name$'\t'$mode
  measure_case "$name: $mode" "$RESULTS/$name-$mode" "$pid" "$url" "${hdr[@]}"
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "$name"; FAILED+=("$name/$mode"); }
  [[ $MEASURE_STATUS != "server died during run" ]]
}

bench_server() { # NAME
  local name=$1 port url rc m p base
  local -a modes=()
  SERVER_PID="" SKIP_REASON=""
  port=$(free_port) || { record_skip "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port"; then
    record_skip "$name" "$SKIP_REASON"
    return 0
  fi
  url=http://127.0.0.1:$port$URL_PATH
  say "$name: started, pid $SERVER_PID, port $port; waiting for it to answer"
  rc=0
  wait_ready "$url" "$SERVER_PID" "$READY_TIMEOUT" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      record_skip "$name" "exited during start-up"
    else
      record_skip "$name" "no 2xx answer on $url within ${READY_TIMEOUT}s"
    fi
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  for m in "${MODES[@]}"; do
    # The epoll floor answers everything with its one 1 KiB body.
    [[ $name == epoll && $m != keepalive && $m != close ]] && continue
    modes+=("$m")
  done
  base=http://127.0.0.1:$port
  for p in $(for m in "${modes[@]}"; do mode_path "$m"; done | sort -u); do
    if ! verify_body "$base$p" "$DOCROOT$p"; then
      record_skip "$name" "did not return $p with 200 and its $(wc -c <"$DOCROOT$p") bytes"
      tail_logs "$name"
      stop_tree "$SERVER_PID"
      return 0
    fi
    say "$name: verified 200 + $(wc -c <"$DOCROOT$p")-byte body of $p"
  done
  say "$name: $(proc_tree "$SERVER_PID" | wc -l) process(es); modes: ${modes[*]}"
  for m in "${modes[@]}"; do
    if ! measure "$name" "$m" "$base$(mode_path "$m")" "$SERVER_PID"; then
      say "$name: not measuring the modes after $m: the server is gone"
      break
    fi
  done
  stop_tree "$SERVER_PID"
}

# ---- run ---------------------------------------------------------------------
version_of() {
  case $1 in
    epoll) echo "bench/epoll_fixed.c (cc -O2, $(cc --version 2>/dev/null | head -n 1))" ;;
    luxd)
      if [[ $LUXD == "$ROOT/build/luxd" ]]; then
        echo "luxd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no commit)') ($LUXD)"
      else
        echo "luxd $LUXD"
      fi
      ;;
    luxd-base) echo "luxd $LUXD_BASE" ;;
    nginx) echo "$("$NGINX" -v 2>&1 | head -n 1), sendfile+tcp_nopush $NGINX_SENDFILE" ;;
    lighttpd) "$LIGHTTPD" -v 2>&1 | head -n 1 ;;
    h2o) "$H2O" -v 2>&1 | head -n 1 ;;
  esac
}

{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "servers:    ${SERVERS[*]}"
  for s in "${SERVERS[@]}"; do printf '  %-9s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging OFF for every server"
  echo "load:       taskset -c $CLIENT_CPU wrk -t1 -c$CONNS -d${DURATION}s [-H 'Connection: close'], warm-up ${WARMUP}s"
  echo "modes:      ${MODES[*]}"
  echo "files:      GET /1k.html 1024 bytes (keepalive, close), /100k.html 102400 (ka-100k), /10m.html 10485760 (ka-10m); same docroot for all"
  echo "cpu:        utime+stime of all server processes (/proc/PID/stat), CLK_TCK=$CLK_TCK"
} | tee "$RESULTS/env.txt" >&2

for s in "${SERVERS[@]}"; do
  bench_server "$s"
done

# ---- table -------------------------------------------------------------------
print_table() {
  awk -F'\t' -v cpu="$SERVER_CPU" '
    NR == 1 { next }
    { rows[NR] = $0; if ($1 == "epoll" && $13 == "ok") floor[$2] = $11 }
    END {
      printf "%-9s %-9s %9s %9s %6s %6s %10s %7s %6s %6s\n", "server", "mode", "req/s", "requests", "errors", "cpu%", "CPU us/req", "x epoll", "core%", "wrk%"
      for (i = 2; i <= NR; i++) {
        split(rows[i], f, "\t")
        if (f[13] ~ /^skipped/) { printf "%-9s %s\n", f[1], f[13]; continue }
        ratio = (floor[f[2]] > 0 && f[13] == "ok") ? sprintf("%.2f", f[11] / floor[f[2]]) : "-"
        if (f[10] == "NA") {
          printf "%-9s %-9s %9.0f %9d %6d %6s %10s %7s %6.1f %6.1f  (%s)\n", f[1], f[2], f[3], f[4], f[5] + f[6], "-", "-", "-", f[14], f[15], f[13]
          continue
        }
        busy = (f[14] - f[10] > 30) ? " *" : ""
        if (busy != "") noisy = 1
        printf "%-9s %-9s %9.0f %9d %6d %6.1f %10.2f %7s %6.1f %6.1f%s%s\n", f[1], f[2], f[3], f[4], f[5] + f[6], f[10], f[11], ratio, f[14], f[15], busy, (f[13] == "ok" ? "" : "  (" f[13] ")")
      }
      if (noisy) print "* core% exceeds the server'"'"'s cpu% by over 30 points: CPU " cpu " was busy with other work too; rerun on an idle machine."
    }' "$SUMMARY"
}

{
  echo
  echo "Static files, ${DURATION}s per run, wrk -t1 -c$CONNS; server on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; access logging OFF for all."
  echo "keepalive / close: 1 KiB, keep-alive / Connection: close; ka-100k, ka-10m: 100 KiB, 10 MiB, keep-alive."
  print_table
  echo
  echo "errors = wrk non-2xx/3xx responses + socket errors; cpu% = server processes' utime+stime over the"
  echo "run, % of one core; CPU us/req = that CPU time*1e6/requests; x epoll = CPU us/req / the bare epoll loop's;"
  echo "core% / wrk% = busy % of CPU $SERVER_CPU / CPU $CLIENT_CPU (/proc/stat, softirq included): wrk% near 100 = client-bound."
  echo "A request of ka-10m is one 10 MiB response: its CPU us/req is the server's CPU per 10 MiB sent."
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
