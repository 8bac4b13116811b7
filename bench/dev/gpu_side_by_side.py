#!/usr/bin/env python3
"""gpu_side_by_side.py: vitbench's CUDA step and the tutorial's PyTorch step
on one GPU, alternated in one invocation, with the same batch size and the
same data placement, so that their ratio is measured rather than assembled
from two machines.

    gpu_side_by_side.py --vitbench BUILD/vitbench --data DIR --out DIR \\
        [--precisions bf16,tf32] [--placements resident,copy] [--torch eager,compile] \\
        [--rounds 3] [--steps 30] [--warmup 5] [--budget SECONDS]

DIR holds an ERA5-layout dataset at `base`'s shapes (train/, valid/,
stats/), e.g. the one scripts/gpu_check.sh generates. For each precision
and placement it runs `rounds` rounds of A B B': one vitbench run (a
SYNTHETIC warm-up trial, then timed SYNTHETIC trials of --vb_trial_steps
steps, `steps` in all; iterations.csv gives each step's time) and then, in this process, `steps`
timed steps of each PyTorch variant after `warmup` untimed ones (CUDA
events around each step, the host waiting for each). Both sides:

  precision bf16: vitbench --amp_mode bf16 --attention cudnn --enable_fused
                  true --enable_jit true; torch autocast bf16, SDPA pinned to
                  cuDNN, fused Adam
  precision tf32: vitbench --amp_mode none --tf32 true (its TF32 attention)
                  --enable_fused true --enable_jit true; torch float32 with
                  TF32 matmuls, SDPA pinned to the memory-efficient kernel
                  (cuDNN's has no float32), fused Adam
  placement resident: the batch stays on the device (vitbench
                  --synthetic_resident true)
  placement copy: every step copies its batch from pinned host memory and
                  waits for the copy (vitbench's data_loader_config pytorch,
                  torch's `.to(device)`)

torch.compile's compilation runs before the first round, off the clock. The
table gives each side's median step, samples/s and MFU (the model's FLOPs
per sample, from vitbench's summary.csv, over the GPU's dense peak for the
precision), and vitbench's speed over each torch variant: the ratio of the
median steps, the per-round ratios' range, and a 95% interval from a
bootstrap that resamples rounds and, within them, steps (so run-to-run
spread enters it). Files under --out: steps.csv (every timed step),
side_by_side.md (the table), vitbench run logs.
--budget stops starting rounds that would end past it (the table says how
many rounds each row has). VB_LD_LIBRARY_PATH, when set, is the
LD_LIBRARY_PATH of the vitbench runs alone (scripts/gpu_check.sh keeps
PyTorch's library search apart from the carried build's).
"""
import argparse
import csv
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PRECISIONS = {
    "bf16": {"vb": ["--amp_mode", "bf16", "--attention", "cudnn", "--enable_fused", "true", "--enable_jit", "true"],
             "amp": "bf16", "tf32": True, "sdpa": "cudnn", "peak": "bf16"},
    "tf32": {"vb": ["--amp_mode", "none", "--tf32", "true", "--enable_fused", "true", "--enable_jit", "true"],
             "amp": "none", "tf32": True, "sdpa": "efficient", "peak": "tf32"},
}
PLACEMENTS = {"resident": ["--synthetic_resident", "true"], "copy": []}


def dense_peak_tflops(name, prec):
    """The datasheet's dense peak (no sparsity) for a GPU name, as gpu_check.sh's table."""
    table = [("H100 NVL", (417.5, 835)), ("H100 PCIe", (378, 756.5)), ("H100", (494.7, 989.4)),
             ("H200", (494.7, 989.4)), ("A100", (156, 312))]
    for key, (tf32, bf16) in table:
        if key in name:
            return tf32 if prec == "tf32" else bf16
    return 0.0


