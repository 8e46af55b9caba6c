#!/bin/sh
# Installs the Debian packages luxd builds and tests with, only those missing.
# Usage: deps/install.sh [build|test|bench|pkg]...   (default: build test)
set -eu
here=$(dirname "$0")
groups=${*:-build test}
want=""
for g in $groups; do
  want="$want $(grep -v '^#' "$here/packages-$g.txt" | tr '\n' ' ')"
done
# A name ending in "?" is optional: installed where the architecture's
# archive has it (libhyperscan-dev: amd64 only), skipped elsewhere.
missing=""
for p in $want; do
  dpkg-query -W -f='${Status}' "${p%\?}" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet; update once, then install.
$SUDO apt-get update -qq
install=""
for p in $missing; do
  case $p in
    *\?)
      if apt-cache show --no-all-versions "${p%\?}" >/dev/null 2>&1; then
        install="$install ${p%\?}"
      else
        echo "deps: ${p%\?} is not in this architecture's archive; building without it"
      fi
      ;;
    *) install="$install $p" ;;
  esac
done
[ -z "$install" ] && exit 0
$SUDO apt-get install -y -qq --no-install-recommends $install
