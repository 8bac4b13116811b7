#!/usr/bin/env python3
"""torch_gpu_step.py: the tutorial's PyTorch training step on one GPU, the
reference vitbench's CUDA backend is compared with on the same machine.

The model is tools/torch_reference.py's ViT with the attention core replaced
by torch's fused scaled_dot_product_attention (as the tutorial's optimized
runs use). Each rung of the tutorial's ladder is a flag:

    torch_gpu_step.py --config base --global_batch_size 16 \
        [--amp_mode none|bf16|fp16] [--tf32 true|false] [--fused_adam] [--compile] \
        [--sdpa flash|cudnn|efficient|math|auto] [--steps 20] [--warmup 5]
    torch_gpu_step.py --attention_only ...   # SDPA forward and forward+backward alone

Steps are timed with CUDA events after warm-up; prints one line per result
with samples/s (or ms and TFLOP/s for --attention_only).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))
import torch_reference as ref  # noqa: E402


def sdpa_context(name):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    table = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    if name == "auto":
        return sdpa_kernel(list(table.values()))
    return sdpa_kernel([table[name]])


def fused_attention_forward(self, x):
    B, N, D = x.shape
    q = self.q(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
    k = self.k(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
    v = self.v(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v)
    return self.proj(out.transpose(1, 2).reshape(B, N, D))


def time_events(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def attention_only(args, cfg, dtype):
    B, (H, W), p = cfg["global_batch_size"], cfg["img_size"], cfg["patch_size"]
    N, NH = (H // p) * (W // p), cfg["num_heads"]
    HD = cfg["embed_dim"] // NH
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, NH, N, HD, device="cuda", dtype=dtype, generator=g).requires_grad_()
               for _ in range(3))
    do = torch.randn(B, NH, N, HD, device="cuda", dtype=dtype, generator=g)
    fl = 4.0 * B * NH * N * N * HD
    for name in ("flash", "cudnn", "efficient"):
        try:
            with sdpa_context(name):
                fwd = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731

                def fb():
                    o = F.scaled_dot_product_attention(q, k, v)
                    o.backward(do)
                tf, _ = time_events(fwd, 3, 10)
                tb, _ = time_events(fb, 3, 10)
        except RuntimeError as e:
            print(f"attention {name:9s} unavailable: {str(e).splitlines()[0][:120]}")
            continue
        # forward+backward counted as 3.5 forwards of products (2 forward, 5 backward)
        print(f"attention {name:9s} B={B} NH={NH} N={N} HD={HD} {str(dtype)[6:]}: "
              f"fwd {tf * 1e3:8.3f} ms {fl / tf / 1e12:6.1f} TFLOP/s   "
              f"fwd+bwd {tb * 1e3:8.3f} ms {3.5 * fl / tb / 1e12:6.1f} TFLOP/s")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--yaml_config", default=os.path.join(ref.SOURCE_DIR, "scenarios", "vit.yaml"))
    p.add_argument("--config", default="base")
    p.add_argument("--amp_mode", choices=("none", "bf16", "fp16"), default="bf16")
    p.add_argument("--tf32", choices=("true", "false"), default="true")
    p.add_argument("--fused_adam", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--sdpa", choices=("auto", "flash", "cudnn", "efficient", "math"), default="auto")
    p.add_argument("--attention_only", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    args, rest = p.parse_known_args()
    overrides = {}
    for i in range(0, len(rest) - 1, 2):
        if not rest[i].startswith("--"):
            sys.exit(f"torch_gpu_step: unexpected argument '{rest[i]}' (want --key value)")
        overrides[rest[i][2:]] = rest[i + 1]
    cfg = ref.load_config(args.yaml_config, args.config, overrides)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "true"
    torch.backends.cudnn.allow_tf32 = args.tf32 == "true"
    dtype = {"none": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.amp_mode]
    if args.attention_only:
        attention_only(args, cfg, torch.bfloat16 if dtype == torch.float32 else dtype)
        return

    torch.manual_seed(0)
    ref.Attention.forward = fused_attention_forward
    model = ref.build_model(cfg)
    model.init_weights()
    model = model.cuda()
    B, (H, W) = cfg["global_batch_size"], cfg["img_size"]
    inp = torch.randn(B, cfg["n_in_channels"], H, W, device="cuda")
    tar = torch.randn(B, cfg["n_out_channels"], H, W, device="cuda")
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8,
                           fused=args.fused_adam)
    scaler = torch.amp.GradScaler("cuda", enabled=args.amp_mode == "fp16")
    fwd = torch.compile(model) if args.compile else model

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=args.amp_mode != "none"), sdpa_context(args.sdpa):
            loss = ref.rel_l2_loss(fwd(inp), tar)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    torch.cuda.reset_peak_memory_stats()
    med, best = time_events(step, args.warmup, args.steps)
    mem = torch.cuda.max_memory_allocated() / 2**30
    print(f"torch_gpu_step {torch.__version__} {torch.cuda.get_device_name()} config={args.config} B={B} "
          f"amp={args.amp_mode} tf32={args.tf32} fused_adam={int(args.fused_adam)} compile={int(args.compile)} "
          f"sdpa={args.sdpa}: median step {med * 1e3:.1f} ms, {B / med:.1f} samples/s "
          f"(best {B / best:.1f}), peak {mem:.1f} GiB")


if __name__ == "__main__":
    main()
