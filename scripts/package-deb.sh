#!/usr/bin/env bash
# Builds the Debian package of tracerun (cpack -G DEB in build/) and, with --check, installs it
# with apt-get the way a user would, runs `tracerun --version` and `gpttrain --version` from
# /usr/bin, and removes it again. Needs root for --check. Prints the package's path.
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/build.sh >/dev/null
(cd "$BUILD_DIR" && rm -f tracerun_*.deb && cpack -G DEB >/dev/null)
deb=$(ls "$PWD/$BUILD_DIR"/tracerun_*.deb)
echo "package: $deb"
dpkg-deb -f "$deb" Version Depends
if [ "${1:-}" = "--check" ]; then
  if dpkg-query -W -f='${Status}' tracerun 2>/dev/null | grep -q "install ok installed"; then
    echo "package-deb: tracerun is already installed on this machine; not touching it" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$deb" >/dev/null
  trap 'apt-get purge -y -qq tracerun >/dev/null' EXIT
  /usr/bin/tracerun --version
  /usr/bin/gpttrain --version
  test -f /usr/lib/libtracerun.so
  test -f /usr/lib/cmake/tracerun/tracerunConfig.cmake
  echo "package-deb: installed, ran and removed $(basename "$deb")"
fi
