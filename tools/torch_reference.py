#!/usr/bin/python3
"""torch_reference.py: an independent PyTorch implementation of the tutorial
ViT trainer (NERSC SC23 "Deep Learning at Scale": networks/vit.py, train.py,
config/ViT.yaml), used to make the golden files vitbench is checked against
and as the PyTorch side of the benchmark (bench/dev/torch_step.py imports VisionTransformer).

Written from the spec, not from vitbench's C code, so a bug has to be made
twice to go unnoticed. Run it with Debian's /usr/bin/python3 (PyTorch 1.13 CPU,
numpy, h5py, yaml; --amp_mode fp8 needs torch >= 2.1); nothing in CI needs it.

    torch_reference.py init  --out tiny_init.h5 --config tiny [--seed S]
    torch_reference.py train --init tiny_init.h5 --data DIR --config tiny --steps 20 \
                             --out losses.csv [--num_iters 20] [--global_batch_size B]
    torch_reference.py grads --init tiny_init.h5 --data DIR --config tiny --out grads.h5

`train --amp_mode fp8` trains with Transformer Engine's delayed-scaling FP8
recipe (DelayedScaling, Format.HYBRID) emulated in float32 with PyTorch's
own torch.float8_e4m3fn / torch.float8_e5m2 casts (torch >= 2.1): every
nn.Linear and the patch-embedding conv read E4M3 inputs and weights, their
output gradients are cast to E5M2, each tensor's scale comes from its amax
history (--fp8_amax_history_len, --fp8_amax_compute_algo, --fp8_margin).

`grads` writes the first batch's inputs, prediction, loss and every gradient
(same keys as the checkpoint) for debugging a mismatch tensor by tensor.
Every other `--key value` is a config override, as in vitbench.
"""
import argparse
import glob
import math
import os
import sys
import types

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Keys this script reads from the YAML (others are accepted and ignored).
INT_KEYS = ("embed_dim", "depth", "patch_size", "num_heads", "n_in_channels", "n_out_channels",
            "dt", "global_batch_size", "num_iters", "warmup", "limit_nsamples")
FLOAT_KEYS = ("lr", "dropout")
STR_KEYS = ("lr_schedule",)


# ----------------------------------------------------------------------------
# config

def load_config(yaml_path, name, overrides):
    with open(yaml_path) as f:
        doc = yaml.safe_load(f)   # safe_load resolves anchors and `<<` merges
    if name not in doc:
        sys.exit(f"torch_reference: config '{name}' not in {yaml_path}")
    cfg = dict(doc[name])
    for k, v in overrides.items():
        cfg[k] = v
    out = {}
    for k in INT_KEYS:
        v = cfg.get(k)
        out[k] = 0 if v in (None, "None", "none") else int(v)
    for k in FLOAT_KEYS:
        out[k] = float(cfg.get(k, 0.0))
    for k in STR_KEYS:
        out[k] = str(cfg.get(k, "cosine"))
    img = cfg["img_size"]
    if isinstance(img, str):
        img = [int(s) for s in img.split(",")]
    out["img_size"] = [int(img[0]), int(img[1])]
    if out["dropout"] != 0.0:
        sys.exit("torch_reference: dropout must be 0 (the reference has no dropout)")
    return out


