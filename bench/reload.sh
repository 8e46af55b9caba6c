#!/usr/bin/env bash
# What a big config costs to check and to reload: t/36's config (N vhosts
# made in a Lua loop, each with an alias, a root, two headers and a deny
# rule) against `luxd -t`, and a running luxd (2 workers) reloaded by
# SIGHUP; nginx -t on N server blocks of the same shape beside it.
#
# Usage: bash bench/reload.sh [SERVER...]   (default: luxd nginx;
#        luxd-base too when LUXD_BASE is set)
# Environment:
#   N=10000      vhosts (server blocks for nginx)
#   ROUNDS=5     rounds; each round runs every server once, the order
#                rotated by one per round; the table shows medians (min-max)
#   LUXD, NGINX  binaries (default build/luxd, /usr/sbin/nginx)
#   LUXD_BASE    a second luxd to measure as luxd-base (a build of the
#                commit before a change, say), side by side in one run
#   KEEP_TMP=1   keep the temp dir
#
# Per round and luxd binary: `luxd -t` (its wall time, its CPU time
# user+sys, and the "compiled in" time it reports), then one SIGHUP to the
# server started for it: the "reload: generation N in X ms" line the server
# logs once every loop has been handed the new generation (SIGHUP to that
# line), and the wall time from kill(1) to seeing that line (5 ms polls), and
# a request to the last vhost must then answer with the new X-Gen. For
# nginx: `nginx -t` wall and CPU. Raw numbers go to
# bench/results/reload-DATE/. Exit status 0, or 1 on a setup error, or 3
# when a run failed.
# shellcheck disable=SC2317  # functions called from traps
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"

N=${N:-10000}
ROUNDS=${ROUNDS:-5}
KEEP_TMP=${KEEP_TMP:-0}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1} # check_idle looks at both
LUXD=${LUXD:-$ROOT/build/luxd}
NGINX=${NGINX:-/usr/sbin/nginx}
if (($#)); then SERVERS=("$@"); else
  SERVERS=(luxd nginx)
  [[ -n ${LUXD_BASE:-} ]] && SERVERS=(luxd luxd-base nginx)
fi
FAILED=0

[[ -x $LUXD ]] || make -C "$ROOT" >/dev/null || die "cannot build luxd"
for s in "${SERVERS[@]}"; do
  case $s in
  nginx) has "$NGINX" || deps_install bench ;;
  luxd | luxd-base) ;;
  *) die "unknown server $s (luxd, luxd-base, nginx)" ;;
  esac
done
check_tools_and_cpus
setup_dirs luxd-reload reload
mkdir -p "$TMP/www"
echo home >"$TMP/www/index.html"

bin_of() { if [[ $1 == luxd-base ]]; then echo "$LUXD_BASE"; else echo "$LUXD"; fi; }

# luxd_conf FILE PORT GEN — t/36's config.
luxd_conf() {
  cat >"$1.tmp" <<EOF
server {
  listen = { "127.0.0.1:$2" }, workers = 2,
  error_log = "$TMP/$3.error.log", error_log_level = "info", access_log = false,
  pid_file = "$TMP/$3.pid",
}
for i = 1, $N do
  local name = string.format("site%05d.example", i)
  vhost(name) {
    aliases = { "www." .. name },
    root = "$TMP/www",
    headers = { ["X-Site"] = tostring(i), ["X-Gen"] = "$4" },
    access = { deny { prefix = "/private/" } },
  }
end
EOF
  mv "$1.tmp" "$1"
}

nginx_conf() {
  local i
  {
    echo "worker_processes 1; pid $TMP/nginx.pid; error_log $TMP/nginx-error.log;"
    [[ $(id -u) == 0 ]] && echo "user root;"
    echo "events {} http { access_log off; server_names_hash_max_size 65536; server_names_hash_bucket_size 64;"
    for ((i = 1; i <= N; i++)); do
      printf 'server { listen 127.0.0.1:%s; server_name site%05d.example www.site%05d.example; root %s/www; add_header X-Site %d; add_header X-Gen a; location /private/ { deny all; } }\n' \
        "$NGINX_PORT" "$i" "$i" "$TMP" "$i"
    done
    echo "}"
  } >"$TMP/nginx.conf"
}

# timed CMD... — runs CMD (output to $TMP/last.out); prints "wall user sys" in ms.
timed() {
  local TIMEFORMAT='%3R %3U %3S' t
  t=$({ time "$@" >"$TMP/last.out" 2>&1; } 2>&1) || return 1
  awk '{ printf "%.0f %.0f\n", $1 * 1000, ($2 + $3) * 1000 }' <<<"$t"
}

