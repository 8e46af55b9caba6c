# shellcheck shell=bash disable=SC2034 # sets globals for the sourcing script
# The servers of bench/tls.sh and bench/tls_stalled.sh over TLS: one
# certificate, the protocol settings, start functions and a handshake check.
# Source it after lib.sh. Reads the globals HERE ROOT TMP DOCROOT SERVER_CPU
# LUXD LUXD_BASE NGINX LIGHTTPD H2O TLS12 (see each function); sets CERT KEY
# and the protocol settings (tls_setup), SERVER_PID SKIP_REASON (start_*).

LIGHTTPD_MODDIR=/usr/lib/lighttpd

# tls_deps TOOL... — the peers' binaries (NGINX LIGHTTPD H2O, and LUXD),
# with lighttpd's TLS module, and the clients TOOL...: what is missing is
# installed through deps/ (bench and test groups). Reads SERVERS.
tls_deps() {
  NGINX=${NGINX:-/usr/sbin/nginx}
  LIGHTTPD=${LIGHTTPD:-/usr/sbin/lighttpd}
  H2O=${H2O:-/usr/bin/h2o}
  LUXD=${LUXD:-$ROOT/build/luxd}
  local want_bench=0 want_test=0 s c
  has taskset || want_bench=1
  for s in "${SERVERS[@]}"; do
    case $s in
      nginx) [[ -x $NGINX ]] || want_bench=1 ;;
      lighttpd) [[ -x $LIGHTTPD && -e $LIGHTTPD_MODDIR/mod_openssl.so ]] || want_bench=1 ;;
      h2o) [[ -x $H2O ]] || want_bench=1 ;;
    esac
  done
  for c in "$@"; do has "$c" || want_test=1; done
  if ((want_bench)); then deps_install bench; fi
  if ((want_test)); then deps_install test; fi
}

# tls_setup — makes TMP/cert.pem and TMP/key.pem, one self-signed ECDSA
# P-256 certificate for 127.0.0.1 and bench.test, and sets the protocol
# settings: TLS 1.2 and 1.3 offered (clients negotiate 1.3), or with TLS12=1
# TLS 1.2 only. WANT_PROTO is what a client should then negotiate.
tls_setup() {
  CERT=$TMP/cert.pem KEY=$TMP/key.pem
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$KEY" -out "$CERT" -days 2 \
    -subj /CN=bench.test -addext 'subjectAltName=DNS:bench.test,IP:127.0.0.1' >"$TMP/openssl-req.log" 2>&1 ||
    die "openssl req failed: $(tail -n 3 "$TMP/openssl-req.log")"
  chmod 644 "$CERT" "$KEY"
  if [[ ${TLS12:-0} == 1 ]]; then
    WANT_PROTO=TLSv1.2
    LUXD_PROTOCOLS='"TLSv1.2"' NGINX_PROTOCOLS=TLSv1.2 MAX_PROTOCOL=TLSv1.2
    # h2o 2.2 has no maximum-version: OpenSSL's own config caps its contexts.
    H2O_OPENSSL_CONF=$TMP/openssl-tls12.cnf
    printf '%s\n' 'openssl_conf = bench_init' '[bench_init]' 'ssl_conf = bench_ssl' '[bench_ssl]' \
      'system_default = bench_tls' '[bench_tls]' 'MaxProtocol = TLSv1.2' >"$H2O_OPENSSL_CONF"
  else
    WANT_PROTO=TLSv1.3
    LUXD_PROTOCOLS='{ "TLSv1.2", "TLSv1.3" }' NGINX_PROTOCOLS='TLSv1.2 TLSv1.3' MAX_PROTOCOL=TLSv1.3
    H2O_OPENSSL_CONF=""
  fi
}

# ---- start functions ------------------------------------------------------------
# start_NAME PORT TLS_PORT: writes the config (bench/conf/*-tls.*.in: a plain
# listener on PORT and a TLS one on TLS_PORT, one worker, access logging
# off), starts the server pinned to SERVER_CPU, sets SERVER_PID. Returns
# non-zero with SKIP_REASON set when it cannot run. HAS_TLS[NAME] becomes 0
# for a luxd that refuses the TLS config (a build from before TLS): it then
# runs static.sh's plain config.
SERVER_PID="" SKIP_REASON=""
declare -A HAS_TLS=([luxd]=1 [luxd-base]=1 [nginx]=1 [lighttpd]=1 [h2o]=1)

