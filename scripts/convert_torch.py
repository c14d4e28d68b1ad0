#!/usr/bin/env python3
"""convert_torch.py - PyTorch checkpoints -> srgeo safetensors (no pickle at run time), or
any torchvision / timm model -> ONNX for srgeo's importer.

Run it once, where PyTorch is installed (Debian: python3-torch), on weights you bring:

    /usr/bin/python3 scripts/convert_torch.py resnet50.pth resnet50.safetensors
    /usr/bin/python3 scripts/convert_torch.py robust_l2_eps3.ckpt r50_eps3.safetensors   # robustness library
    /usr/bin/python3 scripts/convert_torch.py --torchvision resnet18 --seed 0 r18_init.safetensors

    # any architecture srgeo's zoo lacks: export it to ONNX (opset 13, the batch a dynamic axis)
    /usr/bin/python3 scripts/convert_torch.py --onnx --torchvision efficientnet_b0 weights.pth effnet.onnx
    /usr/bin/python3 scripts/convert_torch.py --onnx --timm convnext_small --size 224 convnext_s.onnx

With --onnx the model is built by torchvision (or timm, when installed), loaded with the
checkpoint's weights if one is given (random ones from --seed otherwise), and exported at
--size; its input normalisation (ImageNet's, or timm's default_cfg, or a robustness-library
normaliser in the checkpoint) goes into the file's metadata as srgeo.mean / srgeo.std, so
srgeo.models.load("effnet.onnx") takes raw [0, 1] pixels like every zoo model.

srgeo reads torch.save (>= 1.6) checkpoints itself, without Python (srgeo.models.load("x.pth"),
--model ARCH:x.pth); this script remains for the pre-1.6 and TorchScript formats, dtype casts and
ONNX export.  detect / infer / unwrap / strip_prefix below are mirrored in lua/srgeo/torchkeys.lua:
change both (tests/lua/torch_spec.lua compares them on its fixtures).

It reads torchvision, timm and robustness-library (MadryLab / Salman et al.) checkpoints: a
state_dict, or a dict holding one under 'state_dict' / 'model' / 'model_state_dict'. The
robustness library's attacker copy ('module.attacker.model.*') is dropped and the wrapper
prefixes 'module.model.', 'module.', 'model.' are stripped; its normaliser
('normalizer.new_mean/new_std') goes into the config metadata, so srgeo folds exactly that
normalisation into the model. The architecture is detected from the keys (or given with
--arch); the config entries the weights determine (classes, input channels, widths, image
size, ...) are inferred, and --config sets others. Both go to __metadata__; srgeo then loads
the file with

    m = srgeo.models.load("resnet50.safetensors")

The file is written with plain numpy (the `safetensors` package is not needed), atomically.
"""
import argparse
import json
import os
import sys

import numpy as np

PREFIXES = ["module.model.", "attacker.model.", "module.", "model."]
NORMALIZER = ["module.normalizer.", "normalizer.", "module.attacker.normalize.", "attacker.normalize."]
# The robustness library keeps a second copy of the model for its attacker.
ATTACKER = ["module.attacker.", "attacker."]
DTYPES = {np.dtype("float32"): "F32", np.dtype("float64"): "F64", np.dtype("float16"): "F16",
          np.dtype("int64"): "I64", np.dtype("int32"): "I32", np.dtype("uint8"): "U8", np.dtype("bool"): "BOOL"}


class BF16:
    """bfloat16 values numpy cannot hold: their raw 16-bit patterns."""

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, dtype=np.uint16)
        self.shape = self.bits.shape


def to_numpy(t):
    import torch
    if t.dtype == torch.bfloat16:
        return BF16(t.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16))
    return t.detach().cpu().contiguous().numpy()


