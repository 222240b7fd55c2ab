#!/usr/bin/env bash
# Builds tracerun and runs every test through CTest; exits non-zero on any failure.
# Environment: BUILD_DIR (default build), CTEST_JOBS (default: the number of cores), CTEST_ARGS
# (extra ctest arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
bash scripts/build.sh
echo "build finished in $(( $(date +%s) - start )) s"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# Every test in parallel, one job per core (CTEST_JOBS overrides). No test times the machine: the
# dry-run pipeline tests check the report against a brute force over the same trace and the
# closed forms against gpttrain's virtual clock (docs/trainer.md "Dry run"), so they pass whatever
# the load. The GPU tests skip here (exit 77); on a GPU gpu-check.sh runs them 3 at a time.
# getconf, not nproc: GNU nproc honours the OMP_NUM_THREADS=1 exported above and would say 1.
JOBS=${CTEST_JOBS:-$(getconf _NPROCESSORS_ONLN)}
cd "$BUILD_DIR"
status=0
ctest --output-on-failure --timeout 600 -j "$JOBS" ${CTEST_ARGS:-} || status=1
echo "tests (-j $JOBS) finished in $(( $(date +%s) - start )) s"
cd - >/dev/null
[ "$status" -eq 0 ] || { echo "tests failed (see above)"; exit 1; }
# The Debian package, installed and removed again (only as root, only where no tracerun package is
# installed already): docs/commands.md, "Installing".
if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' tracerun 2>/dev/null | grep -q "install ok"; then
  BUILD_DIR="$BUILD_DIR" bash scripts/package-deb.sh --check
fi
echo "tests finished in $(( $(date +%s) - start )) s in all"
