#!/bin/bash
# t/pkg/fresh-root.sh: the Debian package on a fresh Debian 12.
#
# Builds a pristine bookworm root (debootstrap --variant=minbase, plus
# systemd and man-db, which a Debian 12 machine has and minbase leaves out,
# and curl), installs the package there with `apt install ./luxd_*.deb`, checks
# the units with systemd-analyze verify, starts luxd the way luxd.service
# does (its ExecStartPre, ExecStart, ExecReload, User, Group,
# WorkingDirectory, *Directory= and AmbientCapabilities are read from the
# installed unit: a chroot has no systemd running), fetches a page, reloads
# with a good and a bad config, reopens the logs, stops it, removes and
# purges the package, and checks that nothing of it is left. Prints every
# command with its output; the last line is "fresh-root: PASS" or
# "fresh-root: FAIL (...)".
#
# Usage (as root):  t/pkg/fresh-root.sh [DEB]     (default: build/deb/luxd_*.deb,
#                                                 from `make deb`)
# Environment (optional):
#   ROOT=/tmp/luxd-pkg-root                 the chroot, wiped and re-made every run
#   BASE_TAR=/tmp/luxd-pkg-root-base.tar    the pristine root, built once if missing
#   MIRROR=<the first URIs: of /etc/apt/sources.list.d/debian.sources>
#   KEEP=1                                  leave the root in place (unmounted)
#
# Isolation: everything in the root runs in a private network namespace
# (unshare -n) with only a loopback: luxd's port 80 is the namespace's, not
# the host's. apt reaches the mirror through a forwarder (127.0.0.1:80 in the
# namespace -> a Unix socket -> socat on the host -> mirror:80, the mirror's
# name pointed at 127.0.0.1 in the root's /etc/hosts); luxd runs in another
# namespace without it, so that it can have port 80. The host's apt.conf.d
# is copied in (a snapshot mirror needs its Valid-Until setting).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ROOT=${ROOT:-/tmp/luxd-pkg-root}
BASE_TAR=${BASE_TAR:-/tmp/luxd-pkg-root-base.tar}
SUITE=bookworm
BASE_PKGS="systemd man-db curl"
SOCK=/tmp/luxd-pkg-root.$$.sock
FWD_PID=""

say() { echo "fresh-root: $*"; }
die() { echo "fresh-root: FAIL ($*)"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mount)"
DEB=${1:-$(ls -t "$repo"/build/deb/luxd_*.deb 2>/dev/null | head -1)}
[ -n "$DEB" ] && [ -f "$DEB" ] || die "no package: run make deb, or name the .deb"
DEB=$(cd "$(dirname "$DEB")" && pwd)/$(basename "$DEB")

if [ -z "${MIRROR:-}" ]; then
  MIRROR=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
  [ -n "$MIRROR" ] || MIRROR=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [ -n "$MIRROR" ] || die "no Debian mirror found in the apt sources"
fi
case $MIRROR in http://*) ;; *) die "only an http:// mirror can be forwarded (got $MIRROR)";; esac
MIRROR_HOST=$(echo "$MIRROR" | sed -E 's#^[a-z]+://([^/:]+).*#\1#')

sh "$repo/deps/install.sh" pkg >/dev/null || die "cannot install deps/packages-pkg.txt"