def cast_floats(tensors, dtype):
    """Floating tensors stored as dtype: "keep", "F32", "F16" or "BF16" (round
    to nearest even); integer buffers are kept."""
    if dtype == "keep":
        return dict(tensors)
    out = {}
    for k, a in tensors.items():
        if isinstance(a, BF16):
            a = (a.bits.astype(np.uint32) << 16).view(np.float32)
        if a.dtype.kind != "f":
            out[k] = a
        elif dtype == "F32":
            out[k] = a.astype(np.float32)
        elif dtype == "F16":
            out[k] = a.astype(np.float16)
        elif dtype == "BF16":
            u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            # round to nearest even on the 16 dropped bits; NaN stays NaN
            r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            nan = np.isnan(a)
            r[nan] = (u[nan] >> 16).astype(np.uint16) | 0x40
            out[k] = BF16(r)
        else:
            raise SystemExit(f"convert_torch: unknown dtype {dtype!r} (keep, F32, F16, BF16)")
    return out


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
            vals = [float(x) for x in np.asarray(v.detach().float().cpu() if hasattr(v, "detach") else v).reshape(-1)]
            if name in ("new_mean", "mean"):
                extra["mean"] = vals
            elif name in ("new_std", "std"):
                extra["std"] = vals
        else:
            out[k] = v
    return out, extra


def strip_prefix(sd, prefix=None):
    """Drop the attacker's copy of the model and strip a wrapper prefix that
    every remaining key carries; return (sd, stripped prefix)."""
    if prefix:
        if not all(k.startswith(prefix) for k in sd):
            bad = next(k for k in sd if not k.startswith(prefix))
            raise SystemExit(f"convert_torch: --prefix {prefix!r} does not start key {bad!r}")
        return {k[len(prefix):]: v for k, v in sd.items()}, prefix
    kept = {k: v for k, v in sd.items() if not any(k.startswith(a) for a in ATTACKER)}
    if kept and len(kept) < len(sd):
        sd = kept
    for p in PREFIXES:
        if all(k.startswith(p) for k in sd):
            return {k[len(p):]: v for k, v in sd.items()}, p
    return sd, ""


def n_children(keys, prefix):
    """How many numbered children prefix.N.* the keys hold."""
    return len({k[len(prefix):].split(".")[0] for k in keys if k.startswith(prefix)})


def detect(sd):
    """Architecture name from the keys and shapes."""
    keys = set(sd)
    shape = lambda k: tuple(sd[k].shape)
    if "blocks.0.attn.qkv.weight" in keys:
        dim = shape("blocks.0.attn.qkv.weight")[1]
        if dim <= 64:
            return "small_vit" if shape("patch_embed.proj.weight")[1] == 1 else "vit_nano"
        return {192: "vit_ti_16", 384: "vit_s_16", 768: "vit_b_16_timm"}.get(dim, "vit_s_16")
    if "encoder.layers.encoder_layer_0.self_attention.in_proj_weight" in keys:
        return "vit_b_16"
    if "features.1.0.layer_scale" in keys:
        if shape("features.0.0.weight")[0] != 96 or "features.7.0.layer_scale" not in keys:
            return "convnext_nano"
        return "convnext_small" if n_children(keys, "features.5.") > 9 else "convnext_tiny"
    if "block1.layer.0.conv1.weight" in keys:
        width = shape("block1.layer.0.conv1.weight")[0]
        return "wrn_28_10" if width >= 160 else "wrn_16_4"
    if "layer1.0.conv1.weight" in keys:
        bottleneck = "layer1.0.conv3.weight" in keys
        counts = [n_children(keys, f"layer{i}.") for i in (1, 2, 3, 4)]
        if not bottleneck:
            if shape("conv1.weight")[2] == 3:
                if "layer4.0.conv1.weight" in keys:
                    return "resnet18_cifar"
                return "small_resnet" if shape("conv1.weight")[1] == 1 else "resnet20"
            return {(2, 2, 2, 2): "resnet18", (3, 4, 6, 3): "resnet34"}.get(tuple(counts), "resnet18")
        if shape("layer1.0.conv1.weight")[0] == 128:
            return "wide_resnet50_2"
        return "resnet101" if counts[2] > 6 else "resnet50"
    if "features.0.weight" in keys:
        convs = [k for k in keys if k.startswith("features.") and k.endswith(".weight") and len(sd[k].shape) == 4]
        bn = any(k.endswith("running_mean") for k in keys)
        if "classifier.6.weight" in keys:
            n = {8: "vgg11", 10: "vgg13", 13: "vgg16", 16: "vgg19"}.get(len(convs))
            if n:
                return n + ("_bn" if bn else "")
        if "classifier.weight" in keys:
            return "vgg16_cifar" if len(convs) == 13 else "small_vgg"
    if "fc1.weight" in keys and "head.weight" in keys:
        return "mlp"
    raise SystemExit("convert_torch: cannot recognise the architecture from the keys; pass --arch NAME "
                     "(srgeo.models.list() names them)")


