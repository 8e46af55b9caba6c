#!/usr/bin/env bash
# Stalled TLS handshakes (issue 19): what a client that sends its ClientHello
# and then goes silent costs each server in memory, how long the server waits
# before closing it, and whether a normal client is served meanwhile.
#
# Usage: bash bench/tls_stalled.sh [SERVER...]   SERVER: luxd nginx lighttpd h2o
#                                                (default: all four)
# Environment:
#   CONNS=500     stalled handshakes held open
#   BATCH=50      connections opened at a time (see below)
#   SETTLE=2      seconds between the last answer and the second RSS reading
#   CAP=70        seconds after the last connection opened to wait for the
#                 server to close them all
#   CURLS=5       normal HTTPS requests (curl) made while the handshakes stall
#   TLS12=1       the servers offer TLS 1.2 only (default: 1.2 and 1.3)
#   SERVER_CPU=0  CPU the server is pinned to (taskset -c)
#   CLIENT_CPU=1  CPU the clients are pinned to
#   KEEP_TMP=1    keep the temp dir (configs, certificate, logs)
#   LUXD, NGINX, LIGHTTPD, H2O  binaries, as for bench/tls.sh
#
# Method, per server: started with tls.sh's config (bench/conf/*-tls.*.in:
# one worker, pinned to SERVER_CPU, access logging off, every timeout at the
# server's default), checked (a 1 KiB GET over HTTP and over HTTPS with curl),
# then the RSS of its process tree is read (VmRSS summed over the server and
# its descendants, /proc/PID/status). The client (bench/tls_stalled.py,
# python3, pinned to CLIENT_CPU) opens CONNS connections BATCH at a time, each
# sending a real ClientHello and then nothing: it reads the server's first
# flight but never answers it. When every connection has had its answer,
# SETTLE s later, RSS is read again: (after - before) / CONNS is the memory a
# stalled handshake costs. Then CURLS curl requests over HTTPS, one after the
# other, with their times; then the client waits until the server has closed
# every stalled connection (EOF or reset) or CAP s, and reports the time from
# connect to close (min, median, max); RSS is read a third time. Raw results
# go to bench/results/tls-stalled-DATE/; see bench/README.md.
#
# Exit status: 0 when every selected server was measured cleanly, 3 when one
# or more were skipped or not clean, 1 on a setup error.
# Functions below are called indirectly (start_$name, traps):
# shellcheck disable=SC2317
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
# shellcheck source=bench/tls_lib.sh
. "$HERE/tls_lib.sh"

ALL_SERVERS=(luxd nginx lighttpd h2o)
CONNS=${CONNS:-500}
BATCH=${BATCH:-50}
SETTLE=${SETTLE:-2}
CAP=${CAP:-70}
CURLS=${CURLS:-5}
TLS12=${TLS12:-0}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
KEEP_TMP=${KEEP_TMP:-0}
READY_TIMEOUT=15

usage() { sed -n '2,/^# Functions below/{/^# Functions below/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

# ---- arguments -------------------------------------------------------------
SERVERS=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    luxd | nginx | lighttpd | h2o) SERVERS+=("$a") ;;
    *) usage >&2; die "unknown server '$a' (known: ${ALL_SERVERS[*]})" ;;
  esac