mounted_under() { awk -v r="$1" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts; }
umount_all() {
  local m
  for m in $(mounted_under "$1" | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
  done
}
mount_all() {
  mount -t proc proc "$1/proc"
  mount --bind /sys "$1/sys"
  mount --bind /dev "$1/dev"
  mount --bind /dev/pts "$1/dev/pts"
}
# Never rm -rf a tree that still has /dev or /proc bound in it.
wipe() {
  umount_all "$1"
  [ -z "$(mounted_under "$1")" ] || die "mounts remain under $1; not removing it"
  rm -rf --one-file-system "$1"
}

start_forwarder() {
  rm -f "$SOCK"
  socat UNIX-LISTEN:"$SOCK",fork,unlink-early TCP:"$MIRROR_HOST":80 2>/dev/null &
  FWD_PID=$!
  for _ in $(seq 50); do [ -S "$SOCK" ] && return 0; sleep 0.1; done
  die "socat forwarder did not start"
}

cleanup() {
  [ -n "$FWD_PID" ] && kill "$FWD_PID" 2>/dev/null
  rm -f "$SOCK"
  umount_all "$ROOT.build"
  umount_all "$ROOT"
  if [ "${KEEP:-0}" != 1 ] && [ -d "$ROOT" ] && [ -z "$(mounted_under "$ROOT")" ]; then
    rm -rf --one-file-system "$ROOT"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# in_root ROOT apt|noapt SCRIPT: SCRIPT runs in bash in the chroot, in a new
# network namespace holding only a loopback, with the apt forwarder or not.
in_root() {
  unshare --net -- /bin/bash -c '
    ip link set lo up
    fwd=""
    if [ "$1" = apt ]; then
      socat TCP-LISTEN:80,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:"$0" 2>/dev/null &
      fwd=$!
      sleep 0.3
    fi
    chroot "$2" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      TERM=dumb LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/bash -c "$3"
    rc=$?
    [ -n "$fwd" ] && kill $fwd 2>/dev/null
    exit $rc' "$SOCK" "$2" "$1" "$3"
}

prepare_apt() {
  rm -f "$1/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/debian.sources "$1/etc/apt/sources.list.d/" 2>/dev/null ||
    echo "deb $MIRROR $SUITE main" >"$1/etc/apt/sources.list"
  cp /etc/apt/apt.conf.d/* "$1/etc/apt/apt.conf.d/" 2>/dev/null
  grep -q " $MIRROR_HOST\$" "$1/etc/hosts" 2>/dev/null || echo "127.0.0.1 $MIRROR_HOST" >>"$1/etc/hosts"
}

build_base() {
  local b=$ROOT.build log=/tmp/luxd-pkg-root.debootstrap.log
  say "building $BASE_TAR: debootstrap --variant=minbase $SUITE $MIRROR, then $BASE_PKGS"
  wipe "$b"
  debootstrap --variant=minbase "$SUITE" "$b" "$MIRROR" >"$log" 2>&1 || die "debootstrap failed, see $log"
  prepare_apt "$b"
  mount_all "$b"
  start_forwarder
  in_root "$b" apt "apt-get update -qq && apt-get install -y -qq --no-install-recommends $BASE_PKGS && apt-get clean" \
    >>"$log" 2>&1 || die "installing $BASE_PKGS failed, see $log"
  kill "$FWD_PID" 2>/dev/null; FWD_PID=""
  umount_all "$b"
  [ -z "$(mounted_under "$b")" ] || die "mounts remain under $b"
  tar -C "$b" -cf "$BASE_TAR.tmp" . && mv "$BASE_TAR.tmp" "$BASE_TAR" || die "cannot write $BASE_TAR"
  rm -rf --one-file-system "$b"
}

[ -f "$BASE_TAR" ] || build_base
wipe "$ROOT"
mkdir -p "$ROOT" && tar -C "$ROOT" -xf "$BASE_TAR" || die "cannot extract $BASE_TAR"
prepare_apt "$ROOT"
cp "$DEB" "$ROOT/root/" || die "cannot copy $DEB"
mount_all "$ROOT"
start_forwarder
say "package $(basename "$DEB"), root $ROOT ($(cat "$ROOT/etc/debian_version"))"

# Shell functions for the scripts below: `run CMD` prints "# CMD", then its
# output, and fails the step if it fails; `fail` ends the step.
LIB='
cd /root
run() { echo "# $*"; "$@" 2>&1; local rc=$?; [ $rc -eq 0 ] || { echo "(exit $rc)"; exit 1; }; }
fail() { echo "FAILED: $*"; exit 1; }
# The file list of the root, less what apt and dpkg keep about themselves.
snapshot() {
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /run \
    -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache -o -path /var/log/apt \
    -o -path /root \) -prune -o -print | sort
}
'

step() {
  local name=$1 net=$2 script=$3
  echo
  say "== $name"
  in_root "$ROOT" "$net" "set -u; $LIB $script" || die "$name"
}

step "install with apt" apt '
snapshot >/root/before.list
run apt-get update -qq
run apt install -y ./luxd_*.deb
run dpkg -s luxd
run dpkg -L luxd
echo "# ls -l /etc/systemd/system/multi-user.target.wants/luxd.service"
ls -l /etc/systemd/system/multi-user.target.wants/luxd.service || fail "luxd.service is not enabled"
[ ! -e /etc/systemd/system/sockets.target.wants/luxd.socket ] || fail "luxd.socket is enabled"
run systemd-analyze verify /lib/systemd/system/luxd.service /lib/systemd/system/luxd.socket
echo "# man luxd.lua | head -n 8"; MANWIDTH=80 man luxd.lua 2>&1 | head -n 8
run ls -l /var/www/html/
'

step "start, serve, reload, reopen, stop as luxd.service does" noapt '
unit=/lib/systemd/system/luxd.service
key() { sed -n "s/^$1=//p" $unit | tail -1; }
user=$(key User) group=$(key Group) wd=$(key WorkingDirectory)
pre=$(key ExecStartPre) start=$(key ExecStart) reload=$(key ExecReload)
caps=$(key AmbientCapabilities | tr "A-Z" "a-z" | sed "s/cap_//g; s/ /,+/g")
echo "unit: User=$user Group=$group WorkingDirectory=$wd AmbientCapabilities=$caps"
echo "      ExecStartPre=$pre"
echo "      ExecStart=$start"
echo "      ExecReload=$reload"
# What systemd does before ExecStart: the *Directory= of the unit, owned by
# the user; the capabilities; the working directory.
for d in "/run/$(key RuntimeDirectory)" "/var/lib/$(key StateDirectory)"; do
  mkdir -p "$d" && chown "$user:$group" "$d"
done
# ExecStartPre=+ lines run as root (the log directory, when missing).
sed -n "s/^ExecStartPre=+//p" $unit | while read -r cmd; do echo "# (as root) $cmd"; eval "$cmd" || fail "ExecStartPre=+"; done
as_unit() {
  ( cd "$wd" && setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs \
      --inh-caps=-all,+$caps --ambient-caps=-all,+$caps --bounding-set=-all,+$caps -- "$@" )
}
echo "# (as $user) $pre"; as_unit $pre 2>&1 || fail "ExecStartPre"
echo "# (as $user) $start &"
as_unit $start >/tmp/luxd.stderr 2>&1 &
for i in $(seq 100); do [ -s /run/luxd/luxd.pid ] && curl -s -o /dev/null http://127.0.0.1/ && break; sleep 0.1; done
pid=$(cat /run/luxd/luxd.pid 2>/dev/null) || fail "no pid file /run/luxd/luxd.pid"
echo "# ps: pid $pid, user $(stat -c %U /proc/$pid), $(tr "\0" " " </proc/$pid/cmdline)"
[ "$(stat -c %U /proc/$pid)" = "$user" ] || fail "luxd does not run as $user"
run curl -sS -i http://127.0.0.1/
curl -s http://127.0.0.1/ | grep -q "Welcome to luxd" || fail "the welcome page is not served"
run curl -sS -o /dev/null -w "%{http_code} over IPv6\n" "http://[::1]/"
run ls -l /run/luxd /var/log/luxd
run cat /var/log/luxd/error.log

# A site added in conf.d/ and a reload as systemctl reload runs it.
mkdir -p /var/www/example.test && echo "example.test after the reload" >/var/www/example.test/index.html
printf "%s\n" "vhost \"example.test\" { root = \"/var/www/example.test\", index = { \"index.html\" } }" \
  >/etc/luxd/conf.d/example.test.lua
run cat /etc/luxd/conf.d/example.test.lua
echo "# (as $user) $reload"; as_unit $reload 2>&1; rc=$?; echo "(exit $rc)"
[ $rc -eq 0 ] || fail "the reload failed"
run curl -sS -H "Host: example.test" http://127.0.0.1/
[ "$(curl -s -H "Host: example.test" http://127.0.0.1/)" = "example.test after the reload" ] || fail "new site not served"

# A bad file: the reload fails with file:line, the server goes on serving.
echo "vhost \"bad.test\" { root = \"/var/www/html\", no_such_key = 1 }" >/etc/luxd/conf.d/zz-bad.lua
echo "# (as $user) $reload     (with conf.d/zz-bad.lua)"; as_unit $reload 2>&1; rc=$?; echo "(exit $rc)"
[ $rc -ne 0 ] || fail "a bad reload exited 0"
run curl -sS -o /dev/null -w "%{http_code} after the failed reload\n" -H "Host: example.test" http://127.0.0.1/
rm -f /etc/luxd/conf.d/zz-bad.lua

# What /etc/logrotate.d/luxd runs after rotating (as root).
run grep -A1 postrotate /etc/logrotate.d/luxd
mv /var/log/luxd/access.log /var/log/luxd/access.log.1
run luxd -s reopen -c /etc/luxd/luxd.lua
curl -s -o /dev/null http://127.0.0.1/reopened
for i in $(seq 50); do grep -q reopened /var/log/luxd/access.log 2>/dev/null && break; sleep 0.1; done
run cat /var/log/luxd/access.log
run tail -n 6 /var/log/luxd/error.log

# systemctl stop: KillSignal=SIGTERM to the main process, then the
# RuntimeDirectory goes.
echo "# kill -TERM $pid"; kill -TERM "$pid"
for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "luxd did not stop"
[ ! -e /run/luxd/luxd.pid ] || fail "the pid file is left after the stop"
echo "stopped; stderr:"; cat /tmp/luxd.stderr
rm -rf /run/luxd /tmp/luxd.stderr
rm -rf /var/www/example.test /etc/luxd/conf.d/example.test.lua
'

step "remove, then purge" apt '
run apt remove -y luxd
[ ! -e /usr/sbin/luxd ] || fail "/usr/sbin/luxd is left after remove"
run ls /etc/luxd          # conffiles stay until purge
run apt purge -y luxd
run apt autoremove --purge -y
snapshot >/root/after.list
echo "# diff before.list after.list    (every file of the root but dpkg/apt state, /tmp, /run)"
if diff /root/before.list /root/after.list; then echo "(no difference)"; else fail "files left or removed"; fi
for p in /etc/luxd /var/log/luxd /var/lib/luxd /run/luxd /var/www/html/index.luxd-debian.html \
         /etc/systemd/system/multi-user.target.wants/luxd.service /etc/logrotate.d/luxd; do
  [ ! -e "$p" ] || fail "$p is left"
done
echo "nothing of luxd is left"
dpkg -s luxd >/dev/null 2>&1 && fail "dpkg still knows luxd"
true
'

echo
echo "fresh-root: PASS ($(basename "$DEB"): apt install, systemd-analyze verify, start as the unit, serve, reload ok and failed, reopen, stop, remove, purge, nothing left)"
