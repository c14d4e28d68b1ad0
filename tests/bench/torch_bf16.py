#!/usr/bin/env python3
"""torch_bf16.py MODEL SIZE THREADS [ROUNDS] - PyTorch 1.13's forward of the profile's rows in float32
and under CPU bf16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): oneDNN's bf16 convolutions
and GEMMs, float32 accumulation), each at its own best rows and memory format (torch_sweep.sweep),
then ROUNDS alternating timed rounds, best of each; prints one line per precision
'PREC rows R format F ms_per_image T' and 'ratio fp32/bf16 X'.  The rows are x + eta u as the
numerator's forwards (the values do not change the time).  resnet18_cifar is torchvision's resnet18
with a 3x3 stem and no max-pool, as in torch_profile.py; the features (fc removed)."""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sweep import in_format, sweep, twin  # noqa: E402

name, size, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
torch.set_num_threads(threads)
torch.manual_seed(0)
m = twin(name)
if m is None:
    print("no torch twin for", name)
    sys.exit(0)
d = 3 * size * size


def fp32(mod, x):
    return mod(x)


def bf16(mod, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return mod(x)


cands = [r for r in (4, 8, 17, 34, 85, 170) if r * d <= (16 << 20)] or [1]
make = lambda r: torch.rand(r, 3, size, size)  # noqa: E731
cfg = {p: sweep(m, make, cands, run=fn) for p, fn in (("fp32", fp32), ("bf16", bf16))}
best = {}
with torch.no_grad():
    for rnd in range(rounds + 1):  # round 0 warms up
        for p, fn in (("fp32", fp32), ("bf16", bf16)):
            rows, fmt = cfg[p]
            conv = in_format(m, fmt)
            xb = conv(make(rows))
            reps, t0 = 0, time.perf_counter()
            while reps == 0 or time.perf_counter() - t0 < 1.0:
                fn(m, xb)
                reps += 1
            per = (time.perf_counter() - t0) / (reps * rows)
            if rnd > 0:
                best[p] = min(best.get(p, float("inf")), per)
for p in ("fp32", "bf16"):
    print(f"{p} rows {cfg[p][0]} format {cfg[p][1]} ms_per_image {1e3 * best[p]:.3f}")
print(f"ratio fp32/bf16 {best['fp32'] / best['bf16']:.3f}")
