#!/usr/bin/env python3
"""torch_gpu_step.py: the tutorial's PyTorch training step on one GPU, the
reference vitbench's CUDA backend is compared with on the same machine.

The model is tools/torch_reference.py's ViT with the attention core replaced
by torch's fused scaled_dot_product_attention (as the tutorial's optimized
runs use). Each rung of the tutorial's ladder is a flag:

    torch_gpu_step.py --config base --global_batch_size 16 \
        [--amp_mode none|bf16|fp16] [--tf32 true|false] [--fused_adam] [--compile] \
        [--sdpa flash|cudnn|efficient|math|auto] [--data resident|copy] [--steps 20] [--warmup 5]
    torch_gpu_step.py --attention_only ...   # SDPA forward and forward+backward alone

--data resident (default) keeps the batch on the device; copy keeps it in
pinned host memory and copies it at the start of every step, waiting for
the copy (the tutorial's `inp.to(device)` on a DataLoader batch with
pin_memory), as vitbench's data_loader_config pytorch does.

Steps are timed with CUDA events after warm-up; prints one line per result
with samples/s (or ms and TFLOP/s for --attention_only).
bench/dev/gpu_side_by_side.py builds its PyTorch side from make_step.
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


def step_times(fn, warmup, reps):
    """Seconds of each of reps calls of fn after warmup calls, each between
    two CUDA events with the host waiting for the second."""
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
    return times


def time_events(fn, warmup, reps):
    times = sorted(step_times(fn, warmup, reps))
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


def make_step(cfg, amp_mode, fused_adam, compile_, sdpa, data):
    """One training step of the tutorial's model as a function, and the
    model: the batch resident on the device or copied from pinned host
    memory each step (data, which a call of the step may override), SDPA
    pinned to one backend (sdpa)."""
    torch.manual_seed(0)
    ref.Attention.forward = fused_attention_forward
    model = ref.build_model(cfg)
    model.init_weights()
    model = model.cuda()
    B, (H, W) = cfg["global_batch_size"], cfg["img_size"]
    inp = torch.randn(B, cfg["n_in_channels"], H, W, device="cuda")
    tar = torch.randn(B, cfg["n_out_channels"], H, W, device="cuda")
    inp_host, tar_host = inp.cpu().pin_memory(), tar.cpu().pin_memory()
    dtype = {"none": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[amp_mode]
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8, fused=fused_adam)
    scaler = torch.amp.GradScaler("cuda", enabled=amp_mode == "fp16")
    fwd = torch.compile(model) if compile_ else model

    def step(data=data):
        # a synchronous copy, as `.to(device)` without non_blocking
        x, y = (inp_host.to("cuda"), tar_host.to("cuda")) if data == "copy" else (inp, tar)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=amp_mode != "none"), sdpa_context(sdpa):
            loss = ref.rel_l2_loss(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step, model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--yaml_config", default=os.path.join(ref.SOURCE_DIR, "scenarios", "vit.yaml"))
    p.add_argument("--config", default="base")
    p.add_argument("--amp_mode", choices=("none", "bf16", "fp16"), default="bf16")
    p.add_argument("--tf32", choices=("true", "false"), default="true")
    p.add_argument("--fused_adam", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--sdpa", choices=("auto", "flash", "cudnn", "efficient", "math"), default="auto")
    p.add_argument("--data", choices=("resident", "copy"), default="resident")
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

    step, model = make_step(cfg, args.amp_mode, args.fused_adam, args.compile, args.sdpa, args.data)
    B = cfg["global_batch_size"]
    torch.cuda.reset_peak_memory_stats()
    med, best = time_events(step, args.warmup, args.steps)
    mem = torch.cuda.max_memory_allocated() / 2**30
    print(f"torch_gpu_step {torch.__version__} {torch.cuda.get_device_name()} config={args.config} B={B} "
          f"amp={args.amp_mode} tf32={args.tf32} fused_adam={int(args.fused_adam)} compile={int(args.compile)} "
          f"sdpa={args.sdpa} data={args.data}: median step {med * 1e3:.1f} ms, {B / med:.1f} samples/s "
          f"(best {B / best:.1f}), peak {mem:.1f} GiB")


if __name__ == "__main__":
    main()
