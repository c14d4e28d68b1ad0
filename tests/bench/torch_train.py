#!/usr/bin/env python3
"""torch_train.py NAME BATCH STEPS THREADS [FORMAT] - PyTorch 1.13 reference for bench_train.lua:
images/s of one SGD training step (train-mode BatchNorm, cross-entropy, backward, momentum 0.9 + weight decay
5e-4) on the twin of srgeo's NAME (the definitions of tests/fixtures/gen_models.py), after two
warm-up steps; and the process's peak RSS.  Prints 'images_per_s F rss MB'.  FORMAT is the memory
format of weights and inputs, contiguous (default) or channels_last: bench_train.lua runs both, each
in a process of its own, and compares with the faster (channels_last ran the small ResNet's step
about 4% faster here, resnet18_cifar's 13% slower)."""
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import gen_models  # noqa: E402

name, batch, steps, threads = sys.argv[1], *map(int, sys.argv[2:5])
fmt = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}[
    sys.argv[5] if len(sys.argv) > 5 else "contiguous"]
torch.set_num_threads(threads)
torch.manual_seed(0)
if name not in gen_models.DEFAULT_TWINS:
    sys.exit(f"no PyTorch twin of {name}")
m = gen_models.DEFAULT_TWINS[name]().train().to(memory_format=fmt)
c, h, w = gen_models.CASES[name]["shape"] if name in gen_models.CASES else (3, 32, 32)
x = torch.rand(batch, c, h, w).contiguous(memory_format=fmt)
y = torch.tensor([(b * 7) % 10 for b in range(1, batch + 1)])
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)


def step():
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(m(x), y).backward()
    opt.step()


for _ in range(2):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"images_per_s {steps * batch / t:.3f} rss {rss:.1f}")
