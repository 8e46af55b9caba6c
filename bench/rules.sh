#!/usr/bin/env bash
# What config size costs per request: luxd serving one 1 KiB file through
# thousands of rules and vhosts that the request does not match, against the
# same luxd with no rules, and nginx with 0 and 1,000 non-matching regex
# rewrites in the same run. Also times start-up (Lua run + compile) of a
# config with 10,000 vhosts and 10,000 rules.
#
# Usage: bash bench/rules.sh [CASE...]      (default: all, in the order below)
# Cases (the request is always GET /index.html, Host site05000.example):
#   base        luxd, no rules
#   rw1k rw10k  luxd, 1,000 / 10,000 rewrites ^/old00001/(.*)$ -> /new/$1 ...
#   nginx-base  nginx, no rules
#   nginx-rw1k  nginx, 1,000 rewrites ^/old00001/(.*)$ /new/$1; ... (server block)
#   acc1k acc10k  luxd, 1,000 / 10,000 access rules, in turn deny { prefix =
#               "/p00001/" }, deny { suffix = { ".x00002" } }, deny { regex =
#               [[^/r00003/.*\.bak$]] } ...
#   vh10k       luxd, 10,000 vhosts site00001.example ..., the request's Host
#               one of them
#   sfx10k      luxd, 10,000 rewrites [[\.x00001$]] ...: no literal prefix,
#               only a literal suffix
#   re100 re1k re10k  luxd, 100 / 1,000 / 10,000 rewrites [[(a|b)00001\d+]]
#               ...: no literal prefix or suffix; without the regex prefilter
#               every one is run on every request (worst case). With it
#               (luxd -V: "regex prefilter: Hyperscan"), measured once the
#               error log says it compiled (it compiles off the loops)
#   all10k      luxd, 10,000 vhosts, the requested one with 10,000 rules
#               (5,000 rewrites + 5,000 access rules as above)
#   base2       luxd, no rules, again at the end: the run's drift and noise
#   startup     luxd -t -c FILE of the all10k config, best of 3: "compiled in"
#               (Lua run + compile, as luxd reports it) and the command's wall time
# Environment:
#   DURATION=10   seconds of each measured wrk run
#   WARMUP=2      seconds of the wrk warm-up run before each measured run
#   CONNS=50      wrk connections (-c)
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU wrk is pinned to
#   STARTUP_RUNS=3  runs of luxd -t for the startup case
#   ROUNDS=1      run the whole list of cases this many times, interleaved;
#                 the table then shows each case's median (and min-max)
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   LUXD, NGINX   binaries (default build/luxd, /usr/sbin/nginx)
#
# Every server runs one worker pinned to SERVER_CPU with access logging off,
# on its own free port on 127.0.0.1; wrk -t1 (keep-alive) runs pinned to
# CLIENT_CPU. Server CPU time is utime+stime of all its processes from /proc.
# Raw results go to bench/results/rules-DATE/. See bench/README.md.
#
# Exit status: 0 when every selected case was measured cleanly, 3 when one or
# more were skipped or failed (the others are still measured), 1 on a setup
# error.
# Functions below are called indirectly (traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_RUNS=${STARTUP_RUNS:-3}
ROUNDS=${ROUNDS:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=30
HOST=site05000.example
URL_PATH=/index.html

# ---- the cases ---------------------------------------------------------------
# name -> "server kind count description"; kind is CASE in luxd-rules.lua.in.
ALL_CASES=(base rw1k nginx-base nginx-rw1k rw10k acc1k acc10k vh10k sfx10k re100 re1k re10k all10k base2 startup)
declare -A CASE_SERVER=() CASE_KIND=() CASE_COUNT=() CASE_DESC=()
defcase() { CASE_SERVER[$1]=$2 CASE_KIND[$1]=$3 CASE_COUNT[$1]=$4 CASE_DESC[$1]=$5; }
defcase base luxd base 0 "no rules"
defcase rw1k luxd rewrite 1000 '1,000 rewrites ^/old00001/(.*)$'
defcase rw10k luxd rewrite 10000 '10,000 rewrites ^/old00001/(.*)$'
defcase nginx-base nginx rewrite 0 "no rules"
defcase nginx-rw1k nginx rewrite 1000 '1,000 rewrites ^/old00001/(.*)$'
defcase acc1k luxd access 1000 "1,000 access rules (prefix/suffix/regex)"
defcase acc10k luxd access 10000 "10,000 access rules (prefix/suffix/regex)"
defcase vh10k luxd vhosts 10000 "10,000 vhosts, Host one of them"
defcase sfx10k luxd suffix_re 10000 '10,000 rewrites \.x00001$ (suffix only)'
defcase re100 luxd unindexed_re 100 '100 rewrites (a|b)00001\d+ (no literal)'
defcase re1k luxd unindexed_re 1000 '1,000 rewrites (a|b)00001\d+ (no literal)'
defcase re10k luxd unindexed_re 10000 '10,000 rewrites (a|b)00001\d+ (no literal)'
defcase all10k luxd all 10000 "10,000 vhosts + 10,000 rules (5k rw + 5k access)"
defcase base2 luxd base 0 "no rules (again, last: drift)"
defcase startup luxd all 10000 "start-up: 10,000 vhosts + 10,000 rules"

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

CASES=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    all) CASES+=("${ALL_CASES[@]}") ;;
    *)
      [[ -n ${CASE_SERVER[$a]:-} ]] || { usage >&2; die "unknown case '$a' (known: ${ALL_CASES[*]})"; }
      CASES+=("$a")
      ;;
  esac
