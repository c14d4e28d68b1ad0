"""torch_sweep.py - PyTorch at its best configuration, for the bench scripts (torch_profile.py,
torch_models.py, torch_train.py): the rows per forward and the memory format it runs fastest.

Rounds over all candidates, best of each kept: the VMs this runs on change speed by tens of percent
within minutes, and a one-shot sweep then picks a configuration by luck (it chose 2 rows, the
slowest per image, in one ResNet-50 run).  Each timing covers at least SECONDS of calls: timing
single forwards picked ResNet-50's configuration by noise."""
import time

import torch

FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def twin(name):
    """The torchvision twin of srgeo's architecture `name` in eval mode, its features (fc removed, as
    srgeo's default tap), or None: resnet18_cifar is resnet18 with a 3x3 stem and no max-pool."""
    import torchvision

    if name == "resnet18_cifar":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = torch.nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()
    elif hasattr(torchvision.models, name):
        m = getattr(torchvision.models, name)()
    else:
        return None
    m.fc = torch.nn.Identity()
    return m.eval()
SECONDS = 0.5


def in_format(m, fmt):
    """Puts m's weights in memory format fmt; returns the conversion for its inputs."""
    m.to(memory_format=FORMATS[fmt])
    return lambda t: t.contiguous(memory_format=FORMATS[fmt])


def sweep(m, make_input, cands, run=None, formats=tuple(FORMATS), rounds=3, seconds=SECONDS):
    """(rows, format) with the least seconds per row of run(m, x) (default: a forward without
    grad) over cands x formats; make_input(rows) makes a contiguous input.  Round 0 warms up."""
    run = run or (lambda mod, x: mod(x))
    best = {}
    with torch.no_grad():
        for rnd in range(rounds):
            for f in formats:
                conv = in_format(m, f)
                for r in cands:
                    xb = conv(make_input(r))
                    reps, t0 = 0, time.perf_counter()
                    while reps == 0 or (rnd > 0 and time.perf_counter() - t0 < seconds):
                        run(m, xb)
                        reps += 1
                    per = (time.perf_counter() - t0) / (reps * r)
                    if rnd > 0 and per < best.get((r, f), float("inf")):
                        best[(r, f)] = per
    return min(best, key=best.get)
