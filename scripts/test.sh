#!/usr/bin/env bash
# The test command: installs what is missing (the test-only packages too),
# builds, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
./scripts/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 900 "$@"