start_luxd_binary() { # NAME BINARY PORT TLS_PORT
  local name=$1 bin=$2 port=$3 tport=$4 conf=$TMP/$1.lua
  render "$HERE/conf/luxd-tls.lua.in" "$conf" PORT="$port" TLS_PORT="$tport" DIR="$TMP" DOCROOT="$DOCROOT" \
    CERT="$CERT" KEY="$KEY" LUXD_PROTOCOLS="$LUXD_PROTOCOLS" NAME="$name"
  if ! "$bin" -t -c "$conf" >"$TMP/$name-check.log" 2>&1; then
    HAS_TLS[$name]=0
    render "$HERE/conf/luxd.lua.in" "$conf" PORT="$port" DIR="$TMP" DOCROOT="$DOCROOT"
    sed -i "s|$TMP/luxd-error.log|$TMP/$name-error.log|" "$conf"
    say "$name: refuses the TLS config ($(head -n 1 "$TMP/$name-check.log")): plain HTTP only"
  fi
  start_bg "$TMP/$name-stderr.log" taskset -c "$SERVER_CPU" "$bin" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_luxd() {
  if [[ ! -x $LUXD ]]; then
    SKIP_REASON="$LUXD is missing (make, or set LUXD)"
    return 1
  fi
  start_luxd_binary luxd "$LUXD" "$1" "$2"
}

start_luxd-base() {
  if [[ -z ${LUXD_BASE:-} || ! -x $LUXD_BASE ]]; then
    SKIP_REASON="LUXD_BASE is not set to an executable luxd"
    return 1
  fi
  start_luxd_binary luxd-base "$LUXD_BASE" "$1" "$2"
}

start_nginx() {
  local port=$1 tport=$2 conf=$TMP/nginx.conf user_line=""
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  mkdir -p "$TMP/nginx/logs" "$TMP/nginx-tmp"
  render "$HERE/conf/nginx-tls.conf.in" "$conf" PORT="$port" TLS_PORT="$tport" DIR="$TMP" DOCROOT="$DOCROOT" \
    NGINX_USER="$user_line" CERT="$CERT" KEY="$KEY" NGINX_PROTOCOLS="$NGINX_PROTOCOLS"
  start_bg "$TMP/nginx-stderr.log" taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP/nginx/" -e "$TMP/nginx-error.log" \
    -c "$conf" -g 'daemon off;'
  SERVER_PID=$BENCH_LAST_PID
}

start_lighttpd() {
  local port=$1 tport=$2 conf=$TMP/lighttpd.conf
  if [[ ! -e $LIGHTTPD_MODDIR/mod_openssl.so ]]; then
    SKIP_REASON="$LIGHTTPD_MODDIR/mod_openssl.so missing (Debian package lighttpd-mod-openssl)"
    return 1
  fi
  render "$HERE/conf/lighttpd-tls.conf.in" "$conf" PORT="$port" TLS_PORT="$tport" DIR="$TMP" DOCROOT="$DOCROOT" \
    CERT="$CERT" KEY="$KEY" MAX_PROTOCOL="$MAX_PROTOCOL"
  start_bg "$TMP/lighttpd-stderr.log" taskset -c "$SERVER_CPU" "$LIGHTTPD" -D -f "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

start_h2o() {
  local port=$1 tport=$2 conf=$TMP/h2o.conf user_line=""
  local -a env=()
  # As root h2o would setuid to nobody; stay root (the files are in TMP).
  [[ $(id -u) -eq 0 ]] && user_line="user: root"
  render "$HERE/conf/h2o-tls.conf.in" "$conf" PORT="$port" TLS_PORT="$tport" DIR="$TMP" DOCROOT="$DOCROOT" \
    H2O_USER="$user_line" CERT="$CERT" KEY="$KEY"
  [[ -n $H2O_OPENSSL_CONF ]] && env=(env OPENSSL_CONF="$H2O_OPENSSL_CONF")
  start_bg "$TMP/h2o-stderr.log" "${env[@]}" taskset -c "$SERVER_CPU" "$H2O" -c "$conf"
  SERVER_PID=$BENCH_LAST_PID
}

# two_ports — prints two distinct free ports on one line (free_port in a
# subshell cannot remember the first for the second).
two_ports() {
  local a b i
  a=$(free_port) || return 1
  for ((i = 0; i < 20; i++)); do
    b=$(free_port) || return 1
    [[ $b != "$a" ]] && { echo "$a $b"; return 0; }
  done
  return 1
}

# tls_info NAME TLS_PORT — one full handshake and one resumption with
# openssl s_client (outputs in TMP/NAME-s_client[12].txt); prints
# "protocol<TAB>cipher<TAB>group<TAB>signature<TAB>resumed(yes|no)".
tls_info() {
  local name=$1 tport=$2 sess=$TMP/$1-session.pem out1=$TMP/$1-s_client1.txt out2=$TMP/$1-s_client2.txt
  local req proto cipher group sig resumed=no
  req=$'GET /1k.html HTTP/1.0\r\nHost: bench.test\r\n\r\n'
  rm -f "$sess"
  printf '%s' "$req" | timeout 10 openssl s_client -connect "127.0.0.1:$tport" -servername bench.test \
    -CAfile "$CERT" ${SUITES:+-ciphersuites "$SUITES"} -ign_eof -sess_out "$sess" >"$out1" 2>&1 || true
  printf '%s' "$req" | timeout 10 openssl s_client -connect "127.0.0.1:$tport" -servername bench.test \
    -CAfile "$CERT" ${SUITES:+-ciphersuites "$SUITES"} -ign_eof -sess_in "$sess" >"$out2" 2>&1 || true
  proto=$(awk -F': *' '/^ *Protocol *:/ { print $2; exit }' "$out1")
  cipher=$(awk -F': *' '/^ *Cipher *:/ { print $2; exit }' "$out1")
  group=$(sed -n 's/^Server Temp Key: \([^,]*\).*/\1/p' "$out1" | head -n 1)
  sig=$(sed -n 's/^Peer signature type: //p' "$out1" | head -n 1)
  grep -q '^Reused,' "$out2" && resumed=yes
  printf '%s\t%s\t%s\t%s\t%s\n' "${proto:-?}" "${cipher:-?}" "${group:-?}" "${sig:-?}" "$resumed"
}

# version_of NAME — one line naming the binary and its version.
version_of() {
  case $1 in
    luxd)
      echo "luxd $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (${LUXD_SRC:-$LUXD}$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo '; src/ differs from HEAD'))"
      ;;
    luxd-base) echo "luxd ${LUXD_BASE_SRC:-$LUXD_BASE}" ;;
    nginx) "$NGINX" -v 2>&1 | head -n 1 ;;
    lighttpd) "$LIGHTTPD" -v 2>&1 | head -n 1 ;;
    h2o) "$H2O" -v 2>&1 | head -n 1 ;;
  esac
}

