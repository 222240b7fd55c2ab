#!/usr/bin/env bash
# Fetches the Debian 12 packages a machine without a package archive (the GPU machine) lacks to
# build tracerun, and unpacks them into .gpu-deps/usr at the checkout's root, which then travels
# with the working tree. Run it on a Debian machine with apt (root not needed); build there with
#   TRACERUN_DEPS_PREFIX=.gpu-deps TRACERUN_TORCH=python3 bash scripts/build.sh
# Headers and CMake packages: libsqlite3.a and links to libraries outside the prefix are dropped
# (the machine's own libsqlite3.so.0 is linked instead).
# Only .gpu-deps/usr and .gpu-deps/debs.txt are replaced; anything else in .gpu-deps/ stays.
# Environment: GPU_DEPS_DIR (default .gpu-deps), GPU_DEPS_EXTRA (more package names).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the GPU machine lacks (NOTES.md, "The GPU machine"): SQLite's headers (libsqlite3.so.0 is
# there), CLI11, nlohmann-json, Gloo's headers (pip's PyTorch ships none; c10d's
# ProcessGroupGloo.hpp includes them) and Catch2 v2 for the tests.
PACKAGES=(libsqlite3-dev libcli11-dev nlohmann-json3-dev libgloo-dev catch2)
# shellcheck disable=SC2206
PACKAGES+=(${GPU_DEPS_EXTRA:-})
DEST=${GPU_DEPS_DIR:-.gpu-deps}

if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "gpu-deps: needs apt-get and dpkg (a Debian machine); run it there and copy $DEST/" >&2
  exit 1
fi
if [ "$(realpath -m "$DEST")" = / ]; then
  echo "gpu-deps: GPU_DEPS_DIR=$DEST: refusing to unpack into /" >&2
  exit 1
fi
for p in "${PACKAGES[@]}"; do
  apt-cache show "$p" >/dev/null 2>&1 ||
    { echo "gpu-deps: apt knows no package $p (run apt-get update first)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# (As root, apt warns that it downloads unsandboxed into a folder _apt cannot write: harmless.)
( cd "$work" && apt-get download -q "${PACKAGES[@]}" >"$work/apt.log" 2>&1 ) ||
  { cat "$work/apt.log" >&2; echo "gpu-deps: apt-get download failed (run apt-get update first)" >&2; exit 1; }

mkdir -p "$DEST"
rm -rf "${DEST:?}/usr" "${DEST:?}/debs.txt"
for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$DEST"
  # shellcheck disable=SC2016  # dpkg-deb's own ${Field} syntax
  dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >> "$DEST/debs.txt"
done
# Not needed to build, or would be picked over the machine's shared library: libsqlite3.a (Catch2's
# libCatch2WithMain.a stays: its CMake package checks that it exists), documentation, links whose
# target is not in the prefix (libsqlite3.so -> libsqlite3.so.0.8.6, libgloo.so -> libgloo.so.0).
find "$DEST/usr" -name 'libsqlite3*.a' -delete
rm -rf "$DEST/usr/share/doc" "$DEST/usr/share/man"
find "$DEST/usr" -xtype l -delete
# pkg-config files point at /usr; they are not used (CMake packages and plain paths are).
find "$DEST/usr" -name '*.pc' -delete
find "$DEST/usr" -depth -type d -empty -delete

for f in include/sqlite3.h include/CLI/CLI.hpp include/nlohmann/json.hpp include/gloo/config.h \
         lib/cmake/Catch2/Catch2Config.cmake; do
  if [ ! -f "$DEST/usr/$f" ]; then
    echo "gpu-deps: $DEST/usr/$f missing after unpacking (did a package's layout change?)" >&2
    exit 1
  fi
done
echo "gpu-deps: $(wc -l < "$DEST/debs.txt") packages in $DEST/usr ($(du -sh "$DEST/usr" | cut -f1)):"
sed 's/^/  /' "$DEST/debs.txt"
