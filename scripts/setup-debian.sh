#!/usr/bin/env bash
# Installs every Debian package tracerun builds, tests or demos with. Idempotent: run it as often
# as you like; it only calls apt-get when a package is missing. Does not build anything.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev libopenblas0-pthread python3-torch python3-torchvision python3-pil
  libsqlite3-dev sqlite3
  libgraphviz-dev
  libimgui-dev libglfw3-dev libstb-dev xvfb xauth libgl1-mesa-dri xdotool
  catch2 libcli11-dev nlohmann-json3-dev
  openmpi-bin  # a real mpirun for interpose_launcher_outer_tests (15 packages, ~5 MB of libraries)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
