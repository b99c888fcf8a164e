#!/usr/bin/env python3
"""Converts pretrained weights into the project's safetensors checkpoint names.

Sources (detected from the tensor names, or named with --source):
  torchvision-maskrcnn  a torchvision maskrcnn_resnet50_fpn state dict (.pth): the whole network;
  torchvision-resnet    a torchvision ResNet ImageNet checkpoint (resnet50-*.pth): the backbone;
  detectron-resnet      a Detectron (Caffe2) ResNet ImageNet pickle (R-50.pkl, MSRA weights, the
                        MLPerf reference's pretrained backbone): the backbone.

Batch norms become the model's frozen form, folded once here (norms without running statistics are
group norms and keep their affine, for backbone.norm = "group_norm"):
  scale = gamma / sqrt(running_var + eps),  bias = beta - running_mean * scale
(Detectron pickles already hold scale and bias). eps defaults to 1e-5, torchvision's
FrozenBatchNorm2d default; torchvision's COCO-trained maskrcnn_resnet50_fpn is evaluated with eps 0
(pass --bn-eps 0 for it).

Backbone-only files are loaded with missing names allowed (model::LoadOptions::allow_missing);
the FPN and heads keep their seeded initialization. Note where the stride of a bottleneck sits:
torchvision's ResNets put it in the 3x3 convolution (backbone.stride_in_1x1 = false), the
Detectron/MSRA weights in the first 1x1 (stride_in_1x1 = true, the default); the file's metadata
records the right value ("stride_in_1x1").

--coco-contiguous maps a 91-class torchvision predictor (COCO category ids as class indices) onto
the 81 contiguous classes (background + the 80 categories in id order) the project trains.

--float64 writes float64 tensors (the folded batch norms unrounded), for comparisons of a float64
model with a float64 reference; the model converts them to its own dtype when it loads them.

Usage: convert_weights.py SRC OUT.safetensors [--source KIND] [--bn-eps EPS] [--coco-contiguous]
                          [--float64]
"""
import argparse
import os
import pickle
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

# The 80 COCO category ids, in order: contiguous label i (1..80) is COCO_CATEGORY_IDS[i - 1].
COCO_CATEGORY_IDS = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27,
    28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53,
    54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80,
    81, 82, 84, 85, 86, 87, 88, 89, 90,
]


class ConversionError(Exception):
    pass


def load_source(path):
    """{name: float tensor} from a .pth/.pt (torch) or .pkl (Detectron) file."""
    if path.endswith(".pkl"):
        with open(path, "rb") as f:
            obj = pickle.load(f, encoding="latin1")
        if isinstance(obj, dict) and "blobs" in obj:
            obj = obj["blobs"]
    else:
        obj = torch.load(path, map_location="cpu", weights_only=True)
        for key in ("model", "state_dict"):
            if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
                obj = obj[key]
    if not isinstance(obj, dict):
        raise ConversionError(f"{path}: expected a dictionary of tensors, got {type(obj).__name__}")
    out = {}
    for k, v in obj.items():
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(np.ascontiguousarray(v))
        if isinstance(v, torch.Tensor):
            out[k] = v
    if not out:
        raise ConversionError(f"{path}: holds no tensors")
    return out


def detect_source(names):
    if any(n.startswith("backbone.body.") for n in names):
        return "torchvision-maskrcnn"
    if "conv1.weight" in names and any(n.startswith("layer1.") for n in names):
        return "torchvision-resnet"
    if "conv1_w" in names and any(n.startswith("res2_") for n in names):
        return "detectron-resnet"
    raise ConversionError("cannot tell the source from the tensor names (expected a torchvision "
                          "maskrcnn state dict, a torchvision ResNet or a Detectron ResNet pickle); "
                          "name it with --source")


def fold_bn(src, prefix, eps):
    """scale, bias of a torchvision BatchNorm2d / FrozenBatchNorm2d at `prefix`."""
    try:
        w = src[prefix + "weight"].double()
        b = src[prefix + "bias"].double()
        rm = src[prefix + "running_mean"].double()
        rv = src[prefix + "running_var"].double()
    except KeyError as e:
        raise ConversionError(f"batch norm '{prefix}' lacks {e.args[0]}") from None
    scale = w / torch.sqrt(rv + eps)
    return scale, b - rm * scale