# Each srgeo architecture's defaults (models/*.lua), so the config written
# holds only what differs.
_IMAGENET = {"num_classes": 1000, "in_channels": 3}
_TIMM_VIT = dict(_IMAGENET, image_size=224, patch_size=16)
DEFAULTS = {
    **{a: _IMAGENET for a in ("resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "vgg11",
                              "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
                              "convnext_tiny", "convnext_small")},
    "resnet18_cifar": {"num_classes": 10, "in_channels": 3, "widths": [64, 128, 256, 512]},
    "resnet20": {"num_classes": 10, "in_channels": 3, "widths": [16, 32, 64], "blocks": [3, 3, 3]},
    "small_resnet": {"num_classes": 10, "in_channels": 1, "widths": [16, 32, 64], "blocks": [2, 2, 2]},
    "vgg16_cifar": {"num_classes": 10, "in_channels": 3, "width": 1, "batch_norm": True},
    "small_vgg": {"num_classes": 10, "in_channels": 1, "layout": [16, 16, "M", 32, 32, "M", 64, "M"]},
    "convnext_nano": {"num_classes": 10, "in_channels": 3, "depths": [2, 2, 2], "dims": [32, 64, 128],
                      "stem_kernel": 2},
    "vit_s_16": _TIMM_VIT, "vit_ti_16": _TIMM_VIT, "vit_b_16_timm": _TIMM_VIT,
    "vit_b_16": dict(_IMAGENET, image_size=224),
    "vit_nano": {"num_classes": 10, "in_channels": 3, "image_size": 32, "patch_size": 4},
    "small_vit": {"num_classes": 10, "in_channels": 1, "image_size": 28, "patch_size": 4},
    "wrn_28_10": {"num_classes": 10, "in_channels": 3, "depth": 28, "widen_factor": 10},
    "wrn_16_4": {"num_classes": 10, "in_channels": 3, "depth": 16, "widen_factor": 4},
    "mlp": {"num_classes": 10, "hidden": [256, 128], "input": [1, 28, 28]},
}


