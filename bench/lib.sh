# shellcheck shell=bash
# Helpers for the bench/ scripts. Source it from bash; it defines functions
# and the arrays BENCH_PIDS (servers started, to be stopped) only.

BENCH_PIDS=()

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

# wait_ready URL PID TIMEOUT_S — waits for URL to answer 2xx while PID lives.
wait_ready() {
  local url=$1 pid=$2 timeout=$3 deadline
  deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || return 2
    curl -sf -o /dev/null --max-time 1 "$url" && return 0
    sleep 0.1
  done
  return 1
}

# verify_body URL FILE — one GET must give 200 and exactly FILE's bytes.
verify_body() {
  local url=$1 file=$2 tmp code
  tmp=$(mktemp)
  code=$(curl -s -o "$tmp" -w '%{http_code}' --max-time 5 "$url") || code=000
  if [[ $code != 200 ]]; then
    say "verify: $url answered HTTP $code, want 200"
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
