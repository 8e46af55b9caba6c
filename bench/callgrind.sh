#!/usr/bin/env bash
# User-space instructions per request, counted by callgrind: the figure that
# does not move when the shared machine is busy (wall-clock CPU per request
# on it varies by 10-15% from one run to the next, more than most changes
# cost). Each binary serves one 1 KiB file, one worker, access log off; ab
# sends N keep-alive requests, then (another run) N/5 with a connection
# each; a run with no load at all gives the start-up cost, which is
# subtracted.
#
# Usage: bash bench/callgrind.sh [LUXD...]     (default: build/luxd)
# Environment: N=20000 keep-alive requests (N/5 in close mode, N/10 of
# 100 KiB, N/200 of 10 MiB), CONC=10, MODES="ka close" (add ka-100k and
# ka-10m for the big files: their cost is mostly the kernel's, so this
# counts only what luxd adds in user space).
# Kernel time is not counted: close mode is mostly kernel (accept, close),
# so compare it with bench/static.sh's CPU time too.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${N:-20000}
CONC=${CONC:-10}
for t in valgrind ab curl; do
  command -v "$t" >/dev/null || { echo "callgrind.sh: $t is missing (deps/install.sh test, and valgrind)" >&2; exit 1; }
done
(($# > 0)) || set -- "$ROOT/build/luxd"
TMP=$(mktemp -d /tmp/luxd-callgrind-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/www"
head -c 1024 /dev/zero | tr '\0' x >"$TMP/www/1k.html"
head -c 102400 /dev/zero | tr '\0' x >"$TMP/www/100k.html"
head -c 10485760 /dev/zero | tr '\0' x >"$TMP/www/10m.html"
read -r -a MODES <<<"${MODES:-ka close}"
# requests MODE -> how many requests the mode sends
requests() {
  case $1 in ka) echo "$N" ;; close) echo $((N / 5)) ;; ka-100k) echo $((N / 10)) ;; ka-10m) echo $((N / 200)) ;; esac
}

# run BIN MODE -> prints the instructions callgrind collected
run() {
  local bin=$1 mode=$2 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat >"$TMP/luxd.lua" <<EOF
server { listen = { "127.0.0.1:$port" }, workers = 1, error_log = "$TMP/error.log",
         access_log = false, keepalive_requests = 1000000, pid_file = "$TMP/luxd.pid" }
vhost "localhost" { default = true, root = "$TMP/www" }
EOF
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$bin" -c "$TMP/luxd.lua" >"$TMP/vg.log" 2>&1 &
  local vp=$!
  for _ in $(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$port/1k.html" && break; sleep 0.2; done
  case $mode in
    ka) ab -q -k -n "$N" -c "$CONC" "http://127.0.0.1:$port/1k.html" >"$TMP/ab.log" 2>&1 ;;
    close) ab -q -n "$(requests close)" -c "$CONC" "http://127.0.0.1:$port/1k.html" >"$TMP/ab.log" 2>&1 ;;
    ka-100k) ab -q -k -n "$(requests ka-100k)" -c "$CONC" "http://127.0.0.1:$port/100k.html" >"$TMP/ab.log" 2>&1 ;;
    ka-10m) ab -q -k -n "$(requests ka-10m)" -c "$CONC" "http://127.0.0.1:$port/10m.html" >"$TMP/ab.log" 2>&1 ;;
    start) : ;;
  esac
  kill -TERM "$vp"
  wait "$vp" || true
  if [[ $mode != start ]] && ! grep -q '^Failed requests: *0' "$TMP/ab.log"; then
    echo "callgrind.sh: $bin $mode: ab reported failures" >&2
    exit 1
  fi
  grep -oE 'Collected : [0-9]+' "$TMP/vg.log" | grep -oE '[0-9]+'
}

printf '%-40s' binary
for m in "${MODES[@]}"; do printf ' %16s' "$m instr/req"; done
echo
for bin in "$@"; do
  start=$(run "$bin" start)
  printf '%-40s' "$bin"
  for m in "${MODES[@]}"; do
    printf ' %16d' $((($(run "$bin" "$m") - start) / $(requests "$m")))
  done
  echo
done
