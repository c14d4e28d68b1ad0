#!/usr/bin/env python3
"""torch_models.py NAME BATCH H W K THREADS - PyTorch 1.13 reference figures for bench_models.lua:
forward images/s at batch BATCH, and forward-AD JVP directions/s for one input with K tangents
(one jvp per tangent, as torch.autograd.forward_ad computes them), and the process's peak RSS.
Prints 'forward F jvp J rss MB' (J = 'fail' plus a line 'jvp_error MSG' where forward AD
cannot run the model, e.g. fused attention in eval mode); nothing for a name torchvision
does not have."""
import resource
import sys
import time

import torch
import torch.autograd.forward_ad as fwAD
import torchvision

name, batch, h, w, k, threads = sys.argv[1], *map(int, sys.argv[2:7])
torch.set_num_threads(threads)
torch.manual_seed(0)
ctor = getattr(torchvision.models, name, None)
if ctor is None:
    sys.exit(0)
kw = {"image_size": h} if name.startswith("vit_") else {}
m = ctor(**kw).eval()
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
    with torch.no_grad(), fwAD.dual_level():
        for j in range(k):
            out = m(fwAD.make_dual(x1, v[j:j + 1]))
            fwAD.unpack_dual(out).tangent


try:
    jv = "%.3f" % (k / best(jvp))
    err = None
except Exception as e:  # noqa: BLE001 - reported, not hidden
    jv, err = "fail", str(e).splitlines()[0][:160]
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"forward {batch / tf:.3f} jvp {jv} rss {rss:.1f}")
if err:
    print(f"jvp_error {err}")
