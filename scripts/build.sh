#!/usr/bin/env bash
# Configures and builds tracerun into ./build (Ninja, ccache when present). Does not run anything.
# Environment: BUILD_DIR (default build), BUILD_TYPE (default RelWithDebInfo), JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc)}
# ccache: hash paths relative to the checkout so fresh clones hit the cache, and accept the
# libtorch precompiled header (ccache refuses PCH users without these sloppiness flags).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
