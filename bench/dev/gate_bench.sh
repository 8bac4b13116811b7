#!/usr/bin/env bash
# How the CI gate (scripts/perf_ci.sh) decides on this machine: N gate runs
# of one mode on unchanged code and on a slower or heavier change, quiet and
# under one busy loop per CPU, with each run's exit status and time.
#
#   bench/dev/gate_bench.sh --mode counts|base|stored [--gates N] [--conditions quiet,loaded]
#                           [--change FLAGS | --changed_binary PATH] [--out DIR] [-- perf_ci flags...]
#
# The change is a config override every `vitbench run` of the changed side
# gets, through a wrapper around the binary (default --embed_dim 76: 34%
# more FLOPs a sample, about 25% lower throughput; for --counts pick one that
# adds a little work), or a binary built from changed code
# (--changed_binary: for --counts, a counting build whose step does a
# little more, such as a GELU backward pass over half its elements again,
# +1.9% instructions). Per mode:
#   counts  a counted-work baseline of the unchanged code is made first;
#           then each gate run counts the unchanged side and the changed one
#   base    perf_ci.sh --base HEAD, head the unchanged binary or the
#           changed one, base the unchanged one (VITBENCH_BASE: no rebuild)
#   stored  a stored baseline of the unchanged code is made first (on a
#           quiet machine, --noisy_baseline when it is not); the changed
#           side's compare accepts the changed key (--allow_different)
# Output: DIR/results.csv (condition,kind,gate,exit,seconds,last line) and
# DIR/table.md: per condition and kind, the exits counted (pass 0,
# regression 1, inconclusive 5, refresh 6, other), the median and largest
# time of a gate run. VITBENCH names the binary (default build/vitbench).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=
GATES=20
CONDITIONS=quiet,loaded
CHANGE="--embed_dim 76"
CHANGED_BIN=
OUT=
while [ $# -gt 0 ]; do
  case $1 in
    --mode) MODE=$2; shift 2 ;;
    --gates) GATES=$2; shift 2 ;;
    --conditions) CONDITIONS=$2; shift 2 ;;
    --change) CHANGE=$2; shift 2 ;;
    --changed_binary) CHANGED_BIN=$(readlink -f "$2"); CHANGE="(a binary: $2)"; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gate_bench: unknown flag $1" >&2; exit 2 ;;
  esac
done
case $MODE in counts | base | stored) ;; *) echo "gate_bench: --mode counts, base or stored" >&2; exit 2 ;; esac
case $GATES in '' | *[!0-9]* | 0) echo "gate_bench: --gates takes a whole number above 0" >&2; exit 2 ;; esac
VB=$(readlink -f "${VITBENCH:-build/vitbench}")
# --counts counts a counting build (perf_ci.sh --counts): VITBENCH_COUNTS, else build-counts/vitbench
[ "$MODE" != counts ] || VB=$(readlink -f "${VITBENCH_COUNTS:-build-counts/vitbench}")
[ -x "$VB" ] || { echo "gate_bench: no $VB: build first" >&2; exit 2; }
OUT=${OUT:-results/gate_bench_${MODE}_$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")

# the changed side: every run gets the change's flags
cat >"$OUT/changed_vitbench" <<WRAP
#!/usr/bin/env bash
if [ "\$1" = run ]; then shift; exec "$VB" run "\$@" $CHANGE; fi
exec "$VB" "\$@"
WRAP
chmod +x "$OUT/changed_vitbench"
[ -z "$CHANGED_BIN" ] || ln -sf "$CHANGED_BIN" "$OUT/changed_vitbench"
changed_key=$(sed -n 's/^--\([a-z_]*\).*/\1/p' <<<"$CHANGE")

# the bench's own background load (start_load, stop_load)
source bench/dev/lib/busy_load.sh # (the working directory is the checkout's root)

gate() { # kind condition k: one gate run, its line in results.csv
  local kind=$1 cond=$2 k=$3 head=$VB extra=() rc t0 t1 last
  shift 3 # the rest are perf_ci's own flags
  [ "$kind" = changed ] && head=$OUT/changed_vitbench
  case $MODE in
    counts) extra=(--counts) ;;
    base) extra=(--base HEAD) ;;
    stored) [ "$kind" = changed ] && extra=(--allow_different "$changed_key") ;;
  esac
  t0=$(date +%s.%N)
  set +e
  VITBENCH=$head VITBENCH_COUNTS=$head VITBENCH_BASE=$VB RESULTS=$OUT/runs BASELINES=$OUT/baselines HISTORY=$OUT/history \
    scripts/perf_ci.sh "${extra[@]}" "$@" >"$OUT/gate_${cond}_${kind}_$k.md" 2>/dev/null
  rc=$?
  set -e
  t1=$(date +%s.%N)
  last=$(grep '^perf_ci: exit' "$OUT/gate_${cond}_${kind}_$k.md" | tail -n 1 | tr ',"' ';')
  printf '%s,%s,%d,%d,%.1f,"%s"\n' "$cond" "$kind" "$k" "$rc" "$(echo "$t1 - $t0" | bc)" "$last" >>"$OUT/results.csv"
  tail -n 1 "$OUT/results.csv"
}

echo "condition,kind,gate,exit,seconds,last" >"$OUT/results.csv"
# the baselines of the unchanged code, made once before the gate runs
case $MODE in
  counts) VITBENCH_COUNTS=$VB RESULTS=$OUT/runs BASELINES=$OUT/baselines HISTORY=$OUT/history scripts/perf_ci.sh --counts --create_baseline \
            >"$OUT/baseline.md" 2>&1 ;;
  stored) VITBENCH=$VB RESULTS=$OUT/runs BASELINES=$OUT/baselines HISTORY=$OUT/history scripts/perf_ci.sh --create_baseline "$@" \
            >"$OUT/baseline.md" 2>&1 ||
          VITBENCH=$VB RESULTS=$OUT/runs BASELINES=$OUT/baselines HISTORY=$OUT/history scripts/perf_ci.sh --create_baseline --noisy_baseline \
            "$@" >"$OUT/baseline.md" 2>&1 ;;
esac
IFS=, read -r -a conds <<<"$CONDITIONS"
for cond in "${conds[@]}"; do
  case $cond in quiet) ;; loaded) start_load ;; *) echo "gate_bench: unknown condition $cond" >&2; exit 2 ;; esac
  for k in $(seq 1 "$GATES"); do
    for kind in $(printf '%s\n' unchanged changed | shuf); do gate "$kind" "$cond" "$k" "$@"; done
  done
  stop_load
done

python3 - "$OUT/results.csv" "$MODE" "$CHANGE" <<'PY' | tee "$OUT/table.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("mode %s; the change: %s\n" % (sys.argv[2], sys.argv[3]))
print("| condition | kind | gates | pass (0) | regression (1) | inconclusive (5) | refresh (6) | other | median s | max s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for cond in dict.fromkeys(r["condition"] for r in rows):
    for kind in ("unchanged", "changed"):
        rs = [r for r in rows if r["condition"] == cond and r["kind"] == kind]
        if not rs:
            continue
        c = lambda e: sum(r["exit"] == e for r in rs)
        other = len(rs) - sum(c(e) for e in ("0", "1", "5", "6"))
        t = [float(r["seconds"]) for r in rs]
        print("| %s | %s | %d | %d | %d | %d | %d | %d | %.0f | %.0f |" % (cond, kind, len(rs), c("0"), c("1"), c("5"),
              c("6"), other, statistics.median(t), max(t)))
PY
