#!/usr/bin/env bash
# Configures and builds vitbench into build/ (Release; BUILD_DIR overrides).
#   scripts/build.sh           everything: every target, the CUDA backend
#                              where the toolkit is found (test.sh)
#   scripts/build.sh --quick   what the quickstart runs: the vitbench target
#                              alone, the CUDA backend only where a GPU is
#                              visible (nvidia-smi lists one) or VB_CUDA=ON
#                              asks for it; a build directory configured
#                              before keeps its configuration
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
QUICK=0
case "${1:-}" in
  "") ;;
  --quick) QUICK=1 ;;
  *) echo "usage: scripts/build.sh [--quick]" >&2; exit 2 ;;
esac
JOBS=$(nproc)

if [ "$QUICK" = 0 ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j"$JOBS"
  exit 0
fi

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cuda=${VB_CUDA:-}
  if [ -z "$cuda" ]; then
    cuda=OFF
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then cuda=AUTO; fi
  fi
  echo "build: configuring $BUILD_DIR (Release, CUDA backend: $cuda; VB_CUDA=ON builds it anyway)"
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DVB_CUDA="$cuda" >/dev/null
fi
echo "build: compiling $BUILD_DIR/vitbench with $JOBS jobs"
cmake --build "$BUILD_DIR" -j"$JOBS" --target vitbench
