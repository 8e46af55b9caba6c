#!/usr/bin/env bash
# Idle memory per keep-alive connection: luxd beside nginx, each holding
# CONNS (10,000) open, answered, idle keep-alive connections.
#
# Usage: bash bench/idle.sh [SERVER...]     SERVER: luxd luxd-base nginx
#                                            (default: luxd nginx)
# Environment:
#   CONNS=10000   connections held open
#   BATCH=10      connections opened at a time (see below)
#   SETTLE=2      seconds between the last answer and the second RSS reading
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU the client is pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   LUXD, NGINX   binaries (default build/luxd, /usr/sbin/nginx)
#   LUXD_BASE     a second luxd binary (say, a build of the previous commit),
#                 measured as server "luxd-base" in the same run
#
# Method, per server: start it with one worker (luxd: workers = 1, one
# process; nginx: worker_processes 1, and the worker is measured, not the
# master), keepalive_timeout 300 s, room for 2 x CONNS connections; wait
# until it answers and has served the 1 KiB /small.html correctly (curl), then
# read its VmRSS (/proc/PID/status). The client (bench/idle_client.c, built
# with cc into the temp dir, epoll, 127.0.0.1 only) then opens CONNS
# connections BATCH at a time: connect, one "GET /small.html HTTP/1.1"
# keep-alive request each, read and check the whole answer (200, the file's
# exact bytes), and only then the next batch, leaving every answered
# connection open and idle. So at most BATCH requests are ever in flight and
# the figure is the cost of an idle connection, not of a burst of
# concurrently active ones. SETTLE s after the last answer VmRSS is read
# again, and the client checks that every connection is still open.
# Reported: (RSS after - RSS before) / CONNS bytes per connection, and the
# total. A failed request or a connection the server closed makes the row
# NOT A RESULT. Raw results go to bench/results/idle-DATE/; see
# bench/README.md.
#
# Exit status: 0 when every selected server was measured cleanly, 3 when one
# or more were skipped or not clean, 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

ALL_SERVERS=(luxd nginx)
CONNS=${CONNS:-10000}
BATCH=${BATCH:-10}
SETTLE=${SETTLE:-2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15
OPEN_TIMEOUT=600 # s for the client to open and get answers on all CONNS

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
SERVERS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    luxd | luxd-base | nginx) SERVERS+=("$a") ;;
    *) usage >&2; die "unknown server '$a' (known: luxd luxd-base nginx)" ;;
  esac
