#!/bin/sh
# Installs the Debian packages luxd builds and tests with, only those missing.
# Usage: deps/install.sh [build|test|bench|pkg]...   (default: build test)
set -eu
here=$(dirname "$0")
groups=${*:-build test}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
# A line is a package, then optionally arch=A (only there: Debian builds
# it for A alone) and unless=P (not where P, which it conflicts with, is
# installed: that is the machine owner's choice, not ours to replace). Read
# in this shell, not a pipeline's: a line it cannot read stops it.
want=""
for g in $groups; do
  while read -r p rest; do
    case $p in '#'* | '') continue ;; esac
    ok=1
    for c in $rest; do
      case $c in
        arch=*) [ "${c#arch=}" = "$arch" ] || ok=0 ;;
        unless=*) ! installed "${c#unless=}" || ok=0 ;;
        *) echo "deps: $here/packages-$g.txt: unknown condition \"$c\" for $p" >&2; exit 1 ;;
      esac
    done
    [ $ok = 1 ] && want="$want $p"
  done < "$here/packages-$g.txt"
done
missing=""
for p in $want; do
  installed "$p" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet; update once, then install.
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
