#!/usr/bin/env python3
"""torch_profile.py MODEL DIRECTIONS SIZE THREADS [ROWS [FORMAT]] - the paper-preset statistic for one
image in PyTorch 1.13: min(256, 2*DIRECTIONS) forward-AD JVPs and 2*DIRECTIONS*17 forwards, both
in batches of ROWS, in memory FORMAT (contiguous or channels_last); prints 'rows R format F' and
'seconds S'.  resnet18_cifar is torchvision's resnet18 with a 3x3 stem and no max-pool.

PyTorch gets its own best configuration, not srgeo's: without ROWS (or ROWS 0) an untimed sweep
(rounds over 4-340 rows x both formats, best of each) picks the fastest per image.  On a
2-core Zen 1, oneDNN ran ResNet-50 at 224 fastest at about 4 rows, and resnet18_cifar at 32 at
34-85 rows in channels_last: 8% and 17-25% faster per image than the 17 and 1360 contiguous rows
srgeo's own batch rule would give it.  The JVP tangents are batched the same way, with the primal
repeated: forward-AD pays the primal per tangent either way."""
import math
import os
import sys
import time

import torch
import torch.autograd.forward_ad as fwAD

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_sweep import in_format, sweep, twin  # noqa: E402

name, ndir, size, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = int(sys.argv[5]) if len(sys.argv) > 5 else 0
fmt = sys.argv[6] if len(sys.argv) > 6 else "contiguous"
torch.set_num_threads(threads)
torch.manual_seed(0)
m = twin(name)
if m is None:
    print("no torch twin for", name)
    sys.exit(0)
x = torch.rand(1, 3, size, size)
d = x.numel()
shift = math.log10(math.sqrt(3 * 224 * 224 / d))
etas = torch.tensor([10 ** (-2 - shift + 4 * i / 16) for i in range(17)])
u = torch.randn(ndir, 3, size, size)
u = u / u.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
u = torch.cat([u, -u])
n = len(u) * len(etas)


if rows <= 0:
    # (beyond 340 rows PyTorch only slowed down: 17.3 ms per image at 85, 21.0 at 1360 at 32x32)
    cands = [r for r in (4, 8, 17, 34, 85, 170, 340) if r * d <= (16 << 20) and r <= n] or [1]
    rows, fmt = sweep(m, lambda r: torch.rand(r, 3, size, size), cands)
conv = in_format(m, fmt)
print(f"rows {rows} format {fmt}")

t0 = time.perf_counter()
with torch.no_grad():
    f0 = m(conv(x))
    nj = min(256, len(u))
    jsq = torch.zeros(nj)
    with fwAD.dual_level():
        for a in range(0, nj, rows):
            b = min(nj, a + rows)
            out = m(fwAD.make_dual(conv(x.repeat(b - a, 1, 1, 1)), conv(u[a:b])))
            jsq[a:b] = fwAD.unpack_dual(out).tangent.pow(2).flatten(1).sum(1)
    ej = jsq.mean()
    # row i is direction i // 17 at rung i % 17, as srgeo orders them
    num = torch.zeros(len(etas))
    for a in range(0, n, rows):
        i = torch.arange(a, min(n, a + rows))
        di, ri = i // len(etas), i % len(etas)
        y = m(conv(x + etas[ri].view(-1, 1, 1, 1) * u[di]))
        num.index_add_(0, ri, (y - f0).pow(2).sum(1))
    r = num / len(u) / (etas ** 2 * ej)
print(f"seconds {time.perf_counter() - t0:.3f}")
