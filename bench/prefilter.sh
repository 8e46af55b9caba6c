#!/usr/bin/env bash
# What the regex prefilter's compile costs the server around it: a luxd
# (2 workers) with N literal-free regex redirects (the rules.sh re10k set)
# is sent RELOADS SIGHUPs 0.7 s apart while the set compiles, then, once
# the last generation's prefilter is there (or 60 s passed), a SIGTERM.
# Two modes: "same" reloads the same config (the set unchanged, as a
# periodic reload does) and "change" adds a rule before each reload (a new
# set every time). Per mode and luxd binary: the most threads the server
# had and compile children at once (sampled every 0.1 s), the server's and
# the largest child's peak RSS (VmHWM), the prefilter lines the server
# logged ("compiled"), seconds from the first SIGHUP to the last
# generation's prefilter ("ready s", "-" if none within 60 s), and the
# wall time from SIGTERM to exit.
#
# Usage: bash bench/prefilter.sh          (build/luxd; and luxd-base when
#        LUXD_BASE=/path/to/old/luxd is set: side by side, same configs)
# Environment: N=10000, RELOADS=10, MODES="same change", LUXD, LUXD_BASE,
# KEEP_TMP=1. Both binaries must be built with the engine (`luxd -V`:
# "regex prefilter: Hyperscan"); without it there is nothing to compile.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${N:-10000}
RELOADS=${RELOADS:-10}
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
MODES=${MODES:-same change}
conf() { # RULES: the config with that many rules
    local i
    {
        echo "server { listen = { \"127.0.0.1:$port\" }, workers = 2, error_log = \"$TMP/error.log\", access_log = false }"
        echo "vhost \"localhost\" { default = true, root = \"$TMP\", redirect = {"
        for ((i = 1; i <= $1; i++)); do printf '  { [[(a|b)%05d(\\d+)]], "/to/%d/$2" },\n' "$i" "$i"; done
        echo "} }"
    } >"$TMP/luxd.lua.new"
    mv "$TMP/luxd.lua.new" "$TMP/luxd.lua"
}

peak() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

run() {
    local mode=$1 name=$2 bin=$3
    "$bin" -V | grep -q '^regex prefilter: Hyperscan' || { echo "$name: built without the engine" >&2; return 1; }
    conf "$N"
    : >"$TMP/error.log"
    "$bin" -c "$TMP/luxd.lua" &
    PID=$!
    local i j t c ch maxthr=0 maxch=0 chwm=0 h
    for ((i = 0; i < 200; i++)); do grep -q 'started' "$TMP/error.log" && break; sleep 0.05; done
    sample() {
        t=$(ls "/proc/$PID/task" | wc -l)
        c=$( (pgrep -P "$PID" || true) | wc -l)
        ((t > maxthr)) && maxthr=$t
        ((c > maxch)) && maxch=$c
        for ch in $(pgrep -P "$PID" || true); do h=$(peak "$ch"); ((h > chwm)) && chwm=$h; done
        return 0
    }
    local t_hup
    t_hup=$(date +%s%N)
    for ((i = 1; i <= RELOADS; i++)); do
        [ "$mode" = change ] && conf $((N + i))
        kill -HUP "$PID"
        for ((j = 0; j < 7; j++)); do sample; sleep 0.1; done
    done
    local last=$((RELOADS + 1)) ready=- t_ready
    for ((i = 0; i < 600; i++)); do
        if grep -q "generation $last: regex prefilter of" "$TMP/error.log"; then
            t_ready=$(date +%s%N)
            ready=$(awk -v a="$t_hup" -v b="$t_ready" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
            break
        fi
        sample
        sleep 0.1
    done
    local hwm t0 t1 compiled
    hwm=$(peak "$PID")
    compiled=$(grep -c 'regex prefilter of' "$TMP/error.log" || true)
    t0=$(date +%s%N)
    kill -TERM "$PID"
    wait "$PID" || true
    t1=$(date +%s%N)
    PID=
    printf '%-7s %-10s %8d %9d %12d %12d %9d %8s %9d\n' "$mode" "$name" "$maxthr" "$maxch" "$hwm" "$chwm" \
        "$compiled" "$ready" $(((t1 - t0) / 1000000))
}

printf 'N=%d literal-free regex redirects, %d SIGHUPs 0.7 s apart, then SIGTERM\n' "$N" "$RELOADS"
printf '%-7s %-10s %8s %9s %12s %12s %9s %8s %9s\n' mode server threads children 'server kB' 'child kB' compiled 'ready s' 'stop ms'
for mode in $MODES; do
    run "$mode" luxd "$LUXD"
    [ -n "${LUXD_BASE:-}" ] && run "$mode" luxd-base "$LUXD_BASE"
done
