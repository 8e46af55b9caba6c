#!/usr/bin/env bash
# A cold download beside hot traffic (issue 18): does a server's loop ever
# wait on the disk? CONNS wrk clients fetch a hot 1 KiB file for DURATION s,
# first alone, then while DOWNLOADS clients each fetch a 1 GiB file whose
# pages were dropped from the page cache (posix_fadvise DONTNEED, checked
# with fincore). Reported per server: the hot traffic's p50/p99/max latency
# alone and beside the cold downloads, their MB/s, and for luxd its loop's
# largest lag so far (luxd_worker_lag_max_seconds: how late a 10 ms timer
# fired, which a loop stalled on a disk would raise by the stall). One
# worker each, on SERVER_CPU; the clients on CLIENT_CPU.
#
# Usage: bash bench/cold.sh [SERVER...]   SERVER: luxd nginx (default: both)
# Environment: DURATION=10, CONNS=20, DOWNLOADS=2, FILE_MB=1024,
#   SERVER_CPU=0, CLIENT_CPU=1, LUXD=build/luxd, NGINX=/usr/sbin/nginx,
#   KEEP_TMP=1 keeps the temp dir (the 1 GiB file is removed otherwise).
#
# nginx runs as its users run it by default: sendfile on, no aio (with "aio
# threads" it would read on a thread pool as luxd does). How cold "cold" is
# depends on the disk: on a VM whose virtual disk the host caches, a read
# that misses the guest's page cache still comes back in microseconds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DURATION=${DURATION:-10} CONNS=${CONNS:-20} DOWNLOADS=${DOWNLOADS:-2} FILE_MB=${FILE_MB:-1024}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1} KEEP_TMP=${KEEP_TMP:-0}
LUXD=${LUXD:-$BENCH_DIR/../build/luxd} NGINX=${NGINX:-/usr/sbin/nginx}
SERVERS=("$@")
((${#SERVERS[@]})) || SERVERS=(luxd nginx)

for t in wrk curl taskset fincore; do has "$t" || die "$t is missing (sh deps/install.sh test; bench)"; done
setup_dirs luxd-cold cold
mkdir -p "$TMP/www"
make_docroot "$TMP/www/1k.html"
say "writing a ${FILE_MB} MiB file"
dd if=/dev/urandom of="$TMP/www/big.bin" bs=1M count="$FILE_MB" status=none
chmod 644 "$TMP/www/big.bin"
sync

# drop — takes the big file out of the page cache; fails if pages stay.
drop() {
  local i
  for ((i = 0; i < 20; i++)); do
    dd if="$TMP/www/big.bin" iflag=nocache count=0 status=none
    [[ $(fincore --raw --noheadings --output PAGES "$TMP/www/big.bin") =~ ^[[:space:]]*0[[:space:]]*$ ]] && return 0
    sleep 0.1
  done
  die "the big file stays in the page cache"
}

# lat FILE — wrk --latency's p50 p99 and max, in ms.
lat() {
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
    /^ +Latency +[0-9]/ { max = ms($4) }
    END { printf "%.2f %.2f %.2f", p50, p99, max }' "$1"
}

# lag_over PORT — luxd's lag samples over 10 ms so far (all workers): read
# before and after a phase, the difference is that phase's own, where the
# max is since start.
lag_over() {
  curl -s --max-time 5 "http://127.0.0.1:$1/status" |
    awk '/^luxd_worker_lag_seconds_bucket/ && /le="0.01"/ { le += $2 } /^luxd_worker_lag_seconds_count/ { n += $2 } END { print n - le }'
}

# lag_max PORT — luxd's largest loop lag so far, in ms.
lag_max() {
  curl -s --max-time 5 "http://127.0.0.1:$1/status" |
    awk '/^luxd_worker_lag_max_seconds/ { if ($2 > m) m = $2 } END { printf "%.2f", m * 1000 }'
}

printf 'server\tphase\thot_p50_ms\thot_p99_ms\thot_max_ms\thot_req_s\tcold_MB_s\tlag_max_ms\tlags_over_10ms\n' >"$RESULTS/summary.tsv"
for srv in "${SERVERS[@]}"; do
  port=$(free_port)
  case $srv in
    luxd)
      cat >"$TMP/luxd.lua" <<EOF
server { listen = { "127.0.0.1:$port" }, workers = 1, error_log = "$TMP/luxd-error.log", access_log = false }
vhost "bench" { default = true, root = "$TMP/www", location "/status" { status = true } }
EOF
      start_bg "$TMP/luxd-stderr.log" taskset -c "$SERVER_CPU" "$LUXD" -c "$TMP/luxd.lua"
      ;;
    nginx)
      mkdir -p "$TMP/nginx-tmp"
      cat >"$TMP/nginx.conf" <<EOF
$( ((EUID == 0)) && echo "user root;")
worker_processes 1;
pid $TMP/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path $TMP/nginx-tmp; proxy_temp_path $TMP/nginx-tmp; fastcgi_temp_path $TMP/nginx-tmp;
  uwsgi_temp_path $TMP/nginx-tmp; scgi_temp_path $TMP/nginx-tmp;
  server { listen 127.0.0.1:$port; root $TMP/www; }
}
EOF
      start_bg "$TMP/nginx-stderr.log" taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP" -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf" -g 'daemon off;'
      ;;
    *) die "unknown server $srv" ;;
  esac
  pid=$BENCH_LAST_PID
  wait_ready "http://127.0.0.1:$port/1k.html" "$pid" 15 || die "$srv did not answer"
  url=http://127.0.0.1:$port/1k.html
  lag=-
  for phase in alone cold; do
    cold_mb=- over=-
    [[ $srv == luxd ]] && over0=$(lag_over "$port")
    if [[ $phase == cold ]]; then
      drop
      dl_pids=()
      for ((d = 0; d < DOWNLOADS; d++)); do
        taskset -c "$CLIENT_CPU" curl -s -o /dev/null -w '%{size_download} %{time_total}\n' --max-time $((DURATION + 60)) \
          "http://127.0.0.1:$port/big.bin" >"$TMP/$srv-dl$d.txt" &
        dl_pids+=($!)
      done
    fi
    run_wrk "$TMP/$srv-$phase.wrk" "$DURATION" "$url" --latency || die "$srv: wrk failed"
    if [[ $phase == cold ]]; then
      wait "${dl_pids[@]}" || true
      cold_mb=$(cat "$TMP/$srv"-dl*.txt | awk '{ b += $1; if ($2 > t) t = $2 } END { if (t > 0) printf "%.0f", b / t / 1e6; else print "-" }')
    fi
    if [[ $srv == luxd ]]; then
      lag=$(lag_max "$port")
      over=$(($(lag_over "$port") - over0))
    fi
    read -r p50 p99 max <<<"$(lat "$TMP/$srv-$phase.wrk")"
    rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$TMP/$srv-$phase.wrk")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$srv" "$phase" "$p50" "$p99" "$max" "$rps" "$cold_mb" "$lag" "$over" >>"$RESULTS/summary.tsv"
  done
  stop_tree "$pid"
done
((KEEP_TMP == 1)) || rm -f "$TMP/www/big.bin"
column -t -s $'\t' "$RESULTS/summary.tsv" | tee "$RESULTS/table.txt"
say "lag_max_ms: luxd's largest loop lag (a 10 ms timer's lateness) since it started, read after each phase; lags_over_10ms: that phase's samples over 10 ms (-: not luxd)"
say "raw results: $RESULTS"