# copy_luxd_bins — luxd runs from copies in TMP, so that a rebuild during the
# run changes nothing: LUXD (made first when missing and measured; SERVERS)
# and LUXD_BASE when set. Sets LUXD_SRC and LUXD_BASE_SRC to the originals.
copy_luxd_bins() {
  LUXD_SRC=$LUXD
  if [[ " ${SERVERS[*]} " == *" luxd "* ]]; then
    if [[ ! -x $LUXD ]]; then
      say "luxd: $LUXD missing, running make (log: $RESULTS/luxd-make.log)"
      make -C "$ROOT" >"$RESULTS/luxd-make.log" 2>&1 || say "luxd: make failed (log: $RESULTS/luxd-make.log)"
    fi
    if [[ -x $LUXD ]]; then
      cp "$LUXD" "$TMP/luxd-bin"
      LUXD=$TMP/luxd-bin
    fi
  fi
  if [[ -n ${LUXD_BASE:-} && -x $LUXD_BASE ]]; then
    cp "$LUXD_BASE" "$TMP/luxd-base-bin"
    LUXD_BASE_SRC=$LUXD_BASE
    LUXD_BASE=$TMP/luxd-base-bin
  fi
}

# client_suites — the clients' TLS 1.3 suites (SUITES): OpenSSL's
# system_default section in a config that client_env CMD... runs CMD with
# (each client reads it at its start; the servers are started without it).
client_suites() {
  if [[ -n $SUITES ]]; then
    printf '%s\n' 'openssl_conf = openssl_init' '[openssl_init]' 'ssl_conf = ssl_sect' '[ssl_sect]' \
      'system_default = system_default_sect' '[system_default_sect]' "Ciphersuites = $SUITES" \
      >"$TMP/client-openssl.cnf"
  fi
}
client_env() { if [[ -n $SUITES ]]; then env OPENSSL_CONF="$TMP/client-openssl.cnf" "$@"; else "$@"; fi; }
