#!/usr/bin/env bash
# What the regex prefilter's compile costs the server around it: a luxd
# (2 workers) with N literal-free regex redirects (the rules.sh re10k set)
# is sent RELOADS SIGHUPs 0.7 s apart while the set compiles, then a
# SIGTERM. Per luxd binary: the most threads the server had and the most
# compile children at once (sampled every 0.1 s), the server's and the
# child's peak RSS (VmHWM), and the wall time from the SIGTERM to its exit.
#
# Usage: bash bench/prefilter.sh          (build/luxd; and luxd-base when
#        LUXD_BASE=/path/to/old/luxd is set: side by side, same config)
# Environment: N=10000, RELOADS=10, ROUNDS=1, LUXD, LUXD_BASE, KEEP_TMP=1.
# Both binaries must be built with the engine (`luxd -V`: "regex
# prefilter: Hyperscan"); without it there is nothing to compile.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${N:-10000}
RELOADS=${RELOADS:-10}
ROUNDS=${ROUNDS:-1}
LUXD=${LUXD:-$ROOT/build/luxd}
TMP=$(mktemp -d)
PID=
cleanup() {
    [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null || true
    [ "${KEEP_TMP:-0}" = 1 ] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

[ -x "$LUXD" ] || make -C "$ROOT" -j2 all >&2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
{
    echo "server { listen = { \"127.0.0.1:$port\" }, workers = 2, error_log = \"$TMP/error.log\", access_log = false }"
    echo "vhost \"localhost\" { default = true, root = \"$TMP\", redirect = {"
    for ((i = 1; i <= N; i++)); do printf '  { [[(a|b)%05d(\\d+)]], "/to/%d/$2" },\n' "$i" "$i"; done
    echo "} }"
} >"$TMP/luxd.lua"

peak() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

run() {
    local name=$1 bin=$2
    "$bin" -V | grep -q '^regex prefilter: Hyperscan' || { echo "$name: built without the engine" >&2; return 1; }
    : >"$TMP/error.log"
    "$bin" -c "$TMP/luxd.lua" &
    PID=$!
    local i j t c maxthr=0 maxch=0 chwm=0 h
    for ((i = 0; i < 200; i++)); do grep -q 'started' "$TMP/error.log" && break; sleep 0.05; done
    sample() {
        t=$(ls "/proc/$PID/task" | wc -l)
        c=$( (pgrep -P "$PID" || true) | wc -l)
        ((t > maxthr)) && maxthr=$t
        ((c > maxch)) && maxch=$c
        for ch in $(pgrep -P "$PID" || true); do h=$(peak "$ch"); ((h > chwm)) && chwm=$h; done
        return 0
    }
    for ((i = 0; i < RELOADS; i++)); do
        kill -HUP "$PID"
        for ((j = 0; j < 7; j++)); do sample; sleep 0.1; done
    done
    sample
    local hwm t0 t1
    hwm=$(peak "$PID")
    t0=$(date +%s%N)
    kill -TERM "$PID"
    wait "$PID" || true
    t1=$(date +%s%N)
    PID=
    printf '%-10s %8d %9d %12d %12d %9d\n' "$name" "$maxthr" "$maxch" "$hwm" "$chwm" $(((t1 - t0) / 1000000))
}

printf 'N=%d literal-free regex redirects, %d SIGHUPs 0.7 s apart during the compile, then SIGTERM\n' "$N" "$RELOADS"
printf '%-10s %8s %9s %12s %12s %9s\n' server threads children 'server kB' 'child kB' 'stop ms'
for ((r = 0; r < ROUNDS; r++)); do
    run luxd "$LUXD"
    [ -n "${LUXD_BASE:-}" ] && run luxd-base "$LUXD_BASE"
done
