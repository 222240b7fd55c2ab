#!/usr/bin/env bash
# Configures and builds tracerun into ./build (Ninja, ccache when present). Does not run anything.
# Environment:
#   BUILD_DIR (default build; build-torch with TRACERUN_TORCH), BUILD_TYPE (default RelWithDebInfo),
#   JOBS.
#   TRACERUN_TORCH=python3 (or a path to an interpreter: pip, conda, venv): build against the
#     PyTorch that interpreter imports (its bundled libtorch, CUDA and NCCL) instead of Debian's
#     libtorch. Its NCCL headers (the nvidia-nccl wheel) are preferred when present.
#   TRACERUN_DEPS_PREFIX=DIR: a folder where Debian .debs were unpacked with `dpkg -x` (SQLite
#     headers, CLI11, nlohmann-json, Gloo headers, Catch2); scripts/gpu-deps.sh makes .gpu-deps.
#   TRACERUN_CMAKE_ARGS: more cmake arguments, split on spaces (-DTRACERUN_WANT_VIEWER=OFF ...).
# With none of the three set it configures once and builds, exactly as CI expects.
# Targets: the arguments (or else TRACERUN_TARGETS, split on spaces) name the targets to build;
#   with none it builds everything (scripts/test.sh, CI). `bash scripts/build.sh tracerun_demo`
#   builds only what scripts/demo.sh runs, no tests and no benchmarks. Names: ninja -t targets.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_PY=${TRACERUN_TORCH:-}
DEPS_PREFIX=${TRACERUN_DEPS_PREFIX:-}
EXTRA_ARGS=${TRACERUN_CMAKE_ARGS:-}
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  # shellcheck disable=SC2206
  targets=(${TRACERUN_TARGETS:-})
fi
if [ -n "$TORCH_PY" ]; then
  BUILD_DIR=${BUILD_DIR:-build-torch}
else
  BUILD_DIR=${BUILD_DIR:-build}
fi
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
JOBS=${JOBS:-$(nproc)}
# ccache: hash paths relative to the checkout so fresh clones hit the cache, and accept the
# libtorch precompiled header (ccache refuses PCH users without these sloppiness flags).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}

args=(-DCMAKE_BUILD_TYPE="$BUILD_TYPE")
if [ -n "$TORCH_PY" ]; then
  command -v "$TORCH_PY" >/dev/null ||
    { echo "build.sh: TRACERUN_TORCH=$TORCH_PY: no such interpreter" >&2; exit 1; }
  # One line each: cmake prefix, version, CUDA version, C++11 ABI, NCCL include, interpreter.
  info=$("$TORCH_PY" - <<'EOF'
import os, sys
try:
    import torch, torch.utils
except Exception as e:
    print("import torch failed: %s" % e, file=sys.stderr)
    sys.exit(3)
nccl = ""
try:
    import nvidia.nccl  # the nvidia-nccl-cu* wheel: the NCCL a pip PyTorch loads
    for d in nvidia.nccl.__path__:
        if os.path.isfile(os.path.join(d, "include", "nccl.h")):
            nccl = os.path.join(d, "include")
            break
except Exception:
    pass
print(torch.utils.cmake_prefix_path)
print(torch.__version__)
print(torch.version.cuda or "")
print(int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))))
print(nccl)
print(sys.executable)
EOF
  ) || { echo "build.sh: TRACERUN_TORCH=$TORCH_PY: asking its PyTorch failed (see above)" >&2; exit 1; }
  { read -r torch_prefix; read -r torch_version; read -r torch_cuda; read -r torch_abi
    read -r nccl_include; read -r torch_python; } <<<"$info"
  echo "build.sh: PyTorch $torch_version of $torch_python, CUDA ${torch_cuda:-none}, C++11 ABI $torch_abi"
  if [ -f "$torch_prefix/Torch/TorchConfig.cmake" ]; then
    echo "build.sh: libtorch's CMake package: $torch_prefix/Torch"
    # A build folder configured for another libtorch keeps its cached Torch_DIR: refuse to mix.
    if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
      cached=$(sed -n 's/^Torch_DIR:PATH=//p' "$BUILD_DIR/CMakeCache.txt")
      if [ -n "$cached" ] && [ "$(realpath -m "$cached")" != "$(realpath -m "$torch_prefix/Torch")" ]; then
        echo "build.sh: $BUILD_DIR was configured for the libtorch in $cached; remove it or set BUILD_DIR" >&2
        exit 1
      fi
    fi
    args+=(-DCMAKE_PREFIX_PATH="$torch_prefix" -DTorch_DIR="$torch_prefix/Torch")
  else
    # Debian's python3-torch has no share/cmake; its libtorch's package (libtorch-dev) is found
    # in the system's CMake folders.
    echo "build.sh: $torch_prefix has no Torch package; using the libtorch CMake finds itself (Debian: libtorch-dev)"
  fi
  args+=(-DTRACERUN_PYTHON="$torch_python" -DTRACERUN_TORCH_CUDA_VERSION="$torch_cuda")
  [ -n "$nccl_include" ] && args+=(-DTRACERUN_NCCL_HINT="$nccl_include")
  # The CUDA toolkit PyTorch's CMake package looks for (CUDA_HOME wins, as for tracerun's own).
  [ -n "$torch_cuda" ] && [ -n "${CUDA_HOME:-}" ] && args+=(-DCUDAToolkit_ROOT="$CUDA_HOME")
fi
if [ -n "$DEPS_PREFIX" ]; then
  [ -d "$DEPS_PREFIX/usr/include" ] ||
    { echo "build.sh: TRACERUN_DEPS_PREFIX=$DEPS_PREFIX has no usr/include (make it with scripts/gpu-deps.sh)" >&2; exit 1; }
  args+=(-DTRACERUN_DEPS_PREFIX="$(realpath "$DEPS_PREFIX")")
fi
# shellcheck disable=SC2206
[ -n "$EXTRA_ARGS" ] && args+=($EXTRA_ARGS)

if [ -n "$TORCH_PY$DEPS_PREFIX$EXTRA_ARGS" ]; then
  # Settings given by the environment are applied on every run (configure is incremental).
  # CMake 4 deprecates --no-warn-unused-cli for -Wno-unused-cli, which 3.x accepts but ignores.
  unused_cli=--no-warn-unused-cli
  [ "$(cmake --version | sed -n 's/^cmake version \([0-9]*\).*/\1/p')" -ge 4 ] 2>/dev/null &&
    unused_cli=-Wno-unused-cli
  cmake -S . -B "$BUILD_DIR" -G Ninja "$unused_cli" "${args[@]}"
elif [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE"
fi
build_args=(--build "$BUILD_DIR" -j "$JOBS")
[ "${#targets[@]}" -gt 0 ] && build_args+=(--target "${targets[@]}")
# TRACERUN_KEEP_GOING=1: build every target that can be built when one fails (ninja -k 0), still
# exiting non-zero; scripts/gpu-check.sh uses it so one broken target does not cost a GPU session.
if [ "${TRACERUN_KEEP_GOING:-0}" = 1 ]; then
  cmake "${build_args[@]}" -- -k 0
else
  cmake "${build_args[@]}"
fi