def vitbench_steps(args, prec, place, rnd, log_dir):
    """One vitbench run: the timed SYNTHETIC trial's step seconds and its
    FLOPs per sample."""
    name = f"sbs_{prec}_{place}_{rnd}"
    benchy = os.path.join(args.out, "benchy_sbs.yaml")
    # benchy cuts a trial at the epoch's end: the steps come in trials of
    # --vb_trial_steps (a dataset of one epoch that long is enough)
    per = min(args.vb_trial_steps, args.steps)
    ntrials = -(-args.steps // per)
    with open(benchy, "w") as f:
        f.write("global: {report_freq: 5, exit_after_tests: True, profiler_mode: 'single', "
                "output_filename: 'benchy_output.json', output_dir: '', use_distributed_barrier: False}\n"
                "IO: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}\n"
                f"synthetic: {{run_benchmark: True, nbatches: {per}, ntrials: {ntrials}, nwarmup: 1}}\n"
                "full: {run_benchmark: False, nbatches: 1, ntrials: 1, nwarmup: 0}\n")
    d = args.data
    cmd = [args.vitbench, "run", "--config", "base", "--backend", "cuda", "--global_batch_size", str(args.batch),
           "--train_data_path", os.path.join(d, "train"), "--valid_data_path", os.path.join(d, "valid"),
           "--global_means_path", os.path.join(d, "stats", "global_means.npy"),
           "--global_stds_path", os.path.join(d, "stats", "global_stds.npy"),
           "--benchy_config", benchy, "--output_dir", os.path.join(args.out, "runs"), "--run_name", name,
           "--progress", "none"] + PRECISIONS[prec]["vb"] + PLACEMENTS[place]
    env = dict(os.environ)
    if "VB_LD_LIBRARY_PATH" in env:  # vitbench's library path, kept apart from PyTorch's
        env["LD_LIBRARY_PATH"] = env.pop("VB_LD_LIBRARY_PATH")
    with open(os.path.join(log_dir, name + ".log"), "w") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=600, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"vitbench {prec} {place} exited {r.returncode} (log {name}.log)")
    rd = os.path.join(args.out, "runs", name)
    steps = [float(x["seconds"]) for x in csv.DictReader(open(os.path.join(rd, "iterations.csv"), newline=""))
             if x["trial_type"] == "SYNTHETIC" and x["warmup"] == "0"]
    summ = [x for x in csv.DictReader(open(os.path.join(rd, "summary.csv"), newline=""))
            if x["trial_type"] == "SYNTHETIC"][0]
    flop_per_sample = float(summ["achieved_tflop_per_s"]) * 1e12 / float(summ["mean_samples_per_s"])
    if len(steps) != per * ntrials:
        raise RuntimeError(f"vitbench {prec} {place}: {len(steps)} timed steps in iterations.csv, want {per * ntrials} "
                           f"(is an epoch of the data shorter than {per} batches?)")
    return steps, flop_per_sample


