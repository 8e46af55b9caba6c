#!/usr/bin/env bash
# What a Lua access policy costs per request: luxd with and without a vhost
# `policy`, against nginx with and without OpenResty's access_by_lua
# (Debian's libnginx-mod-http-lua), the same policy in both — a header check
# and an address check — in the same run, on the same cores:
#   luxd:  policy = function(r)
#            if r.headers["x-api-key"] ~= "k1" then return 401 end
#            if r.remote_addr ~= "127.0.0.1" then return 403 end
#          end
#   nginx: access_by_lua_block {
#            if ngx.var.http_x_api_key ~= "k1" then return ngx.exit(401) end
#            if ngx.var.remote_addr ~= "127.0.0.1" then return ngx.exit(403) end
#          }
# wrk sends X-Api-Key: k1 from 127.0.0.1: every request passes and gets the
# 1 KiB file.
#
# Usage: bash bench/policy.sh [CASE...]    (default: all four, in this order)
# Cases:
#   luxd          luxd, no policy
#   luxd-policy   luxd, the policy on the vhost
#   nginx         nginx, lua module loaded, no access_by_lua
#   nginx-lua     nginx, the policy in access_by_lua_block
# The cases are run ROUNDS times; odd rounds in the order given, even rounds
# in the reverse order (ABBA), so slow drift of the machine cancels out in the
# mean. Each round gets its own table; the last table is the mean.
# Environment:
#   DURATION=10   seconds of each measured wrk run
#   WARMUP=2      seconds of the wrk warm-up run before each measured run
#   ROUNDS=2      rounds over the cases (see above)
#   CONNS=50      wrk connections (-c)
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU wrk is pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, logs) after the run
#   LUXD, NGINX   binaries (default build/luxd, /usr/sbin/nginx)
#   NGINX_MODULES directory of ndk_http_module.so and ngx_http_lua_module.so
#                 (default: the first of /usr/lib/nginx/modules,
#                 /usr/share/nginx/modules that has them)
#
# Every server runs one worker pinned to SERVER_CPU with access logging off,
# on its own free port on 127.0.0.1, started afresh for each case and round;
# wrk -t1 (keep-alive) runs pinned to CLIENT_CPU. Server CPU time is
# utime+stime of all its processes from /proc. Before measuring, each server
# must answer GET /1k.html (with the key) with 200 and the file's bytes; the
# policy cases must also answer 401 without the key and 403 to a client at
# 127.0.0.2 with the key (the address check), the others 200 without the key.
# Raw results go to bench/results/policy-DATE/. See bench/README.md.
#
# Exit status: 0 when every case was measured cleanly, 3 when one or more
# were skipped or failed (the others are still measured), 1 on a setup error.
# Functions below are called indirectly (start_$server, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-50}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15
URL_PATH=/1k.html
KEY_HEADER="X-Api-Key: k1"

# ---- the cases -------------------------------------------------------------
ALL_CASES=(luxd luxd-policy nginx nginx-lua)
declare -A CASE_SERVER=([luxd]=luxd [luxd-policy]=luxd [nginx]=nginx [nginx-lua]=nginx)
declare -A CASE_POLICY=([luxd]=0 [luxd-policy]=1 [nginx]=0 [nginx-lua]=1)
declare -A CASE_DESC=([luxd]="no policy" [luxd-policy]="policy = function(r) ... end"
  [nginx]="lua module loaded, no policy" [nginx-lua]="access_by_lua_block")
# The case without the policy that each case's added cost is measured against.
declare -A CASE_BASE=([luxd-policy]=luxd [nginx-lua]=nginx)

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
need_whole DURATION WARMUP ROUNDS CONNS SERVER_CPU CLIENT_CPU
((DURATION > 0)) || die "DURATION must be > 0"
((ROUNDS > 0)) || die "ROUNDS must be > 0"