done
((${#SERVERS[@]})) || SERVERS=("${ALL_SERVERS[@]}")
need_whole CONNS BATCH SETTLE CAP CURLS SERVER_CPU CLIENT_CPU
((CONNS > 0 && BATCH > 0)) || die "CONNS and BATCH must be > 0"
[[ $TLS12 == 0 || $TLS12 == 1 ]] || die "TLS12 must be 0 or 1"

# ---- dependencies ----------------------------------------------------------
tls_deps curl
for c in taskset curl openssl python3 cmp awk; do has "$c" || die "$c not found"; done
python3 -c 'import ssl; ssl.MemoryBIO' 2>/dev/null || die "python3 has no ssl.MemoryBIO"
taskset -c "$SERVER_CPU" true 2>/dev/null || die "cannot pin to CPU $SERVER_CPU (SERVER_CPU)"
taskset -c "$CLIENT_CPU" true 2>/dev/null || die "cannot pin to CPU $CLIENT_CPU (CLIENT_CPU)"
NEED_FDS=$((CONNS + 256))
if [[ $(ulimit -n) != unlimited ]] && (($(ulimit -n) < NEED_FDS)); then
  ulimit -n "$NEED_FDS" 2>/dev/null || die "ulimit -n $NEED_FDS failed (CONNS=$CONNS needs it)"
fi

# ---- cleanup, temp dir, results ---------------------------------------------
setup_dirs luxd-tls-stalled tls-stalled
SUMMARY=$RESULTS/summary.tsv
printf 'server\tconns\tanswered\tclosed_early\tfailed\tserver_bytes\trss_before_kb\trss_stalled_kb\tkib_per_conn\trss_after_close_kb\tcurl_ok\tcurl_med_s\tcurl_max_s\tclosed\teof\trst\tstill_open\tclose_min_s\tclose_med_s\tclose_max_s\topen_ms\tstatus\n' >"$SUMMARY"

DOCROOT=$TMP/www
make_docroot "$DOCROOT/1k.html"
tls_setup
LUXD_SRC=$LUXD
if [[ -x $LUXD ]]; then
  cp "$LUXD" "$TMP/luxd-bin"
  LUXD=$TMP/luxd-bin
fi

# tree_rss_kb PID — VmRSS summed over PID and its descendants, KiB.
tree_rss_kb() {
  local p total=0 kb
  while read -r p; do
    kb=$(awk '$1 == "VmRSS:" { print $2; exit }' "/proc/$p/status" 2>/dev/null) || kb=0
    total=$((total + ${kb:-0}))
  done < <(proc_tree "$1")
  echo "$total"
}

# ---- measuring ---------------------------------------------------------------
FAILED=()
record_skip() { # NAME REASON
  printf '%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tskipped: %s\n' "$1" "$CONNS" "$2" >>"$SUMMARY"
  FAILED+=("$1")
  say "$1: SKIPPED: $2"
}

CLIENT_PID="" CLIENT_OUT=""
stop_client() {
  [[ -n $CLIENT_PID ]] || return 0
  stop_tree "$CLIENT_PID"
  CLIENT_PID="" CLIENT_OUT=""
}

bench_server() { # NAME
  local name=$1 port tport rc line status=ok info
  local answered=-1 early=-1 failed=-1 sbytes=- open_ms=- rss0 rss1=- rss2=- kib=-
  local closed=- eof=- rst=- still=- cmin=- cmed=- cmax=- curl_ok=0 cmed_s=- cmax_s=- i out
  local -a ctimes=()
  SERVER_PID="" SKIP_REASON=""
  read -r port tport < <(two_ports) || { record_skip "$name" "no free port found"; return 0; }
  if ! "start_$name" "$port" "$tport"; then
    record_skip "$name" "$SKIP_REASON"
    return 0
  fi
  rc=0
  wait_ready "http://127.0.0.1:$port/1k.html" "$SERVER_PID" "$READY_TIMEOUT" || rc=$?
  if ((rc != 0)); then
    record_skip "$name" "$( ((rc == 2)) && echo "exited during start-up" || echo "no answer within ${READY_TIMEOUT}s")"
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  if [[ ${HAS_TLS[$name]} != 1 ]] || ! verify_body "https://127.0.0.1:$tport/1k.html" "$DOCROOT/1k.html" "" --cacert "$CERT"; then
    record_skip "$name" "did not serve /1k.html over HTTPS"
    tail_logs "$name"
    stop_tree "$SERVER_PID"
    return 0
  fi
  info=$(tls_info "$name" "$tport")
  say "$name: pid $SERVER_PID, https $tport, $(proc_tree "$SERVER_PID" | wc -l) process(es); $(tr '\t' ' ' <<<"$info")"
  sleep 0.5 # the checks' connections close
  rss0=$(tree_rss_kb "$SERVER_PID")

  say "$name: $CONNS stalled handshakes, $BATCH at a time"
  coproc STALL_CLIENT { exec taskset -c "$CLIENT_CPU" python3 "$HERE/tls_stalled.py" "$tport" "$CONNS" "$BATCH" \
    "$CAP" "$RESULTS/$name-conns.tsv" 2>"$TMP/$name-client.log"; }
  CLIENT_PID=$STALL_CLIENT_PID CLIENT_OUT=${STALL_CLIENT[0]}
  BENCH_PIDS+=("$CLIENT_PID")
  line=""
  read -r -t $((CONNS * 11 / BATCH + 70)) -u "$CLIENT_OUT" line || true
  if [[ $line =~ ^ready\ answered=([0-9]+)\ closed=([0-9]+)\ failed=([0-9]+)\ bytes=([0-9]+)\ open_ms=([0-9]+)$ ]]; then
    answered=${BASH_REMATCH[1]} early=${BASH_REMATCH[2]} failed=${BASH_REMATCH[3]} sbytes=${BASH_REMATCH[4]}
    open_ms=${BASH_REMATCH[5]}
    say "$name: $answered answered and stalled, $early closed already, $failed failed (server sent $sbytes bytes each); waiting ${SETTLE}s"
    sleep "$SETTLE"
    rss1=$(tree_rss_kb "$SERVER_PID")
    kib=$(awk -v a="$rss0" -v b="$rss1" -v n="$CONNS" 'BEGIN { printf "%.1f", (b - a) / n }')
    # A normal client meanwhile.
    for ((i = 0; i < CURLS; i++)); do
      out=$(taskset -c "$CLIENT_CPU" curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 30 \
        --cacert "$CERT" "https://127.0.0.1:$tport/1k.html" 2>/dev/null) || true
      say "$name: curl during the stall: ${out:-failed}"
      [[ $out == 200\ * ]] && curl_ok=$((curl_ok + 1))
      ctimes+=("${out#* }")
    done
    read -r cmed_s cmax_s < <(printf '%s\n' "${ctimes[@]}" | sort -g | awk '{ v[NR] = $1 } END {
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4f %.4f\n", m, v[NR] }')
    say "$name: waiting for the server to close them (at most ${CAP}s after the last opened)"
    line=""
    read -r -t $((CAP + 30)) -u "$CLIENT_OUT" line || true
    if [[ $line =~ ^done\ closed=([0-9]+)\ eof=([0-9]+)\ rst=([0-9]+)\ open=([0-9]+)\ min=([0-9.-]+)\ med=([0-9.-]+)\ max=([0-9.-]+)$ ]]; then
      closed=${BASH_REMATCH[1]} eof=${BASH_REMATCH[2]} rst=${BASH_REMATCH[3]} still=${BASH_REMATCH[4]}
      cmin=${BASH_REMATCH[5]} cmed=${BASH_REMATCH[6]} cmax=${BASH_REMATCH[7]}
      sleep 1
      rss2=$(tree_rss_kb "$SERVER_PID")
    else
      status="client gave no done line (got '${line:0:80}')"
    fi
  else
    status="client did not finish opening (got '${line:0:80}')"
  fi
  if [[ $status == ok ]]; then
    if ((failed > 0)); then
      status="NOT A RESULT: $failed handshakes not answered"
    elif ((early > 0)); then
      status="NOT A RESULT: $early closed before the RSS reading"
    elif ((curl_ok != CURLS)); then
      status="curl: $((CURLS - curl_ok)) of $CURLS requests failed during the stall"
    fi
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then status="server died during run"; fi
  if [[ -s $TMP/$name-client.log ]]; then
    say "--- $name client:"
    cat "$TMP/$name-client.log" >&2
  fi
  stop_client
  stop_tree "$SERVER_PID"
  [[ $status == ok ]] || { say "$name: $status"; tail_logs "$name"; FAILED+=("$name"); }
  printf '%s\t' "$name" "$CONNS" "$answered" "$early" "$failed" "$sbytes" "$rss0" "$rss1" "$kib" "$rss2" \
    "$curl_ok" "$cmed_s" "$cmax_s" "$closed" "$eof" "$rst" "$still" "$cmin" "$cmed" "$cmax" "$open_ms" >>"$SUMMARY"
  printf '%s\n' "$status" >>"$SUMMARY"
}

# ---- run ---------------------------------------------------------------------
{
  echo "date:       $(date -Is)"
  echo "host:       $(uname -srm), $(nproc) CPUs, $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "servers:    ${SERVERS[*]}"
  for s in "${SERVERS[@]}"; do printf '  %-9s %s\n' "$s:" "$(version_of "$s" 2>/dev/null || echo '?')"; done
  echo "openssl:    $(openssl version); python3 $(python3 -c 'import ssl, sys; print(sys.version.split()[0], ssl.OPENSSL_VERSION)')"
  echo "server:     tls.sh's config: 1 worker, taskset -c $SERVER_CPU, access logging OFF, timeouts at their defaults; ECDSA P-256, $WANT_PROTO"
  echo "client:     bench/tls_stalled.py, taskset -c $CLIENT_CPU: $CONNS connections, $BATCH at a time, a ClientHello each, then silence"
  echo "memory:     VmRSS summed over the server's process tree, before and ${SETTLE}s after the last answer, and after the closes"
  echo "close:      time from connect to the server's EOF or reset, at most ${CAP}s after the last connection opened"
} | tee "$RESULTS/env.txt" >&2

for s in "${SERVERS[@]}"; do
  bench_server "$s"
done

# ---- table -------------------------------------------------------------------
{
  echo
  echo "Stalled TLS handshakes: $CONNS per server (a ClientHello each, the server's answer read, then silence)."
  echo
  echo "| server | stalled | RSS before KiB | RSS stalled KiB | KiB/conn | closes after s (min / median / max) | closed by | still open | curl meanwhile s (median / max) | RSS after close KiB |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  awk -F'\t' 'NR == 1 { next }
    $22 ~ /^skipped/ { printf "| %s | %s |\n", $1, $22; next }
    {
      how = ($15 + 0 > 0 ? $15 " EOF" : "") ($16 + 0 > 0 ? ($15 + 0 > 0 ? ", " : "") $16 " RST" : "")
      if (how == "") how = "-"
      printf "| %s | %s | %s | %s | %s | %s / %s / %s | %s | %s | %s / %s (%s of %s ok) | %s |%s\n",
        $1, $3, $7, $8, $9, $18, $19, $20, how, $17, $12, $13, $11, '"$CURLS"', $10, ($22 == "ok" ? "" : " " $22)
    }' "$SUMMARY"
  echo
  echo "KiB/conn = (RSS stalled - RSS before) / $CONNS: VmRSS summed over the server's processes (nginx: master and"
  echo "worker; h2o: with its neverbleed and helper processes). closes after = seconds from connect to the server's"
  echo "close of a stalled handshake; still open = not closed ${CAP}s after the last connection opened."
  echo "Raw results: $RESULTS"
} | tee "$RESULTS/table.md"

((${#FAILED[@]} == 0)) || { say "not measured cleanly: ${FAILED[*]}"; exit 3; }
exit 0
