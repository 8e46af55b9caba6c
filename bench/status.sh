#!/usr/bin/env bash
# What the counters behind the status endpoint cost per request: server CPU
# microseconds per request for the 1 KiB keep-alive case (GET /1k.html, the
# cheapest request luxd serves, so the one where a fixed cost shows most),
# luxd with its counters against the same commit built with -DLX_NO_STATS
# (every count compiled out), both with the status location configured
# (bench/conf/luxd-status.lua.in), in the same run. Target: within 2%.
#
# Usage: bash bench/status.sh
# Environment:
#   ROUNDS=3      rounds; each measures both builds, the order alternating
#                 (stats, nostats, then nostats, stats, ...) so that a drift
#                 of the machine over the run falls on both alike
#   DURATION=10   seconds of each measured wrk run
#   WARMUP=2      seconds of the wrk warm-up run before each measured run
#   CONNS=50      wrk connections (-c)
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU wrk is pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   LUXD          the build with counters (default build/luxd, made if missing)
#   LUXD_NOSTATS  the build without (default build/nostats/luxd, made with
#                 make BUILD=build/nostats CFLAGS="-O2 -g -DLX_NO_STATS")
#
# Each run: one worker pinned to SERVER_CPU, access log off, wrk -t1 pinned
# to CLIENT_CPU; server CPU is utime+stime from /proc (bench/lib.sh
# measure_case). After each stats run, one scrape of /status checks that
# the counters counted wrk's requests (so the build measured is the one
# with counters). Reported: the median CPU us/request of each build and
# their ratio. On a busy (shared) machine CPU time per request moves by
# 10-15% between runs, more than the 2% target, so with valgrind present
# the script also counts user-space instructions per request of both builds
# (bench/callgrind.sh, N=CALLGRIND_N keep-alive requests, default 10000;
# CALLGRIND_N=0 skips it), which a busy machine does not move. Raw results
# go to bench/results/status-DATE/.
#
# Exit status: 0 when every run was measured, 3 when one failed, 1 on a
# setup error.
# Functions below are called indirectly (traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15
LUXD=${LUXD:-$ROOT/build/luxd}
LUXD_NOSTATS=${LUXD_NOSTATS:-$ROOT/build/nostats/luxd}

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$a'" ;;
  esac
done
need_whole ROUNDS DURATION WARMUP CONNS SERVER_CPU CLIENT_CPU
((ROUNDS > 0 && DURATION > 0)) || die "ROUNDS and DURATION must be > 0"
check_tools_and_cpus
check_idle

setup_dirs luxd-bench status
SUMMARY=$RESULTS/summary.tsv
printf 'build\tround\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\n' >"$SUMMARY"

# ---- the two builds of this tree ----------------------------------------------
if [[ ! -x $LUXD ]]; then
  say "building $LUXD"
  make -C "$ROOT" -j2 >"$RESULTS/make-stats.log" 2>&1 || die "make failed (log: $RESULTS/make-stats.log)"
fi
if [[ ! -x $LUXD_NOSTATS || $LUXD_NOSTATS == "$ROOT/build/nostats/luxd" ]]; then
  say "building $LUXD_NOSTATS (-DLX_NO_STATS)"
  make -C "$ROOT" -j2 BUILD=build/nostats CFLAGS="-O2 -g -DLX_NO_STATS" >"$RESULTS/make-nostats.log" 2>&1 ||
    die "make of the -DLX_NO_STATS build failed (log: $RESULTS/make-nostats.log)"
fi
[[ -x $LUXD && -x $LUXD_NOSTATS ]] || die "a build is missing"

DOCROOT=$TMP/www
FILE=$DOCROOT/1k.html
make_docroot "$FILE"

FAILED=()
run_one() { # BUILD ROUND
  local build=$1 round=$2 bin port conf url pid n
  bin=$LUXD
  [[ $build == nostats ]] && bin=$LUXD_NOSTATS
  port=$(free_port) || die "no free port"
  conf=$TMP/luxd-$build-$round.lua
  render "$HERE/conf/luxd-status.lua.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT"
  start_bg "$TMP/luxd-$build-$round-stderr.log" taskset -c "$SERVER_CPU" "$bin" -c "$conf"
  pid=$BENCH_LAST_PID
  url=http://127.0.0.1:$port/1k.html
  if ! wait_ready "$url" "$pid" "$READY_TIMEOUT" || ! verify_body "$url" "$FILE"; then
    tail_logs luxd
    stop_tree "$pid"
    FAILED+=("$build/$round")
    return 0
  fi
  MEASURE_PRE=$build$'\t'$round
  measure_case "$build round $round" "$RESULTS/$build-$round" "$pid" "$url"
  [[ $MEASURE_STATUS == ok ]] || FAILED+=("$build/$round")
  curl -s --max-time 5 "http://127.0.0.1:$port/status" >"$RESULTS/$build-$round.status.txt" || true
  n=$(awk '/^luxd_requests_total\{vhost="bench",class="2xx"\}/ { print $2 }' "$RESULTS/$build-$round.status.txt")
  if [[ $build == stats ]]; then
    # warm-up + measured run + wait_ready + verify_body: at least wrk's requests.
    local wrk_n
    wrk_n=$(awk '/ requests in / { print $1 }' "$RESULTS/$build-$round.wrk.txt")
    if [[ -z $n ]] || ((n < wrk_n)); then
      say "stats round $round: the status endpoint counted ${n:-nothing}, wrk alone made $wrk_n"
      FAILED+=("$build/$round/count")
    else
      say "stats round $round: /status counted $n 2xx (wrk measured run: $wrk_n)"
    fi
  fi
  stop_tree "$pid"
}

for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(stats nostats); else order=(nostats stats); fi
  for b in "${order[@]}"; do run_one "$b" "$r"; done
done

# ---- report ------------------------------------------------------------------
awk -F'\t' '
  NR > 1 && $13 == "ok" { v[$1] = v[$1] " " $11; n[$1]++ }
  function median(s,   a, k, i, j, t) {
    k = split(s, a, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (b in v) printf "%-8s runs %d  cpu us/req:%s  median %.3f\n", b, n[b], v[b], median(v[b])
    if (n["stats"] && n["nostats"]) {
      s = median(v["stats"]); o = median(v["nostats"])
      printf "counters cost: %.3f us/req -> %.3f us/req: %+.2f%% (target: within 2%%)\n", o, s, 100 * (s - o) / o
    }
  }' "$SUMMARY" | tee "$RESULTS/report.txt"
CALLGRIND_N=${CALLGRIND_N:-10000}
if ((CALLGRIND_N > 0)) && has valgrind && has ab; then
  say "instructions per request (callgrind, N=$CALLGRIND_N)"
  N=$CALLGRIND_N bash "$HERE/callgrind.sh" "$LUXD" "$LUXD_NOSTATS" 2>&1 | tee "$RESULTS/callgrind.txt" |
    awk -v s="$LUXD" -v o="$LUXD_NOSTATS" '
      { print }
      $1 == s { ka_s = $2; cl_s = $3 } $1 == o { ka_o = $2; cl_o = $3 }
      END { if (ka_o && cl_o) printf "counters cost in instructions: keep-alive %+.2f%%, close %+.2f%% (target: within 2%%)\n",
              100 * (ka_s - ka_o) / ka_o, 100 * (cl_s - cl_o) / cl_o }' | tee -a "$RESULTS/report.txt"
fi
[[ -n $NOT_IDLE ]] && say "$NOT_IDLE"
say "results: $RESULTS"
((${#FAILED[@]} == 0)) || { say "failed runs: ${FAILED[*]}"; exit 3; }