def split_args(argv):
    """argparse for our own flags; every other --key value is a config override."""
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=("init", "train", "grads"))
    p.add_argument("--yaml_config", default=os.path.join(SOURCE_DIR, "scenarios", "vit.yaml"))
    p.add_argument("--config", default="tiny")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init")
    p.add_argument("--data")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="float64 only to measure how much float32 rounding moves the losses")
    p.add_argument("--amp_mode", choices=("none", "fp8"), default="none",
                   help="fp8: Transformer Engine's delayed scaling, emulated in float32 (train only)")
    p.add_argument("--fp8_amax_history_len", type=int, default=1024)
    p.add_argument("--fp8_amax_compute_algo", choices=("max", "most_recent"), default="max")
    p.add_argument("--fp8_margin", type=int, default=0)
    args, rest = p.parse_known_args(argv)
    overrides = {}
    i = 0
    while i < len(rest):
        a = rest[i]
        if not a.startswith("--"):
            sys.exit(f"torch_reference: unexpected argument '{a}'")
        if "=" in a:
            k, v = a[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(rest):
                sys.exit(f"torch_reference: flag {a} needs a value")
            k, v = a[2:], rest[i + 1]
            i += 2
        overrides[k] = v
    return args, overrides


# ----------------------------------------------------------------------------
# model

class PatchEmbed(nn.Module):
    def __init__(self, cin, dim, p):
        super().__init__()
        self.proj = nn.Conv2d(cin, dim, kernel_size=p, stride=p, bias=True)

    def forward(self, x):
        x = self.proj(x)                       # [B, D, H/p, W/p]
        return x.flatten(2).transpose(1, 2)    # [B, N, D], tokens row-major over (H/p, W/p)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.hd = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, D = x.shape
        # [B, N, D] -> [B, heads, N, hd]; head h = columns [h*hd, (h+1)*hd)
        q = self.q(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
        k = self.k(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
        v = self.v(x).reshape(B, N, self.heads, self.hd).transpose(1, 2)
        # spelled out (no fused SDPA) so the math is exactly softmax(q k^T / sqrt(hd)) v
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        att = att.softmax(dim=-1)
        out = (att @ v).transpose(1, 2).reshape(B, N, D)
        return self.proj(out)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))   # exact erf GELU (approximate='none')


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, img_size, patch, cin, cout, dim, depth, heads):
        super().__init__()
        self.h, self.w = img_size
        self.p = patch
        self.cout = cout
        ntok = (self.h // patch) * (self.w // patch)
        self.patch_embed = PatchEmbed(cin, dim, patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, ntok, dim))
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, cout * patch * patch, bias=False)

    def init_weights(self):
        # the tutorial's init (timm style): trunc_normal(std .02, bounds +-2) for
        # Linear / conv weights and pos_embed, zero biases, LayerNorm (1, 0)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(mod.weight, std=0.02)
                if mod.bias is not None:
                    nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.LayerNorm):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)

    def forward(self, x):
        B = x.shape[0]
        x = self.patch_embed(x) + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        x = self.head(self.norm(x))            # [B, N, Cout*p*p]
        hp, wp, p = self.h // self.p, self.w // self.p, self.p
        x = x.reshape(B, hp, wp, p, p, self.cout)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(B, self.cout, self.h, self.w)


def build_model(cfg):
    return VisionTransformer(cfg["img_size"], cfg["patch_size"], cfg["n_in_channels"],
                             cfg["n_out_channels"], cfg["embed_dim"], cfg["depth"],
                             cfg["num_heads"])


def rel_l2_loss(pred, tar):
    B = pred.shape[0]
    diff = torch.norm(pred.reshape(B, -1) - tar.reshape(B, -1), 2, dim=1)
    ref = torch.norm(tar.reshape(B, -1), 2, dim=1)
    return torch.mean(diff / ref)


def lr_factor(cfg, t):
    """Multiplier of lr for the update at 0-based iteration t."""
    if cfg["lr_schedule"] == "constant":
        return 1.0
    cos = 0.5 * (1.0 + math.cos(math.pi * t / cfg["num_iters"]))
    w = cfg["warmup"]
    return min((t + 1) / w, cos) if w > 0 else cos


# ----------------------------------------------------------------------------
# FP8 with delayed scaling (Transformer Engine's DelayedScaling, Format.HYBRID),
# written from TE's documentation: a GEMM's input and weight are cast to
# E4M3 and the gradient of its output to E5M2, each multiplied by its own
# per-tensor scale first; the GEMM then runs on the dequantised values
# (q / scale) in float32. The bias and its gradient stay float32 (the bias
# gradient is summed from the unquantised output gradient). A step uses the
# scales computed before it; each cast records the unscaled tensor's amax into
# slot 0 of its history, and after the step every scale is updated from its
# history and the history rolled, as TE's amax_and_scale_update.

FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
FP8_DTYPE = {}


def fp8_qdq(x, scale, fmt):
    """x * scale cast to FP8 (saturating: the cast alone does not), back to x's dtype, / scale."""
    if not FP8_DTYPE:
        if not hasattr(torch, "float8_e4m3fn"):
            sys.exit(f"torch_reference: --amp_mode fp8 needs torch >= 2.1 (float8 dtypes), this is {torch.__version__}")
        FP8_DTYPE.update(e4m3=torch.float8_e4m3fn, e5m2=torch.float8_e5m2)
    m = FP8_MAX[fmt]
    y = (x * scale).clamp(-m, m)            # clamp keeps NaN
    return y.to(FP8_DTYPE[fmt]).to(x.dtype) / scale


