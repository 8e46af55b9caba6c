#!/usr/bin/env bash
# HTTPS side by side (issue 19): luxd against nginx, lighttpd and h2o over
# TLS, one ECDSA P-256 certificate for all, in ROUNDS rounds with the server
# order rotated each round, and the medians. Rows (all GETs, one docroot):
#   1k-keepalive       plain HTTP, /1k.html, keep-alive (wrk)     } the "must
#   100k               plain HTTP, /100k.html, keep-alive (wrk)   } not move" rows
#   tls-1k-keepalive   HTTPS, /1k.html, keep-alive (wrk)
#   tls-1k-handshake   HTTPS, /1k.html, a new connection and a full handshake
#                      per request (ab, which never resumes a session)
#   tls-1k-resumed     HTTPS, /1k.html, a new connection per request that
#                      resumes the last session (wrk -H 'Connection: close')
#   tls-100k           HTTPS, /100k.html, keep-alive (wrk)
#   tls-10m            HTTPS, /10m.html, keep-alive, 8 connections (wrk)
#
# Usage: bash bench/tls.sh [SERVER...]   SERVER: luxd luxd-base nginx lighttpd h2o
#                                        (default: luxd nginx lighttpd h2o, and
#                                        luxd-base when LUXD_BASE is set)
# Environment:
#   ROUNDS=5      rounds; round r measures the servers in the order given,
#                 rotated left by r-1
#   DURATION=6    seconds of each measured client run
#   WARMUP=2      seconds of the warm-up run (same row) before each one
#   CONNS=50      client connections (wrk -c, ab -c); tls-10m uses CONNS_10M
#   CONNS_10M=8   connections of the tls-10m row
#   ROWS="1k-keepalive 100k tls-1k-keepalive tls-1k-handshake tls-1k-resumed tls-100k tls-10m"
#                 the rows, in this order
#   TLS12=1       TLS 1.2 only (every server offers only TLSv1.2); default: both
#                 offered, so every client negotiates TLS 1.3
#   SUITES=TLS_AES_128_GCM_SHA256
#                 the TLS 1.3 suites the clients (wrk, ab, the s_client
#                 checks) offer, through an OpenSSL config in OPENSSL_CONF:
#                 every server then negotiates the same suite. Default:
#                 OpenSSL's three, and each server's order chooses (luxd's
#                 puts AES-128-GCM first, OpenSSL's default AES-256-GCM)
#   SERVER_CPU=0  CPU the servers are pinned to (taskset -c)
#   CLIENT_CPU=1  CPU the clients (wrk, ab) are pinned to
#   KEEP_TMP=1    keep the temp dir (configs, docroot, certificate, logs)
#   LUXD, NGINX, LIGHTTPD, H2O  binaries (default build/luxd, /usr/sbin/nginx,
#                 /usr/sbin/lighttpd, /usr/bin/h2o); luxd runs from a copy
#                 made at the start, so a rebuild during the run changes nothing
#   LUXD_BASE     a second luxd binary, measured as "luxd-base" in the same
#                 run: all rows if it takes the TLS config (luxd -t), else
#                 (a build from before TLS) the plain rows only
#
# Each round starts every server afresh, each pinned to SERVER_CPU with one
# worker, access logging off, a plain and a TLS listener on free ports of
# 127.0.0.1; checks each (files over both, the TLS version, cipher, group and
# that a session resumes, with openssl s_client); then for each row measures
# the servers one after the other in the round's order. Server CPU time is
# utime+stime of the server's whole process tree from /proc, before and after
# the measured run (lib.sh's measure_case). Raw results go to
# bench/results/tls-DATE/; the table (table.md) has per row and server the
# median CPU us per request and req/s over the clean rounds, and luxd over
# the best of nginx, lighttpd and h2o. See bench/README.md.
#
# Exit status: 0 when every selected server was measured cleanly in every
# round, 3 when a server or a row was skipped or not clean, 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
# shellcheck source=bench/tls_lib.sh
. "$HERE/tls_lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-6}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-50}
CONNS_10M=${CONNS_10M:-8}
TLS12=${TLS12:-0}
SUITES=${SUITES:-}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
ALL_ROWS=(1k-keepalive 100k tls-1k-keepalive tls-1k-handshake tls-1k-resumed tls-100k tls-10m)
read -r -a ROWS <<<"${ROWS:-${ALL_ROWS[*]}}"
READY_TIMEOUT=15

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
SERVERS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    luxd | luxd-base | nginx | lighttpd | h2o) SERVERS+=("$a") ;;
    *) usage >&2; die "unknown server '$a' (known: luxd luxd-base nginx lighttpd h2o)" ;;
  esac
