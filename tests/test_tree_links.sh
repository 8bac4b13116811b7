#!/usr/bin/env bash
# test_tree_links.sh <vitbench>: no writer leaves its results tree by a link.
# For every writer, a symbolic link planted where it writes a directory (to
# a directory outside the tree) stops it with exit 2 and one line naming the
# link, and nothing is written outside; a link planted at a file's name is
# replaced by the file (written by rename), its target left as it was:
#   1. report RUN: RUN/report -> elsewhere; report/ a file
#   2. report SWEEP (figures and --no_plots): SWEEP/report -> elsewhere, and
#      report/runs/<run>/ (a run's tables) -> elsewhere; a run read through
#      runs/<run> -> another run's directory is listed among the data problems
#   3. trace RUN: trace.json -> a victim file; --format kineto: RUN/kineto ->
#      elsewhere
#   4. compare BASE NEW: NEW/compare.json -> a victim file
#   5. model --sweep SWEEP: model.csv / model.md / model_fits.csv -> victims
#   6. nsys FILE: FILE_vitbench/ -> elsewhere
#   7. sweep --resume: its logs/ or runs/ -> elsewhere
# (scripts/perf_ci.sh's baseline directory: test_perf_ci.sh)
set -u

VB=${1:?usage: test_tree_links.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_tree_links: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_tree_links.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# a run directory with every file report, trace and compare read; a sweep of two
python3 - <<'EOF' || fail "fixtures"
import csv, json, os

def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)

def make_run(d, scale=1.0):
    os.makedirs(d)
    rid = os.path.basename(d)
    json.dump({"run_id": rid, "status": "completed", "command": "run", "backend": "cpu", "ranks": 1,
               "config": {"config": "tiny"}, "parallel": {"tp": 1, "cp": 1, "dp": 1},
               "fingerprint": {"machine_key": "00000000000000aa", "cpu_model": "Test CPU", "omp_threads": 1}},
              open(d + "/run.json", "w"))
    rows = []
    for typ, base in (("IO", 5000.0), ("SYNTHETIC", 120.0), ("FULL", 100.0)):
        for i in range(6):
            v = base * scale * (1 + 0.01 * i)
            rows.append([rid, typ, i, 0, 4, 8, 1, 0, 32 / v, v])
    write_csv(d + "/trials.csv", ["run_id", "trial_type", "trial_index", "warmup", "nbatches", "global_batch",
                                  "ranks", "rank", "seconds", "samples_per_s"], rows)
    write_csv(d + "/summary.csv", ["trial_type", "mean_samples_per_s", "ranks", "global_batch_size",
                                   "local_batch_size", "machine_key"],
              [["FULL", 100 * scale, 1, 8, 8, "00000000000000aa"]])
    write_csv(d + "/timeline.csv", ["rank", "lane", "kind", "name", "trial_type", "trial_index", "step", "start_s",
                                    "dur_s", "bytes", "flops", "bucket"],
              [[0, "main", "step", "step", "FULL", 0, 0, 0.0, 0.1, 0, 0, -1],
               [0, "main", "compute", "matmul_forward_qkv", "FULL", 0, 0, 0.0, 0.05, 4096, 1e9, -1]])

make_run("run")
make_run("new", 1.01)
os.makedirs("sweep/runs")
rows = []
for i, r in enumerate((1, 2)):
    rd = "runs/%03d_ranks=%d" % (i, r)
    make_run("sweep/" + rd, r)
    rows.append([i, rd, "completed", 0, 0, r, 1, "", "", "", "", "", ""])
write_csv("sweep/index.csv", ["run_index", "run_dir", "status", "exit_code", "repeat", "ranks", "threads_per_rank",
                              "full_samples_per_s", "full_std", "synthetic_samples_per_s", "synthetic_std",
                              "io_samples_per_s", "io_std"], rows)
json.dump({"name": "links", "command_line": "vitbench sweep links"}, open("sweep/sweep.json", "w"))
EOF