done
((${#SERVERS[@]})) || SERVERS=("${ALL_SERVERS[@]}")
need_whole CONNS BATCH SETTLE SERVER_CPU CLIENT_CPU
((CONNS > 0 && BATCH > 0)) || die "CONNS and BATCH must be > 0"
MAXCONN=$((2 * CONNS))

# ---- dependencies ----------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
LUXD=${LUXD:-$ROOT/build/luxd}
want_bench=0 want_test=0 want_build=0
has taskset || want_bench=1
for s in "${SERVERS[@]}"; do
  [[ $s == nginx && ! -x $NGINX ]] && want_bench=1
done
has curl || want_test=1
has cc || want_build=1
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
if ((want_build)); then deps_install build; fi
for c in taskset curl cc cmp awk; do has "$c" || die "$c not found"; done
taskset -c "$SERVER_CPU" true 2>/dev/null || die "cannot pin to CPU $SERVER_CPU (SERVER_CPU)"
taskset -c "$CLIENT_CPU" true 2>/dev/null || die "cannot pin to CPU $CLIENT_CPU (CLIENT_CPU)"

# ---- open files: the server and the client each hold CONNS sockets ----------
NEED_FDS=$((CONNS + 256))
HARD=$(ulimit -Hn)
if [[ $HARD != unlimited ]] && ((HARD < NEED_FDS)); then
  die "the hard open-files limit (ulimit -Hn) is $HARD; CONNS=$CONNS needs $NEED_FDS (raise it, or lower CONNS)"
fi
if [[ $HARD == unlimited ]]; then NOFILE=$((MAXCONN + 256)); else NOFILE=$HARD; fi
ulimit -n "$NOFILE" || die "ulimit -n $NOFILE failed"

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-idle idle
SUMMARY=$RESULTS/summary.tsv
printf 'server\tconns\tbatch\tok\tfailed\tstill_open\tclosed\trss_before_kb\trss_after_kb\tdelta_kb\tbytes_per_conn\trss_anon_delta_kb\trss_file_delta_kb\tkernel_tcp_mem_delta_pages\topen_ms\tstatus\n' >"$SUMMARY"

DOCROOT=$TMP/www
FILE=$DOCROOT/small.html
make_docroot "$FILE"
URL_PATH=/small.html

if ! cc -O2 -o "$TMP/idle_client" "$HERE/idle_client.c" >"$TMP/client-build.log" 2>&1; then
  cat "$TMP/client-build.log" >&2
  die "cc -O2 bench/idle_client.c failed"
fi

# ---- per-server start functions --------------------------------------------
# start_NAME PORT: writes the config, starts the server in the foreground (in
# the background of this script) pinned to SERVER_CPU, sets SERVER_PID.
# Returns non-zero with SKIP_REASON set when it cannot run.
SERVER_PID="" SKIP_REASON=""
PIN=(taskset -c "$SERVER_CPU")

start_luxd_binary() { # NAME BINARY PORT
  local name=$1 bin=$2 port=$3 conf=$TMP/$1.lua
  render "$HERE/conf/luxd-idle.lua.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" NAME="$name" \
    MAXCONN="$MAXCONN"
  start_bg "$TMP/$name-stderr.log" "${PIN[@]}" "$bin" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_luxd() {
  if [[ ! -x $LUXD ]]; then
    say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
    if ! make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1 || [[ ! -x $LUXD ]]; then
      SKIP_REASON="$LUXD missing and 'make' did not build it (log: $RESULTS/luxd-make.log)"
      return 1
    fi
  fi
  start_luxd_binary luxd "$LUXD" "$1"
}

start_luxd-base() {
  if [[ -z ${LUXD_BASE:-} || ! -x $LUXD_BASE ]]; then
    SKIP_REASON="LUXD_BASE is not set to an executable luxd"
    return 1
  fi
  start_luxd_binary luxd-base "$LUXD_BASE" "$1"
}

start_nginx() {
  local port=$1 conf=$TMP/nginx.conf user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  render "$HERE/conf/nginx-idle.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" \
    NGINX_USER="$user_line" MAXCONN="$MAXCONN" NOFILE="$NOFILE"
  start_bg "$TMP/nginx-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/nginx/" -e "$TMP/nginx-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

# mem_pid NAME PID — the process whose memory is measured: nginx's one
# worker (the master's child running "nginx: worker process"), else PID.
mem_pid() {
  local name=$1 pid=$2 p i
  if [[ $name != nginx ]]; then
    echo "$pid"
    return 0
  fi
  for ((i = 0; i < 50; i++)); do
    while read -r p; do
      [[ $p == "$pid" ]] && continue
      if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'worker process'; then
        echo "$p"
        return 0
      fi
    done < <(proc_tree "$pid")
    sleep 0.1
  done
  return 1
}

# status_kb PID FIELD — a "FIELD: N kB" line of /proc/PID/status (0 if absent).
status_kb() {
  awk -v f="$2:" '$1 == f { print $2; found = 1; exit } END { if (!found) print 0 }' "/proc/$1/status"
}

# tcp_mem_pages — the kernel's TCP buffer memory, in pages, for both ends of
# every socket (the "mem" of /proc/net/sockstat's TCP line).
tcp_mem_pages() {
  awk '$1 == "TCP:" { for (i = 2; i < NF; i++) if ($i == "mem") { print $(i + 1); exit } }' /proc/net/sockstat
}

# ---- measuring ---------------------------------------------------------------
FAILED=()
record_skip() { # NAME REASON
  printf '%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\n' "$1" "$CONNS" "$BATCH" "$2" >>"$SUMMARY"
  FAILED+=("$1")
  say "$1: SKIPPED: $2"
}

# The running client: its pid and our ends of its stdin and stdout (copied
# from the coproc's variables, which bash clears when it exits).
CLIENT_PID="" CLIENT_IN="" CLIENT_OUT=""
# stop_client — ends the client: end of its stdin (it closes every
# connection and exits), then stop_tree after at most 30 s.
stop_client() {
  local i fd
  [[ -n $CLIENT_PID ]] || return 0
  for fd in $CLIENT_IN $CLIENT_OUT; do exec {fd}>&-; done
  CLIENT_IN="" CLIENT_OUT=""
  for ((i = 0; i < 300; i++)); do
    kill -0 "$CLIENT_PID" 2>/dev/null || break
    [[ $(awk '{print $3}' "/proc/$CLIENT_PID/stat" 2>/dev/null) == Z ]] && break
    sleep 0.1
  done
  stop_tree "$CLIENT_PID"
  CLIENT_PID=""
}

bench_server() { # NAME
  local name=$1 port url rc mpid line ok=-1 failed=-1 open=-1 closed=-1 data=0 status=ok
  local rss0 rss1 anon0 anon1 file0 file1 tcp0 tcp1 t0 t1
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
  if ! verify_body "$url" "$FILE"; then
    record_skip "$name" "did not return the 1 KiB file with 200"
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ! mpid=$(mem_pid "$name" "$SERVER_PID"); then
    record_skip "$name" "no worker process found under pid $SERVER_PID"
    stop_tree "$SERVER_PID"
    return 0
  fi
  say "$name: verified 200 + 1024-byte body; measuring pid $mpid ($(tr '\0' ' ' <"/proc/$mpid/cmdline" | cut -c1-60))"
  sleep 0.5 # let the curl connections' teardown finish
  rss0=$(status_kb "$mpid" VmRSS) anon0=$(status_kb "$mpid" RssAnon) file0=$(status_kb "$mpid" RssFile)
  tcp0=$(tcp_mem_pages)

  say "$name: opening $CONNS connections, $BATCH at a time"
  t0=$EPOCHREALTIME
  coproc IDLE_CLIENT { exec taskset -c "$CLIENT_CPU" "$TMP/idle_client" "$port" "$URL_PATH" "$FILE" "$CONNS" \
    "$BATCH" 2>"$TMP/$name-client.log"; }
  CLIENT_PID=$IDLE_CLIENT_PID CLIENT_OUT=${IDLE_CLIENT[0]} CLIENT_IN=${IDLE_CLIENT[1]}
  BENCH_PIDS+=("$CLIENT_PID")
  rss1=$rss0 anon1=$anon0 file1=$file0 tcp1=$tcp0
  line=""
  read -r -t "$OPEN_TIMEOUT" -u "$CLIENT_OUT" line || true
  t1=$EPOCHREALTIME
  if [[ $line =~ ^opened\ ok=([0-9]+)\ failed=([0-9]+)$ ]]; then
    ok=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]}
    say "$name: $ok answered and idle, $failed failed; waiting ${SETTLE}s"
    sleep "$SETTLE"
    rss1=$(status_kb "$mpid" VmRSS) anon1=$(status_kb "$mpid" RssAnon) file1=$(status_kb "$mpid" RssFile)
    tcp1=$(tcp_mem_pages)
    echo check >&"$CLIENT_IN"
    line=""
    read -r -t 60 -u "$CLIENT_OUT" line || true
    if [[ $line =~ ^check\ open=([0-9]+)\ closed=([0-9]+)\ data=([0-9]+)$ ]]; then
      open=${BASH_REMATCH[1]} closed=${BASH_REMATCH[2]} data=${BASH_REMATCH[3]}
    else
      status="client gave no check answer"
    fi
  else
    status="client did not finish opening (got '${line:0:80}')"
  fi
  if [[ $status == ok ]]; then
    if ((failed > 0)); then
      status="NOT A RESULT: $failed failed"
    elif ((ok != CONNS)); then
      status="NOT A RESULT: $ok of $CONNS answered"
    elif ((open != ok)); then
      status="NOT A RESULT: $closed closed by the server, $data with unasked data"
    fi
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then status="server died during run"; fi
  if [[ -s $TMP/$name-client.log ]]; then
    say "--- $name client:"
    cat "$TMP/$name-client.log" >&2
  fi
  stop_client
  stop_tree "$SERVER_PID"
  [[ $status == ok ]] || { say "$name: $status"; tail_logs "$name"; FAILED+=("$name"); }
  awk -v OFS='\t' -v name="$name" -v n="$CONNS" -v b="$BATCH" -v ok="$ok" -v f="$failed" -v o="$open" \
    -v c="$closed" -v r0="$rss0" -v r1="$rss1" -v a0="$anon0" -v a1="$anon1" -v f0="$file0" -v f1="$file1" \
    -v p0="$tcp0" -v p1="$tcp1" -v t0="$t0" -v t1="$t1" -v st="$status" 'BEGIN {
      print name, n, b, ok, f, o, c, r0, r1, r1 - r0, sprintf("%.0f", (r1 - r0) * 1024 / n), a1 - a0, f1 - f0,
        p1 - p0, sprintf("%.0f", (t1 - t0) * 1000), st
    }' >>"$SUMMARY"
}

# ---- run ---------------------------------------------------------------------
version_of() {
  case $1 in
    luxd)
      if [[ $LUXD == "$ROOT/build/luxd" ]]; then
        echo "luxd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no commit)') ($LUXD)"
      else
        echo "luxd $LUXD"
      fi
      ;;
    luxd-base) echo "luxd $LUXD_BASE" ;;
    nginx) "$NGINX" -v 2>&1 | head -n 1 ;;
  esac
}

