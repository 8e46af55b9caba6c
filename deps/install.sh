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
# installed: that is the machine owner's choice, not ours to replace); a #
# starts a comment. Read in this shell, not a pipeline's, so that a line it
# cannot read stops it; a last line without its newline and CRLF ends count.
cr=$(printf '\r')
want=""
for g in $groups; do
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%"$cr"}
    line=${line%%#*}
    # shellcheck disable=SC2086 # split into package and conditions
    set -- $line
    [ $# -gt 0 ] || continue
    p=$1
    shift
    ok=1
    for c in "$@"; do
      case $c in
        arch=*) [ "${c#arch=}" = "$arch" ] || ok=0 ;;
        unless=*) ! installed "${c#unless=}" || ok=0 ;;
        *) echo "deps: $here/packages-$g.txt: unknown condition \"$c\" for $p" >&2; exit 1 ;;
      esac
    done
    if [ $ok = 1 ]; then want="$want $p"; fi
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