def infer(arch, sd):
    """Config values read off the weights (those the keys determine)."""
    has = lambda k: k in sd
    dim = lambda k, i: int(sd[k].shape[i])
    cfg = {}
    for head in ("fc.weight", "classifier.6.weight", "classifier.2.weight", "classifier.weight",
                 "heads.head.weight", "head.weight"):
        if has(head):
            cfg["num_classes"] = dim(head, 0)
            break
    for first in ("conv1.weight", "features.0.weight", "features.0.0.weight", "patch_embed.proj.weight",
                  "conv_proj.weight"):
        if has(first):
            cfg["in_channels"] = dim(first, 1)
            break
    keys = set(sd)
    if arch in ("resnet18_cifar", "resnet20", "small_resnet"):
        stages = [i for i in range(1, 5) if has(f"layer{i}.0.conv1.weight")]
        cfg["widths"] = [dim(f"layer{i}.0.conv1.weight", 0) for i in stages]
        if arch != "resnet18_cifar":
            cfg["blocks"] = [n_children(keys, f"layer{i}.") for i in stages]
    elif arch in ("vgg16_cifar", "small_vgg"):
        convs = sorted((int(k.split(".")[1]), k) for k in keys
                       if k.startswith("features.") and k.endswith(".weight") and len(sd[k].shape) == 4)
        if arch == "vgg16_cifar":
            cfg["width"] = dim(convs[0][1], 0) / 64
            cfg["batch_norm"] = any(k.endswith("running_mean") for k in keys)
        else:
            # a pool follows a conv block wherever the index jumps past it
            layout, step = [], 3 if any(k.endswith("running_mean") for k in keys) else 2
            for j, (idx, k) in enumerate(convs):
                layout.append(dim(k, 0))
                nxt = convs[j + 1][0] if j + 1 < len(convs) else None
                if nxt is None or nxt - idx > step:
                    layout.append("M")
            cfg["layout"] = layout
    elif arch == "convnext_nano":
        stages = [i for i in range(1, 16, 2) if has(f"features.{i}.0.layer_scale")]
        cfg["depths"] = [n_children(keys, f"features.{i}.") for i in stages]
        cfg["dims"] = [int(sd[f"features.{i}.0.layer_scale"].shape[0]) for i in stages]
        cfg["stem_kernel"] = dim("features.0.0.weight", 2)
    elif arch in ("vit_s_16", "vit_ti_16", "vit_b_16_timm", "vit_nano", "small_vit"):
        patch = dim("patch_embed.proj.weight", 2)
        side = int(round((dim("pos_embed", 1) - 1) ** 0.5))
        cfg["patch_size"], cfg["image_size"] = patch, side * patch
    elif arch == "vit_b_16":
        side = int(round((dim("encoder.pos_embedding", 1) - 1) ** 0.5))
        cfg["image_size"] = side * dim("conv_proj.weight", 2)
    elif arch.startswith("wrn"):
        cfg["widen_factor"] = dim("block1.layer.0.conv1.weight", 0) // 16
        cfg["depth"] = 6 * n_children(keys, "block1.layer.") + 4
    elif arch == "mlp":
        n = 0
        while has(f"fc{n + 1}.weight"):
            n += 1
        cfg["hidden"] = [dim(f"fc{i}.weight", 0) for i in range(1, n + 1)]
        d = dim("fc1.weight", 1)
        if d != 784:
            cfg["input"] = [3, 32, 32] if d == 3072 else [1, d, 1]
    return cfg


def config_for(arch, sd, extra, config=None):
    """srgeo config: inferred values that differ from the architecture's
    defaults, the normaliser (extra), then the user's explicit config."""
    defaults = DEFAULTS.get(arch, {})
    cfg = {k: v for k, v in infer(arch, sd).items() if defaults.get(k) != v}
    cfg.update(extra)
    cfg.update(config or {})
    return cfg


