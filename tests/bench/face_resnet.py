"""face_resnet.py - the face-ResNet-like network of bench_onnx.lua, made once
by PyTorch: 3x3 convolutions throughout, BatchNorm, and at each change of
width the shortcut of dlib's face-recognition ResNet (and of He et al.'s
CIFAR option A): a 2x2 average pool, then the missing channels zero-padded
(F.pad on the channel axis, an ONNX Pad; in the third stage concatenated
zeros, torch.cat with new_zeros: ConstantOfShape and Concat), no projection; a 128-D descriptor
out of a linear layer.  Seeded; the BatchNorm statistics and affine
parameters are drawn too, so folding them is not an identity.

Writes OUT.onnx (torch.onnx.export in eval mode: PyTorch folds each
BatchNorm into its convolution; dynamic batch; srgeo.mean / srgeo.std
metadata) and OUT.safetensors (the state_dict under PyTorch's names, which
bench_onnx.lua's native build uses):
    /usr/bin/python3 tests/bench/face_resnet.py build/bench_onnx/face_resnet
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from convert_torch import onnx_metadata, write_safetensors  # noqa: E402

WIDTHS, BLOCKS, SIZE, DIM = (32, 64, 128, 256), (2, 2, 2, 2), 112, 128
MEAN, STD = (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)


class Block(nn.Module):
    def __init__(self, cin, cout, stride, cat=False):
        super().__init__()
        self.cat = cat
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.extra = cout - cin
        self.stride = stride

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x
        if self.stride != 1:
            s = F.avg_pool2d(s, 2)
        if self.extra and self.cat:
            s = torch.cat([s, s.new_zeros(s.shape[0], self.extra, s.shape[2], s.shape[3])], 1)
        elif self.extra:
            s = F.pad(s, (0, 0, 0, 0, 0, self.extra))
        return F.relu(y + s)


class FaceResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, WIDTHS[0], 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(WIDTHS[0])
        cin = WIDTHS[0]
        for i, (w, n) in enumerate(zip(WIDTHS, BLOCKS)):
            blocks = []
            for j in range(n):
                blocks.append(Block(cin, w, 2 if i > 0 and j == 0 else 1, cat=i == 2))
                cin = w
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, DIM)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for i in range(len(WIDTHS)):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = FaceResNet()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 2.0)
    model.eval()
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    write_safetensors(out + ".safetensors", sd, {"source": f"face_resnet.py (seed 0) {WIDTHS} {BLOCKS}"})
    tmp = f"{out}.onnx.tmp.{os.getpid()}"
    torch.onnx.export(model, torch.rand(1, 3, SIZE, SIZE), tmp, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    props = {"srgeo.mean": ",".join("%.9g" % v for v in MEAN), "srgeo.std": ",".join("%.9g" % v for v in STD),
             "srgeo.source": "face_resnet.py (seed 0)", "srgeo.input": f"3,{SIZE},{SIZE}"}
    with open(tmp, "ab") as f:
        f.write(onnx_metadata(props))
    os.replace(tmp, out + ".onnx")
    print(f"face ResNet {WIDTHS} x {BLOCKS} at {SIZE}x{SIZE} -> {out}.onnx, {out}.safetensors")
    print("in srgeo: made")


if __name__ == "__main__":
    main()