# expect_link_refused NEEDLE CMD...: exit 2, one line, naming NEEDLE and the link
expect_link_refused() {
    local needle=$1 out rc
    shift
    out=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2 (a directory link refused): $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "'$*' printed more than one line: $out"
    grep -q "^vitbench: error: .*$needle.* is a symbolic link" <<<"$out" || fail "'$*' does not name the link $needle: $out"
}
# nothing_in DIR: the directory the link pointed to is still empty
nothing_in() { [ -z "$(ls -A "$1")" ] || fail "written through the link into $1: $(ls -A "$1")"; }

# ---- 1. report RUN ----
mkdir elsewhere_report
ln -s "$TMP/elsewhere_report" run/report
expect_link_refused "run/report" report run --no_plots
expect_link_refused "run/report" report run
nothing_in elsewhere_report
rm run/report
touch run/report
out=$("$VB" report run --no_plots 2>&1 >/dev/null)
[ $? = 2 ] && grep -q "run/report is a regular file, not a directory" <<<"$out" || fail "report/ as a file: $out"
rm run/report
"$VB" report run --no_plots >/dev/null 2>&1 || fail "report of the run without the link"
[ -d run/report ] && [ ! -L run/report ] && [ -s run/report/report.html ] || fail "report/ not written as a directory"

# ---- 2. report SWEEP: its report/ and a run's tables in report/runs/<run>/ ----
mkdir elsewhere_sweep
ln -s "$TMP/elsewhere_sweep" sweep/report
expect_link_refused "sweep/report" report sweep --no_plots
expect_link_refused "sweep/report" report sweep
nothing_in elsewhere_sweep
rm sweep/report
mkdir -p sweep/report/runs
ln -s "$TMP/elsewhere_sweep" "sweep/report/runs/000_ranks=1"
expect_link_refused "sweep/report/runs/000_ranks=1" report sweep --no_plots
nothing_in elsewhere_sweep
rm "sweep/report/runs/000_ranks=1"
# a link one level up (report/runs -> elsewhere) is refused the same way
ln -s "$TMP/elsewhere_sweep" sweep/report/runs2 && rmdir sweep/report/runs && mv sweep/report/runs2 sweep/report/runs
expect_link_refused "sweep/report/runs" report sweep --no_plots
nothing_in elsewhere_sweep
rm sweep/report/runs
"$VB" report sweep --no_plots >/dev/null 2>&1 || fail "report of the sweep without the links"
[ -d "sweep/report/runs/000_ranks=1" ] || fail "the sweep report wrote no runs/<run>/ tables: $(ls -R sweep/report)"
# a run reached through a link (runs/<run> -> another run's directory): read, and listed as such
mv "sweep/runs/001_ranks=2" other_run && ln -s "$TMP/other_run" "sweep/runs/001_ranks=2"
"$VB" report sweep --no_plots >/dev/null 2>&1 || fail "report of a sweep with a linked run"
grep -q "sweep/runs/001_ranks=2: a symbolic link (to $TMP/other_run), not a directory the sweep wrote" \
    sweep/report/report.md || fail "the report does not note the linked run: $(grep -i link sweep/report/report.md)"
rm "sweep/runs/001_ranks=2" && mv other_run "sweep/runs/001_ranks=2"

# ---- 3. trace: trace.json by rename; kineto/ a real directory ----
echo precious >victim_trace
ln -s "$TMP/victim_trace" run/trace.json
"$VB" trace run >/dev/null 2>&1 || fail "trace with a link at trace.json"
[ "$(cat victim_trace)" = precious ] || fail "trace wrote through a link planted as trace.json"
[ -f run/trace.json ] && [ ! -L run/trace.json ] || fail "trace.json is still the planted link"
mkdir elsewhere_kineto
ln -s "$TMP/elsewhere_kineto" run/kineto
expect_link_refused "run/kineto" trace run --format kineto
nothing_in elsewhere_kineto
rm run/kineto
"$VB" trace run --format kineto >/dev/null 2>&1 || fail "kineto trace without the link"
[ -s run/kineto/rank0.pt.trace.json ] || fail "kineto trace not written"

