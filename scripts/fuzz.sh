#!/usr/bin/env bash
# Fuzzes vitbench's input parsers with libFuzzer (ASan + UBSan):
#   scripts/fuzz.sh [SECONDS]     each target for SECONDS (default 30)
#   FUZZ_SEED=N scripts/fuzz.sh   the same input sequence on every machine (CI:
#                                 a slower machine runs a prefix of it, so CI
#                                 cannot fail on a finding the same seed did
#                                 not already give here; a human run explores)
# Targets (tests/fuzz/fuzz_*.c): config, benchy, scenario, npy, csv, nsys, machine, reference,
# yaml (the loader's depth cap), trials (the trials.csv reader), import (vitbench import's readers).
# Seeds come from tests/fuzz/corpus/<target>/ (read only); what the fuzzer
# adds goes to build-fuzz/corpus/<target>/ and findings to build-fuzz/findings/.
# Exits non-zero if any target crashes, leaks, hangs or trips a sanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-30}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"

./scripts/setup.sh
# clang and its runtime (libFuzzer, ASan, UBSan) are needed only here.
need=()
for p in clang libclang-rt-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

CC=clang cmake -S . -B "$BUILD" -DVB_FUZZ=ON -DVB_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j2 --target fuzz_all

# Sanitizer reports must end the run; leaks are checked per input by libFuzzer.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
mkdir -p "$BUILD/findings"
fail=0
for src in tests/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c)
  [ "$t" = fuzz_util ] && continue
  name=${t#fuzz_}
  mkdir -p "$BUILD/corpus/$name"
  log="$BUILD/findings/$name.log"
  # close_fd_mask=3: the parsers' own stdout/stderr lines (one per rejected
  # input) would drown the log; libFuzzer keeps a copy of stderr for reports.
  if "$BUILD/$t" -max_total_time="$SECONDS_PER_TARGET" ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -timeout=10 -rss_limit_mb=2048 \
      -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$BUILD/findings/$name-" \
      "$BUILD/corpus/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $name: ok, ${runs:-?} inputs in ${SECONDS_PER_TARGET}s"
  else
    echo "fuzz: $name: FAILED (log $log, reproducer $BUILD/findings/$name-*)" >&2
    grep -m3 -E "ERROR|SUMMARY|runtime error" "$log" >&2 || true
    fail=1
  fi
done
exit $fail
