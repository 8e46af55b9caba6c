# shellcheck shell=bash
# Helpers for the bench/ scripts. Source it from bash; it defines functions
# and the arrays BENCH_PIDS (servers started, to be stopped) only.
#
# The functions from "setup" on read the scripts' settings as globals:
# DURATION WARMUP CONNS SERVER_CPU CLIENT_CPU KEEP_TMP, and set or use
# CLK_TCK NOT_IDLE TMP RESULTS SUMMARY (see each one).

BENCH_PIDS=()
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { printf '%s\n' "bench: $*" >&2; }
die() {
  say "error: $*"
  exit 1
}

# render TEMPLATE OUT VAR=VALUE...  — copies TEMPLATE to OUT replacing @VAR@.
render() {
  local tpl=$1 out=$2 kv k v content
  shift 2
  content=$(<"$tpl")
  for kv in "$@"; do
    k=${kv%%=*}
    v=${kv#*=}
    content=${content//@"$k"@/$v}
  done
  printf '%s\n' "$content" >"$out"
}

# port_in_use PORT — true if any TCP socket (any state) uses it locally.
port_in_use() {
  local hex
  hex=$(printf ':%04X ' "$1")
  grep -qF -- "$hex" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# free_port — prints a port that no local TCP socket uses. Ports are drawn
# below the ephemeral range (32768+) so wrk's client ports never collide,
# and never twice in one run (BENCH_USED_PORTS).
BENCH_USED_PORTS=" "
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 12000))
    [[ $BENCH_USED_PORTS == *" $p "* ]] && continue
    port_in_use "$p" && continue
    BENCH_USED_PORTS+="$p "
    echo "$p"
    return 0
  done
  return 1
}

