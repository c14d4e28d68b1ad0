#!/usr/bin/env python3
"""torch_models.py NAME BATCH H W K THREADS [MODE] - PyTorch 1.13 reference figures for bench_models.lua.

MODE "best" (default): PyTorch at its best configuration (torch_sweep.py: rows per forward in
1-64 and memory format, rounds of timings, best of each): forward images/s at those rows, and
forward-AD JVP directions/s for one input with K tangents batched in those rows with the primal
repeated (forward AD pays the primal per tangent either way; torch_profile.py does the same).
Prints 'forward F jvp J rows R format FMT'.
MODE "rss": the task at srgeo's own shape (BATCH rows, contiguous, one JVP per tangent) for the
process's peak RSS: 'forward F jvp J rss MB' (the best rows' RSS would compare another task).
Where forward AD cannot run the model (torch 1.13's fused attention in eval mode), J comes from
torch.autograd.functional.jvp (the double-backward trick: two reverse passes, PyTorch's only JVP
there) and a line 'jvp_method functional: MSG' says so; J is 'fail' plus 'jvp_error MSG' only when
that fails too.  Nothing is printed for a name torchvision does not have."""
import os
import resource
import sys
import time

import torch
import torch.autograd.forward_ad as fwAD
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sweep import in_format, sweep  # noqa: E402

name, batch, h, w, k, threads = sys.argv[1], *map(int, sys.argv[2:7])
mode = sys.argv[7] if len(sys.argv) > 7 else "best"
torch.set_num_threads(threads)
torch.manual_seed(0)
ctor = getattr(torchvision.models, name, None)
if ctor is None:
    sys.exit(0)
kw = {"image_size": h} if name.startswith("vit_") else {}
m = ctor(**kw).eval()

if mode == "best":
    d = 3 * h * w
    cands = [r for r in (1, 2, 4, 8, 16, 32, 64) if r * d <= (16 << 20)] or [1]
    rows, fmt = sweep(m, lambda r: torch.rand(r, 3, h, w), cands)
else:
    rows, fmt = batch, "contiguous"
conv = in_format(m, fmt)
x = conv(torch.rand(rows, 3, h, w))


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
per = rows if mode == "best" else 1  # tangents per forward-AD pass


def jvp():
    with torch.no_grad(), fwAD.dual_level():
        for a in range(0, k, per):
            b = min(k, a + per)
            out = m(fwAD.make_dual(conv(x1.repeat(b - a, 1, 1, 1)), conv(v[a:b])))
            fwAD.unpack_dual(out).tangent


def jvp_functional():
    for a in range(0, k, per):
        b = min(k, a + per)
        torch.autograd.functional.jvp(m, conv(x1.repeat(b - a, 1, 1, 1)), conv(v[a:b]))


err = method = None
try:
    jv = "%.3f" % (k / best(jvp))
except Exception as e:  # noqa: BLE001 - reported, not hidden
    method = str(e).splitlines()[0][:160]
    try:
        jv = "%.3f" % (k / best(jvp_functional))
    except Exception as e2:  # noqa: BLE001
        jv, err = "fail", str(e2).splitlines()[0][:160]
if mode == "best":
    print(f"forward {rows / tf:.3f} jvp {jv} rows {rows} format {fmt}")
else:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"forward {rows / tf:.3f} jvp {jv} rss {rss:.1f}")
if method and not err:
    print(f"jvp_method functional: {method}")
if err:
    print(f"jvp_error {err}")
