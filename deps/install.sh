#!/bin/sh
# Installs the Debian packages luxd builds and tests with, only those missing.
# Usage: deps/install.sh [build|test|bench|pkg]...   (default: build test)
set -eu
set -f # package lists are words, never file names to glob
here=$(dirname "$0")
groups=${*:-build test}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
# A line is a package, then optionally arch=A[,B...] (only there: Debian
# builds it for those alone) and unless=P (not where P, which it conflicts
# with, is installed: that is the machine owner's choice, not ours to
# replace); a # starts a comment. A package with a condition is optional:
# where the archive lacks it, it is left out (luxd builds without it), not
# the whole install refused. Read in this shell, not a pipeline's, so that
# a line it cannot read stops it; a last line without its newline and CRLF
# ends count.
cr=$(printf '\r')
want="" optional=""
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
        arch=*) case ",${c#arch=}," in *",$arch,"*) ;; *) ok=0 ;; esac ;;
        unless=*) ! installed "${c#unless=}" || ok=0 ;;
        *) echo "deps: $here/packages-$g.txt: unknown condition \"$c\" for $p" >&2; exit 1 ;;
      esac
    done
    if [ $ok = 1 ]; then want="$want $p"; fi
    if [ $# -gt 0 ]; then optional="$optional $p"; fi
  done < "$here/packages-$g.txt"
done
missing=""
for p in $want; do
  installed "$p" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet; update once, then install.
$SUDO apt-get update -qq
install=""
for p in $missing; do
  case " $optional " in
    *" $p "*)
      if ! apt-cache show "$p" >/dev/null 2>&1; then
        echo "deps: $p is not in this machine's archive; building without it" >&2
        continue
      fi ;;
  esac
  install="$install $p"
done
[ -z "$install" ] && exit 0
echo "deps: installing$install"
$SUDO apt-get install -y -qq --no-install-recommends $install
