#!/usr/bin/env bash
# Builds vitbench with AddressSanitizer + UndefinedBehaviorSanitizer and runs
# the whole test suite (unit and end-to-end) on the instrumented binaries:
#   scripts/sanitize.sh [gcc|clang] [ctest args...]    (default gcc)
# Build directory: build-asan-<cc> (RelWithDebInfo: -O2 -g). Any ASan error,
# UB or leak in vitbench fails the test that hit it. Leaks inside MPI and its
# runtime, which vitbench cannot free, are suppressed by tests/sanitize/lsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
cc="${1:-gcc}"
[ $# -gt 0 ] && shift
case "$cc" in gcc|clang) ;; *) echo "usage: scripts/sanitize.sh [gcc|clang] [ctest args...]" >&2; exit 2 ;; esac
./scripts/setup.sh --test
if ! command -v "$cc" >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev >/dev/null
fi
build="build-asan-$cc"
# no CUDA: the instrumented suite runs on the CPU, where CUDA tests only skip
CC="$cc" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVB_SANITIZE=address,undefined -DVB_CUDA=OFF >/dev/null
cmake --build "$build" -j2

supp="$PWD/tests/sanitize/lsan.supp"
# exitcode 23 for sanitizer reports: distinct from vitbench's own 1 and 2, so
# a test that expects exit 2 cannot mistake a report for a clean rejection.
# intercept_tls_get_addr=0: gcc 12's runtime records dynamic TLS blocks from
# __tls_get_addr and, for MPI's dlopen'ed plugins, can record a block's offset
# as its address; the leak check at exit then scans from address 0x3b78 and
# the tracer dies on SIGSEGV ("Tracer caught signal 11", exit 23) in MPI
# processes, depending on what ran before. Without it, glibc's TLS blocks are
# still malloc'ed chunks that the check reaches through each thread's static
# TLS, so no leak goes unseen; at worst one is reported that is not.
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:exitcode=23:abort_on_error=0:detect_stack_use_after_return=0:strict_string_checks=1:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=23"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0:exitcode=23"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# keep MPI and PMIx plugins loaded until exit, so their allocations have a module name
# the suppressions can match instead of <unknown module>
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
ctest --test-dir "$build" --output-on-failure --timeout 1800 "$@"
