# busy_load.sh: the benches' own background load, sourced by the scripts in
# bench/dev that measure a condition "under one busy loop per CPU".
#
#   start_load [N]   N busy loops (default: one per CPU, nproc), then half a
#                    second for the scheduler to spread them
#   stop_load        ends them by pid and waits for them; also on EXIT
#
# Each loop is a Python `while True: pass`: pure CPU, no memory traffic, so
# what it takes from a run is CPU time alone, as a neighbour's job on a
# shared runner takes it.
LOADERS=()
stop_load() {
  local p
  for p in "${LOADERS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${LOADERS[@]}"; do wait "$p" 2>/dev/null || true; done
  LOADERS=()
}
trap stop_load EXIT
start_load() {
  local i
  for i in $(seq "${1:-$(nproc)}"); do
    python3 -c 'while True: pass' &
    LOADERS+=($!)
  done
  sleep 0.5
}
