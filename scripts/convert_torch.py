#!/usr/bin/env python3
"""convert_torch.py - PyTorch checkpoints -> srgeo safetensors (no pickle at run time).

Run it once, where PyTorch is installed (Debian: python3-torch), on weights you bring:

    /usr/bin/python3 scripts/convert_torch.py resnet50.pth resnet50.safetensors
    /usr/bin/python3 scripts/convert_torch.py robust_l2_eps3.ckpt r50_eps3.safetensors   # robustness library
    /usr/bin/python3 scripts/convert_torch.py --torchvision resnet18 --seed 0 r18_init.safetensors

It reads torchvision, timm and robustness-library (MadryLab / Salman et al.) checkpoints: a
state_dict, or a dict holding one under 'state_dict' / 'model' / 'model_state_dict'. Prefixes
'module.', 'model.', 'module.model.' and 'module.attacker.model.' are stripped; the robustness
library's normaliser ('normalizer.new_mean/new_std') goes into the config metadata, so srgeo
folds exactly that normalisation into the model. The architecture is detected from the keys
(or given with --arch) and written to __metadata__ with the config; srgeo then loads it with

    m = srgeo.models.load("resnet50.safetensors")

The file is written with plain numpy (the `safetensors` package is not needed), atomically.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

PREFIXES = ["module.attacker.model.", "module.model.", "attacker.model.", "module.", "model."]
NORMALIZER = ["module.normalizer.", "normalizer.", "module.attacker.normalize.", "attacker.normalize."]
DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("float16"): "F16",
          np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL"}


def to_numpy(t):
    import torch
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.detach().cpu().contiguous().numpy()


def unwrap(obj):
    """The state_dict inside a checkpoint object."""
    if hasattr(obj, "state_dict") and not isinstance(obj, dict):
        return obj.state_dict()
    for key in ("state_dict", "model_state_dict", "model", "net", "state"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            inner = obj[key]
            if any(hasattr(v, "shape") for v in inner.values()):
                return inner
    return obj


def split_normalizer(sd):
    """Remove robustness-library normaliser keys; return (sd, config extras)."""
    extra, out = {}, {}
    for k, v in sd.items():
        hit = next((p for p in NORMALIZER if k.startswith(p)), None)
        if hit:
            name = k[len(hit):]
            vals = to_numpy(v).reshape(-1).astype(float).tolist()
            if name in ("new_mean", "mean"):
                extra["mean"] = vals
            elif name in ("new_std", "std"):
                extra["std"] = vals
        else:
            out[k] = v
    return out, extra


def strip_prefix(sd, prefix=None):
    prefixes = [prefix] if prefix else PREFIXES
    for p in prefixes:
        if p and all(k.startswith(p) for k in sd):
            return {k[len(p):]: v for k, v in sd.items()}, p
    # robustness checkpoints hold both module.model.* and module.attacker.model.*
    for p in prefixes:
        sub = {k[len(p):]: v for k, v in sd.items() if k.startswith(p)}
        if sub and p in ("module.model.", "model.") and len(sub) >= len(sd) // 3:
            return sub, p
    return sd, ""


def detect(sd):
    """Architecture name from the keys and shapes."""
    keys = set(sd)
    shape = lambda k: tuple(sd[k].shape)
    if "blocks.0.attn.qkv.weight" in keys:
        dim = shape("blocks.0.attn.qkv.weight")[1]
        return {192: "vit_ti_16", 384: "vit_s_16"}.get(dim, "vit_s_16" if dim < 768 else "vit_b_16_timm")
    if "encoder.layers.encoder_layer_0.self_attention.in_proj_weight" in keys:
        return "vit_b_16"
    if "features.1.0.layer_scale" in keys:
        n3 = len({k.split(".")[2] for k in keys if k.startswith("features.5.")})
        return "convnext_small" if n3 > 9 else "convnext_tiny"
    if "block1.layer.0.conv1.weight" in keys:
        width = shape("block1.layer.0.conv1.weight")[0]
        return "wrn_28_10" if width >= 160 else "wrn_16_4"
    if "layer1.0.conv1.weight" in keys:
        bottleneck = "layer1.0.conv3.weight" in keys
        counts = [len({k.split(".")[1] for k in keys if k.startswith(f"layer{i}.")}) for i in (1, 2, 3, 4)]
        if not bottleneck:
            if shape("conv1.weight")[2] == 3:
                return "resnet20" if "layer4.0.conv1.weight" not in keys else "resnet18_cifar"
            return {(2, 2, 2, 2): "resnet18", (3, 4, 6, 3): "resnet34"}.get(tuple(counts), "resnet18")
        if shape("layer1.0.conv1.weight")[0] == 128:
            return "wide_resnet50_2"
        return "resnet101" if counts[2] > 6 else "resnet50"
    if "features.0.weight" in keys and "classifier.6.weight" in keys:
        convs = [k for k in keys if k.startswith("features.") and k.endswith(".weight") and len(sd[k].shape) == 4]
        bn = any(k.endswith("running_mean") for k in keys)
        n = {8: "vgg11", 10: "vgg13", 13: "vgg16", 16: "vgg19"}.get(len(convs))
        if n:
            return n + ("_bn" if bn else "")
    raise SystemExit("convert_torch: cannot recognise the architecture from the keys; pass --arch NAME "
                     "(srgeo.models.list() names them)")


def config_for(arch, sd, extra):
    cfg = dict(extra)
    head = {"resnet": "fc.weight", "wide": "fc.weight", "wrn": "fc.weight", "vgg": "classifier.6.weight",
            "convnext": "classifier.2.weight", "vit_b_16": "heads.head.weight", "vit": "head.weight"}
    for prefix, key in head.items():
        if arch.startswith(prefix) and key in sd:
            cfg["num_classes"] = int(sd[key].shape[0])
            break
    return cfg


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": metadata}
    offset = 0
    arrays = []
    for name in sorted(tensors):
        # not np.ascontiguousarray: it turns 0-d arrays (num_batches_tracked) into 1-d
        a = np.asarray(tensors[name])
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        if a.dtype not in DTYPES:
            a = a.astype(np.float32)
        nbytes = a.nbytes
        header[name] = {"dtype": DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
        arrays.append(a)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for a in arrays:
            f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def convert_state_dict(sd, arch=None, prefix=None, source="", extra_meta=None):
    sd, extra = split_normalizer(sd)
    sd, stripped = strip_prefix(sd, prefix)
    arch = arch or detect(sd)
    cfg = config_for(arch, sd, extra)
    tensors = {k: to_numpy(v) if not isinstance(v, np.ndarray) else v for k, v in sd.items() if hasattr(v, "shape")}
    meta = {"architecture": arch, "config": json.dumps(cfg), "source": os.path.basename(source),
            "converter": "srgeo convert_torch.py 1"}
    if stripped:
        meta["stripped_prefix"] = stripped
    meta.update(extra_meta or {})
    return tensors, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", help="checkpoint (.pth/.pt/.ckpt/.bin)")
    ap.add_argument("output", help="output .safetensors")
    ap.add_argument("--arch", help="srgeo architecture name (default: detected from the keys)")
    ap.add_argument("--prefix", help="key prefix to strip (default: common wrappers)")
    ap.add_argument("--torchvision", metavar="NAME", help="export a torchvision model built here instead of a file")
    ap.add_argument("--seed", type=int, default=0, help="seed for --torchvision random init")
    ap.add_argument("--num-classes", type=int, default=1000)
    args = ap.parse_args()
    import torch
    if args.torchvision:
        import torchvision
        torch.manual_seed(args.seed)
        model = getattr(torchvision.models, args.torchvision)(num_classes=args.num_classes)
        sd, source = model.state_dict(), f"torchvision.models.{args.torchvision}(seed={args.seed})"
    elif args.input:
        obj = torch.load(args.input, map_location="cpu")
        sd, source = unwrap(obj), args.input
    else:
        ap.error("give an input checkpoint or --torchvision NAME")
    tensors, meta = convert_state_dict(sd, args.arch or (args.torchvision if args.torchvision else None),
                                       args.prefix, source)
    write_safetensors(args.output, tensors, meta)
    n = sum(int(np.prod(t.shape)) for t in tensors.values())
    print(f"architecture: {meta['architecture']}  ({len(tensors)} tensors, {n} values)")
    print(f"config: {meta['config']}")
    print(f"in srgeo:  m = srgeo.models.load({args.output!r})")


if __name__ == "__main__":
    sys.exit(main())
