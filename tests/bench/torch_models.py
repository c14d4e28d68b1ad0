#!/usr/bin/env python3
"""torch_models.py NAME BATCH H W K THREADS - PyTorch 1.13 reference figures for bench_models.lua:
forward images/s at batch BATCH, and forward-AD JVP directions/s for one input with K tangents
(one jvp per tangent, as torch.autograd.forward_ad computes them). Prints
'forward F jvp J'."""
import sys
import time

import torch
import torchvision

name, batch, h, w, k, threads = sys.argv[1], *map(int, sys.argv[2:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
ctor = getattr(torchvision.models, name.replace("_cifar", ""), None)
if ctor is None:
    sys.exit(0)
m = ctor().eval()
x = torch.rand(batch, 3, h, w)


def best(fn, reps=3):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


with torch.no_grad():
    tf = best(lambda: m(x))
x1 = torch.rand(1, 3, h, w)
v = torch.randn(k, 3, h, w)


def jvp():
    import torch.autograd.forward_ad as fwAD
    with torch.no_grad(), fwAD.dual_level():
        for j in range(k):
            out = m(fwAD.make_dual(x1, v[j:j + 1]))
            fwAD.unpack_dual(out).tangent


tj = best(jvp)
print(f"forward {batch / tf:.3f} jvp {k / tj:.3f}")