{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "servers:    ${SERVERS[*]}"
  for s in "${SERVERS[@]}"; do printf '  %-9s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging OFF, keepalive_timeout 300 s, room for $MAXCONN connections"
  echo "client:     bench/idle_client.c, taskset -c $CLIENT_CPU: $CONNS connections, $BATCH at a time, one GET $URL_PATH (1024 bytes) each"
  echo "memory:     VmRSS of the server worker (/proc/PID/status) before the client and ${SETTLE}s after the last answer"
  echo "open files: ulimit -n $NOFILE"
} | tee "$RESULTS/env.txt" >&2

for s in "${SERVERS[@]}"; do
  bench_server "$s"
done

# ---- table -------------------------------------------------------------------
print_table() {
  awk -F'\t' '
    NR == 1 { next }
    {
      if ($16 ~ /^skipped/) { printf "%-9s %s\n", $1, $16; next }
      if (!hdr++) printf "%-9s %6s %6s %6s %11s %11s %11s %8s %9s\n", "server", "conns", "failed", "open", "RSS before", "RSS after", "total", "B/conn", "open ms"
      printf "%-9s %6d %6s %6s %7d KiB %7d KiB %7d KiB %8s %9s%s\n", $1, $2, $5, $6, $8, $9, $10, $11, $15, ($16 == "ok" ? "" : "  (" $16 ")")
    }' "$SUMMARY"
}

{
  echo
  echo "Idle keep-alive connections: $CONNS per server, opened $BATCH at a time, each after one GET $URL_PATH (1 KiB) answered in full."
  print_table
  echo
  echo "RSS = VmRSS of the server worker (nginx: the worker, not the master) before the client and ${SETTLE}s after its last"
  echo "answer; total = after - before; B/conn = total*1024/conns. Kernel socket memory is not in RSS (see summary.tsv)."
  echo "failed = requests without a full, correct 200; open = connections still open at the second reading."
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