def bootstrap_ratio(rounds_a, rounds_b, n=2000, seed=0):
    """95% interval of median(b) / median(a) (a: vitbench's steps, b: the
    other side's, so > 1 means vitbench is faster), resampling rounds with
    replacement and steps within each chosen round."""
    rng = random.Random(seed)
    k = len(rounds_a)
    out = []
    for _ in range(n):
        pa, pb = [], []
        for _ in range(k):
            i = rng.randrange(k)
            pa += rng.choices(rounds_a[i], k=len(rounds_a[i]))
            pb += rng.choices(rounds_b[i], k=len(rounds_b[i]))
        out.append(statistics.median(pb) / statistics.median(pa))
    out.sort()
    return out[int(0.025 * n)], out[int(0.975 * n) - 1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vitbench", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--precisions", default="bf16,tf32")
    p.add_argument("--placements", default="resident,copy")
    p.add_argument("--torch", default="eager,compile")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--vb_trial_steps", type=int, default=10,
                   help="vitbench's timed steps come in SYNTHETIC trials of this many (benchy stops a trial at "
                        "the epoch's end)")
    p.add_argument("--budget", type=float, default=0, help="seconds; 0 = none")
    args = p.parse_args()
    precs, places, variants = (args.precisions.split(","), args.placements.split(","), args.torch.split(","))
    for x, allowed, flag in ((precs, PRECISIONS, "--precisions"), (places, PLACEMENTS, "--placements"),
                             (variants, ("eager", "compile"), "--torch")):
        bad = [v for v in x if v not in allowed]
        if bad:
            sys.exit(f"gpu_side_by_side: {flag}: unknown {bad[0]!r} (one of {', '.join(allowed)})")
    if args.rounds < 1 or args.steps < 1 or args.vb_trial_steps < 1:
        sys.exit("gpu_side_by_side: --rounds, --steps and --vb_trial_steps must be at least 1")
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    t_start = time.time()

    import torch
    import torch_gpu_step as tgs
    ref = tgs.ref
    cfg = ref.load_config(os.path.join(ref.SOURCE_DIR, "scenarios", "vit.yaml"), "base",
                          {"global_batch_size": str(args.batch)})
    gpu = torch.cuda.get_device_name()
    print(f"gpu_side_by_side: {gpu}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"batch {args.batch}, {args.rounds} rounds x {args.steps} timed steps a side", flush=True)

    steps_csv = open(os.path.join(args.out, "steps.csv"), "w", newline="")
    sw = csv.writer(steps_csv)
    sw.writerow(["precision", "placement", "side", "round", "step", "seconds"])
    rows = []
    for prec in precs:
        P = PRECISIONS[prec]
        torch.backends.cuda.matmul.allow_tf32 = P["tf32"]
        torch.backends.cudnn.allow_tf32 = P["tf32"]
        torch_steps = {}
        for v in variants:
            t0 = time.time()
            fn, _ = tgs.make_step(cfg, P["amp"], True, v == "compile", P["sdpa"], "resident")
            for place in places:  # compiles (and warms) every placement's graph off the clock
                for _ in range(3):
                    fn(place)
            torch.cuda.synchronize()
            torch_steps[v] = fn
            print(f"gpu_side_by_side: torch {prec} {v} ready in {time.time() - t0:.1f} s", flush=True)
        for place in places:
            per = {"vitbench": []}
            per.update({f"torch_{v}": [] for v in variants})
            flop = 0.0
            round_s = []
            for rnd in range(args.rounds):
                if args.budget and round_s and time.time() - t_start + max(round_s) > args.budget:
                    print(f"gpu_side_by_side: {prec} {place}: budget: {rnd} of {args.rounds} rounds", flush=True)
                    break
                t0 = time.time()
                try:
                    vb, flop = vitbench_steps(args, prec, place, rnd, args.out)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"gpu_side_by_side: FAILED: {e}", flush=True)
                    break
                per["vitbench"].append(vb)
                for v in variants:
                    fn = torch_steps[v]
                    per[f"torch_{v}"].append(tgs.step_times(lambda: fn(place), args.warmup, args.steps))
                for side, rr in per.items():
                    for i, x in enumerate(rr[-1]):
                        sw.writerow([prec, place, side, rnd, i, f"{x:.6f}"])
                steps_csv.flush()
                round_s.append(time.time() - t0)
            if not per["vitbench"]:
                continue
            peak = dense_peak_tflops(gpu, P["peak"])
            vb_med = statistics.median([x for r in per["vitbench"] for x in r])
            for side, rr in per.items():
                med = statistics.median([x for r in rr for x in r])
                sps = args.batch / med
                mfu = 100 * sps * flop / 1e12 / peak if peak else float("nan")
                if side == "vitbench":
                    ratio = "-"
                else:
                    lo, hi = bootstrap_ratio(per["vitbench"], rr)
                    per_round = [statistics.median(b) / statistics.median(a) for a, b in zip(per["vitbench"], rr)]
                    ratio = (f"{med / vb_med:.3f} [{lo:.3f}, {hi:.3f}] (rounds {min(per_round):.3f}-"
                             f"{max(per_round):.3f})")
                rows.append((prec, place, side, len(rr), med * 1e3, sps, mfu, ratio))
    steps_csv.close()

    lines = [f"vitbench against PyTorch on one {gpu} (torch {torch.__version__}), `base`, batch {args.batch}, "
             f"alternated A B B' per round, {args.steps} timed steps a side a round after warm-up",
             "",
             "| precision | placement | side | rounds | median step ms | samples/s | MFU | vitbench speed / side [95% CI] (per-round range) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.1f} | {r[6]:.1f}% | {r[7]} |")
    text = "\n".join(lines)
    with open(os.path.join(args.out, "side_by_side.md"), "w") as f:
        f.write(text + "\n")
    print(text, flush=True)
    print(f"gpu_side_by_side: done in {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