def convert_torchvision_resnet(src, prefix, eps, used):
    """backbone.* from torchvision ResNet names under `prefix` ("" or "backbone.body.")."""
    out = {}

    def take(name):
        used.add(prefix + name)
        return src[prefix + name].float()

    def bn(name, dst):
        for k in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            used.add(prefix + name + "." + k)
        if prefix + name + ".running_mean" not in src and prefix + name + ".running_var" not in src:
            # A group norm (affine only): the model's backbone.norm = "group_norm".
            out[dst + ".norm.weight"] = src[prefix + name + ".weight"].float()
            out[dst + ".norm.bias"] = src[prefix + name + ".bias"].float()
            return
        out[dst + ".norm.scale"], out[dst + ".norm.bias"] = fold_bn(src, prefix + name + ".", eps)

    out["backbone.stem.conv1.weight"] = take("conv1.weight")
    bn("bn1", "backbone.stem.conv1")
    pattern = re.compile(r"^layer(\d)\.(\d+)\.(conv\d)\.weight$")
    for name in sorted(src):
        if not name.startswith(prefix):
            continue
        m = pattern.match(name[len(prefix):])
        if not m:
            continue
        stage, block, conv = int(m.group(1)) + 1, m.group(2), m.group(3)
        dst = f"backbone.res{stage}.{block}.{conv}"
        out[dst + ".weight"] = take(name[len(prefix):])
        bn(f"layer{m.group(1)}.{block}.bn{conv[-1]}", dst)
        down = f"layer{m.group(1)}.{block}.downsample"
        if conv == "conv1" and prefix + down + ".0.weight" in src:
            out[f"backbone.res{stage}.{block}.shortcut.weight"] = take(down + ".0.weight")
            bn(down + ".1", f"backbone.res{stage}.{block}.shortcut")
    return out


def convert_detectron_resnet(src, used):
    out = {}

    def take(name):
        used.add(name)
        return src[name].float()

    out["backbone.stem.conv1.weight"] = take("conv1_w")
    out["backbone.stem.conv1.norm.scale"] = take("res_conv1_bn_s")
    out["backbone.stem.conv1.norm.bias"] = take("res_conv1_bn_b")
    branches = {"branch2a": "conv1", "branch2b": "conv2", "branch2c": "conv3", "branch1": "shortcut"}
    pattern = re.compile(r"^res(\d)_(\d+)_(branch2[abc]|branch1)_w$")
    for name in sorted(src):
        m = pattern.match(name)
        if not m:
            continue
        dst = f"backbone.res{m.group(1)}.{m.group(2)}.{branches[m.group(3)]}"
        base = name[:-2]
        out[dst + ".weight"] = take(name)
        out[dst + ".norm.scale"] = take(base + "_bn_s")
        out[dst + ".norm.bias"] = take(base + "_bn_b")
    return out


def convert_torchvision_heads(src, used):
    """fpn.*, rpn.*, roi_heads.* of a torchvision maskrcnn state dict (old and new layouts)."""
    out = {}

    def move(name, dst):
        used.add(name)
        out[dst] = src[name].float()

    patterns = [
        (r"^backbone\.fpn\.inner_blocks\.(\d+)(?:\.0)?\.(weight|bias)$", "fpn.inner.{0}.{1}"),
        (r"^backbone\.fpn\.layer_blocks\.(\d+)(?:\.0)?\.(weight|bias)$", "fpn.layer.{0}.{1}"),
        (r"^rpn\.head\.conv(?:\.0\.0)?\.(weight|bias)$", "rpn.head.conv.{0}"),
        (r"^rpn\.head\.(cls_logits|bbox_pred)\.(weight|bias)$", "rpn.head.{0}.{1}"),
        (r"^roi_heads\.box_head\.(fc6|fc7)\.(weight|bias)$", "roi_heads.box_head.{0}.{1}"),
        (r"^roi_heads\.box_predictor\.(cls_score|bbox_pred)\.(weight|bias)$",
         "roi_heads.box_predictor.{0}.{1}"),
        (r"^roi_heads\.mask_predictor\.(conv5_mask|mask_fcn_logits)\.(weight|bias)$",
         "roi_heads.mask_predictor.{0}.{1}"),
    ]
    for name in sorted(src):
        for pat, dst in patterns:
            m = re.match(pat, name)
            if m:
                move(name, dst.format(*m.groups()))
                break
        else:
            m = re.match(r"^roi_heads\.mask_head\.(\d+)\.0\.(weight|bias)$", name)
            if m:
                move(name, f"roi_heads.mask_head.fcn{int(m.group(1)) + 1}.{m.group(2)}")
                continue
            m = re.match(r"^roi_heads\.mask_head\.mask_fcn(\d+)\.(weight|bias)$", name)
            if m:
                move(name, f"roi_heads.mask_head.fcn{m.group(1)}.{m.group(2)}")
    return out