class Fp8Meta:
    """One tensor's scale (1 at the start) and amax history."""

    def __init__(self, fmt, history_len):
        self.fmt = fmt
        self.scale = torch.tensor(1.0, dtype=torch.float32)
        self.history = torch.zeros(history_len, dtype=torch.float32)

    def cast(self, x):
        self.history[0] = x.detach().abs().max().to(torch.float32)   # NaN propagates
        return fp8_qdq(x, self.scale.to(x.dtype), self.fmt)

    def update(self, algo, margin):
        amax = self.history.max() if algo == "max" else self.history[0]
        sf = (FP8_MAX[self.fmt] / amax) / (2.0 ** margin)
        sf = torch.where(amax > 0.0, sf, self.scale)
        sf = torch.where(torch.isfinite(amax), sf, self.scale)
        # a subnormal amax would give an infinite scale: the largest float
        sf = torch.where(torch.isinf(sf), torch.tensor(torch.finfo(torch.float32).max), sf)
        self.scale = sf
        self.history = torch.roll(self.history, -1, 0)
        self.history[0] = 0.0


class Fp8LinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, metas):
        mx, mw, mg = metas
        xq, wq = mx.cast(x), mw.cast(w)
        ctx.save_for_backward(xq, wq)
        ctx.mg, ctx.has_bias = mg, b is not None
        return F.linear(xq, wq, b)

    @staticmethod
    def backward(ctx, gy):
        xq, wq = ctx.saved_tensors
        gq = ctx.mg.cast(gy)
        oc, c = wq.shape
        gx = gq @ wq
        gw = gq.reshape(-1, oc).t() @ xq.reshape(-1, c)
        gb = gy.reshape(-1, oc).sum(0) if ctx.has_bias else None
        return gx, gw, gb, None


class Fp8PatchConvFn(torch.autograd.Function):
    """Conv2d with kernel = stride = p: a GEMM over the patches, so the same recipe."""

    @staticmethod
    def forward(ctx, x, w, b, p, metas):
        mx, mw, mg = metas
        xq, wq = mx.cast(x), mw.cast(w)
        ctx.save_for_backward(xq, wq)
        ctx.mg, ctx.p = mg, p
        return F.conv2d(xq, wq, b, stride=p)

    @staticmethod
    def backward(ctx, gy):
        xq, wq = ctx.saved_tensors
        gq = ctx.mg.cast(gy)
        gw = torch.nn.grad.conv2d_weight(xq, wq.shape, gq, stride=ctx.p)
        return None, gw, gy.sum((0, 2, 3)), None, None   # the image needs no gradient


def enable_fp8(model, history_len):
    """Routes every Linear and the patch-embedding conv through the recipe; returns the metas."""
    metas = []
    for mod in model.modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            mod.fp8 = (Fp8Meta("e4m3", history_len), Fp8Meta("e4m3", history_len), Fp8Meta("e5m2", history_len))
            metas.extend(mod.fp8)
            if isinstance(mod, nn.Linear):
                mod.forward = types.MethodType(lambda self, x: Fp8LinearFn.apply(x, self.weight, self.bias, self.fp8), mod)
            else:
                mod.forward = types.MethodType(
                    lambda self, x: Fp8PatchConvFn.apply(x, self.weight, self.bias, self.stride[0], self.fp8), mod)
    return metas


# ----------------------------------------------------------------------------
# checkpoint (HDF5: one dataset per state_dict key at the root)

def save_checkpoint(model, path):
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        for k, v in model.state_dict().items():
            f.create_dataset(k, data=v.detach().to(torch.float32).cpu().numpy())
    os.replace(tmp, path)


def load_checkpoint(model, path):
    sd = model.state_dict()
    with h5py.File(path, "r") as f:
        keys = [k for k in f.keys() if k not in ("optimizer", "fp8")]
        missing = set(sd) - set(keys)
        extra = set(keys) - set(sd)
        if missing or extra:
            sys.exit(f"torch_reference: {path}: missing {sorted(missing)} unexpected {sorted(extra)}")
        new = {}
        for k in sd:
            a = f[k][...]
            if tuple(a.shape) != tuple(sd[k].shape):
                sys.exit(f"torch_reference: {path}: {k} has shape {a.shape}, model wants {tuple(sd[k].shape)}")
            new[k] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(sd[k].dtype)
    model.load_state_dict(new)


# ----------------------------------------------------------------------------
# data: the tutorial's ERA5 layout, read the simple way

