#!/usr/bin/env python3
"""torch_profile.py MODEL DIRECTIONS SIZE THREADS - the paper-preset statistic for one image in
PyTorch 1.13: 256 forward-AD JVPs and 2*DIRECTIONS*17 batched forwards; prints 'seconds S'.
resnet18_cifar is torchvision's resnet18 with a 3x3 stem and no max-pool."""
import math
import sys
import time

import torch
import torchvision

name, ndir, size, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
if name == "resnet18_cifar":
    m = torchvision.models.resnet18(num_classes=10)
    m.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
    m.maxpool = torch.nn.Identity()
elif hasattr(torchvision.models, name):
    m = getattr(torchvision.models, name)()
else:
    print("no torch twin for", name)
    sys.exit(0)
m.fc = torch.nn.Identity()  # features, as srgeo's default tap
m.eval()
x = torch.rand(1, 3, size, size)
d = x.numel()
shift = math.log10(math.sqrt(3 * 224 * 224 / d))
etas = [10 ** (-2 - shift + 4 * i / 16) for i in range(17)]
u = torch.randn(ndir, 3, size, size)
u = u / u.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
u = torch.cat([u, -u])
t0 = time.perf_counter()
import torch.autograd.forward_ad as fwAD
with torch.no_grad():
    f0 = m(x)
    jsq = []
    with fwAD.dual_level():
        for j in range(min(256, len(u))):
            out = m(fwAD.make_dual(x, u[j:j + 1]))
            jsq.append(fwAD.unpack_dual(out).tangent.pow(2).sum())
    ej = torch.stack(jsq).mean()
    batch = max(8, min(512, (4 << 20) // d))
    per = max(1, batch // 17)
    num = torch.zeros(17)
    for a in range(0, len(u), per):
        ua = u[a:a + per]
        rows = torch.cat([x + e * ua for e in etas])
        y = m(rows)
        num += (y - f0).pow(2).sum(1).view(17, -1).sum(1)
    r = num / len(u) / (torch.tensor(etas) ** 2 * ej)
print(f"seconds {time.perf_counter() - t0:.3f}")
