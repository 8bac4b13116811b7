#!/usr/bin/env bash
# Installs the Debian packages vitbench needs, only those that are missing.
# Safe to run repeatedly; needs root (or sudo) the first time on a fresh machine.
set -euo pipefail

PACKAGES=(
  cmake make gcc pkg-config
  g++                    # the tensor-core kernels' emulator test (C++)
  libhdf5-dev            # ERA5-layout data and checkpoints
  libopenblas-openmp-dev # CPU GEMM (OpenMP build: nests cleanly inside our parallel regions)
  libyaml-dev            # configs
  libopenmpi-dev openmpi-bin  # communicator (distributed runs)
  libcjson-dev           # run.json / benchy_output.json
  libcmocka-dev          # unit tests (run by ctest)
  gnuplot-nox            # plots (analysis)
  python3                # JSON/CSV checks in shell tests
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 2; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