class Era5:
    def __init__(self, data_dir, cfg, dtype):
        self.files = sorted(glob.glob(os.path.join(data_dir, "train", "*.h5")))
        if not self.files:
            sys.exit(f"torch_reference: no *.h5 in {data_dir}/train")
        self.h5 = [h5py.File(p, "r") for p in self.files]
        self.T = self.h5[0]["fields"].shape[0]
        self.dt = cfg["dt"]
        self.cin, self.cout = cfg["n_in_channels"], cfg["n_out_channels"]
        self.H, self.W = cfg["img_size"]
        means = np.load(os.path.join(data_dir, "stats", "global_means.npy")).astype(np.float32)
        stds = np.load(os.path.join(data_dir, "stats", "global_stds.npy")).astype(np.float32)
        self.means, self.stds = means.reshape(1, -1, 1, 1), stds.reshape(1, -1, 1, 1)
        self.n = len(self.files) * self.T
        if cfg["limit_nsamples"] > 0:
            self.n = min(self.n, cfg["limit_nsamples"])
        self.dtype = dtype

    def sample(self, i):
        y, l = divmod(i, self.T)
        l = l % (self.T - self.dt)
        if l < self.dt:
            l += self.dt
        f = self.h5[y]["fields"]
        inp = f[l, :self.cin, :self.H, :self.W].astype(np.float32)
        tar = f[l + self.dt, :self.cout, :self.H, :self.W].astype(np.float32)
        inp = (inp - self.means[0, :self.cin]) / self.stds[0, :self.cin]
        tar = (tar - self.means[0, :self.cout]) / self.stds[0, :self.cout]
        return inp, tar

    def batch(self, step, B):
        """Batch `step` of the unshuffled, drop_last stream that wraps into the next epoch."""
        per_epoch = self.n // B
        if per_epoch == 0:
            sys.exit(f"torch_reference: {self.n} samples < batch {B}")
        k = step % per_epoch
        xs, ys = zip(*(self.sample(k * B + j) for j in range(B)))
        return (torch.from_numpy(np.stack(xs)).to(self.dtype),
                torch.from_numpy(np.stack(ys)).to(self.dtype))


# ----------------------------------------------------------------------------

def setup_torch():
    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)


def cmd_init(args, cfg):
    torch.manual_seed(args.seed)
    model = build_model(cfg)
    model.init_weights()
    save_checkpoint(model, args.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"torch_reference: wrote {args.out} ({n} parameters)")


def cmd_train(args, cfg):
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    model = build_model(cfg).to(dtype)
    load_checkpoint(model, args.init)
    data = Era5(args.data, cfg, dtype)
    metas = []
    if args.amp_mode == "fp8":
        if dtype != torch.float32:
            sys.exit("torch_reference: --amp_mode fp8 emulates its GEMMs in float32 (use --dtype float32)")
        metas = enable_fp8(model, args.fp8_amax_history_len)
    B = cfg["global_batch_size"]
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8,
                           weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: lr_factor(cfg, t))
    rows = []
    for step in range(args.steps):
        inp, tar = data.batch(step, B)
        lr = opt.param_groups[0]["lr"]          # the lr this step's update uses
        opt.zero_grad(set_to_none=False)
        loss = rel_l2_loss(model(inp), tar)
        loss.backward()
        for m in metas:                         # delayed scaling: the next step's scales
            m.update(args.fp8_amax_compute_algo, args.fp8_margin)
        opt.step()
        sched.step()
        rows.append((step, loss.item(), lr))
        print(f"step {step:4d}  loss {loss.item():.9g}  lr {lr:.6g}", flush=True)
    with open(args.out, "w") as f:
        f.write("step,loss,lr\n")
        for s, l, r in rows:
            f.write(f"{s},{l:.9g},{r:.9g}\n")


def cmd_grads(args, cfg):
    model = build_model(cfg)
    load_checkpoint(model, args.init)
    data = Era5(args.data, cfg, torch.float32)
    inp, tar = data.batch(0, cfg["global_batch_size"])
    pred = model(inp)
    loss = rel_l2_loss(pred, tar)
    loss.backward()
    with h5py.File(args.out, "w") as f:
        f["inp"], f["tar"], f["pred"] = inp.numpy(), tar.numpy(), pred.detach().numpy()
        f["loss"] = np.float32(loss.item())
        g = f.create_group("grads")
        for k, p in model.named_parameters():
            g[k] = p.grad.numpy()
    print(f"torch_reference: loss {loss.item():.9g}, wrote {args.out}")


def main():
    args, overrides = split_args(sys.argv[1:])
    cfg = load_config(args.yaml_config, args.config, overrides)
    setup_torch()
    if args.cmd == "init":
        cmd_init(args, cfg)
    else:
        if not args.init or not args.data:
            sys.exit(f"torch_reference: {args.cmd} needs --init and --data")
        if args.cmd == "grads" and args.amp_mode != "none":
            sys.exit("torch_reference: --amp_mode fp8 is for train only (its scales need steps)")
        (cmd_train if args.cmd == "train" else cmd_grads)(args, cfg)


if __name__ == "__main__":
    main()