done
((${#CASES[@]})) || CASES=("${ALL_CASES[@]}")
need_whole DURATION WARMUP CONNS SERVER_CPU CLIENT_CPU STARTUP_RUNS ROUNDS
((DURATION > 0)) || die "DURATION must be > 0"
((STARTUP_RUNS > 0)) || die "STARTUP_RUNS must be > 0"
((ROUNDS > 0)) || die "ROUNDS must be > 0"

# ---- dependencies ------------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
LUXD=${LUXD:-$ROOT/build/luxd}
want_bench=0 want_test=0
has taskset || want_bench=1
for c in "${CASES[@]}"; do
  if [[ ${CASE_SERVER[$c]} == nginx && ! -x $NGINX ]]; then want_bench=1; fi
done
has wrk || want_test=1
has curl || want_test=1
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
check_tools_and_cpus

# ---- cleanup, temp dir, results ------------------------------------------------

# luxd must exist before anything is measured (make it if it is missing).
need_luxd=0
for c in "${CASES[@]}"; do
  if [[ ${CASE_SERVER[$c]} == luxd ]]; then need_luxd=1; fi
done
setup_dirs luxd-bench-rules rules
LUXD_SKIP=""
if ((need_luxd)) && [[ ! -x $LUXD ]]; then
  say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
  if ! make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1 || [[ ! -x $LUXD ]]; then
    LUXD_SKIP="build/luxd missing and 'make' did not build it (log: $RESULTS/luxd-make.log)"
    say "$LUXD_SKIP"
  fi
fi
# Run a copy: a rebuild of build/luxd during the run must not change the
# binary half-way through the cases.
LUXD_SRC=$LUXD
if ((need_luxd)) && [[ -z $LUXD_SKIP ]]; then
  cp "$LUXD" "$TMP/luxd-bin" || die "cannot copy $LUXD"
  LUXD=$TMP/luxd-bin
fi

check_idle

SUMMARY=$RESULTS/summary.tsv
printf 'case\tserver\tkind\tcount\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\tload_ms\tdescription\tround\n' >"$SUMMARY"
STARTUP_TSV=$RESULTS/startup.tsv

# ---- the docroot: one 1 KiB file -------------------------------------------------
DOCROOT=$TMP/www
FILE=$DOCROOT/index.html
make_docroot "$FILE"

# ---- configs and servers ---------------------------------------------------------
PIN=(taskset -c "$SERVER_CPU")
SERVER_PID="" SKIP_REASON="" LOAD_MS=""

luxd_conf() { # CASE PORT — writes TMP/luxd-CASE.lua, prints its path
  local c=$1 port=$2 conf=$TMP/luxd-$1.lua
  render "$HERE/conf/luxd-rules.lua.in" "$conf" CASE="${CASE_KIND[$c]}" COUNT="${CASE_COUNT[$c]}" \
    HOST="$HOST" DOCROOT="$DOCROOT" DIR="$TMP" NAME="$c" PORT="$port"
  echo "$conf"
}

start_luxd() { # CASE PORT
  local c=$1 port=$2 conf
  [[ -z $LUXD_SKIP ]] || { SKIP_REASON=$LUXD_SKIP; return 1; }
  conf=$(luxd_conf "$c" "$port")
  # Check it once first: the load time, and what the tables look like
  # (the -T summary lines; the full dump of 10,000 vhosts is not kept).
  if ! "$LUXD" -T -c "$conf" >"$TMP/luxd-$c.dump" 2>"$TMP/luxd-$c-check.log"; then
    SKIP_REASON="luxd -T rejected the config: $(head -c 400 "$TMP/luxd-$c-check.log")"
    return 1
  fi
  LOAD_MS=$(sed -n 's/.*compiled in \([0-9.]*\) ms.*/\1/p' "$TMP/luxd-$c-check.log")
  grep -E "^(hosts|vhost $HOST |  (access|rewrite|redirect) \\()" "$TMP/luxd-$c.dump" >"$RESULTS/luxd-$c.tables.txt" || true
  rm -f "$TMP/luxd-$c.dump"
  start_bg "$TMP/luxd-$c-stderr.log" "${PIN[@]}" "$LUXD" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_nginx() { # CASE PORT
  local c=$1 port=$2 conf=$TMP/$1.conf rw=$TMP/$1-rewrites.conf user_line="" i n=${CASE_COUNT[$1]}
  [[ -x $NGINX ]] || { SKIP_REASON="$NGINX not found"; return 1; }
  if [[ $(id -u) -eq 0 ]]; then user_line="user root;"; fi
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  for ((i = 1; i <= n; i++)); do
    # shellcheck disable=SC2016 # $1 is nginx's, not ours
    printf 'rewrite ^/old%05d/(.*)$ /new/$1;\n' "$i"
  done >"$rw"
  render "$HERE/conf/nginx-rules.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" \
    NGINX_USER="$user_line" SENDFILE=on HOST="$HOST" NAME="$c" COUNT="${CASE_COUNT[$c]}" REWRITES="$rw"
  start_bg "$TMP/$c-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/nginx/" -e "$TMP/$c-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

# ---- measuring ---------------------------------------------------------------------
FAILED=()
MEASURE_NON2XX_FAILS=1 # a run with non-2xx answers is not clean
record_skip() { # CASE REASON
  printf '%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\t-\t-\t-\t-\t%s\t%s\n' \
    "$1" "${CASE_SERVER[$1]}" "${CASE_KIND[$1]}" "${CASE_COUNT[$1]}" "$2" "${CASE_DESC[$1]}" "$ROUND" >>"$SUMMARY"
  FAILED+=("$1")
  say "$1: SKIPPED: $2"
}

measure() { # CASE URL PID
  local c=$1
  MEASURE_PRE=$c$'\t'${CASE_SERVER[$c]}$'\t'${CASE_KIND[$c]}$'\t'${CASE_COUNT[$c]}
  MEASURE_POST=${LOAD_MS:--}$'\t'${CASE_DESC[$c]}$'\t'$ROUND
  measure_case "$c" "$RESULTS/$c$SFX" "$3" "$2" -H "Host: $HOST"
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "luxd-$c" "$c"; FAILED+=("$c"); }
}

compiled_lines() { # CASE — how many "regex prefilter of" lines its error log has
  local n
  n=$(grep -c 'regex prefilter of' "$TMP/luxd-$1-error.log" 2>/dev/null) || true
  echo "${n:-0}"
}

bench_case() { # CASE
  local c=$1 srv=${CASE_SERVER[$1]} port url rc
  SERVER_PID="" SKIP_REASON="" LOAD_MS=""
  # Each round appends to the case's error log: only a line this start
  # writes says its prefilter compiled.
  local compiled_before
  compiled_before=$(compiled_lines "$c")
  port=$(free_port) || { record_skip "$c" "no free port found"; return 0; }
  if ! "start_$srv" "$c" "$port"; then
    record_skip "$c" "$SKIP_REASON"
    return 0
  fi
  url=http://127.0.0.1:$port$URL_PATH
  say "$c$SFX: $srv started (${CASE_DESC[$c]}${LOAD_MS:+, config loaded in $LOAD_MS ms}), pid $SERVER_PID, port $port"
  rc=0
  wait_ready "$url" "$SERVER_PID" "$READY_TIMEOUT" -H "Host: $HOST" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      record_skip "$c" "exited during start-up"
    else
      record_skip "$c" "no 2xx answer on $url (Host $HOST) within ${READY_TIMEOUT}s"
    fi
    tail_logs "luxd-$c" "$c"
    stop_tree "$SERVER_PID"
    return 0
  fi
  # The regex prefilter compiles on its own thread after the start: what
  # is measured is the server once it is there.
  if [[ $srv == luxd && ${CASE_KIND[$c]} == unindexed_re ]] &&
    "$LUXD" -V 2>/dev/null | grep -q '^regex prefilter: Hyperscan'; then
    local waited=0
    until (($(compiled_lines "$c") > compiled_before)); do
      if ((waited >= READY_TIMEOUT * 10)); then
        record_skip "$c" "the regex prefilter did not compile within ${READY_TIMEOUT}s"
        tail_logs "luxd-$c" "$c"
        stop_tree "$SERVER_PID"
        return 0
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
    say "$c$SFX: $(grep -o 'regex prefilter of.*' "$TMP/luxd-$c-error.log" | tail -1)"
  fi
  if ! verify_body "$url" "$FILE" " (Host $HOST)" -H "Host: $HOST"; then
    record_skip "$c" "did not return the 1 KiB file with 200"
    tail_logs "luxd-$c" "$c"
    stop_tree "$SERVER_PID"
    return 0
  fi
  measure "$c" "$url" "$SERVER_PID"
  stop_tree "$SERVER_PID"
}

# startup: luxd -t of the all10k config, STARTUP_RUNS times. Prints nothing;
# writes startup.tsv (one row per run).
STARTUP_LINE=""
bench_startup() {
  local c=startup conf i t0 t1 log ms wall ok=1
  if [[ -n $LUXD_SKIP ]]; then record_skip "$c" "$LUXD_SKIP"; return 0; fi
  conf=$(luxd_conf "$c" "$(free_port || echo 1)")
  printf 'run\tcompiled_ms\twall_ms\tuser_s\tsys_s\tmax_rss_kb\n' >"$STARTUP_TSV"
  for ((i = 1; i <= STARTUP_RUNS; i++)); do
    log=$RESULTS/startup-$i.txt
    t0=$EPOCHREALTIME
    if [[ -x /usr/bin/time ]]; then
      /usr/bin/time -o "$log.time" -f '%U %S %M' "$LUXD" -t -c "$conf" >"$log" 2>&1 || ok=0
    else
      "$LUXD" -t -c "$conf" >"$log" 2>&1 || ok=0
    fi
    t1=$EPOCHREALTIME
    ((ok)) || { record_skip "$c" "luxd -t failed: $(head -c 400 "$log")"; return 0; }
    ms=$(sed -n 's/.*compiled in \([0-9.]*\) ms.*/\1/p' "$log")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
    local u=- s=- m=-
    [[ -s $log.time ]] && read -r u s m <"$log.time"
    printf '%d\t%s\t%s\t%s\t%s\t%s\n' "$i" "${ms:-NA}" "$wall" "$u" "$s" "$m" >>"$STARTUP_TSV"
    say "startup: run $i: compiled in ${ms:-?} ms, wall $wall ms"
  done
  "$LUXD" -T -c "$conf" 2>/dev/null | grep -E "^(hosts|vhost $HOST |  (access|rewrite|redirect) \\()" >"$RESULTS/luxd-startup.tables.txt" || true
  STARTUP_LINE=$(awk -F'\t' 'NR > 1 {
      if (bc == "" || $2 + 0 < bc) bc = $2 + 0
      if (bw == "" || $3 + 0 < bw) bw = $3 + 0
      all = all (all == "" ? "" : ", ") $2 "/" $3
      if ($6 != "-" && $6 + 0 > rss) rss = $6 + 0
    }
    END { printf "best of %d: compiled in %.1f ms (Lua run + compile, luxd -t), wall %.1f ms for the whole command", NR - 1, bc, bw
          if (rss) printf ", max RSS %.0f MB", rss / 1024
          printf "\n  runs (compiled/wall ms): %s", all }' "$STARTUP_TSV")
}

# ---- run ------------------------------------------------------------------------------
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "luxd:       $LUXD_SRC (copied at start; built $(date -r "$LUXD_SRC" -Is 2>/dev/null || echo '?'), tree at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') + $(git -C "$ROOT" status --porcelain 2>/dev/null | grep -c . || true) uncommitted paths)"
  echo "nginx:      $("$NGINX" -v 2>&1 | head -n 1), sendfile+tcp_nopush on"
  echo "cases:      ${CASES[*]} (rounds: $ROUNDS)"
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging off, keep-alive limit 100000"
  echo "load:       taskset -c $CLIENT_CPU wrk -t1 -c$CONNS -d${DURATION}s -H 'Host: $HOST' (keep-alive), warm-up ${WARMUP}s"
  echo "request:    GET $URL_PATH, 1024 bytes; no rule matches it"
  echo "cpu:        utime+stime of all server processes (/proc/PID/stat), CLK_TCK=$CLK_TCK"
} | tee "$RESULTS/env.txt" >&2

# Rounds: the whole list again, so slow drift of the machine spreads over
# every case instead of landing on a few; the table shows medians.
ROUND=1 SFX=""
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  ((ROUNDS == 1)) || { SFX=.r$ROUND; say "round $ROUND of $ROUNDS"; }
  for c in "${CASES[@]}"; do
    if [[ $c == startup ]]; then
      if ((ROUND == 1)); then bench_startup; fi
    else
      bench_case "$c"
    fi
  done
done

# ---- table ------------------------------------------------------------------------------
# One row per case: with ROUNDS > 1, the median over its clean rounds (and the
# min-max of CPU us/req). x base: CPU us/req over the same server's no-rules
# figure in this run (luxd: the median of every base and base2 round).
print_table() {
  awk -F'\t' -v cpu="$SERVER_CPU" -v rounds="$ROUNDS" '
    function median(list,   a, n, i, j, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      if (n == 0) return ""
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function lo(list,   a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 < m) m = a[i] + 0; return m }
    function hi(list,   a, n, i, m) { n = split(list, a, " "); m = a[1] + 0; for (i = 2; i <= n; i++) if (a[i] + 0 > m) m = a[i] + 0; return m }
    NR == 1 { next }
    $1 == "startup" && $15 !~ /^skipped/ { next }
    {
      c = $1
      if (!(c in seen)) { seen[c] = 1; order[++nc] = c; srv[c] = $2; desc[c] = $20 }
      if ($15 == "ok") {
        us[c] = us[c] " " $13; rps[c] = rps[c] " " $5; pct[c] = pct[c] " " $12
        core[c] = core[c] " " $16; wrk[c] = wrk[c] " " $17; nok[c]++
        if ($19 != "-" && $19 != "") load[c] = load[c] " " $19
        if ($3 != "vhosts" && $4 == 0) base[$2] = base[$2] " " $13
      } else {
        bad[c] = bad[c] (bad[c] == "" ? "" : "; ") (rounds > 1 ? "r" $21 ": " : "") $15
      }
      if ($7 ~ /^[0-9]+$/) err[c] += $7 + $8
    }
    END {
      for (s in base) b[s] = median(base[s])
      printf "%-10s %-6s %-48s %8s %6s %6s %10s", "case", "server", "config", "req/s", "errors", "cpu%", "CPU us/req"
      if (rounds > 1) printf " %13s", "(min-max)"
      printf " %6s %6s %6s %8s\n", "x base", "core%", "wrk%", "load ms"
      for (i = 1; i <= nc; i++) {
        c = order[i]
        if (!nok[c]) { printf "%-10s %-6s %-48s %s\n", c, srv[c], desc[c], bad[c]; continue }
        m = median(us[c])
        ratio = (b[srv[c]] > 0) ? sprintf("%.2f", m / b[srv[c]]) : "-"
        ld = (load[c] != "") ? sprintf("%.1f", median(load[c])) : "-"
        busy = (median(core[c]) - median(pct[c]) > 30) ? " *" : ""
        if (busy != "") noisy = 1
        printf "%-10s %-6s %-48s %8.0f %6d %6.1f %10.2f", c, srv[c], desc[c], median(rps[c]), err[c], median(pct[c]), m
        if (rounds > 1) printf " %13s", sprintf("%.2f-%.2f", lo(us[c]), hi(us[c]))
        printf " %6s %6.1f %6.1f %8s%s%s\n", ratio, median(core[c]), median(wrk[c]), ld, busy, (bad[c] == "" ? "" : "  (" bad[c] ")")
        # The issue-3 goal: at 10,000 rules (and vhosts) within 10% of no rules.
        if (srv[c] == "luxd" && c ~ /^(rw10k|acc10k|vh10k|all10k)$/ && b["luxd"] > 0)
          goal = goal sprintf("  %s %.2f %s", c, m / b["luxd"], (m / b["luxd"] <= 1.10 ? "ok" : "OVER"))
      }
      if (goal != "") print "goal (CPU us/req at 10,000 rules/vhosts <= 1.10 x base):" goal
      if (noisy) print "* core% exceeds the server'"'"'s cpu% by over 30 points: CPU " cpu " was busy with other work too; rerun on an idle machine."
    }' "$SUMMARY"
}

{
  echo
  echo "Config size vs cost per request: GET $URL_PATH (1 KiB), Host $HOST, ${DURATION}s per run, $ROUNDS round(s), wrk -t1 -c$CONNS keep-alive;"
  echo "server (1 worker) on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; access logging off; no rule matches the request."
  print_table
  echo
  echo "errors = wrk non-2xx/3xx + socket errors; cpu% = server utime+stime over the run, % of one core;"
  echo "CPU us/req = that CPU time*1e6/requests; x base = CPU us/req / the same server's no-rules figure in this run"
  echo "(luxd: median of base and base2); core% / wrk% = busy % of CPU $SERVER_CPU / CPU $CLIENT_CPU (wrk% near 100 = client-bound);"
  echo "load ms = 'compiled in' of luxd -T on that config (Lua run + compile)."
  if ((ROUNDS > 1)); then echo "Each column is the median over the case's clean rounds; (min-max) is the range of CPU us/req."; fi
  if [[ -n $STARTUP_LINE ]]; then
    echo
    echo "Start-up, 10,000 vhosts + 10,000 rules (5,000 rewrites + 5,000 access rules) on one of them:"
    echo "  $STARTUP_LINE"
  fi
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