declare -A PORT=() PID=() GEN=()
start_luxd() {
  local s=$1
  PORT[$s]=$(free_port)
  GEN[$s]=1
  luxd_conf "$TMP/$s.lua" "${PORT[$s]}" "$s" a
  start_bg "$TMP/$s.stderr.log" "$(bin_of "$s")" -c "$TMP/$s.lua"
  PID[$s]=$BENCH_LAST_PID
  wait_ready "http://127.0.0.1:${PORT[$s]}/index.html" "${PID[$s]}" 120 -H "Host: site00001.example" ||
    die "$s did not start (see $TMP/$s.stderr.log)"
}

# The log line "reload: generation G in X ms", awaited.
await_gen() {
  local log=$1 g=$2 deadline=$((SECONDS + 120)) line
  while ((SECONDS < deadline)); do
    line=$(grep -o "reload: generation $g in [0-9.]* ms" "$log" 2>/dev/null | tail -1) || true
    [[ -n $line ]] && { awk '{ print $5 }' <<<"$line"; return 0; }
    sleep 0.005
  done
  return 1
}

round_luxd() {
  local s=$1 bin t0 ms wall compiled gen x
  bin=$(bin_of "$s")
  timed "$bin" -t -c "$TMP/$s.lua" >"$TMP/t.out" || { say "$s -t failed: $(cat "$TMP/last.out")"; FAILED=1; return; }
  compiled=$(grep -o 'compiled in [0-9.]*' "$TMP/last.out" | awk '{ print $3 }')
  read -r wall cpu <"$TMP/t.out"
  echo "$s check_wall $wall" >>"$RESULTS/raw"
  echo "$s check_cpu $cpu" >>"$RESULTS/raw"
  echo "$s check_compiled $compiled" >>"$RESULTS/raw"
  gen=$((GEN[$s] + 1))
  x=$([[ $((gen % 2)) == 0 ]] && echo b || echo a)
  luxd_conf "$TMP/$s.lua" "${PORT[$s]}" "$s" "$x"
  t0=$(date +%s%N)
  kill -HUP "${PID[$s]}"
  ms=$(await_gen "$TMP/$s.error.log" "$gen") || { say "$s: no reload line for generation $gen"; FAILED=1; return; }
  wall=$((($(date +%s%N) - t0) / 1000000))
  GEN[$s]=$gen
  got=$(curl -s -o /dev/null -w '%header{x-gen}' -H "Host: www.site$(printf %05d "$N").example" \
    "http://127.0.0.1:${PORT[$s]}/index.html")
  [[ $got == "$x" ]] || { say "$s: generation $gen serves X-Gen '$got', not '$x'"; FAILED=1; }
  echo "$s reload_log $ms" >>"$RESULTS/raw"
  echo "$s reload_wall $wall" >>"$RESULTS/raw"
}

round_nginx() {
  timed "$NGINX" -t -p "$TMP" -c "$TMP/nginx.conf" >"$TMP/t.out" ||
    { say "nginx -t failed: $(tail -3 "$TMP/last.out")"; FAILED=1; return; }
  read -r wall cpu <"$TMP/t.out"
  echo "nginx check_wall $wall" >>"$RESULTS/raw"
  echo "nginx check_cpu $cpu" >>"$RESULTS/raw"
}

for s in "${SERVERS[@]}"; do
  case $s in
  nginx) NGINX_PORT=$(free_port) && nginx_conf ;;
  *) start_luxd "$s" ;;
  esac
done
check_idle
: >"$RESULTS/raw"
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < ${#SERVERS[@]}; k++)); do
    s=${SERVERS[$(((k + r) % ${#SERVERS[@]}))]}
    say "round $((r + 1))/$ROUNDS: $s"
    if [[ $s == nginx ]]; then round_nginx; else round_luxd "$s"; fi
  done
done

# The table: per server and measure, median (min-max) over the rounds.
{
  echo "# reload.sh: N=$N vhosts, $ROUNDS rounds, $(date -u +%FT%TZ) ${NOT_IDLE:+($NOT_IDLE)}"
  printf '| %-10s | %-22s | %-22s | %-22s | %-22s | %-22s |\n' server "-t wall ms" "-t CPU ms" \
    "-t compiled in ms" "reload ms (server log)" "reload ms (HUP to log)"
  echo "|---|---|---|---|---|---|"
  for s in "${SERVERS[@]}"; do
    row="| $s"
    for m in check_wall check_cpu check_compiled reload_log reload_wall; do
      row+=" | $(awk -v s="$s" -v m="$m" '$1 == s && $2 == m { print $3 }' "$RESULTS/raw" | sort -n |
        awk '{ v[++n] = $1 } END { if (!n) { print "-"; exit }
              med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
              printf "%.0f (%.0f-%.0f)", med, v[1], v[n] }')"
    done
    echo "$row |"
  done
} | tee "$RESULTS/summary.md"
((FAILED == 0)) || exit 3