# proc_tree PID — prints PID and all its live descendants, one per line.
proc_tree() {
  local root=$1 f stat rest ppid pid
  local -A kids=()
  for f in /proc/[0-9]*/stat; do
    read -r stat 2>/dev/null <"$f" || continue
    pid=${stat%% *}
    rest=${stat##*) }        # fields from 3 (state) on; comm may hold spaces
    rest=${rest#* }          # drop state: now starts at field 4 (ppid)
    ppid=${rest%% *}
    kids[$ppid]+="$pid "
  done
  local queue=("$root") found=()
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -d /proc/$pid ]] || continue
    found+=("$pid")
    # shellcheck disable=SC2206 # word splitting of the pid list is wanted
    [[ -n ${kids[$pid]:-} ]] && queue+=(${kids[$pid]})
  done
  ((${#found[@]})) && printf '%s\n' "${found[@]}"
  return 0
}

# cpu_ticks PID... — sum of utime+stime (fields 14, 15 of /proc/PID/stat,
# in clock ticks) over the given processes. A process gone is skipped.
cpu_ticks() {
  local pid stat rest total=0
  local -a f
  for pid in "$@"; do
    read -r stat 2>/dev/null <"/proc/$pid/stat" || continue
    rest=${stat##*) }
    read -r -a f <<<"$rest"
    # f[0] is field 3 (state): field N is f[N-3].
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

# core_ticks CPU — prints "busy total" clock ticks of one CPU from /proc/stat
# (busy = everything but idle and iowait, so softirq work on it counts).
core_ticks() {
  awk -v c="cpu$1" '$1 == c {
    t = 0; for (i = 2; i <= NF; i++) t += $i
    print t - $5 - $6, t; exit }' /proc/stat
}

# tree_cpu_ticks PID — cpu_ticks of PID and its descendants.
tree_cpu_ticks() {
  local -a pids
  mapfile -t pids < <(proc_tree "$1")
  cpu_ticks "${pids[@]}"
}

# start_bg LOG CMD... — starts CMD in the background with output to LOG,
# remembers its pid for stop_all and sets BENCH_LAST_PID to it. (Not to be
# called in $(...): the server would then be a child of that subshell.)
BENCH_LAST_PID=
start_bg() {
  local log=$1
  shift
  "$@" </dev/null >"$log" 2>&1 &
  BENCH_LAST_PID=$!
  BENCH_PIDS+=("$BENCH_LAST_PID")
}

# stop_tree PID — TERM to PID (one that start_bg started) and its
# descendants, KILL to what is left after 3 s; reaps PID.
stop_tree() {
  local root=$1 i pid ours=0
  local -a pids keep=()
  for pid in "${BENCH_PIDS[@]}"; do
    if [[ $pid == "$root" ]]; then ours=1; else keep+=("$pid"); fi
  done
  ((ours)) || return 0
  mapfile -t pids < <(proc_tree "$root")
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do
      mapfile -t pids < <(proc_tree "$root")
      ((${#pids[@]})) || break
      # Only our own child, already a zombie, left: it is gone.
      if ((${#pids[@]} == 1)) && [[ $(awk '{print $3}' "/proc/$root/stat" 2>/dev/null) == Z ]]; then break; fi
      sleep 0.1
    done
    mapfile -t pids < <(proc_tree "$root")
    if ((${#pids[@]})); then kill -KILL "${pids[@]}" 2>/dev/null || true; fi
  fi
  wait "$root" 2>/dev/null || true
  BENCH_PIDS=("${keep[@]}")
  return 0
}

# stop_all — stops every server start_bg started.
stop_all() {
  local pid
  local -a all=("${BENCH_PIDS[@]}")
  for pid in "${all[@]}"; do
    stop_tree "$pid"
  done
}

# wait_ready URL PID TIMEOUT_S [CURL_ARG...] — waits for URL to answer 2xx
# (curl with CURL_ARGs, e.g. -H 'Host: x') while PID lives. Returns 2 when
# PID died, 1 on timeout.
wait_ready() {
  local url=$1 pid=$2 timeout=$3 deadline
  shift 3
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || return 2
    curl -sf -o /dev/null --max-time 1 "$@" "$url" && return 0
    sleep 0.1
  done
  return 1
}

# verify_body URL FILE [NOTE [CURL_ARG...]] — one GET (curl with CURL_ARGs)
# must give 200 and exactly FILE's bytes. NOTE follows the URL in the
# message about a wrong status (e.g. " (Host x)").
verify_body() {
  local url=$1 file=$2 note=${3:-} tmp code
  shift 2
  (($#)) && shift
  tmp=$(mktemp)
  code=$(curl -s -o "$tmp" -w '%{http_code}' --max-time 5 "$@" "$url") || code=000
  if [[ $code != 200 ]]; then
    say "verify: $url$note answered HTTP $code, want 200"
    rm -f "$tmp"
    return 1
  fi
  if ! cmp -s "$tmp" "$file"; then
    say "verify: body from $url ($(wc -c <"$tmp") bytes) differs from $file ($(wc -c <"$file") bytes)"
    rm -f "$tmp"
    return 1
  fi
  rm -f "$tmp"
  return 0
}

# parse_wrk FILE — prints "rps requests non2xx sockerr" from wrk's output.
parse_wrk() {
  awk '
    / requests in / { req = $1 }
    /^Requests\/sec:/ { rps = $2 }
    /^Non-2xx or 3xx responses:/ { non2xx = $NF }
    /^  Socket errors:/ {
      # Socket errors: connect 0, read 0, write 0, timeout 0
      for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) { v = $i; sub(/,/, "", v); sock += v }
    }
    END { printf "%s %s %d %d\n", (rps == "" ? "0" : rps), (req == "" ? "0" : req), non2xx, sock }
  ' "$1"
}

# ---- setup -------------------------------------------------------------------

has() { command -v "$1" >/dev/null 2>&1; }

# need_whole VAR... — dies unless each VAR holds a whole number.
need_whole() {
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, got '${!v}'"
  done
}

# deps_install GROUP — sh deps/install.sh GROUP, or dies.
deps_install() {
  sh "$BENCH_DIR/../deps/install.sh" "$1" || die "deps/install.sh $1 failed"
}

# check_tools_and_cpus — the tools every script runs, and that SERVER_CPU and
# CLIENT_CPU can be pinned to; sets CLK_TCK, clears NOT_IDLE.
check_tools_and_cpus() {
  local c
  for c in taskset wrk curl awk cmp; do has "$c" || die "$c not found"; done
  taskset -c "$SERVER_CPU" true 2>/dev/null || die "cannot pin to CPU $SERVER_CPU (SERVER_CPU)"
  taskset -c "$CLIENT_CPU" true 2>/dev/null || die "cannot pin to CPU $CLIENT_CPU (CLIENT_CPU); this benchmark needs 2 CPUs"
  [[ $SERVER_CPU != "$CLIENT_CPU" ]] || say "warning: server and wrk share CPU $SERVER_CPU"
  CLK_TCK=$(getconf CLK_TCK)
  NOT_IDLE=""
}

# check_idle — the numbers only mean something on an otherwise idle machine:
# looks at both CPUs for 1 s; sets NOT_IDLE (and says it) when either was
# over 20% busy.
check_idle() {
  local s0 c0 s1 c1
  read -r s0 _ < <(core_ticks "$SERVER_CPU")
  read -r c0 _ < <(core_ticks "$CLIENT_CPU")
  sleep 1
  read -r s1 _ < <(core_ticks "$SERVER_CPU")
  read -r c1 _ < <(core_ticks "$CLIENT_CPU")
  if (((s1 - s0) * 100 > 20 * CLK_TCK || (c1 - c0) * 100 > 20 * CLK_TCK)); then
    NOT_IDLE="warning: the machine was not idle (CPU $SERVER_CPU busy $(((s1 - s0) * 100 / CLK_TCK))%, CPU $CLIENT_CPU busy $(((c1 - c0) * 100 / CLK_TCK))% over 1 s before the start): expect noisy numbers"
    say "$NOT_IDLE"
  fi
}

# bench_cleanup — the EXIT trap: stops the servers, copies the configs and
# logs (not the docroot or binaries) of TMP to RESULTS/files, removes TMP
# unless KEEP_TMP=1, exits with the script's status.
bench_cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  stop_all
  if [[ -n $TMP && -d $TMP ]]; then
    if [[ -n $RESULTS ]]; then
      mkdir -p "$RESULTS/files"
      find "$TMP" -maxdepth 1 -type f \( -name '*.conf' -o -name '*.lua' -o -name '*.log' \) \
        -exec cp {} "$RESULTS/files/" \; 2>/dev/null || true
    fi
    if [[ $KEEP_TMP == 1 ]]; then
      say "temp dir kept: $TMP"
    else
      rm -rf "$TMP"
    fi
  fi
  exit "$rc"
}

# setup_dirs TMP_NAME RESULTS_NAME — installs the cleanup traps, then makes
# TMP (TMPDIR/TMP_NAME.XXXXXX) and RESULTS (bench/results/RESULTS_NAME-DATE).
setup_dirs() {
  TMP="" RESULTS=""
  trap bench_cleanup EXIT
  trap 'say "interrupted"; exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  chmod 755 "$TMP"
  RESULTS=$BENCH_DIR/results/$2-$(date +%Y%m%d-%H%M%S)
  [[ ! -e $RESULTS ]] || RESULTS+="-$$"
  mkdir -p "$RESULTS"
}

# make_docroot FILE — writes the 1 KiB test file (16 lines of 63 characters
# + newline) readable by any server user, in a new directory.
make_docroot() {
  local file=$1 i
  mkdir -p "$(dirname "$file")"
  for ((i = 0; i < 16; i++)); do
    printf 'luxd bench line %02d: 0123456789abcdefghijklmnopqrstuvwxyzABCDEFG\n' "$i"
  done >"$file"
  [[ $(wc -c <"$file") -eq 1024 ]] || die "docroot file is not 1024 bytes"
  chmod 644 "$file"
  chmod 755 "$(dirname "$file")"
}

# tail_logs PREFIX... — shows the end of each non-empty TMP/PREFIX-*.log.
tail_logs() {
  local p f
  for p in "$@"; do
    for f in "$TMP/$p"-*.log; do
      [[ -s $f ]] || continue
      say "--- tail $f"
      tail -n 15 "$f" >&2
    done
  done
}

# ---- measuring -------------------------------------------------------------------

# run_wrk OUT SECONDS URL [WRK_ARG...] — wrk -t1 -cCONNS pinned to CLIENT_CPU,
# output to OUT; killed 30 s after it should have ended.
run_wrk() {
  local out=$1 secs=$2 url=$3
  shift 3
  timeout --foreground -k 5 $((secs + 30)) \
    taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${secs}s" "$@" "$url" >"$out" 2>&1
}

# measure_case LABEL OUT PID URL [WRK_ARG...] — one case against the server
# PID: WARMUP s of wrk (OUT.warmup.txt), then DURATION s (OUT.wrk.txt) with
# the CPU time of PID's process tree and the busy ticks of SERVER_CPU and
# CLIENT_CPU sampled before and after. Appends one row to SUMMARY:
#   MEASURE_PRE, then req_per_s requests non2xx socket_errors cpu_ticks cpu_s
#   elapsed_s cpu_pct cpu_us_per_req nprocs status server_core_busy_pct
#   client_core_busy_pct server_core_us_per_req, then MEASURE_POST if set
# (MEASURE_PRE / MEASURE_POST: tab-separated columns). The run is not "ok"
# when wrk fails, the server dies, no request completes, or (with
# MEASURE_NON2XX_FAILS=1) an answer is not 2xx/3xx; then it says so (LABEL:
# status) and shows the end of the wrk output. Sets MEASURE_STATUS.
MEASURE_PRE="" MEASURE_POST="" MEASURE_NON2XX_FAILS=0 MEASURE_STATUS=""
measure_case() {
  local label=$1 out=$2.wrk.txt warm=$2.warmup.txt pid=$3 url=$4 before after t0 t1 rc=0 nprocs status=ok
  local rps requests non2xx sock s_busy0 s_tot0 c_busy0 c_tot0 s_busy1 s_tot1 c_busy1 c_tot1
  shift 4
  if ((WARMUP > 0)); then
    say "$label: warm-up ${WARMUP}s"
    run_wrk "$warm" "$WARMUP" "$url" "$@" || true
  fi
  say "$label: measuring ${DURATION}s"
  nprocs=$(proc_tree "$pid" | wc -l)
  read -r s_busy0 s_tot0 < <(core_ticks "$SERVER_CPU")
  read -r c_busy0 c_tot0 < <(core_ticks "$CLIENT_CPU")
  before=$(tree_cpu_ticks "$pid")
  t0=$EPOCHREALTIME
  run_wrk "$out" "$DURATION" "$url" "$@" || rc=$?
  t1=$EPOCHREALTIME
  after=$(tree_cpu_ticks "$pid")
  read -r s_busy1 s_tot1 < <(core_ticks "$SERVER_CPU")
  read -r c_busy1 c_tot1 < <(core_ticks "$CLIENT_CPU")
  read -r rps requests non2xx sock < <(parse_wrk "$out")
  if ((rc != 0)); then status="wrk exit $rc"; fi
  if ((MEASURE_NON2XX_FAILS && non2xx > 0)); then status="$non2xx non-2xx answers"; fi
  if ! kill -0 "$pid" 2>/dev/null || [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == Z ]]; then
    status="server died during run"
  fi
  if [[ $requests == 0 ]]; then status="no requests completed"; fi
  if [[ $status != ok ]]; then
    say "$label: $status"
    tail -n 20 "$out" >&2
  fi
  # shellcheck disable=SC2034 # read by the calling script
  MEASURE_STATUS=$status
  awk -v pre="$MEASURE_PRE" -v post="$MEASURE_POST" -v rps="$rps" -v req="$requests" -v e1="$non2xx" -v e2="$sock" \
    -v ticks="$((after - before))" -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" -v np="$nprocs" -v st="$status" \
    -v sb="$((s_busy1 - s_busy0))" -v stt="$((s_tot1 - s_tot0))" \
    -v cb="$((c_busy1 - c_busy0))" -v ctt="$((c_tot1 - c_tot0))" '
    BEGIN {
      cpu = ticks / hz; el = t1 - t0
      us = (req > 0) ? cpu * 1e6 / req : 0
      core_us = (req > 0) ? sb / hz * 1e6 / req : 0
      spct = (stt > 0 ? 100 * sb / stt : 0); cpct = (ctt > 0 ? 100 * cb / ctt : 0)
      tail = (post == "") ? "\n" : "\t" post "\n"
      if (st == "server died during run") { # its CPU time is lost with it
        printf "%s\t%s\t%s\t%d\t%d\tNA\tNA\t%.2f\tNA\tNA\t%d\t%s\t%.1f\t%.1f\tNA%s",
          pre, rps, req, e1, e2, el, np, st, spct, cpct, tail
        exit
      }
      printf "%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.2f\t%d\t%s\t%.1f\t%.1f\t%.2f%s",
        pre, rps, req, e1, e2, ticks, cpu, el, (el > 0 ? 100 * cpu / el : 0), us, np, st,
        spct, cpct, core_us, tail
    }' >>"$SUMMARY"
}