def coco_contiguous(out):
    """Keeps background + the 80 COCO categories of a 91-class predictor, in id order."""
    keep = torch.tensor([0] + COCO_CATEGORY_IDS)
    cls = out.get("roi_heads.box_predictor.cls_score.weight")
    if cls is None or cls.shape[0] != 91:
        raise ConversionError("--coco-contiguous needs a 91-class box predictor, got "
                              + ("none" if cls is None else f"{cls.shape[0]} classes"))
    rows4 = (keep[:, None] * 4 + torch.arange(4)).reshape(-1)
    for name, idx in (("roi_heads.box_predictor.cls_score", keep),
                      ("roi_heads.box_predictor.bbox_pred", rows4),
                      ("roi_heads.mask_predictor.mask_fcn_logits", keep)):
        for k in ("weight", "bias"):
            out[f"{name}.{k}"] = out[f"{name}.{k}"].index_select(0, idx).contiguous()


def convert(src, source, eps, contiguous):
    used = set()
    if source == "torchvision-maskrcnn":
        out = convert_torchvision_resnet(src, "backbone.body.", eps, used)
        out.update(convert_torchvision_heads(src, used))
        ignored = ()
    elif source == "torchvision-resnet":
        out = convert_torchvision_resnet(src, "", eps, used)
        ignored = ("fc.",)
    elif source == "detectron-resnet":
        out = convert_detectron_resnet(src, used)
        ignored = ("fc1000", "pred_")
    else:
        raise ConversionError(f"unknown source '{source}'")
    left = [n for n in src if n not in used and not n.startswith(ignored)
            and not n.endswith(("num_batches_tracked", "_momentum"))]
    if left:
        shown = ", ".join(sorted(left)[:8]) + (" ..." if len(left) > 8 else "")
        raise ConversionError(f"{len(left)} tensors of the source have no place in the model: {shown}")
    if contiguous:
        coco_contiguous(out)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("--source", choices=["auto", "torchvision-maskrcnn", "torchvision-resnet",
                                        "detectron-resnet"], default="auto")
    p.add_argument("--bn-eps", type=float, default=1e-5)
    p.add_argument("--coco-contiguous", action="store_true")
    p.add_argument("--float64", action="store_true")
    args = p.parse_args(argv)
    try:
        src = load_source(args.src)
        source = detect_source(src.keys()) if args.source == "auto" else args.source
        out = convert(src, source, args.bn_eps, args.coco_contiguous)
        dtype = torch.float64 if args.float64 else torch.float32
        out = {k: v.to(dtype) for k, v in out.items()}
    except (ConversionError, OSError, pickle.UnpicklingError, RuntimeError) as e:
        print(f"convert_weights: error: {e}", file=sys.stderr)
        return 1
    metadata = {
        "format": "mlperf-maskrcnn",
        "source": source,
        "bn_eps": repr(args.bn_eps) if source != "detectron-resnet" else "folded in the source",
        "stride_in_1x1": "true" if source == "detectron-resnet" else "false",
        "coco_contiguous": "true" if args.coco_contiguous else "false",
    }
    safetensors_io.save(args.out, out, metadata)
    print(f"convert_weights: {len(out)} tensors from {source} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
