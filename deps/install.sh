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
# installed: that is the machine owner's choice, not ours to replace).
want=""
for g in $groups; do
  want="$want $(grep -v '^#' "$here/packages-$g.txt" | while read -r p rest; do
    [ -n "$p" ] || continue
    for c in $rest; do
      case $c in
        arch=*) [ "${c#arch=}" = "$arch" ] || continue 2 ;;
        unless=*) ! installed "${c#unless=}" || continue 2 ;;
        *) echo "deps: $g: unknown condition $c for $p" >&2; exit 1 ;;
      esac
    done
    echo "$p"
  done | tr '\n' ' ')"
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
