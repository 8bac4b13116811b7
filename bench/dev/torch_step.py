#!/usr/bin/python3
"""torch_step.py: PyTorch CPU training-step throughput of the same ViT, the
baseline bench_step is compared with (bench/dev/run_bench.sh runs both).

One step = forward + rel-L2 loss + backward + Adam update on ONE cached batch
(no data loading: the SYNTHETIC trial of benchy). Model, loss and optimizer are
those of tools/torch_reference.py, so both sides run the same math.

    /usr/bin/python3 bench/dev/torch_step.py [--config small] [--warmup 2] [--steps 5] [--key value ...]

Prints a human table and one machine line `torch_step samples_per_s=<x> ...`.
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import torch_reference as ref  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--yaml_config", default=os.path.join(ref.SOURCE_DIR, "scenarios", "vit.yaml"))
    p.add_argument("--config", default="small")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args, rest = p.parse_known_args()
    overrides = {}
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--skip_full":                # bench_step's own flags: ignored here
            i += 1
            continue
        if not a.startswith("--"):
            sys.exit(f"torch_step: unexpected argument '{a}' (want --key value)")
        if "=" in a:
            key, value = a[2:].split("=", 1)
            i += 1
        elif i + 1 < len(rest):
            key, value = a[2:], rest[i + 1]
            i += 2
        else:
            sys.exit(f"torch_step: flag {a} needs a value")
        if key not in ("full_steps", "sgemm_seconds", "ops_csv"):
            overrides[key] = value
    cfg = ref.load_config(args.yaml_config, args.config, overrides)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    model = ref.build_model(cfg)
    model.init_weights()
    B, (H, W) = cfg["global_batch_size"], cfg["img_size"]
    inp = torch.randn(B, cfg["n_in_channels"], H, W)
    tar = torch.randn(B, cfg["n_out_channels"], H, W)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = ref.rel_l2_loss(model(inp), tar)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    total = sum(times)
    sps = B * len(times) / total
    nparams = sum(q.numel() for q in model.parameters())
    print(f"# PyTorch {torch.__version__} CPU, {torch.get_num_threads()} threads, config {args.config}: "
          f"D={cfg['embed_dim']} depth={cfg['depth']} heads={cfg['num_heads']} p={cfg['patch_size']} "
          f"img={H}x{W} C={cfg['n_in_channels']} B={B} params={nparams}")
    print(f"# {'trial':>10} {'steps':>6} {'batch':>6} {'step_ms(mean)':>14} {'step_ms(min)':>13} {'samples/s':>10}")
    print(f"  {'SYNTHETIC':>10} {len(times):6d} {B:6d} {1e3 * total / len(times):14.1f} "
          f"{1e3 * min(times):13.1f} {sps:10.2f}")
    print(f"torch_step samples_per_s={sps:.4f} best_samples_per_s={B / min(times):.4f} "
          f"step_s={total / len(times):.6f} min_step_s={min(times):.6f} batch={B}")


if __name__ == "__main__":
    main()
