#!/usr/bin/env bash
# Installs the Debian packages vitbench needs, only those that are missing.
#   scripts/setup.sh          what building and running vitbench needs
#   scripts/setup.sh --test   that, and what only the test suite needs (Slurm, h5repack)
# Safe to run repeatedly; needs root (or sudo) the first time on a fresh machine.
set -euo pipefail

TEST=0
case "${1:-}" in
  "") ;;
  --test) TEST=1 ;;
  *) echo "usage: scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

PACKAGES=(
  cmake make gcc pkg-config
  g++                    # the tensor-core kernels' emulator test (C++)
  libhdf5-dev            # ERA5-layout data and checkpoints
  libopenblas-openmp-dev # CPU GEMM (OpenMP build: nests cleanly inside our parallel regions)
  libyaml-dev            # configs
  libopenmpi-dev openmpi-bin  # communicator (distributed runs)
  libcjson-dev           # run.json / benchy_output.json
  zlib1g-dev             # gzip'd PyTorch profiler traces (vitbench import)
  libcmocka-dev          # unit tests (run by ctest)
  gnuplot-nox            # plots (analysis)
  python3                # JSON/CSV checks in shell tests
)

# Only the tests use these: `vitbench sweep --launcher sbatch` needs srun in
# PATH, and test_slurm_real runs a one-node cluster of its own (munged,
# slurmctld, slurmd on random ports, stopped when it ends). Their packages
# would start and enable system daemons, which nobody asked for: see
# install_quietly.
TEST_PACKAGES=(
  slurm-wlm              # srun, sbatch, squeue, slurmctld, slurmd
  munge                  # Slurm's authentication (munged, mungekey)
  python3-venv           # test_hta: Holistic Trace Analysis from PyPI in a virtual environment
  hdf5-tools             # test_h5_compressed: h5repack makes gzip / shuffle compressed years
  valgrind               # test_counts and perf_ci.sh --counts: the step's counted work under callgrind
)
# the packages among these that ship a daemon, and the service each ships
SERVICES=(munge:munge slurmctld:slurmctld slurmd:slurmd)

missing_of() { # prints the packages among "$@" that are not installed
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

mapfile -t missing < <(missing_of "${PACKAGES[@]}")
missing_test=()
[ $TEST -eq 1 ] && mapfile -t missing_test < <(missing_of "${TEST_PACKAGES[@]}")

if [ ${#missing[@]} -eq 0 ] && [ ${#missing_test[@]} -eq 0 ]; then
  exit 0
fi

all=("${missing[@]}" "${missing_test[@]}")
echo "setup: installing ${all[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${all[*]}" >&2; exit 2; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# install_quietly PKG...: installs the packages without leaving a daemon of
# theirs running or enabled. Their maintainer scripts enable each service and
# start it through invoke-rc.d (or deb-systemd-invoke), both of which ask
# /usr/sbin/policy-rc.d first: for the install it answers 101 (action
# forbidden) unless the machine has a policy of its own, which is left alone.
# Enabling is not subject to that policy, so every service installed here is
# then disabled, and stopped in case a policy of the machine's let it start.
# Services of packages that were installed before are not touched.
install_quietly() {
  local policy=/usr/sbin/policy-rc.d ours=0 new_services=() entry svc
  for entry in "${SERVICES[@]}"; do
    [ -n "$(missing_of "${entry%%:*}")" ] && new_services+=("${entry#*:}")
  done
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/setup.sh: no service starts while it installs test packages\nexit 101\n' |
      $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    ours=1
    trap "$SUDO rm -f $policy" EXIT
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  if [ $ours -eq 1 ]; then
    $SUDO rm -f "$policy"
    trap - EXIT
  fi
  for svc in "${new_services[@]}"; do
    if [ -d /run/systemd/system ]; then
      $SUDO systemctl disable --now --quiet "$svc.service" || true
    else
      # no systemd running: stop what the init script may have started, then
      # remove the boot links of both init systems (systemctl edits them offline)
      if [ -x "/etc/init.d/$svc" ]; then
        $SUDO "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
        $SUDO update-rc.d "$svc" disable >/dev/null 2>&1 || true
      fi
      if command -v systemctl >/dev/null; then
        $SUDO systemctl disable --quiet "$svc.service" 2>/dev/null || true
      fi
    fi
  done
}
if [ ${#missing_test[@]} -gt 0 ]; then
  install_quietly "${missing_test[@]}"
fi
echo "setup: done"