def write_safetensors(path, tensors, metadata, fsync=True):
    """Write atomically (temporary file, then rename); fsync=False for
    throw-away files, where syncing hundreds of MB only costs time."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        a = tensors[name]
        if isinstance(a, BF16):
            dtype, data = "BF16", a.bits.astype("<u2", copy=False).tobytes()
        else:
            # not np.ascontiguousarray: it turns 0-d arrays (num_batches_tracked) into 1-d
            a = np.asarray(a)
            if not a.flags.c_contiguous:
                a = a.copy(order="C")
            if a.dtype not in DTYPES:
                a = a.astype(np.float32)
            dtype, data = DTYPES[a.dtype], a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)


def convert_state_dict(sd, arch=None, prefix=None, source="", extra_meta=None, config=None):
    """(tensors, metadata) for write_safetensors from a state_dict."""
    sd, extra = split_normalizer(sd)
    sd, stripped = strip_prefix(sd, prefix)
    arch = arch or detect(sd)
    cfg = config_for(arch, sd, extra, config)
    tensors = {k: to_numpy(v) if not isinstance(v, np.ndarray) else v for k, v in sd.items() if hasattr(v, "shape")}
    meta = {"architecture": arch, "config": json.dumps(cfg), "source": os.path.basename(source),
            "converter": "srgeo convert_torch.py 2"}
    if stripped:
        meta["stripped_prefix"] = stripped
    meta.update(extra_meta or {})
    return tensors, meta


IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def onnx_metadata(props):
    """ModelProto.metadata_props entries (field 14, each a key/value
    StringStringEntryProto) as protobuf bytes: appended to a serialised
    model they merge into it, as protobuf concatenation does, so no onnx
    package is needed."""
    out = bytearray()
    for k, v in props.items():
        kb, vb = k.encode(), v.encode()
        entry = b"\x0a" + _varint(len(kb)) + kb + b"\x12" + _varint(len(vb)) + vb
        out += b"\x72" + _varint(len(entry)) + entry
    return bytes(out)


def export_onnx(args, ap):
    """--onnx: build the architecture, load the weights, export, add metadata."""
    import torch
    torch.manual_seed(args.seed)
    mean, std = IMAGENET
    if args.timm:
        import timm
        model = timm.create_model(args.timm, pretrained=False, num_classes=args.num_classes)
        cfg = getattr(model, "default_cfg", {}) or {}
        mean, std = list(cfg.get("mean", mean)), list(cfg.get("std", std))
        name = "timm." + args.timm
    elif args.torchvision:
        import torchvision
        model = getattr(torchvision.models, args.torchvision)(num_classes=args.num_classes)
        name = "torchvision.models." + args.torchvision
    else:
        ap.error("--onnx needs --torchvision NAME or --timm NAME (the architecture to export)")
    if args.input:
        sd, extra = split_normalizer(unwrap(torch.load(args.input, map_location="cpu")))
        sd, _ = strip_prefix(sd, args.prefix)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        if missing or unexpected:
            raise SystemExit(f"convert_torch: {args.input} does not fit {name}: missing {list(missing)[:5]}, "
                             f"unexpected {list(unexpected)[:5]}")
        mean, std = extra.get("mean", mean), extra.get("std", std)
    model.eval()
    x = torch.rand(1, 3, args.size, args.size)
    tmp = f"{args.output}.tmp.{os.getpid()}"
    torch.onnx.export(model, x, tmp, opset_version=args.opset, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    props = {"srgeo.mean": ",".join("%.9g" % v for v in mean), "srgeo.std": ",".join("%.9g" % v for v in std),
             "srgeo.source": os.path.basename(args.input) if args.input else f"{name}(seed={args.seed})",
             "srgeo.input": f"3,{args.size},{args.size}"}
    with open(tmp, "ab") as f:
        f.write(onnx_metadata(props))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.output)
    print(f"{name} at {args.size}x{args.size} -> {args.output} (opset {args.opset}, "
          f"{os.path.getsize(args.output)} bytes); normalisation mean {mean} std {std}")
    print(f"in srgeo:  m = srgeo.models.load({args.output!r})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", help="checkpoint (.pth/.pt/.ckpt/.bin)")
    ap.add_argument("output", help="output .safetensors")
    ap.add_argument("--arch", help="srgeo architecture name (default: detected from the keys)")
    ap.add_argument("--prefix", help="key prefix to strip (default: common wrappers)")
    ap.add_argument("--torchvision", metavar="NAME", help="export a torchvision model built here instead of a file")
    ap.add_argument("--seed", type=int, default=0, help="seed for --torchvision random init")
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--config", type=json.loads, default=None, metavar="JSON",
                    help="srgeo config entries to set, e.g. '{\"image_size\": 384}' (override what is inferred)")
    ap.add_argument("--dtype", default="keep", choices=["keep", "F32", "F16", "BF16"],
                    help="store floating tensors as this dtype (default: as in the checkpoint)")
    ap.add_argument("--onnx", action="store_true", help="export the model (--torchvision or --timm) to ONNX")
    ap.add_argument("--timm", metavar="NAME", help="with --onnx: a timm architecture (when timm is installed)")
    ap.add_argument("--size", type=int, default=224, help="with --onnx: the input size the export is made at")
    ap.add_argument("--opset", type=int, default=13, help="with --onnx: the ONNX opset (11 to 17)")
    args = ap.parse_args()
    if args.onnx:
        return export_onnx(args, ap)
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
                                       args.prefix, source, config=args.config)
    tensors = cast_floats(tensors, args.dtype)
    write_safetensors(args.output, tensors, meta)
    n = sum(int(np.prod(t.shape)) for t in tensors.values())
    print(f"architecture: {meta['architecture']}  ({len(tensors)} tensors, {n} values)")
    print(f"config: {meta['config']}")
    print(f"in srgeo:  m = srgeo.models.load({args.output!r})")


if __name__ == "__main__":
    sys.exit(main())