# ---- dependencies ----------------------------------------------------------
NGINX=${NGINX:-/usr/sbin/nginx}
LUXD=${LUXD:-$ROOT/build/luxd}
find_modules() {
  local d
  for d in ${NGINX_MODULES:-} /usr/lib/nginx/modules /usr/share/nginx/modules; do
    if [[ -f $d/ngx_http_lua_module.so && -f $d/ndk_http_module.so ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}
need_nginx=0 need_luxd=0
for c in "${CASES[@]}"; do
  if [[ ${CASE_SERVER[$c]} == nginx ]]; then need_nginx=1; else need_luxd=1; fi
done
want_bench=0 want_test=0
has taskset || want_bench=1
if ((need_nginx)) && { [[ ! -x $NGINX ]] || ! find_modules >/dev/null; }; then want_bench=1; fi
has wrk || want_test=1
has curl || want_test=1
if ((want_bench)); then deps_install bench; fi
if ((want_test)); then deps_install test; fi
check_tools_and_cpus
NGINX_SKIP="" MODDIR=""
if ((need_nginx)); then
  if [[ ! -x $NGINX ]]; then
    NGINX_SKIP="$NGINX not found"
  elif ! MODDIR=$(find_modules); then
    NGINX_SKIP="ngx_http_lua_module.so / ndk_http_module.so not found (libnginx-mod-http-lua; NGINX_MODULES)"
  fi
  [[ -z $NGINX_SKIP ]] || say "$NGINX_SKIP: the nginx cases will be skipped"
fi

# ---- cleanup, temp dir, results --------------------------------------------

setup_dirs luxd-bench-policy policy
LUXD_SKIP=""
if ((need_luxd)) && [[ ! -x $LUXD ]]; then
  say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
  if ! make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1 || [[ ! -x $LUXD ]]; then
    LUXD_SKIP="build/luxd missing and 'make' did not build it (log: $RESULTS/luxd-make.log)"
    say "$LUXD_SKIP"
  fi
fi

check_idle

SUMMARY=$RESULTS/summary.tsv
printf 'round\tcase\tserver\tpolicy\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\tdescription\n' >"$SUMMARY"

# ---- the docroot: one 1 KiB file -------------------------------------------
DOCROOT=$TMP/www
FILE=$DOCROOT/1k.html
make_docroot "$FILE"

# ---- configs and servers ---------------------------------------------------
PIN=(taskset -c "$SERVER_CPU")
SERVER_PID="" SKIP_REASON=""

start_luxd() { # CASE PORT NAME
  local c=$1 port=$2 name=$3 conf=$TMP/$1.lua pol=false
  [[ -z $LUXD_SKIP ]] || { SKIP_REASON=$LUXD_SKIP; return 1; }
  ((CASE_POLICY[$c])) && pol=true
  render "$HERE/conf/luxd-policy.lua.in" "$conf" POLICY="$pol" PORT="$port" DIR="$TMP" \
    DOCROOT="$DOCROOT" NAME="$name"
  if ! "$LUXD" -t -c "$conf" >"$TMP/$name-check.log" 2>&1; then
    SKIP_REASON="luxd -t rejected the config: $(head -c 400 "$TMP/$name-check.log")"
    return 1
  fi
  start_bg "$TMP/$name-stderr.log" "${PIN[@]}" "$LUXD" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_nginx() { # CASE PORT NAME
  local c=$1 port=$2 name=$3 conf=$TMP/$1.conf user_line="" access=""
  [[ -z $NGINX_SKIP ]] || { SKIP_REASON=$NGINX_SKIP; return 1; }
  if [[ $(id -u) -eq 0 ]]; then user_line="user root;"; fi
  if ((CASE_POLICY[$c])); then
    access='        access_by_lua_block {
            if ngx.var.http_x_api_key ~= "k1" then return ngx.exit(401) end
            if ngx.var.remote_addr ~= "127.0.0.1" then return ngx.exit(403) end
        }'
  fi
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  render "$HERE/conf/nginx-policy.conf.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT" \
    NGINX_USER="$user_line" NAME="$name" MODDIR="$MODDIR" ACCESS="$access"
  if ! "$NGINX" -t -p "$TMP/nginx/" -e "$TMP/$name-error.log" -c "$conf" >"$TMP/$name-check.log" 2>&1; then
    SKIP_REASON="nginx -t rejected the config: $(head -c 400 "$TMP/$name-check.log")"
    return 1
  fi
  start_bg "$TMP/$name-stderr.log" "${PIN[@]}" "$NGINX" -p "$TMP/nginx/" -e "$TMP/$name-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

# status_of URL [CURL ARGS...] — prints the HTTP status of one GET (000: none).
status_of() {
  local url=$1 code
  shift
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$url") || code=000
  echo "$code"
}

# verify CASE URL — with the key: 200 and the file's bytes. Policy cases:
# 401 without the key, 403 from 127.0.0.2 with the key. The others: 200
# without the key. Prints what failed on stderr, returns 1 then.
verify_case() {
  local c=$1 url=$2 code ok=0
  verify_body "$url" "$FILE" " with the key" -H "$KEY_HEADER" || ok=1
  if ((CASE_POLICY[$c])); then
    code=$(status_of "$url")
    [[ $code == 401 ]] || { say "verify: $url without the key answered HTTP $code, want 401"; ok=1; }
    code=$(status_of "$url" -H "X-Api-Key: wrong")
    [[ $code == 401 ]] || { say "verify: $url with a wrong key answered HTTP $code, want 401"; ok=1; }
    code=$(status_of "$url" -H "$KEY_HEADER" --interface 127.0.0.2)
    if [[ $code == 000 ]]; then
      say "verify: cannot connect from 127.0.0.2; address check not verified"
    elif [[ $code != 403 ]]; then
      say "verify: $url from 127.0.0.2 with the key answered HTTP $code, want 403"
      ok=1
    fi
  else
    code=$(status_of "$url")
    [[ $code == 200 ]] || { say "verify: $url without the key answered HTTP $code, want 200 (no policy)"; ok=1; }
  fi
  return "$ok"
}

# ---- measuring -------------------------------------------------------------
FAILED=()
MEASURE_NON2XX_FAILS=1 # a run with non-2xx answers is not clean
record_skip() { # ROUND CASE REASON
  printf '%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\t-\t-\t-\t%s\n' \
    "$1" "$2" "${CASE_SERVER[$2]}" "${CASE_POLICY[$2]}" "$3" "${CASE_DESC[$2]}" >>"$SUMMARY"
  FAILED+=("$2/round$1")
  say "round $1: $2: SKIPPED: $3"
}

measure() { # ROUND CASE NAME URL PID
  local round=$1 c=$2 name=$3
  MEASURE_PRE=$round$'\t'$c$'\t'${CASE_SERVER[$c]}$'\t'${CASE_POLICY[$c]}
  MEASURE_POST=${CASE_DESC[$c]}
  measure_case "round $round: $c" "$RESULTS/$name" "$5" "$4" -H "$KEY_HEADER"
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "$name"; FAILED+=("$c/round$round"); }
}

bench_case() { # ROUND CASE
  local round=$1 c=$2 srv=${CASE_SERVER[$2]} name="$2-r$1" port url rc
  SERVER_PID="" SKIP_REASON=""
  port=$(free_port) || { record_skip "$round" "$c" "no free port found"; return 0; }
  if ! "start_$srv" "$c" "$port" "$name"; then
    record_skip "$round" "$c" "$SKIP_REASON"
    return 0
  fi
  url=http://127.0.0.1:$port$URL_PATH
  say "round $round: $c: $srv started (${CASE_DESC[$c]}), pid $SERVER_PID, port $port"
  rc=0
  wait_ready "$url" "$SERVER_PID" "$READY_TIMEOUT" -H "$KEY_HEADER" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      record_skip "$round" "$c" "exited during start-up"
    else
      record_skip "$round" "$c" "no 2xx answer on $url (with the key) within ${READY_TIMEOUT}s"
    fi
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ! verify_case "$c" "$url"; then
    record_skip "$round" "$c" "did not answer as the policy says (see above)"
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if ((CASE_POLICY[$c])); then
    say "round $round: $c: verified 200 + 1024-byte body with the key, 401 without it, 403 from 127.0.0.2"
  else
    say "round $round: $c: verified 200 + 1024-byte body (with and without the key)"
  fi
  measure "$round" "$c" "$name" "$url" "$SERVER_PID"
  stop_tree "$SERVER_PID"
}

# ---- run -------------------------------------------------------------------
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "cases:      ${CASES[*]}; $ROUNDS round(s), even rounds in reverse order"
  echo "luxd:       $LUXD ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo 'no commit')$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo ', src modified'))"
  if ((need_nginx)); then
    echo "nginx:      $("$NGINX" -v 2>&1 | head -n 1); modules ${MODDIR:-none}"
    echo "            $(dpkg-query -W -f='${Package} ${Version}, ' libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core libluajit2-5.1-2 2>/dev/null | sed 's/, $//' || true)"
  fi
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging off, keepalive_requests 100000"
  echo "load:       taskset -c $CLIENT_CPU wrk -t1 -c$CONNS -d${DURATION}s -H '$KEY_HEADER', keep-alive, warm-up ${WARMUP}s"
  echo "file:       GET $URL_PATH, 1024 bytes"
  echo "cpu:        utime+stime of all server processes (/proc/PID/stat), CLK_TCK=$CLK_TCK"
} | tee "$RESULTS/env.txt" >&2

for ((round = 1; round <= ROUNDS; round++)); do
  order=("${CASES[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#CASES[@]} - 1; i >= 0; i--)); do order+=("${CASES[i]}"); done
  fi
  say "round $round of $ROUNDS: ${order[*]}"
  for c in "${order[@]}"; do
    bench_case "$round" "$c"
  done
done

# ---- tables ----------------------------------------------------------------
# print_table ROUND|mean — one round's rows (in the canonical case order), or
# the mean over the rounds of each case's clean rows.
print_table() {
  local want=$1 pairs="" c
  for c in "${!CASE_BASE[@]}"; do pairs+="$c=${CASE_BASE[$c]} "; done
  awk -F'\t' -v want="$want" -v order="${CASES[*]}" -v pairs="$pairs" -v cpu="$SERVER_CPU" '
    NR == 1 { next }
    {
      c = $2
      if (want != "mean") {
        if ($1 != want) next
        status[c] = $15
        if ($15 ~ /^skipped/) next
        n[c] = 1; rps[c] = $5; req[c] = $6; err[c] = $7 + $8
        pct[c] = $12; us[c] = $13; core[c] = $16; wrk[c] = $17
        next
      }
      if ($15 != "ok") { bad[c]++; next }
      n[c]++; rps[c] += $5; req[c] += $6; err[c] += $7 + $8
      pct[c] += $12; us[c] += $13; core[c] += $16; wrk[c] += $17
    }
    END {
      np = split(pairs, pp, " ")
      for (i = 1; i <= np; i++) { split(pp[i], kv, "="); base[kv[1]] = kv[2] }
      if (want == "mean")
        for (c in n) { rps[c] /= n[c]; req[c] /= n[c]; pct[c] /= n[c]; us[c] /= n[c]; core[c] /= n[c]; wrk[c] /= n[c] }
      printf "%-12s %9s %9s %6s %6s %10s %9s %6s %6s\n", "case", "req/s", "requests", "errors", "cpu%", "CPU us/req", "policy+us", "core%", "wrk%"
      nc = split(order, cs, " ")
      for (i = 1; i <= nc; i++) {
        c = cs[i]
        if (seen[c]++) continue
        if (!(c in n)) {
          printf "%-12s %s\n", c, (want == "mean" ? "no clean run" : (c in status ? status[c] : "not run"))
          continue
        }
        if (pct[c] == "NA") {
          printf "%-12s %9.0f %9d %6d %6s %10s %9s %6.1f %6.1f  (%s)\n", c, rps[c], req[c], err[c], "-", "-", "-", core[c], wrk[c], status[c]
          continue
        }
        add = "-"
        if ((c in base) && (base[c] in n) && pct[base[c]] != "NA")
          add = sprintf("%+.2f", us[c] - us[base[c]])
        busy = (core[c] - pct[c] > 30) ? " *" : ""
        if (busy != "") noisy = 1
        note = ""
        if (want != "mean" && status[c] != "ok") note = "  (" status[c] ")"
        if (want == "mean") note = sprintf("  (%d run%s%s)", n[c], (n[c] == 1 ? "" : "s"), (bad[c] ? ", " bad[c] " not clean left out" : ""))
        printf "%-12s %9.0f %9d %6d %6.1f %10.2f %9s %6.1f %6.1f%s%s\n", c, rps[c], req[c], err[c], pct[c], us[c], add, core[c], wrk[c], busy, note
      }
      if (noisy) print "* core% exceeds the server'"'"'s cpu% by over 30 points: CPU " cpu " was busy with other work too; distrust that row."
      # The issue-5 goals, when all four cases are there.
      if (("luxd" in n) && ("luxd-policy" in n) && ("nginx" in n) && ("nginx-lua" in n)) {
        lx = us["luxd-policy"] - us["luxd"]; ng = us["nginx-lua"] - us["nginx"]
        printf "goal 1: luxd policy adds %.2f us/req, access_by_lua adds %.2f us/req: %s\n", lx, ng, (lx < ng ? "met" : "NOT met")
        printf "goal 2: luxd+policy %.2f us/req vs nginx without a policy %.2f us/req: %s\n", us["luxd-policy"], us["nginx"], (us["luxd-policy"] < us["nginx"] ? "met" : "NOT met")
      }
    }' "$SUMMARY"
}

{
  echo
  echo "Lua access policy, 1 KiB file, ${DURATION}s per run, wrk -t1 -c$CONNS (keep-alive, X-Api-Key: k1);"
  echo "server on CPU $SERVER_CPU, wrk on CPU $CLIENT_CPU; access logging off; $ROUNDS round(s), even rounds in reverse order."
  for ((round = 1; round <= ROUNDS; round++)); do
    echo
    echo "round $round:"
    print_table "$round"
  done
  if ((ROUNDS > 1)); then
    echo
    echo "mean of the rounds' clean runs:"
    print_table mean
  fi
  echo
  echo "errors = wrk non-2xx/3xx responses + socket errors; cpu% = server processes' utime+stime over the"
  echo "run, % of one core; CPU us/req = that CPU time*1e6/requests; policy+us = CPU us/req minus the same"
  echo "server's without the policy, same round; core% / wrk% = busy % of CPU $SERVER_CPU / CPU $CLIENT_CPU"
  echo "(/proc/stat, softirq included): wrk% near 100 = client-bound."
  echo "Issue 5's reference on this machine: access_by_lua adds 1.0 us/req to nginx (12.6 -> 13.6 us)."
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
