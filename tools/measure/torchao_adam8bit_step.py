#!/usr/bin/env python3
"""The working memory of one torchao 8-bit AdamW step, as torchao v0.7.0's compiled single_param_adam
computes it (torchao/prototype/low_bit_optim/adam.py; the OptimState8bit subclass desugared into codes,
block scales and qmap: subclass_8bit.py, quant_utils.py). Usage on a GPU: python3 torchao_adam8bit_step.py 128256x3072
Prints, for three calls after compilation, the step's peak allocated memory above its inputs, in bytes and
bytes per element (used by validation/TT-3b-packed-compile-chunkedce-ac-optbwd-offload-adamw8bit.toml and
plugins/optimizers/adam-8bit, library = "torchao")."""
import torch, time, sys
torch.manual_seed(0)
dev = "cuda"
def dyn_map(signed):
    data = []
    non_sign_bits = 7; max_exp = 7; add = 2 ** (non_sign_bits - max_exp) - 1
    for i in range(max_exp):
        fi = int(2 ** (i + non_sign_bits - max_exp) + 1 if signed else 2 ** (i + non_sign_bits - max_exp + 1) + 1)
        b = torch.linspace(0.1, 1, fi); m = (b[:-1] + b[1:]) / 2.0
        data += ((10 ** (-(max_exp - 1) + i)) * m).tolist()
        if signed: data += (-(10 ** (-(max_exp - 1) + i)) * m).tolist()
    if add > 0:
        b = torch.linspace(0.1, 1, add + 1); m = (b[:-1] + b[1:]) / 2.0
        data += ((10 ** (-(max_exp - 1) + i)) * m).tolist()
        if signed: data += (-(10 ** (-(max_exp - 1) + i)) * m).tolist()
    data.append(0); data.append(1.0); data.sort(); return data
def deq(codes, qmap, scale):
    return (qmap[codes.int()].view(scale.shape[0], -1) * scale.view(-1, 1)).view(codes.shape)
def scale_t(x, bs):
    s = x.view(-1, bs).abs().amax(-1).clip(1e-12)
    return (x.view(-1, bs) / s.view(-1, 1)).view(x.shape), s
def quant(x, qmap):
    c = torch.where(x >= qmap[128], 128, 0)
    for k in (64, 32, 16, 8, 4, 2, 1):
        c += torch.where(x >= qmap[c + k], k, 0)
    up = (c + 1).clip(max=255); lo = qmap[c]; hi = qmap[up]
    c = torch.where(x - lo >= (hi - lo) * 0.5, up, c)
    return c.to(torch.uint8)
def step_fn(p, grad, step, c1, s1, q1, c2, s2, q2, lr, beta1, beta2, wd, eps):
    grad = grad.float(); bc1 = 1 - beta1 ** step; bc2 = 1 - beta2 ** step
    m = deq(c1, q1, s1).lerp(grad, 1 - beta1)
    v = deq(c2, q2, s2).lerp(grad.square(), 1 - beta2)
    xs, s = scale_t(m, 256); c1.copy_(quant(xs, q1)); s1.copy_(s)
    xs, s = scale_t(v, 256); c2.copy_(quant(xs, q2)); s2.copy_(s)
    denom = (v.sqrt() / bc2.sqrt()).add_(eps)
    p.add_(-lr * wd * p - (lr / bc1) * m / denom)
shape = tuple(int(a) for a in sys.argv[1].split("x"))
p = torch.randn(shape, device=dev, dtype=torch.bfloat16) * 0.02
g = torch.randn(shape, device=dev, dtype=torch.bfloat16) * 1e-3
n = p.numel()
c1 = torch.zeros(shape, dtype=torch.uint8, device=dev); s1 = torch.zeros(n // 256, device=dev)
c2 = torch.zeros(shape, dtype=torch.uint8, device=dev); s2 = torch.zeros(n // 256, device=dev)
q1 = torch.tensor(dyn_map(True), device=dev); q2 = torch.tensor(dyn_map(False), device=dev)
step = torch.tensor(0.0, device=dev); lr = torch.tensor(2e-5, device=dev)
f = torch.compile(step_fn, fullgraph=True, dynamic=False)
for it in range(3):
    step += 1
    torch.cuda.synchronize(); base = torch.cuda.memory_allocated(); torch.cuda.reset_peak_memory_stats()
    t = time.time(); f(p, g, step, c1, s1, q1, c2, s2, q2, lr, 0.9, 0.999, 0.01, 1e-8); torch.cuda.synchronize()
    pk = torch.cuda.max_memory_allocated()
    print(f"torch {torch.__version__} shape {shape} n {n} iter {it}: step working memory {pk-base} B = {(pk-base)/n:.3f} B/elem ({time.time()-t:.1f}s)", flush=True)