done
if ((${#SERVERS[@]} == 0)); then
  SERVERS=(luxd nginx lighttpd h2o)
  [[ -n ${LUXD_BASE:-} ]] && SERVERS=(luxd luxd-base nginx lighttpd h2o)
fi
need_whole ROUNDS DURATION WARMUP CONNS CONNS_10M SERVER_CPU CLIENT_CPU
((ROUNDS > 0 && DURATION > 0 && CONNS > 0 && CONNS_10M > 0)) || die "ROUNDS, DURATION, CONNS and CONNS_10M must be > 0"
[[ $TLS12 == 0 || $TLS12 == 1 ]] || die "TLS12 must be 0 or 1"
((${#ROWS[@]})) || die "ROWS is empty (known: ${ALL_ROWS[*]})"
for r in "${ROWS[@]}"; do
  [[ " ${ALL_ROWS[*]} " == *" $r "* ]] || die "unknown row '$r' in ROWS (known: ${ALL_ROWS[*]})"
done

# ---- dependencies ----------------------------------------------------------
tls_deps wrk curl ab
has openssl || die "openssl not found (Debian package openssl)"
has python3 || die "python3 not found (for the medians)"
has ab || die "ab not found (Debian package apache2-utils)"
check_tools_and_cpus
check_idle

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-tls tls
SUMMARY=$RESULTS/summary.tsv
printf 'round\tserver\trow\treq_per_s\trequests\tnon2xx\tsocket_errors\tcpu_ticks\tcpu_s\telapsed_s\tcpu_pct\tcpu_us_per_req\tnprocs\tstatus\tserver_core_busy_pct\tclient_core_busy_pct\tserver_core_us_per_req\n' >"$SUMMARY"
TLSINFO=$RESULTS/tls-info.tsv
printf 'round\tserver\tprotocol\tcipher\tgroup\tsignature\tresumed\n' >"$TLSINFO"

copy_luxd_bins # (tls_lib.sh)
client_suites

# ---- docroot and certificate ------------------------------------------------
DOCROOT=$TMP/www
make_docroot "$DOCROOT/1k.html"
big_file() { # NAME BYTES — 64-byte lines, as static.sh's
  yes 'luxd bench large file line: 0123456789abcdefghijklmnopqrstuvwxy' | head -c "$2" >"$DOCROOT/$1" || true
  [[ $(wc -c <"$DOCROOT/$1") -eq $2 ]] || die "$DOCROOT/$1 is not $2 bytes"
  chmod 644 "$DOCROOT/$1"
}
big_file 100k.html 102400
[[ " ${ROWS[*]} " == *" tls-10m "* ]] && big_file 10m.html 10485760

tls_setup

# ---- rows ---------------------------------------------------------------------
# row_scheme ROW / row_path ROW / row_client ROW / row_args ROW
row_tls() { [[ $1 == tls-* ]]; }
row_path() {
  case $1 in
    1k-keepalive | tls-1k-*) echo /1k.html ;;
    100k | tls-100k) echo /100k.html ;;
    tls-10m) echo /10m.html ;;
  esac
}
row_client() { if [[ $1 == tls-1k-handshake ]]; then echo ab; else echo wrk; fi; }
row_conns() { if [[ $1 == tls-10m ]]; then echo "$CONNS_10M"; else echo "$CONNS"; fi; }
row_args() {
  case $1 in
    # wrk keeps the TLS session across its reconnects (SSL_shutdown +
    # SSL_clear), so each request is a new connection with a resumed handshake.
    tls-1k-resumed) printf '%s\n' -H 'Connection: close' ;;
    tls-10m) printf '%s\n' --timeout 30s ;;
  esac
}

# The clients under lib.sh's measure_case: it calls run_wrk and parse_wrk;
# with CLIENT=ab they run ab instead (a new connection and a full handshake
# per request: ab makes a new SSL object per connection and never sets a
# session on it; HTTP/1.0, so the server closes after the answer).
CLIENT=wrk
eval "lib_$(declare -f run_wrk)"
eval "lib_$(declare -f parse_wrk)"
run_wrk() { # OUT SECONDS URL [ARG...]
  if [[ $CLIENT == wrk ]]; then
    if [[ -n $SUITES ]]; then OPENSSL_CONF=$TMP/client-openssl.cnf lib_run_wrk "$@"; else lib_run_wrk "$@"; fi
    return
  fi
  local out=$1 secs=$2 url=$3
  # -t first: it resets -n. -n only bounds ab's statistics array (20,000/s
  # is several times what one client core can handshake here).
  client_env timeout --foreground -k 5 $((secs + 30)) \
    taskset -c "$CLIENT_CPU" ab -r -t "$secs" -n $((secs * 20000)) -c "$CONNS" "$url" >"$out" 2>&1
}
parse_wrk() { # FILE — "rps requests non2xx errors"
  if [[ $CLIENT == wrk ]]; then
    lib_parse_wrk "$@"
    return
  fi
  awk '
    /^Complete requests:/ { req = $3 }
    /^Failed requests:/ { failed = $3 }
    /^Non-2xx responses:/ { non2xx = $3 }
    /^Requests per second:/ { rps = $4 }
    END { printf "%s %s %d %d\n", (rps == "" ? "0" : rps), (req == "" ? "0" : req), non2xx, failed }
  ' "$1"
}

# ---- measuring ---------------------------------------------------------------
FAILED=()
record_skip() { # ROUND NAME REASON
  printf '%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\t-\t-\t-\n' "$1" "$2" "$3" >>"$SUMMARY"
  FAILED+=("r$1/$2")
  say "round $1: $2: SKIPPED: $3"
}

declare -A PID_OF PORT_OF TPORT_OF
# start_checked ROUND NAME — starts NAME and checks it; sets PID_OF[NAME]
# (empty when skipped), PORT_OF and TPORT_OF.
start_checked() {
  local round=$1 name=$2 port tport rc p info proto
  PID_OF[$name]=""
  SERVER_PID="" SKIP_REASON=""
  read -r port tport < <(two_ports) || { record_skip "$round" "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port" "$tport"; then
    record_skip "$round" "$name" "$SKIP_REASON"
    return 0
  fi
  rc=0
  wait_ready "http://127.0.0.1:$port/1k.html" "$SERVER_PID" "$READY_TIMEOUT" || rc=$?
  if ((rc != 0)); then
    if ((rc == 2)); then
      record_skip "$round" "$name" "exited during start-up"
    else
      record_skip "$round" "$name" "no 2xx answer on http://127.0.0.1:$port/1k.html within ${READY_TIMEOUT}s"
    fi
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  for p in /1k.html /100k.html; do
    if ! verify_body "http://127.0.0.1:$port$p" "$DOCROOT$p"; then
      record_skip "$round" "$name" "did not return $p over HTTP with 200 and its bytes"
      stop_tree "$SERVER_PID"
      return 0
    fi
  done
  if [[ ${HAS_TLS[$name]} == 1 ]]; then
    for p in /1k.html /100k.html /10m.html; do
      [[ -e $DOCROOT$p ]] || continue
      if ! verify_body "https://127.0.0.1:$tport$p" "$DOCROOT$p" "" --cacert "$CERT"; then
        record_skip "$round" "$name" "did not return $p over HTTPS with 200 and its bytes"
        tail_logs "$name"
        stop_tree "$SERVER_PID"
        return 0
      fi
    done
    info=$(tls_info "$name" "$tport")
    printf '%s\t%s\t%s\n' "$round" "$name" "$info" >>"$TLSINFO"
    proto=${info%%$'\t'*}
    if [[ $proto != "$WANT_PROTO" ]]; then
      record_skip "$round" "$name" "negotiated '$proto', want $WANT_PROTO (see $TMP/$name-s_client1.txt)"
      stop_tree "$SERVER_PID"
      return 0
    fi
    [[ $info == *$'\t'yes ]] || say "round $round: $name: a session did not resume (openssl s_client -sess_in)"
  fi
  PID_OF[$name]=$SERVER_PID PORT_OF[$name]=$port TPORT_OF[$name]=$tport
  say "round $round: $name: pid $SERVER_PID, $(proc_tree "$SERVER_PID" | wc -l) process(es), http $port, https $tport: checked"
}

measure_row() { # ROUND NAME ROW
  local round=$1 name=$2 row=$3 pid=${PID_OF[$2]} url
  local -a args=()
  if row_tls "$row"; then
    [[ ${HAS_TLS[$name]} == 1 ]] || return 0
    url=https://127.0.0.1:${TPORT_OF[$name]}$(row_path "$row")
  else
    url=http://127.0.0.1:${PORT_OF[$name]}$(row_path "$row")
  fi
  mapfile -t args < <(row_args "$row")
  if ! kill -0 "$pid" 2>/dev/null; then
    record_skip "$round" "$name" "$row: the server is gone"
    return 0
  fi
  CLIENT=$(row_client "$row")
  MEASURE_PRE=$round$'\t'$name$'\t'$row
  CONNS=$(row_conns "$row") measure_case "round $round: $name: $row" "$RESULTS/$name-$row.r$round" "$pid" "$url" \
    "${args[@]}"
  [[ $MEASURE_STATUS == ok ]] || { tail_logs "$name"; FAILED+=("r$round/$name/$row"); }
}

# ---- run ---------------------------------------------------------------------
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "servers:    ${SERVERS[*]}"
  for s in "${SERVERS[@]}"; do printf '  %-10s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  echo "openssl:    $(openssl version)"
  echo "tls:        ECDSA P-256 self-signed certificate (openssl req, this run), $WANT_PROTO; tickets/resumption on (each server's default)"
  echo "server:     1 worker, taskset -c $SERVER_CPU, access logging OFF for every server; fresh servers each round"
  echo "clients:    taskset -c $CLIENT_CPU: wrk -t1 -c$CONNS (tls-10m: -c$CONNS_10M --timeout 30s), tls-1k-resumed with"
  echo "            -H 'Connection: close'; tls-1k-handshake: ab -r -c$CONNS -t; ${DURATION}s each after a ${WARMUP}s warm-up"
  echo "rows:       ${ROWS[*]}"
  echo "rounds:     $ROUNDS, server order rotated each round"
  echo "cpu:        utime+stime of each server's process tree (/proc/PID/stat), CLK_TCK=$CLK_TCK"
} | tee "$RESULTS/env.txt" >&2

n=${#SERVERS[@]}
for ((round = 1; round <= ROUNDS; round++)); do
  k=$(((round - 1) % n))
  order=("${SERVERS[@]:k}" "${SERVERS[@]:0:k}")
  say "round $round of $ROUNDS: ${order[*]}"
  for s in "${order[@]}"; do start_checked "$round" "$s"; done
  for row in "${ROWS[@]}"; do
    for s in "${order[@]}"; do
      [[ -n ${PID_OF[$s]} ]] && measure_row "$round" "$s" "$row"
    done
  done
  for s in "${order[@]}"; do [[ -n ${PID_OF[$s]} ]] && stop_tree "${PID_OF[$s]}"; done
done

# ---- table -------------------------------------------------------------------
SUITES=$SUITES python3 - "$SUMMARY" "$TLSINFO" "${ROWS[*]}" "${SERVERS[*]}" "$ROUNDS" <<'PY' >"$RESULTS/table.md"
import os, sys, statistics, collections
summary, tlsinfo, rows, servers, nrounds = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split(), int(sys.argv[5])
peers = [s for s in ('nginx', 'lighttpd', 'h2o') if s in servers]
runs = collections.defaultdict(dict)   # (row, server) -> round -> (us, rps)
bad = collections.defaultdict(int)
for line in list(open(summary))[1:]:
    f = line.rstrip('\n').split('\t')
    if len(f) < 17 or f[2] == '-':
        continue
    if f[13] != 'ok':
        bad[(f[2], f[1])] += 1
        continue
    runs[(f[2], f[1])][f[0]] = (float(f[11]), float(f[3]))
def med(xs):
    return statistics.median(xs) if xs else None
def fmt(x, p=1):
    return '-' if x is None else f'{x:.{p}f}'
print(f'Medians over the clean rounds (of {nrounds}); CPU us/req = server process tree utime+stime per request')
print('(tls-10m: per 10 MiB response).\n')
cols = ' | '.join(f'{s} us/req | {s} req/s' for s in servers)
print(f'| row | {cols} | best peer | luxd/best | paired luxd/best (min-max) |')
print('|' + '---|' * (2 * len(servers) + 4))
for row in rows:
    m = {s: med([v[0] for v in runs[(row, s)].values()]) for s in servers}
    r = {s: med([v[1] for v in runs[(row, s)].values()]) for s in servers}
    cells = []
    for s in servers:
        note = f' ({len(runs[(row, s)])}/{nrounds})' if 0 < len(runs[(row, s)]) < nrounds or bad.get((row, s)) else ''
        cells.append(f'{fmt(m[s], 2 if (m[s] or 0) < 100 else 0)}{note} | {fmt(r[s], 0)}')
    have = [(m[p], p) for p in peers if m[p] is not None]
    best = min(have) if have else (None, '-')
    ratio = m.get('luxd') / best[0] if best[0] and m.get('luxd') is not None else None
    paired = []
    for rnd, v in runs[(row, 'luxd')].items():
        pv = [runs[(row, p)][rnd][0] for p in peers if rnd in runs[(row, p)]]
        if len(pv) == len(peers) and pv:
            paired.append(v[0] / min(pv))
    pr = f'{med(paired):.2f} ({min(paired):.2f}-{max(paired):.2f})' if paired else '-'
    print(f'| {row} | ' + ' | '.join(cells) + f' | {best[1]} {fmt(best[0], 2 if (best[0] or 0) < 100 else 0)} | {fmt(ratio, 2)} | {pr} |')
if 'luxd' in servers and 'luxd-base' in servers:
    parts = []
    for row in rows:
        a, b = runs[(row, 'luxd')], runs[(row, 'luxd-base')]
        if not a or not b:
            continue
        paired = [a[k][0] / b[k][0] for k in a if k in b]
        parts.append(f'{row} {med([v[0] for v in a.values()]) / med([v[0] for v in b.values()]):.2f}'
                     + (f' (paired {med(paired):.2f}, {min(paired):.2f}-{max(paired):.2f})' if paired else ''))
    print('\nluxd / luxd-base, ratio of the medians (paired: median, min-max of the per-round ratios): '
          + '; '.join(parts))
print('\nTarget (issue 19): luxd/best <= 0.85 on every TLS row; the plain rows must not move.')
for row in rows:
    if not row.startswith('tls-'):
        continue
    m = med([v[0] for v in runs[(row, 'luxd')].values()])
    pm = [med([v[0] for v in runs[(row, p)].values()]) for p in peers if runs[(row, p)]]
    if m is not None and pm:
        x = m / min(pm)
        print(f'- {row}: {x:.2f} {"met" if x <= 0.85 else "NOT met"}')
info = collections.OrderedDict()
for line in list(open(tlsinfo))[1:]:
    f = line.rstrip('\n').split('\t')
    info.setdefault(f[1], set()).add(' '.join(f[2:6]) + ', resumes: ' + f[6])
print('\nNegotiated (openssl s_client, each round)' + (f'; the clients offered only {os.environ["SUITES"]} (SUITES)' if os.environ.get('SUITES') else '') + ':')
for s, v in info.items():
    print(f'- {s}: ' + '; '.join(sorted(v)))
notclean = [f'{s}/{row} x{n}' for (row, s), n in bad.items() if n]
if notclean:
    print('\nNot clean (left out of the medians): ' + ', '.join(notclean))
PY
{
  echo
  cat "$RESULTS/table.md"
  echo
  echo "paired = the median (min-max) over rounds of luxd's CPU us/req over the best peer's of the same round."
  echo "A count (n/$ROUNDS) after a figure: only n clean rounds. Per-run details (core%, wrk%, errors) in summary.tsv."
  if [[ -n $NOT_IDLE ]]; then echo "$NOT_IDLE"; fi
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.txt"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
