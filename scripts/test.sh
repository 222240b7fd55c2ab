#!/usr/bin/env bash
# Builds tracerun and runs every test through CTest; exits non-zero on any failure.
# Environment: BUILD_DIR (default build), CTEST_ARGS (extra ctest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
bash scripts/build.sh
echo "build finished in $(( $(date +%s) - start )) s"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 ${CTEST_ARGS:-}
cd - >/dev/null
# The Debian package, installed and removed again (only as root, only where no tracerun package is
# installed already): docs/commands.md, "Installing".
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' tracerun 2>/dev/null | grep -q "install ok"; then
  BUILD_DIR="$BUILD_DIR" bash scripts/package-deb.sh --check
fi
echo "tests finished in $(( $(date +%s) - start )) s in all"