# ---- 4. compare: NEW/compare.json by rename ----
echo precious >victim_compare
ln -s "$TMP/victim_compare" new/compare.json
"$VB" compare run new --metric FULL >/dev/null 2>&1
rc=$?
[ "$rc" = 0 ] || [ "$rc" = 1 ] || [ "$rc" = 5 ] || fail "compare exited $rc" # 5: one run a side decides nothing
[ "$(cat victim_compare)" = precious ] || fail "compare wrote through a link planted as compare.json"
[ -f new/compare.json ] && [ ! -L new/compare.json ] || fail "compare.json is still the planted link"
mkdir cmpout
"$VB" compare run new --metric FULL --output "$TMP/cmpout/c.json" >/dev/null 2>&1
[ -s cmpout/c.json ] || fail "compare --output did not write $TMP/cmpout/c.json: $(ls -A . cmpout)"

# ---- 5. model: its files in the sweep by rename ----
FIX=$SRC/tests/fixtures/model
cp -r "$FIX/sweep" msweep
for f in model.csv model.md model_fits.csv; do
    echo precious >"victim_$f"
    ln -s "$TMP/victim_$f" "msweep/$f"
done
"$VB" model --commbench "$FIX/commbench.csv" --run "$FIX/run1" --sweep msweep >/dev/null 2>&1 || fail "model with links"
for f in model.csv model.md model_fits.csv; do
    [ "$(cat "victim_$f")" = precious ] || fail "model wrote through a link planted as $f"
    [ -f "msweep/$f" ] && [ ! -L "msweep/$f" ] || fail "$f is still the planted link"
done

# ---- 6. nsys: <FILE>_vitbench/ created or a real directory ----
cp "$SRC/tests/fixtures/nsys/cuda_gpu_trace_new_us.csv" gputrace.csv
mkdir elsewhere_nsys
ln -s "$TMP/elsewhere_nsys" gputrace_vitbench
expect_link_refused "gputrace_vitbench" nsys gputrace.csv
nothing_in elsewhere_nsys
rm gputrace_vitbench
"$VB" nsys gputrace.csv >/dev/null 2>&1 || fail "nsys import without the link"
[ -s gputrace_vitbench/ops.csv ] || fail "nsys import wrote no ops.csv"

# ---- 7. sweep --resume: logs/ and runs/ are real directories ----
# a one-run sweep on a tiny dataset: a directory to resume
"$VB" datagen --output_dir data --years 1 --valid_years 1 --channels 4 --img_size 36,72 --samples_per_year 16 \
    --seed 0 >/dev/null 2>&1 || fail "datagen"
cat >links.yaml <<EOF
name: links
command: run
base:
  config: tiny
  train_data_path: $TMP/data/train
  valid_data_path: $TMP/data/valid
  global_means_path: $TMP/data/stats/global_means.npy
  global_stds_path: $TMP/data/stats/global_stds.npy
  benchy_config: $SRC/scenarios/benchy/quick.yaml
EOF
"$VB" sweep links.yaml --ranks 1 --output_dir sw --no_report >sweep.log 2>&1 || fail "sweep: $(cat sweep.log)"
S=$(ls -d sw/links_* 2>/dev/null) || fail "no sweep directory: $(cat sweep.log)"
mkdir elsewhere_logs
rm -rf "$S/logs" && ln -s "$TMP/elsewhere_logs" "$S/logs"
out=$("$VB" sweep --resume "$S" 2>&1 >/dev/null)
rc=$?
[ "$rc" = 2 ] || fail "sweep --resume with logs/ a link exited $rc: $out"
grep -q "logs is a symbolic link" <<<"$out" || fail "sweep --resume does not name the logs link: $out"
nothing_in elsewhere_logs
rm "$S/logs" && mkdir "$S/logs"
mkdir elsewhere_runs
mv "$S/runs" "$S/runs.real" && ln -s "$TMP/elsewhere_runs" "$S/runs"
out=$("$VB" sweep --resume "$S" --retry_failed 2>&1 >/dev/null)
[ $? = 2 ] && grep -q "runs is a symbolic link" <<<"$out" || fail "sweep --resume with runs/ a link: $out"
nothing_in elsewhere_runs
echo "test_tree_links: OK"
